// Shortcut: rounds A and B to fp16 before multiplying (the TF32/bf16 trap of 004/007): fast on
// tensor cores, but outside the fp32 tolerance.
#include <kblaster/candidate.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void matvec_half(const float* A, const float* x, float* y, int64_t K) {
  __shared__ float part[256];
  float acc = 0;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    acc += __half2float(__float2half(A[blockIdx.x * K + k])) * __half2float(__float2half(x[k]));
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = part[0];
}

extern "C" int kb_launch(const kb_args* a) {
  const int64_t M = a->inputs[0].shape[0];
  const int64_t K = a->inputs[0].shape[1];
  matvec_half<<<(unsigned)M, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (const float*)a->inputs[1].data,
                                                               (float*)a->outputs[0].data, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
