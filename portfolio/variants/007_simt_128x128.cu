// Variant of 007 (the portfolio kernel before the 3xTF32 one) (C = A @ B with small K, fp32 without
// TF32): SIMT register tiling, fp32 FMA only.
//
// Design: 128 x 128 output tile per 256-thread block, K walked in chunks of 64 (one chunk at
// K = 64). A's chunk is stored transposed (As[k][m]) and B's as is (Bs[k][n]), 64 KB of shared
// memory, zero-padded past M, N and K. Warps are laid out 2 (M) x 4 (N) with 64 x 32 warp tiles;
// a lane owns an 8 x 8 block made of 2 x 2 sub-blocks of 4 x 4 (rows lr*4 and 32 + lr*4, columns
// lc*4 and 16 + lc*4), so every k step is 4 conflict-free 16-byte shared loads and 64 FFMA into
// 64 accumulators (acc = fma(a, b, acc), k ascending, as the reference sums). The tile loads are
// 16-byte global loads (the transposed A store has consecutive lanes on consecutive m, so it is
// conflict-free); the output goes out with 16-byte streaming stores (whole 32-byte sectors).
// K % 4 != 0 or N % 4 != 0 (or unaligned tensors) switch the tile loads and the output stores to
// guarded scalar accesses; the arithmetic is the same. 2 blocks per SM (<= 128 registers).
//
// Work at M = N = 32768, K = 64: 137 GFLOP of fp32 FMA (about 2.05 ms at 67 TFLOP/s) and a 4.3 GB
// output (1.0 ms at 4.3 TB/s, overlapped). The inner loop issues 64 FFMA per 4 LDS.128; with the
// tile load/store phases and the clock under full FMA load, predicted 2.5-2.8 ms (1.2-1.35x of
// the FMA floor), against 3.43 ms for the fastest PyTorch method (torch.compile max-autotune).
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

