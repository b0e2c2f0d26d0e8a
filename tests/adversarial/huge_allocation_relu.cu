// Broken: allocates far more device memory than the card has, ignores the failure and writes
// through the null pointer it got back.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

__global__ void use(float* scratch, float* y) { y[0] = scratch[123456789]; }

extern "C" int kb_launch(const kb_args* a) {
  float* scratch = nullptr;
  cudaMalloc(&scratch, size_t(1) << 46); // 64 TiB
  cudaGetLastError();
  use<<<1, 1, 0, (cudaStream_t)a->stream>>>(scratch, (float*)a->outputs[0].data);
  return 0;
}
