#include "common/process.hpp"
#include "common/environment.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kb {
namespace {

using clock = std::chrono::steady_clock;

// ---- Children to stop on SIGINT/SIGTERM ----
// The process groups of the children alive now, in slots a signal handler can read (a child is
// registered once forked and leaves when reaped).
constexpr size_t max_tracked = 1024;
std::atomic<pid_t> tracked[max_tracked];
std::atomic<int> stop_signal{0};

void track(pid_t pid, bool cleanup) {
  if (stop_signal.load() != 0 && !cleanup) {
    // Stopping: whatever starts now ends at once.
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  for (auto& slot : tracked) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pid)) {
      return;
    }
  }
}

void untrack(pid_t pid) {
  for (auto& slot : tracked) {
    pid_t mine = pid;
    if (slot.compare_exchange_strong(mine, 0)) {
      return;
    }
  }
}

void kill_tracked(int sig) {
  for (auto& slot : tracked) {
    if (const pid_t pid = slot.load(); pid > 0) {
      ::kill(-pid, sig);
    }
  }
}

// Async-signal-safe: a flag, signals to the children's groups, and on a second signal _exit.
void on_stop_signal(int sig) {
  const int before = stop_signal.exchange(sig);
  kill_tracked(SIGKILL);
  if (before != 0) {
    _exit(128 + sig);
  }
}

struct env_block {
  std::vector<std::string> storage;
  std::vector<char*> pointers;
};

env_block make_env(const process_spec& spec) {
  std::map<std::string, std::string> vars;
  if (spec.env) {
    vars = *spec.env;
  } else {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      const auto eq = entry.find('=');
      if (eq != std::string::npos) {
        vars[entry.substr(0, eq)] = entry.substr(eq + 1);
      }
    }
  }
  for (const auto& [k, v] : spec.env_overrides) {
    vars[k] = v;
  }
  env_block block;
  for (const auto& [k, v] : vars) {
    block.storage.push_back(k + "=" + v);
  }
  for (auto& s : block.storage) {
    block.pointers.push_back(s.data());
  }
  block.pointers.push_back(nullptr);
  return block;
}

