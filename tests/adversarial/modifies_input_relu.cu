// Broken: applies relu in place on the input, then copies it to the output. The output is right;
// the caller's input is destroyed.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void relu_in_place(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    x[i] = x[i] > 0.f ? x[i] : 0.f;
  }
}

extern "C" int kb_launch(const kb_args* a) {
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  cudaStream_t s = (cudaStream_t)a->stream;
  relu_in_place<<<1024, 256, 0, s>>>((float*)a->inputs[0].data, n);
  return cudaMemcpyAsync(a->outputs[0].data, a->inputs[0].data, n * sizeof(float), cudaMemcpyDeviceToDevice, s) == cudaSuccess ? 0 : 1;
}
