#include "common/fs.hpp"

#include "common/error.hpp"
#include "common/process.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace kb {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail_input("cannot read {}: {}", path.string(), std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void fsync_directory(const fs::path& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fail("cannot open folder {}: {}", dir.string(), std::strerror(errno));
  }
  fsync(fd);
  close(fd);
}

void write_file_if_changed(const fs::path& path, std::string_view bytes) {
  if (!fs::is_regular_file(path) || read_file(path) != bytes) {
    write_file_atomic(path, bytes);
  }
}

void write_file_atomic(const fs::path& path, std::string_view bytes, unsigned mode) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / (".tmp-" + path.filename().string() + "-" + std::to_string(getpid()) +
                              "-" + std::to_string(rd()));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      fail("cannot write {}: {}", tmp.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    fail("cannot fsync {}: {}", tmp.string(), std::strerror(err));
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    fail("cannot rename {} to {}: {}", tmp.string(), path.string(), std::strerror(err));
  }
  fsync_directory(dir);
}

temp_dir::temp_dir(const std::string& prefix, const std::optional<fs::path>& parent) {
  const fs::path base = parent ? *parent : fs::temp_directory_path();
  fs::create_directories(base);
  std::string templ = (base / (prefix + "-XXXXXX")).string();
  if (mkdtemp(templ.data()) == nullptr) {
    fail("cannot create a temporary folder under {}: {}", base.string(), std::strerror(errno));
  }
  m_path = templ;
}

temp_dir::~temp_dir() {
  if (!m_keep) {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
}

namespace {

bool is_project_root(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "tasks", ec) &&
         fs::is_regular_file(dir / "include/kblaster/candidate.h", ec);
}

std::optional<fs::path> search_up(fs::path dir) {
  while (!dir.empty()) {
    if (is_project_root(dir)) {
      return dir;
    }
    if (dir == dir.root_path()) {
      break;
    }
    dir = dir.parent_path();
  }
  return std::nullopt;
}

} // namespace

fs::path find_project_root(const std::optional<fs::path>& explicit_root) {
  if (explicit_root) {
    if (!is_project_root(*explicit_root)) {
      fail_input("--root {}: not a KernelBlaster project folder (needs tasks/ and "
                 "include/kblaster/candidate.h)",
                 explicit_root->string());
    }
    return fs::absolute(*explicit_root);
  }
  if (const char* env = std::getenv("KBLASTER_ROOT"); env != nullptr && *env != '\0') {
    if (!is_project_root(env)) {
      fail_input("KBLASTER_ROOT={}: not a KernelBlaster project folder", env);
    }
    return fs::absolute(env);
  }
  if (auto found = search_up(fs::current_path())) {
    return *found;
  }
  if (auto found = search_up(self_executable().parent_path())) {
    return *found;
  }
  fail_input("cannot find the KernelBlaster project folder (tasks/ and include/kblaster/); "
             "run from inside it, or pass --root or set KBLASTER_ROOT");
}

fs::path default_cache_dir() {
  if (const char* env = std::getenv("KBLASTER_CACHE"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return fs::path(xdg) / "kblaster";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "/tmp") / ".cache" / "kblaster";
}

} // namespace kb
