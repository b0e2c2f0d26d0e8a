// What a runner prints is data of any encoding and any size: its stdout and stderr go to a file
// the judge owns (bounded by the runner's file-size limit), and only the last bytes of it are
// kept, as bytes (base64) and as text with every invalid UTF-8 sequence replaced, so that nothing
// a candidate prints can break the JSON of a result.
#pragma once

#include "common/text.hpp"

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace kb::gpu::detail {

inline constexpr size_t capture_bytes = 64 * 1024; // [bytes] kept of a runner's output

// The last `limit` bytes of a file (empty when it cannot be read), and its whole size.
struct captured {
  std::string tail; // raw bytes
  size_t total = 0; // [bytes] the file held
};
captured capture_tail(const std::filesystem::path& file, size_t limit = capture_bytes);

using kb::printable_text; // common/text.hpp

std::string base64(std::string_view bytes);

} // namespace kb::gpu::detail
