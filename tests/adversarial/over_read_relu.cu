// Broken: every thread of the last block also reads one element past the end of the input. The
// result is right; the read is out of bounds, which memcheck sees when tensors are exact.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void relu_peek(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float next = x[i + 1 <= n ? i + 1 : n]; // x[n] is one past the end
    y[i] = (x[i] > 0.f ? x[i] : 0.f) + 0.f * next;
  }
}

extern "C" int kb_launch(const kb_args* a) {
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  relu_peek<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
