// Child processes: run-to-completion with a wall-clock limit (compilers, profilers), and
// long-lived children with pipes (evaluation workers). A child always gets its own process
// group, so a limit kills everything it started. A child inherits no descriptor of the parent
// other than its standard streams (and, for child_process, the result descriptor): whatever else
// the parent has open (the store's database, a socket to the model's API) stays out of reach.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace kb {

// Limits set with setrlimit in the child just before exec. They survive exec, so a wrapper such
// as bwrap hands them on to everything it starts. Soft and hard limits are equal, so the child
// cannot raise them; the CPU limit's hard value is one second later, so the soft one is reported
// as SIGXCPU rather than a bare SIGKILL. Unset limits are inherited from the parent.
struct resource_limits {
  std::optional<uint64_t> cpu_time;   // [seconds] of CPU, per process
  std::optional<uint64_t> file_size;  // [bytes] of one file; a larger write raises SIGXFSZ
  std::optional<uint64_t> processes;  // processes and threads of the user (not enforced for uid 0)
  std::optional<uint64_t> open_files; // descriptors per process
  std::optional<uint64_t> core_size;  // [bytes] of a core dump; 0: none
};

// A user to become in the child before exec (the parent must be root). Supplementary groups are
// dropped.
struct process_credentials {
  uid_t uid = 0;
  gid_t gid = 0;
};

struct process_spec {
  std::vector<std::string> argv; // argv[0] is looked up in PATH
  std::optional<std::filesystem::path> cwd;
  std::optional<std::map<std::string, std::string>> env; // replaces the environment when set
  std::map<std::string, std::string> env_overrides;      // applied on top
  std::string stdin_data;
  std::chrono::milliseconds timeout{0}; // 0: no limit
  size_t output_limit = 16u << 20;      // [bytes] kept of stdout+stderr
  resource_limits rlimits;
  std::optional<process_credentials> run_as;
  bool log_append = false; // child_process: add to the log instead of starting it afresh
  bool cleanup = false;    // runs even once a stop was asked for (scancel); others end at once
};

struct process_result {
  int exit_code = -1; // valid when !signaled && !timed_out
  int signal = 0;     // terminating signal, if any
  bool timed_out = false;
  bool spawn_failed = false;
  std::string output; // stdout and stderr, interleaved as written
  double wall_seconds = 0;

  bool ok() const { return !spawn_failed && !timed_out && signal == 0 && exit_code == 0; }
  std::string describe() const; // "exit 1", "killed by SIGSEGV", "timed out after 3.0 s"
};

process_result run_process(const process_spec& spec);

// A running child with a pipe to its stdin and one from a dedicated result descriptor.
// Its stdout and stderr go to `log_path` (so a candidate's prints never corrupt the protocol).
class child_process {
public:
  // The descriptor number the child writes its results to.
  static constexpr int result_fd = 3;

  // `result_fd_env`: name of the environment variable that tells the child which descriptor
  // to write results to.
  // `pass_fd`, when not -1, is handed to the child as descriptor `passed_fd` (a socket to it).
  child_process(const process_spec& spec, const std::filesystem::path& log_path,
                const std::string& result_fd_env, int pass_fd = -1);
  static constexpr int passed_fd = 4;
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return m_pid; }
  bool write_line(const std::string& line);
  // Next line from the child, or nullopt on end of file or when `timeout` passes first.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout, bool* timed_out);
  // Kills the process group (SIGKILL) and reaps the child.
  void kill();
  // Waits for exit (after closing stdin); returns the status as a process_result without output.
  process_result wait(std::chrono::milliseconds timeout);
  bool running();

private:
  process_result reap(int status) const;
  pid_t m_pid = -1;
  int m_stdin_fd = -1;
  int m_result_fd = -1;
  std::string m_buffer;
  bool m_reaped = false;
  int m_status = 0;
  std::chrono::steady_clock::time_point m_started;
};

// Path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

// The kblaster executable that runs workers and probes: $KBLASTER_WORKER_EXE when set (a test
// binary sets it to the kblaster it was built with), else the running executable.
std::filesystem::path worker_executable();

// The environment a worker process (a `queue work` per GPU, a Slurm job) gets: the variables of
// worker_environment_names() that are set here, and nothing else of this process's environment,
// so that a credential it holds (the model's API key, a database password) does not travel.
// What a worker must be told (where the store is) is added by name, per worker.
const std::vector<std::string>& worker_environment_names();
std::map<std::string, std::string> worker_environment();

// SIGINT and SIGTERM: the first kills every child alive (each one's process group: nvcc, bwrap,
// judge workers, queue workers) and sets the stop flag, which loops that take work (the queue's
// workers and waiters, the search) check to end cleanly; a second ends the process at once.
// `kblaster` installs them at start.
void install_stop_handlers();
// The signal that asked this process to stop, or 0.
int stop_requested();
// Asks for a stop as a signal would, without one (tests).
void request_stop(int sig);

// Human name of a signal ("SIGSEGV").
std::string signal_name(int sig);

} // namespace kb
