// The judge's per-device lock (device_lock.hpp).
#include "gpu/detail/device_lock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kb::gpu::detail {

namespace fs = std::filesystem;

fs::path device_lock_dir() {
  const char* dir = std::getenv("KBLASTER_DEVICE_LOCK_DIR");
  return dir != nullptr && *dir != '\0' ? fs::path(dir) : fs::path("/tmp");
}

fs::path device_lock_path(const std::string& id, const fs::path& dir) {
  std::string name = "kblaster-device-";
  for (const char c : id.empty() ? std::string("unknown") : id) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_';
    name += plain ? c : '_';
  }
  return dir / (name + ".lock");
}

device_lock& device_lock::operator=(device_lock&& o) noexcept {
  std::swap(m_fd, o.m_fd);
  std::swap(m_file, o.m_file);
  std::swap(m_error, o.m_error);
  return *this;
}

void device_lock::release() {
  if (m_fd >= 0) {
    ::close(m_fd); // the lock goes with the last descriptor of its open file
    m_fd = -1;
  }
}

namespace {

// The lock file opened for reading (flock needs no more). Another user's file in a sticky
// folder such as /tmp cannot be opened with O_CREAT where the kernel protects regular files
// (fs.protected_regular), so an existing file is opened as it is and a missing one created
// exclusively, readable by everyone so that other users' judges can lock it too.
int open_lock_file(const fs::path& file, std::string& error) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      return fd;
    }
    if (errno != ENOENT) {
      break;
    }
    fd = ::open(file.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)::fchmod(fd, 0644); // whatever the umask
      return fd;
    }
    if (errno != EEXIST) {
      break;
    }
    // Another judge created it in between: open it as it is.
  }
  error = fmt::format("cannot open the device lock {}: {}", file.string(), std::strerror(errno));
  return -1;
}

} // namespace

lock_result device_lock::acquire(const fs::path& file, std::chrono::milliseconds wait,
                                 std::chrono::milliseconds poll,
                                 const std::function<void(std::chrono::milliseconds)>& waiting) {
  using clock = std::chrono::steady_clock;
  release();
  m_file = file;
  m_error.clear();
  const int fd = open_lock_file(file, m_error);
  if (fd < 0) {
    return lock_result::failed;
  }
  const auto start = clock::now();
  auto next_word = start + std::chrono::seconds(1);
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      m_fd = fd;
      return lock_result::held;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      m_error =
          fmt::format("cannot lock the device lock {}: {}", file.string(), std::strerror(errno));
      ::close(fd);
      return lock_result::failed;
    }
    const auto now = clock::now();
    if (now - start >= wait) {
      ::close(fd);
      return lock_result::busy;
    }
    if (waiting && now >= next_word) {
      waiting(std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
      next_word = now + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        poll, std::chrono::duration_cast<std::chrono::milliseconds>(wait - (now - start)) +
                  std::chrono::milliseconds(1)));
  }
}

} // namespace kb::gpu::detail