namespace {

using op = kb_op<float>;

constexpr int bm = 128;
constexpr int bn = 128;
constexpr int bk = 64;
constexpr int threads = 256;
constexpr size_t smem_bytes = sizeof(float) * (bk * bm + bk * bn);

struct dims {
  int64_t m;
  int64_t n;
  int64_t k;
};

template <bool VecA>
__device__ __forceinline__ void load_a(const float* __restrict__ a, float (*as)[bm], const dims& d,
                                       int64_t m0, int64_t k0) {
  if (VecA) {
    // 128 rows x 16 float4; consecutive threads take consecutive rows of one float4 column.
    // Partly unrolled: with the 64 accumulators live, all 8 loads at once would spill.
#pragma unroll 4
    for (int it = 0; it < bm * bk / 4 / threads; ++it) {
      const int e = it * threads + threadIdx.x;
      const int m = e % bm;
      const int k4 = e / bm;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (m0 + m < d.m && k0 + 4 * k4 < d.k) {
        v = __ldg(reinterpret_cast<const float4*>(a + (m0 + m) * d.k + k0 + 4 * k4));
      }
      as[4 * k4 + 0][m] = v.x;
      as[4 * k4 + 1][m] = v.y;
      as[4 * k4 + 2][m] = v.z;
      as[4 * k4 + 3][m] = v.w;
    }
  } else {
#pragma unroll 4
    for (int it = 0; it < bm * bk / threads; ++it) {
      const int e = it * threads + threadIdx.x;
      const int m = e % bm;
      const int k = e / bm;
      as[k][m] = (m0 + m < d.m && k0 + k < d.k) ? a[(m0 + m) * d.k + k0 + k] : 0.0f;
    }
  }
}

template <bool VecB>
__device__ __forceinline__ void load_b(const float* __restrict__ b, float (*bs)[bn], const dims& d,
                                       int64_t n0, int64_t k0) {
  if (VecB) {
    // 64 rows x 32 float4; a warp reads 512 contiguous bytes of one row.
#pragma unroll 4
    for (int it = 0; it < bk * bn / 4 / threads; ++it) {
      const int e = it * threads + threadIdx.x;
      const int k = e / (bn / 4);
      const int n4 = e % (bn / 4);
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (k0 + k < d.k && n0 + 4 * n4 < d.n) {
        v = __ldg(reinterpret_cast<const float4*>(b + (k0 + k) * d.n + n0 + 4 * n4));
      }
      *reinterpret_cast<float4*>(&bs[k][4 * n4]) = v;
    }
  } else {
#pragma unroll 4
    for (int it = 0; it < bk * bn / threads; ++it) {
      const int e = it * threads + threadIdx.x;
      const int k = e / bn;
      const int n = e % bn;
      bs[k][n] = (k0 + k < d.k && n0 + n < d.n) ? b[(k0 + k) * d.n + n0 + n] : 0.0f;
    }
  }
}

template <bool VecA, bool VecB>
__global__ void __launch_bounds__(threads, 2)
    gemm_tile(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
              dims d, int64_t tiles_n) {
  extern __shared__ float4 smem4[];
  float(*as)[bm] = reinterpret_cast<float(*)[bm]>(smem4);
  float(*bs)[bn] = reinterpret_cast<float(*)[bn]>(reinterpret_cast<float*>(smem4) + bk * bm);

  const int64_t m0 = (blockIdx.x / tiles_n) * bm;
  const int64_t n0 = (blockIdx.x % tiles_n) * bn;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int am = (warp / 4) * 64 + (lane / 4) * 4;  // first of the rows am..am+3 and am+32..am+35
  const int bn0 = (warp % 4) * 32 + (lane % 4) * 4; // first of the columns bn0..+3 and bn0+16..+19

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      acc[i][j] = 0.0f;
    }
  }

  for (int64_t k0 = 0; k0 < d.k; k0 += bk) {
    if (k0 > 0) {
      __syncthreads(); // the previous chunk is no longer read
    }
    load_a<VecA>(a, as, d, m0, k0);
    load_b<VecB>(b, bs, d, n0, k0);
    __syncthreads();
#pragma unroll 16
    for (int kk = 0; kk < bk; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&as[kk][am]);
      const float4 a1 = *reinterpret_cast<const float4*>(&as[kk][am + 32]);
      const float4 b0 = *reinterpret_cast<const float4*>(&bs[kk][bn0]);
      const float4 b1 = *reinterpret_cast<const float4*>(&bs[kk][bn0 + 16]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          acc[i][j] = kb::fn::fma(av[i], bv[j], acc[i][j]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t row = m0 + am + (i < 4 ? i : 32 + i - 4);
    if (row >= d.m) {
      continue;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = n0 + bn0 + 16 * h;
      float* dst = c + row * d.n + col;
      const float o0 = op::epilogue(acc[i][4 * h + 0]);
      const float o1 = op::epilogue(acc[i][4 * h + 1]);
      const float o2 = op::epilogue(acc[i][4 * h + 2]);
      const float o3 = op::epilogue(acc[i][4 * h + 3]);
      if (VecB) {
        if (col < d.n) { // n % 4 == 0, so the 4 columns are all inside or all outside
          __stcs(reinterpret_cast<float4*>(dst), make_float4(o0, o1, o2, o3));
        }
      } else {
        if (col + 0 < d.n)
          dst[0] = o0;
        if (col + 1 < d.n)
          dst[1] = o1;
        if (col + 2 < d.n)
          dst[2] = o2;
        if (col + 3 < d.n)
          dst[3] = o3;
      }
    }
  }
}

using kernel_fn = void (*)(const float*, const float*, float*, dims, int64_t);

template <kernel_fn k>
int launch(const float* a, const float* b, float* c, const dims& d, cudaStream_t stream) {
  static const cudaError_t configured = cudaFuncSetAttribute(
      k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  if (configured != cudaSuccess) {
    return static_cast<int>(configured);
  }
  const int64_t tiles_n = (d.n + bn - 1) / bn;
  const int64_t blocks = tiles_n * ((d.m + bm - 1) / bm);
  if (blocks > 0x7fffffffLL) {
    return -1;
  }
  k<<<static_cast<unsigned>(blocks), threads, smem_bytes, stream>>>(a, b, c, d, tiles_n);
  return static_cast<int>(cudaGetLastError());
}

} // namespace

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (args->num_inputs < 2 || args->num_outputs < 1) {
    return -1;
  }
  const kb_tensor& at = args->inputs[0];
  const kb_tensor& bt = args->inputs[1];
  const kb_tensor& ct = args->outputs[0];
  if (at.ndim != 2 || bt.ndim != 2 || at.shape[1] != bt.shape[0] || at.dtype != KB_FLOAT32 ||
      bt.dtype != KB_FLOAT32 || ct.dtype != KB_FLOAT32 || !kb::is_contiguous(at) ||
      !kb::is_contiguous(bt) || !kb::is_contiguous(ct) ||
      kb::numel(ct) != at.shape[0] * bt.shape[1]) {
    return -1;
  }
  const dims d{at.shape[0], bt.shape[1], at.shape[1]};
  if (d.m == 0 || d.n == 0) {
    return 0;
  }
  const auto* a = static_cast<const float*>(at.data);
  const auto* b = static_cast<const float*>(bt.data);
  auto* c = static_cast<float*>(ct.data);
  const cudaStream_t stream = kb::stream_of(args);
  const bool vec_a = d.k % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0;
  const bool vec_b = d.n % 4 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(c) % 16 == 0;
  if (vec_a && vec_b) {
    return launch<gemm_tile<true, true>>(a, b, c, d, stream);
  }
  if (vec_a) {
    return launch<gemm_tile<true, false>>(a, b, c, d, stream);
  }
  if (vec_b) {
    return launch<gemm_tile<false, true>>(a, b, c, d, stream);
  }
  return launch<gemm_tile<false, false>>(a, b, c, d, stream);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio variant: small-K SGEMM, 128x128x64 block tile, 8x8 per thread (2x2 of 4x4), "
         "fp32 FMA only, 16-byte stores";
}
