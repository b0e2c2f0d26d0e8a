// Host programs the unit tests write (generated device math evaluated in double on the host, the
// chain's index math compiled by nvcc): built with the given compiler command and run.
#pragma once

#include "common/fs.hpp"
#include "common/process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace kb::host_program {

// Builds `binary` with `compile` (the compiler and its arguments up to the sources; "-o binary"
// is added) and runs it: success when both exit 0, else the compiler's or the program's output.
inline ::testing::AssertionResult builds_and_passes(std::vector<std::string> compile,
                                                    const fs::path& binary) {
  process_spec build;
  build.argv = std::move(compile);
  build.argv.push_back("-o");
  build.argv.push_back(binary.string());
  build.timeout = std::chrono::seconds(300);
  const auto b = run_process(build);
  if (!b.ok()) {
    return ::testing::AssertionFailure() << "does not build:\n" << b.output;
  }
  process_spec run;
  run.argv = {binary.string()};
  const auto r = run_process(run);
  if (!r.ok()) {
    return ::testing::AssertionFailure() << r.output;
  }
  return ::testing::AssertionSuccess();
}

} // namespace kb::host_program
