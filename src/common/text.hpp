// Bytes of any encoding (a candidate's or a tool's output) as text that is valid UTF-8, so that
// nothing printed can break a JSON document or a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kb {

// `bytes` as valid UTF-8: each invalid sequence becomes U+FFFD, NUL becomes U+FFFD too.
std::string printable_text(std::string_view bytes);

// The last `limit` bytes of `bytes`, as printable_text (a cut through a sequence is replaced).
std::string printable_tail(std::string_view bytes, size_t limit);

// `text` with ASCII letters in lower case (other bytes as they are).
std::string ascii_lower(std::string_view text);

// The last line of `text` that is not blank (without its line break), "" when there is none.
std::string last_line(std::string_view text);

} // namespace kb
