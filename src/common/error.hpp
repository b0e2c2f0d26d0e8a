// Errors of the tool itself. A candidate's failure is never an exception: it is an outcome with a
// reason code (see eval/). An exception here means the tool cannot go on (bad flags, unreadable
// task, full disk) and becomes a clear message and a non-zero exit at the CLI boundary.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kb {

class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A problem in user input (a task file, a flag, a path), as opposed to an internal failure.
class input_error : public error {
public:
  using error::error;
};

template <class... Args> [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw error(fmt::format(f, std::forward<Args>(args)...));
}

template <class... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> f, Args&&... args) {
  throw input_error(fmt::format(f, std::forward<Args>(args)...));
}

// Process exit codes of `kblaster`, stable because scripts depend on them.
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int rejected = 1;     // the candidate was evaluated and rejected
inline constexpr int not_improved = 2; // evaluated and correct, but no verified improvement
inline constexpr int blocked = 3;      // a required stage cannot run here (no GPU, no sandbox)
inline constexpr int task_failed = 4;  // a task of optimize or bench ended failed or timeout
inline constexpr int usage = 64;       // bad command line
inline constexpr int input = 65;       // unreadable or malformed input (task file, candidate path)
inline constexpr int tool = 70;        // internal failure of the tool
} // namespace exit_code

} // namespace kb
