// The GPU tests' entry point. Evaluations run their GPU work in worker processes started as
// `<this executable> worker`, so this binary serves as the worker too.
#include "eval/eval.hpp"

#include <gtest/gtest.h>

#include <string>

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "worker") {
    return kb::eval::worker_main();
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