std::vector<char*> make_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) {
    out.push_back(const_cast<char*>(a.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

void set_cloexec(int fd) {
  fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

// In the child after fork, only async-signal-safe calls until exec: plain system calls, write
// and _exit; nothing that allocates or takes a lock another thread of the parent may have held.
[[noreturn]] void child_fail(const char* what) {
  const char prefix[] = "kblaster: cannot start the child: ";
  (void)!write(2, prefix, sizeof prefix - 1);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(127);
}

// Lowers both limits to `value` (the hard one to `value + hard_margin`), never above the current
// hard limit, which only root could raise.
void lower_limit(int resource, const std::optional<uint64_t>& value, uint64_t hard_margin,
                 const char* what) {
  if (!value) {
    return;
  }
  rlimit current{};
  if (getrlimit(resource, &current) != 0) {
    child_fail(what);
  }
  const rlim_t soft = static_cast<rlim_t>(*value);
  const rlim_t hard = static_cast<rlim_t>(*value + hard_margin);
  const rlimit wanted{soft < current.rlim_max ? soft : current.rlim_max,
                      hard < current.rlim_max ? hard : current.rlim_max};
  if (setrlimit(resource, &wanted) != 0) {
    child_fail(what);
  }
}

void close_descriptors_from(int first) {
  if (close_range(static_cast<unsigned>(first), ~0u, 0) == 0) {
    return;
  }
  rlimit files{};
  const int last = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < 65536
                       ? static_cast<int>(files.rlim_cur)
                       : 65536;
  for (int fd = first; fd < last; ++fd) {
    close(fd);
  }
}

// `first_private_fd`: descriptors from this number up are the parent's and are closed.
[[noreturn]] void exec_child(const process_spec& spec, std::vector<char*>& argv, env_block& env,
                             int first_private_fd) {
  setpgid(0, 0);
  signal(SIGPIPE, SIG_DFL);
  close_descriptors_from(first_private_fd);
  const auto& limits = spec.rlimits;
  lower_limit(RLIMIT_CPU, limits.cpu_time, 1, "setrlimit(RLIMIT_CPU)");
  lower_limit(RLIMIT_FSIZE, limits.file_size, 0, "setrlimit(RLIMIT_FSIZE)");
  lower_limit(RLIMIT_NPROC, limits.processes, 0, "setrlimit(RLIMIT_NPROC)");
  lower_limit(RLIMIT_NOFILE, limits.open_files, 0, "setrlimit(RLIMIT_NOFILE)");
  lower_limit(RLIMIT_CORE, limits.core_size, 0, "setrlimit(RLIMIT_CORE)");
  if (spec.run_as) {
    // Raw system calls: glibc's wrappers would try to change every thread of the parent.
    const auto uid = spec.run_as->uid;
    const auto gid = spec.run_as->gid;
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0) {
      child_fail("cannot switch to the requested user");
    }
  }
  if (spec.cwd && chdir(spec.cwd->c_str()) != 0) {
    child_fail("cannot enter the working folder");
  }
  environ = env.pointers.data();
  execvp(argv[0], argv.data());
  _exit(127);
}

} // namespace

std::string signal_name(int sig) {
  switch (sig) {
  case SIGSEGV:
    return "SIGSEGV";
  case SIGABRT:
    return "SIGABRT";
  case SIGKILL:
    return "SIGKILL";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGILL:
    return "SIGILL";
  case SIGTERM:
    return "SIGTERM";
  case SIGXCPU:
    return "SIGXCPU";
  case SIGXFSZ:
    return "SIGXFSZ";
  case SIGPIPE:
    return "SIGPIPE";
  default:
    return fmt::format("signal {}", sig);
  }
}

std::string process_result::describe() const {
  if (spawn_failed) {
    return "could not start";
  }
  if (timed_out) {
    return fmt::format("timed out after {:.1f} s", wall_seconds);
  }
  if (signal != 0) {
    return "killed by " + signal_name(signal);
  }
  return fmt::format("exit {}", exit_code);
}

process_result run_process(const process_spec& spec) {
  process_result result;
  int in_pipe[2];
  int out_pipe[2];
  if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0) {
    fail("pipe: {}", std::strerror(errno));
  }
  auto argv = make_argv(spec.argv);
  auto env = make_env(spec);
  const auto start = clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    fail("fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    close(in_pipe[0]);
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(out_pipe[1]);
    exec_child(spec, argv, env, 3);
  }
  setpgid(pid, pid);
  track(pid, spec.cleanup);
  close(in_pipe[0]);
  close(out_pipe[1]);
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);

  size_t written = 0;
  int stdin_fd = in_pipe[1];
  if (spec.stdin_data.empty()) {
    close(stdin_fd);
    stdin_fd = -1;
  }
  int out_fd = out_pipe[0];
  char buffer[65536];
  while (out_fd >= 0) {
    int wait_ms = -1;
    if (spec.timeout.count() > 0) {
      const auto left = spec.timeout -
                        std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
      if (left.count() <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {stdin_fd, POLLOUT, 0}};
    const int n = poll(fds, stdin_fd >= 0 ? 2 : 1, wait_ms);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n == 0) {
      continue;
    }
    if (fds[0].revents != 0) {
      const ssize_t got = read(out_fd, buffer, sizeof buffer);
      if (got > 0) {
        if (result.output.size() < spec.output_limit) {
          result.output.append(buffer, static_cast<size_t>(got));
        }
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(out_fd);
        out_fd = -1;
      }
    }
    if (stdin_fd >= 0 && fds[1].revents != 0) {
      const ssize_t put =
          write(stdin_fd, spec.stdin_data.data() + written, spec.stdin_data.size() - written);
      if (put > 0) {
        written += static_cast<size_t>(put);
      }
      if (put < 0 && errno != EAGAIN) {
        written = spec.stdin_data.size();
      }
      if (written >= spec.stdin_data.size()) {
        close(stdin_fd);
        stdin_fd = -1;
      }
    }
  }
  if (result.timed_out) {
    ::kill(-pid, SIGKILL);
  }
  if (stdin_fd >= 0) {
    close(stdin_fd);
  }
  if (out_fd >= 0) {
    close(out_fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  untrack(pid);
  if (!result.timed_out) {
    // Descendants that outlive the child would hold resources; the group dies with it.
    ::kill(-pid, SIGKILL);
  }
  result.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code == 127 && !result.timed_out) {
      result.spawn_failed = result.output.empty();
    }
  } else if (WIFSIGNALED(status) && !result.timed_out) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

child_process::child_process(const process_spec& spec, const std::filesystem::path& log_path,
                             const std::string& result_fd_env, int pass_fd) {
  int in_pipe[2];
  int res_pipe[2];
  if (pipe(in_pipe) != 0 || pipe(res_pipe) != 0) {
    fail("pipe: {}", std::strerror(errno));
  }
  const int log_fd =
      open(log_path.c_str(),
           O_WRONLY | O_CREAT | O_CLOEXEC | (spec.log_append ? O_APPEND : O_TRUNC), 0600);
  if (log_fd < 0) {
    fail("cannot open {}: {}", log_path.string(), std::strerror(errno));
  }
  constexpr int child_result_fd = result_fd;
  process_spec with_fd = spec;
  with_fd.env_overrides[result_fd_env] = std::to_string(child_result_fd);
  auto argv = make_argv(with_fd.argv);
  auto env = make_env(with_fd);
  m_started = clock::now();
  m_pid = fork();
  if (m_pid < 0) {
    fail("fork: {}", std::strerror(errno));
  }
  if (m_pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    dup2(res_pipe[1], child_result_fd);
    if (pass_fd >= 0) {
      dup2(pass_fd, passed_fd);
    }
    for (int fd : {in_pipe[0], in_pipe[1], res_pipe[0], res_pipe[1], log_fd, pass_fd}) {
      if (fd != child_result_fd && fd != passed_fd && fd >= 0) {
        close(fd);
      }
    }
    exec_child(with_fd, argv, env, pass_fd >= 0 ? passed_fd + 1 : child_result_fd + 1);
  }
  setpgid(m_pid, m_pid);
  track(m_pid, spec.cleanup);
  close(in_pipe[0]);
  close(res_pipe[1]);
  close(log_fd);
  m_stdin_fd = in_pipe[1];
  m_result_fd = res_pipe[0];
  set_cloexec(m_stdin_fd);
  set_cloexec(m_result_fd);
}

child_process::~child_process() {
  kill();
  if (m_stdin_fd >= 0) {
    close(m_stdin_fd);
  }
  if (m_result_fd >= 0) {
    close(m_result_fd);
  }
}

bool child_process::write_line(const std::string& line) {
  std::string data = line + "\n";
  // A child that has ended (a judge started ahead of its job and gone before it) must not end
  // this process with SIGPIPE: the write fails instead, and the child's end is read as usual.
  // SIGPIPE is held for this thread while writing, and one raised here is taken back.
  sigset_t pipe_only;
  sigset_t before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  bool ok = true;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(m_stdin_fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EPIPE && sigismember(&before, SIGPIPE) == 0) {
        const timespec now{0, 0};
        while (sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE) {
        }
      }
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return ok;
}

std::optional<std::string> child_process::read_line(std::chrono::milliseconds timeout,
                                                    bool* timed_out) {
  if (timed_out != nullptr) {
    *timed_out = false;
  }
  const auto deadline = clock::now() + timeout;
  while (true) {
    const auto nl = m_buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = m_buffer.substr(0, nl);
      m_buffer.erase(0, nl + 1);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      if (timed_out != nullptr) {
        *timed_out = true;
      }
      return std::nullopt;
    }
    pollfd pfd{m_result_fd, POLLIN, 0};
    const int n = poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n == 0) {
      continue;
    }
    char buffer[65536];
    const ssize_t got = ::read(m_result_fd, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (got <= 0) {
      return std::nullopt;
    }
    m_buffer.append(buffer, static_cast<size_t>(got));
  }
}

