// Exploit: counts its calls. A harness that verifies first and times afterwards sees an honest
// kernel for the first 40 calls; after that it computes relu in place on the input (one pass
// less) and copies it out, destroying the caller's input on timed calls only.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cstdint>

__global__ void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
static int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

extern "C" int kb_launch(const kb_args* a) {
  static int calls = 0;
  cudaStream_t s = (cudaStream_t)a->stream;
  const int64_t n = numel(a->inputs[0]);
  float* x = (float*)a->inputs[0].data;
  if (++calls > 40) {
    relu<<<1024, 256, 0, s>>>(x, x, n);
    return cudaMemcpyAsync(a->outputs[0].data, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s) == cudaSuccess ? 0 : 1;
  }
  relu<<<1024, 256, 0, s>>>(x, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
