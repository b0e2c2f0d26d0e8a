// The environment every unit test runs in, set before main (CTest cannot pass several variables
// through tests discovered at build time): workers start from the kblaster executable, and
// compiled modules are cached under the build folder.
#include <cstdlib>

namespace {

const bool environment_set = [] {
  setenv("KBLASTER_WORKER_EXE", KBLASTER_BINARY, 0);
  setenv("KBLASTER_CACHE", KBLASTER_TEST_CACHE, 0);
  setenv("KBLASTER_ROOT", KBLASTER_SOURCE_DIR, 0);
  return true;
}();

} // namespace
