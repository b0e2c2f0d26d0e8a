// Broken: asks for a workspace and reads it before anything was written there.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void relu_plus_scratch(const float* x, const float* scratch, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = (x[i] > 0.f ? x[i] : 0.f) + scratch[i] * 0.f;
  }
}

static int64_t count(const kb_args* a) {
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  return n;
}

extern "C" int kb_workspace_bytes(const kb_args* a, uint64_t* bytes) {
  *bytes = count(a) * sizeof(float);
  return 0;
}

extern "C" int kb_launch(const kb_args* a) {
  relu_plus_scratch<<<1024, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (const float*)a->workspace,
                                                               (float*)a->outputs[0].data, count(a));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
