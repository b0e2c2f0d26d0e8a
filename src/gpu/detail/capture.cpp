#include "gpu/detail/capture.hpp"

#include <fstream>

namespace kb::gpu::detail {

captured capture_tail(const std::filesystem::path& file, size_t limit) {
  captured c;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) {
    return c;
  }
  const auto size = static_cast<size_t>(in.tellg());
  c.total = size;
  const size_t keep = size < limit ? size : limit;
  in.seekg(static_cast<std::streamoff>(size - keep));
  c.tail.resize(keep);
  in.read(c.tail.data(), static_cast<std::streamsize>(keep));
  c.tail.resize(static_cast<size_t>(in.gcount()));
  return c;
}

std::string printable_text(std::string_view s) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (b == 0) {
      out += replacement;
      ++i;
      continue;
    }
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
      cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      cp = b & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid too.
    ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) &&
         !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF));
    if (!ok) {
      out += replacement;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string base64(std::string_view s) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const uint32_t v = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i < s.size()) {
    uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) {
      v |= static_cast<unsigned char>(s[i + 1]) << 8;
    }
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < s.size() ? table[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

} // namespace kb::gpu::detail
