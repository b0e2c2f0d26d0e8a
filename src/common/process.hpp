// Child processes: run-to-completion with a wall-clock limit (compilers, profilers), and
// long-lived children with pipes (evaluation workers). A child always gets its own process
// group, so a limit kills everything it started.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace kb {

struct process_spec {
  std::vector<std::string> argv;                       // argv[0] is looked up in PATH
  std::optional<std::filesystem::path> cwd;
  std::optional<std::map<std::string, std::string>> env; // replaces the environment when set
  std::map<std::string, std::string> env_overrides;      // applied on top
  std::string stdin_data;
  std::chrono::milliseconds timeout{0};                  // 0: no limit
  size_t output_limit = 16u << 20;                       // [bytes] kept of stdout+stderr
};

struct process_result {
  int exit_code = -1;    // valid when !signaled && !timed_out
  int signal = 0;        // terminating signal, if any
  bool timed_out = false;
  bool spawn_failed = false;
  std::string output;    // stdout and stderr, interleaved as written
  double wall_seconds = 0;

  bool ok() const { return !spawn_failed && !timed_out && signal == 0 && exit_code == 0; }
  std::string describe() const; // "exit 1", "killed by SIGSEGV", "timed out after 3.0 s"
};

process_result run_process(const process_spec& spec);

// A running child with a pipe to its stdin and one from a dedicated result descriptor.
// Its stdout and stderr go to `log_path` (so a candidate's prints never corrupt the protocol).
class child_process {
public:
  // `result_fd_env`: name of the environment variable that tells the child which descriptor
  // to write results to.
  child_process(const process_spec& spec, const std::filesystem::path& log_path,
                const std::string& result_fd_env);
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

// Human name of a signal ("SIGSEGV").
std::string signal_name(int sig);

} // namespace kb
