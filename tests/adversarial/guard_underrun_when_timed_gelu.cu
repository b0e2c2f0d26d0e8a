// Exploit: writes outside its output only where it guesses nobody looks. Its first 48 calls are
// an honest GELU (verification, the warm-ups and the allocation probe); from then on, in the
// timed rounds, every call also writes 16 KiB just before the start of its output (scratch
// space it did not ask for). Guard bands used to be checked after checked calls only. Every
// timed call's guard bands are checked now: `verify.out_of_bounds_write`.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

namespace {

constexpr int64_t scratch_floats = 4096; // 16 KiB

__global__ void gelu(const float* x, float* y, int64_t n, bool scribble) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  }
  if (scribble && i < scratch_floats) {
    y[i - scratch_floats] = 0.f;
  }
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static int calls = 0;
  ++calls;
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  const int64_t threads = n > scratch_floats ? n : scratch_floats;
  gelu<<<(unsigned)((threads + 255) / 256), 256, 0, (cudaStream_t)a->stream>>>(
      (const float*)a->inputs[0].data, (float*)a->outputs[0].data, n, calls > 48);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