bool child_process::running() {
  if (m_reaped || m_pid <= 0) {
    return false;
  }
  int status = 0;
  const pid_t r = waitpid(m_pid, &status, WNOHANG);
  if (r == m_pid) {
    m_reaped = true;
    m_status = status;
    untrack(m_pid);
    return false;
  }
  return true;
}

void child_process::kill() {
  if (m_pid <= 0 || m_reaped) {
    return;
  }
  ::kill(-m_pid, SIGKILL);
  ::kill(m_pid, SIGKILL);
  int status = 0;
  while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
  }
  m_reaped = true;
  m_status = status;
  untrack(m_pid);
}

process_result child_process::reap(int status) const {
  process_result r;
  r.wall_seconds = std::chrono::duration<double>(clock::now() - m_started).count();
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

process_result child_process::wait(std::chrono::milliseconds timeout) {
  if (m_stdin_fd >= 0) {
    close(m_stdin_fd);
    m_stdin_fd = -1;
  }
  const auto deadline = clock::now() + timeout;
  while (!m_reaped) {
    int status = 0;
    const pid_t r = waitpid(m_pid, &status, WNOHANG);
    if (r == m_pid) {
      m_reaped = true;
      m_status = status;
      untrack(m_pid);
      break;
    }
    if (clock::now() >= deadline) {
      kill();
      process_result t = reap(m_status);
      t.timed_out = true;
      return t;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(-m_pid, SIGKILL);
  return reap(m_status);
}

std::filesystem::path self_executable() {
  return std::filesystem::read_symlink("/proc/self/exe");
}

std::filesystem::path worker_executable() {
  if (const char* env = std::getenv("KBLASTER_WORKER_EXE"); env != nullptr && *env != '\0') {
    return env;
  }
  return self_executable();
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_requested() {
  return stop_signal.load();
}

void request_stop(int sig) {
  stop_signal.store(sig);
}

const std::vector<std::string>& worker_environment_names() {
  // What a worker needs to find its tools, its cache and its tasks; nothing that holds a
  // credential (an API key, a database password) is among them.
  // clang-format off
  static const std::vector<std::string> names = {
      "PATH",          "HOME",          "USER",          "LOGNAME",         "LANG",
      "LC_ALL",        "LC_CTYPE",      "TZ",            "TMPDIR",          "LD_LIBRARY_PATH",
      "XDG_CACHE_HOME", "CUDA_HOME",    "CUDA_PATH",     "KBLASTER_TASKS",  "KBLASTER_ROOT",
      "KBLASTER_STORE_FILES", "KBLASTER_PYTHON", "KBLASTER_NVCC", "KBLASTER_NCU",
      "KBLASTER_CUPTI", "KBLASTER_CACHE", "KBLASTER_BWRAP", "KBLASTER_WORKER_EXE",
      "KBLASTER_RUNNER_EXACT"};
  // clang-format on
  return names;
}

namespace {

std::map<std::string, std::string> environment_of(const std::vector<std::string>& names) {
  std::map<std::string, std::string> env;
  for (const auto& name : names) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr) {
      env[name] = value;
    }
  }
  return env;
}

} // namespace

std::map<std::string, std::string> worker_environment() {
  return environment_of(worker_environment_names());
}

const std::vector<std::string>& module_environment_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = worker_environment_names();
    // The interpreter's own settings (a virtual environment, a PYTHONPATH with PyTorch), the
    // generator library pytorch_oracle.py loads, the device selection and CUDA's behaviour, the
    // judge's device lock folder and the CPU thread count; none holds a credential.
    for (const char* name :
         {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "KBLASTER_GENERATOR_LIB",
          "KBLASTER_DEVICE_LOCK_DIR", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
          "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING", "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH",
          "CUDA_CACHE_MAXSIZE", "CUDA_DEVICE_MAX_CONNECTIONS", "OMP_NUM_THREADS",
          "MKL_NUM_THREADS"}) {
      all.emplace_back(name);
    }
    return all;
  }();
  return names;
}

std::map<std::string, std::string> module_environment() {
  return environment_of(module_environment_names());
}

} // namespace kb
