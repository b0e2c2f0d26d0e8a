// Broken: an off-by-some bound lets the last threads write past the end of the output.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

__global__ void gelu_overrun(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n + 64) {
    y[i] = kb_op<float>::map(i < n ? x[i] : 0.f);
  }
}

extern "C" int kb_launch(const kb_args* a) {
  const int64_t n = kb::numel(a->inputs[0]);
  const unsigned blocks = (unsigned)((n + 64 + 255) / 256);
  gelu_overrun<<<blocks, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
