// Broken: a kernel whose loop never ends (the exit condition reads a value that never changes).
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void spin(const float* x, float* y, volatile int* never) {
  while (*never == 0) {
  }
  y[0] = x[0];
}

extern "C" int kb_launch(const kb_args* a) {
  static int* flag = nullptr;
  if (flag == nullptr) {
    cudaMalloc(&flag, sizeof(int));
    cudaMemset(flag, 0, sizeof(int));
  }
  spin<<<1, 1, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, flag);
  return 0;
}
