#include "cli/commands.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  try {
    return kb::cli::run(argc, argv);
  } catch (const kb::input_error& e) {
    fmt::print(stderr, "kblaster: error: {}\n", e.what());
    return kb::exit_code::input;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kblaster: internal error: {}\n", e.what());
    return kb::exit_code::tool;
  }
}
