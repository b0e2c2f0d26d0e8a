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
