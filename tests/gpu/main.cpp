// The GPU tests' entry point. Evaluations start their workers from the kblaster executable (the
// sandbox binds it and its lib/ folder), also when this binary runs outside CTest.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("KBLASTER_WORKER_EXE", KBLASTER_BINARY, 0);
  setenv("KBLASTER_ROOT", KBLASTER_SOURCE_DIR, 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
