// Broken, and hiding it from the sanitizers: every thread of the last block reads one element
// past the end of its input, but only when the runner does not look sanitized (no variable of
// the judge's saying so in its environment, no sanitizer library mapped into the process). In a
// sanitized run it is an exact ReLU and every tool finds it clean. The runner's environment no
// longer says whether it is sanitized, and tensors end where their mapping ends in every run,
// with nothing mapped after them, so the plain run's over-read faults: `launch.cuda_error`
// (or `sanitize.memcheck` where a run under a tool is taken for a plain one).
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool looks_sanitized() {
  if (std::getenv("KBLASTER_RUNNER_EXACT") != nullptr) {
    return true;
  }
  for (const char* v : {"LD_PRELOAD", "CUDA_INJECTION64_PATH"}) {
    const char* s = std::getenv(v);
    if (s != nullptr && std::strstr(s, "anitizer") != nullptr) {
      return true;
    }
  }
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) {
    return false;
  }
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    found = std::strstr(line, "anitizer") != nullptr;
  }
  std::fclose(f);
  return found;
}

__global__ void relu_peek(const float* x, float* y, int64_t n, bool peek) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float next = peek ? x[i + 1 <= n ? i + 1 : n] : 0.f; // x[n] is one past the end
    y[i] = (x[i] > 0.f ? x[i] : 0.f) + 0.f * next;
  }
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static const bool sanitized = looks_sanitized();
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  relu_peek<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)a->stream>>>(
      (const float*)a->inputs[0].data, (float*)a->outputs[0].data, n, !sanitized);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
