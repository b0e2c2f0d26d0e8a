// Broken: computes GELU for the first half of the elements only; the rest keeps whatever was there.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

__global__ void half_gelu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / 2; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = kb_op<float>::map(x[i]);
  }
}

extern "C" int kb_launch(const kb_args* a) {
  const int64_t n = kb::numel(a->inputs[0]);
  half_gelu<<<1024, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
