#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kb {

// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);
std::string sha256_file(const std::filesystem::path& path);

// Incremental hashing for content made of several parts.
class sha256_builder {
public:
  sha256_builder();
  ~sha256_builder();
  sha256_builder(const sha256_builder&) = delete;
  sha256_builder& operator=(const sha256_builder&) = delete;
  sha256_builder& add(std::string_view bytes);
  // Adds a length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
  sha256_builder& field(std::string_view bytes);
  std::string hex();

private:
  void* m_ctx;
};

} // namespace kb
