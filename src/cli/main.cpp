#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/process.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  kb::install_stop_handlers();
  try {
    const int code = kb::cli::run(argc, argv);
    if (const int sig = kb::stop_requested(); sig != 0) {
      fmt::print(stderr, "kblaster: stopped by {}\n", kb::signal_name(sig));
      return 128 + sig;
    }
    return code;
  } catch (const kb::input_error& e) {
    fmt::print(stderr, "kblaster: error: {}\n", e.what());
    return kb::exit_code::input;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kblaster: internal error: {}\n", e.what());
    return kb::exit_code::tool;
  }
}
