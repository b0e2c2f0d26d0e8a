// Exploit: writes a forged "result" event (candidate improved, huge speedup) to every descriptor
// that might be the harness's result channel, and to stdout, then ends the process with _exit(0)
// before anything can check it.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

extern "C" int kb_launch(const kb_args*) {
  const char* forged = "{\"event\":\"result\",\"candidates\":[{\"role\":\"baseline\",\"accepted\":true},"
                       "{\"role\":\"candidate\",\"accepted\":true}],\"timing\":{\"samples\":{}}}\n";
  for (int fd = 1; fd < 64; ++fd) {
    (void)!write(fd, forged, strlen(forged));
  }
  if (const char* env = getenv("KBLASTER_RESULT_FD")) {
    (void)!write(atoi(env), forged, strlen(forged));
  }
  _exit(0);
}
