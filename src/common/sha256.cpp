#include "common/sha256.hpp"

#include "common/error.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>

namespace kb {
namespace {

std::string to_hex(const unsigned char* digest, unsigned len) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = digits[digest[i] >> 4];
    out[2 * i + 1] = digits[digest[i] & 15];
  }
  return out;
}

} // namespace

sha256_builder::sha256_builder() : m_ctx(EVP_MD_CTX_new()) {
  if (m_ctx == nullptr ||
      EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(m_ctx), EVP_sha256(), nullptr) != 1) {
    fail("OpenSSL: cannot initialise SHA-256");
  }
}

sha256_builder::~sha256_builder() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_ctx));
}

sha256_builder& sha256_builder::add(std::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_ctx), bytes.data(), bytes.size());
  return *this;
}

sha256_builder& sha256_builder::field(std::string_view bytes) {
  const std::string len = std::to_string(bytes.size()) + ":";
  add(len);
  return add(bytes);
}

std::string sha256_builder::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_ctx), digest.data(), &len);
  return to_hex(digest.data(), len);
}

std::string sha256_hex(std::string_view bytes) {
  return sha256_builder().add(bytes).hex();
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("cannot read {}", path.string());
  }
  sha256_builder builder;
  std::array<char, 1 << 16> buffer{};
  while (in) {
    in.read(buffer.data(), buffer.size());
    builder.add(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  return builder.hex();
}

} // namespace kb
