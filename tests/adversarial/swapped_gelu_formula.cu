// Wrong op: the tanh approximation submitted for exact (erf) GELU. On U[0,1) they differ by at most
// about 1.5e-4, within a plain 1e-4 tolerance there; other distributions expose it.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void tanh_gelu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

extern "C" int kb_launch(const kb_args* a) {
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  tanh_gelu<<<1024, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
