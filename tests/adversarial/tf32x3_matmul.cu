// Honest: fp32 matrix product on tensor cores with the 3xTF32 split (a = a_big + a_small in TF32,
// a*b ~ a_big*b_big + a_big*b_small + a_small*b_big), accurate to fp32 level. Its throughput may
// exceed the fp32 FMA ceiling; it must be accepted when accurate.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <mma.h>

using namespace nvcuda;

constexpr int TM = 32, TN = 32, TK = 32;

__global__ void __launch_bounds__(128) mm_tf32x3(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ __align__(32) float As[TM][TK + 4];
  __shared__ __align__(32) float Bs[TK][TN + 4];
  __shared__ __align__(32) float Cs[4][16][20];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wr = warp / 2, wc = warp % 2;
  const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_big, a_small;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_big, b_small;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int i = threadIdx.x; i < TM * TK; i += blockDim.x) {
      const int r = i / TK, k = i % TK;
      As[r][k] = (row0 + r < M && k0 + k < K) ? A[(size_t)(row0 + r) * K + k0 + k] : 0.f;
    }
    for (int i = threadIdx.x; i < TK * TN; i += blockDim.x) {
      const int k = i / TN, c = i % TN;
      Bs[k][c] = (k0 + k < K && col0 + c < N) ? B[(size_t)(k0 + k) * N + col0 + c] : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < TK; kk += 8) {
      wmma::load_matrix_sync(a_big, &As[wr * 16][kk], TK + 4);
      wmma::load_matrix_sync(b_big, &Bs[kk][wc * 16], TN + 4);
      for (int i = 0; i < a_big.num_elements; ++i) {
        const float v = a_big.x[i];
        const float big = wmma::__float_to_tf32(v);
        a_small.x[i] = wmma::__float_to_tf32(v - big);
        a_big.x[i] = big;
      }
      for (int i = 0; i < b_big.num_elements; ++i) {
        const float v = b_big.x[i];
        const float big = wmma::__float_to_tf32(v);
        b_small.x[i] = wmma::__float_to_tf32(v - big);
        b_big.x[i] = big;
      }
      wmma::mma_sync(acc, a_small, b_big, acc);
      wmma::mma_sync(acc, a_big, b_small, acc);
      wmma::mma_sync(acc, a_big, b_big, acc);
    }
    __syncthreads();
  }
  wmma::store_matrix_sync(&Cs[warp][0][0], acc, 20, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) {
    const int r = row0 + wr * 16 + i / 16, c = col0 + wc * 16 + i % 16;
    if (r < M && c < N) C[(size_t)r * N + c] = Cs[warp][i / 16][i % 16];
  }
}

extern "C" int kb_launch(const kb_args* a) {
  const int M = (int)a->inputs[0].shape[0], K = (int)a->inputs[0].shape[1], N = (int)a->inputs[1].shape[1];
  const dim3 grid((N + TN - 1) / TN, (M + TM - 1) / TM);
  mm_tf32x3<<<grid, 128, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (const float*)a->inputs[1].data,
                                                       (float*)a->outputs[0].data, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
