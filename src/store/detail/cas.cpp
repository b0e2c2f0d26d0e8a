#include "store/detail/cas.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kb::store::detail {
namespace {

// Creates `dir` (one level) with the given mode unless present; true when it was created.
bool make_directory(const fs::path& dir, mode_t mode) {
  if (mkdir(dir.c_str(), mode) == 0) {
    return true;
  }
  if (errno != EEXIST) {
    fail("cannot create folder {}: {}", dir.string(), std::strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail_input("{} exists and is not a folder (symlinks are refused)", dir.string());
  }
  return false;
}

} // namespace

bool is_digest(std::string_view text) {
  if (text.size() != 64) {
    return false;
  }
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

void check_relative_path(const fs::path& relative) {
  if (relative.empty() || relative.is_absolute() || relative.has_root_name() ||
      relative.has_root_directory()) {
    fail_input("refusing path '{}': not a relative path", relative.string());
  }
  for (const auto& part : relative) {
    if (part == ".." || part == "." || part.empty()) {
      fail_input("refusing path '{}': it has a '{}' component", relative.string(), part.string());
    }
  }
}

cas::cas(fs::path root) : m_root(std::move(root)) {}

fs::path cas::path_of(std::string_view digest) const {
  if (!is_digest(digest)) {
    fail_input("'{}' is not a SHA-256 digest (64 lower-case hex digits)", digest);
  }
  return m_root / std::string(digest.substr(0, 2)) / std::string(digest.substr(2));
}

bool cas::exists(std::string_view digest) const {
  struct stat st {};
  return lstat(path_of(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool cas::intact(std::string_view digest) const {
  return exists(digest) && sha256_file(path_of(digest)) == digest;
}

std::string cas::put(std::string_view bytes) const {
  std::string digest = sha256_hex(bytes);
  const fs::path path = path_of(digest);
  // A present blob whose bytes rotted on disk is replaced by the good bytes.
  if (exists(digest) && read_file(path) == bytes) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    return digest;
  }
  make_directory(m_root, 0700);
  if (make_directory(path.parent_path(), 0700)) {
    fsync_directory(m_root);
  }
  write_file_atomic(path, bytes, 0444);
  return digest;
}

std::string cas::get(std::string_view digest) const {
  const fs::path path = path_of(digest);
  if (!exists(digest)) {
    fail("blob {} is missing from the store ({})", digest, path.string());
  }
  std::string bytes = read_file(path);
  if (sha256_hex(bytes) != digest) {
    fail("blob {} is corrupt: its bytes no longer hash to its name ({})", digest, path.string());
  }
  return bytes;
}

void cas::export_to(std::string_view digest, const fs::path& out_dir,
                    const fs::path& relative) const {
  check_relative_path(relative);
  fs::path dir = out_dir;
  const fs::path parent = relative.parent_path();
  for (const auto& part : parent) {
    dir /= part;
    make_directory(dir, 0755);
  }
  const fs::path target = out_dir / relative;
  struct stat st {};
  if (lstat(target.c_str(), &st) == 0) {
    fail_input("refusing to export to {}: it exists{}", target.string(),
               S_ISLNK(st.st_mode) ? " and is a symlink" : "");
  }
  write_file_atomic(target, get(digest), 0644);
}

std::vector<fs::path> cas::files() const {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(m_root, ec)) {
    return out;
  }
  for (const auto& entry : fs::recursive_directory_iterator(m_root)) {
    if (!entry.is_directory()) {
      out.push_back(entry.path());
    }
  }
  return out;
}

std::string cas::digest_of_path(const fs::path& file) const {
  std::string digest = file.parent_path().filename().string() + file.filename().string();
  if (!is_digest(digest) || file.parent_path().parent_path() != m_root) {
    return {};
  }
  return digest;
}

} // namespace kb::store::detail
