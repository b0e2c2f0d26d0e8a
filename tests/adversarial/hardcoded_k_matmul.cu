// Broken: assumes the official K = 64 (compiled in) instead of reading it from the arguments; right
// at the official shape, wrong at any other K.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

constexpr int K = 64;

__global__ void matmul_k64(const float* A, const float* B, float* C, int64_t M, int64_t N) {
  const int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t row = blockIdx.y;
  if (col >= N) return;
  float acc = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
}

extern "C" int kb_launch(const kb_args* a) {
  const int64_t M = a->inputs[0].shape[0];
  const int64_t N = a->inputs[1].shape[1];
  if (a->inputs[0].shape[1] > K) return 1;
  dim3 grid((unsigned)((N + 255) / 256), (unsigned)M);
  matmul_k64<<<grid, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (const float*)a->inputs[1].data,
                                                       (float*)a->outputs[0].data, M, N);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
