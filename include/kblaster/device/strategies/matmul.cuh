// Strategy library, family `matmul` (c[m, n] = epilogue(sum over k of a[m, k] * b[k, n])), fp32
// FMA only: no TF32 or tensor-core shortcuts, whose rounding fails the fp32 tolerance.
//
// matmul::matvec<Op, P>: N == 1 or small. A block owns `rows` rows of A and one column of B over
// a chunk of K (k_chunk elements, 0: all of K); each thread loads one vector of B and the rows'
// vectors of A at the same k, so B is read once per `rows` rows; the rows' sums meet in shared
// memory. With several chunks the partial sums go to the workspace and a second kernel adds them
// in a fixed order. P: block, rows, vector_bytes, k_chunk.
//
// matmul::tiled<Op, P>: register tiling: a block computes a bm x bn tile of C, each thread a
// tm x tn sub-tile (float4 reads of A and B from shared memory), bk-deep slices of A (transposed)
// and B staged in double-buffered shared memory, the next slice loaded into registers while the
// current one is multiplied; 16-byte stores of C where N allows. P: bm, bn, bk, tm, tn, store_hint.
//
// matmul::tensor_core<Op, P>: tensor cores at fp32 accuracy. fp32 operands are split into
// big = tf32(v) and small = tf32(v - big) and each product is a_small * b_big + a_big * b_small +
// a_big * b_big (3xTF32, mma.sync m16n8k8, fp32 accumulation; the dropped a_small * b_small is
// about 2^-22 of the product). fp16 and bf16 values are exact in TF32, so their products take one
// mma each. A 128 x 128 tile per block of 8 warps (2 x 4, 64 x 32 each), K in bk-deep chunks held
// in shared memory with bank-conflict-free pitches, the accumulation order fixed (reproducible).
// P: bk, min_blocks (blocks per SM the register budget is sized for), k_unroll, store_hint, and
// optionally staged (C through shared memory), split (0: big and small rounded by cvt.rna;
// 1: big by masking, small passed as raw fp32 bits; 2: big rounded by an integer add and mask,
// the two cross terms as one bf16 mma of depth 16, two mma per product instead of three) and
// presplit (each chunk split once per block into (big, small) pairs in shared memory instead of
// once per warp at every k-step) and flush (fp32 storage: how often the mma sums leave the tensor
// core's accumulator, whose adds truncate toward zero, for fp32 totals added with round to
// nearest: 0 never, whose error grows coherently with K, about 3 (K / 8) 2^-25 relative, 4.6e-5
// at K = 4096; 1 every 8-deep k-step, 64 FADD per thread and step beside 48 mma; 2 every chunk,
// a second set of 64 accumulators; see tc::step). With a flush the accumulation error is that of
// an fp32 FMA chain, about 1e-6 rel_l2 at K = 4096, at any K.
//
// matmul::row_scale<Op, P>: diag(a) @ B as a row scaling, c[m, n] = epilogue(alpha * a[m] *
// b[m, n]) with V-element accesses along the rows; memory bound. P: block, vector_bytes, hint.
//
// Every strategy takes every form of the family (families/matmul.cuh) through forms::plan: a
// transposed operand is transposed into the workspace first (so workspace_bytes is that size, plus
// matvec's partial sums), batches run as blockIdx.z of the tiled kernels (matvec: one launch per
// batch), alpha is applied before the epilogue, and the triangular mask zeroes its elements in a
// pass after the product; the tiled kernels skip the tiles the mask zeroes whole. The GEMM
// strategies refuse diag(a) @ B, and row_scale takes only it.
#pragma once

#include "kblaster/device/families/matmul.cuh"
#include "kblaster/device/strategies/common.cuh"

namespace kb::strategies::matmul {

using kb::matmul::config;
using kb::matmul::dims;

#if defined(__CUDACC__)

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    matvec_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, dims d,
                  int64_t splits, int64_t chunk_vecs, float* __restrict__ partials) {
  constexpr int R = P::rows;
  constexpr int warps = P::block / 32;
  __shared__ float red[warps][R];
  const int64_t nvec = d.k / V;
  const int64_t groups = ceil_div(d.m, R);
  for (int64_t blk = blockIdx.x; blk < groups * d.n * splits; blk += gridDim.x) {
    const int64_t q = blk % splits;
    const int64_t n = blk / splits % d.n;
    const int64_t m0 = blk / splits / d.n * R;
    const int64_t begin = q * chunk_vecs;
    const int64_t end = min64(nvec, begin + chunk_vecs);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r] = 0.0f;
    }
    for (int64_t kv = begin + threadIdx.x; kv < end; kv += P::block) {
      float bv[V];
      if constexpr (V > 1) {
        load_vec<float, T, V>(b + kv * V, bv); // V > 1 only when N == 1
      } else {
        bv[0] = cvt<float>(b[kv * d.n + n]);
      }
      float av[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (m0 + r < d.m) {
          load_vec<float, T, V>(a + (m0 + r) * d.k + kv * V, av[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (m0 + r < d.m) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            acc[r] = fn::fma(av[r][k], bv[k], acc[r]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r] = warp_reduce(acc[r], [](float u, float v) { return u + v; });
    }
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        red[threadIdx.x / 32][r] = acc[r];
      }
    }
    __syncthreads();
    if (threadIdx.x < R && m0 + threadIdx.x < d.m) {
      float sum = red[0][threadIdx.x];
#pragma unroll
      for (int w = 1; w < warps; ++w) {
        sum += red[w][threadIdx.x];
      }
      const int64_t out = (m0 + threadIdx.x) * d.n + n;
      if (splits == 1) {
        c[out] = cvt<T>(kb::matmul::finish<Op>(sum, d, m0 + threadIdx.x, n));
      } else {
        partials[q * d.m * d.n + out] = sum;
      }
    }
    __syncthreads(); // `red` is reused by the next block of work
  }
}

// A thread per output: the chunks' partial sums in a fixed order, then the epilogue.
template <template <class> class Op, class T>
__global__ void __launch_bounds__(256)
    matvec_finish_kernel(const float* __restrict__ partials, int64_t outputs, int64_t splits,
                         T* __restrict__ c, dims d) {
  for (int64_t out = int64_t{blockIdx.x} * 256 + threadIdx.x; out < outputs;
       out += int64_t{gridDim.x} * 256) {
    float sum = partials[out];
    for (int64_t q = 1; q < splits; ++q) {
      sum += partials[q * outputs + out];
    }
    c[out] = cvt<T>(kb::matmul::finish<Op>(sum, d, out / d.n, out % d.n));
  }
}

template <class P> struct tile_shape {
  static constexpr int threads = (P::bm / P::tm) * (P::bn / P::tn);
  static constexpr int a_stride = P::bm + 4; // floats per k-row of the transposed A tile (padded)
  static constexpr int a_floats = P::bk * a_stride; // per buffer
  static constexpr int b_floats = P::bk * P::bn;
  static constexpr int a_loads = (P::bm * P::bk + threads - 1) / threads; // per thread and slice
  static constexpr int b_loads = (P::bk * P::bn + threads - 1) / threads;
  static constexpr size_t smem_bytes = 2 * sizeof(float) * (a_floats + b_floats);
};

template <template <class> class Op, class P, class T, bool VecStore>
__global__ void __launch_bounds__(tile_shape<P>::threads)
    tiled_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, dims d) {
  using shape = tile_shape<P>;
  constexpr int threads = shape::threads;
  constexpr int row_span = P::bm * 4 / P::tm; // rows between a thread's groups of 4 rows
  constexpr int col_span = P::bn * 4 / P::tn;
  extern __shared__ float4 tile_smem[];
  float* as = reinterpret_cast<float*>(tile_smem);
  float* bs = as + 2 * shape::a_floats;
  const int tid = threadIdx.x;
  const int tx = tid % (P::bn / P::tn);
  const int ty = tid / (P::bn / P::tn);
  const int64_t tiles_n = ceil_div(d.n, P::bn);
  const int64_t m0 = blockIdx.x / tiles_n * P::bm;
  const int64_t n0 = blockIdx.x % tiles_n * P::bn;
  const int64_t slices = ceil_div(d.k, P::bk);
  if (kb::matmul::tile_masked(d.mask, m0, n0, P::bm, P::bn)) {
    return; // zero throughout: written by the mask pass
  }
  a += static_cast<int64_t>(blockIdx.z) * d.sa;
  b += static_cast<int64_t>(blockIdx.z) * d.sb;
  c += static_cast<int64_t>(blockIdx.z) * d.sc;

  float ra[shape::a_loads];
  float rb[shape::b_loads];
  const auto load_slice = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < shape::a_loads; ++i) {
      const int e = tid + i * threads;
      const int64_t m = m0 + e / P::bk;
      const int64_t k = k0 + e % P::bk;
      ra[i] = (e < P::bm * P::bk && m < d.m && k < d.k) ? cvt<float>(a[m * d.k + k]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < shape::b_loads; ++i) {
      const int e = tid + i * threads;
      const int64_t k = k0 + e / P::bn;
      const int64_t n = n0 + e % P::bn;
      rb[i] = (e < P::bk * P::bn && k < d.k && n < d.n) ? cvt<float>(b[k * d.n + n]) : 0.0f;
    }
  };
  const auto store_slice = [&](int buf) {
#pragma unroll
    for (int i = 0; i < shape::a_loads; ++i) {
      const int e = tid + i * threads;
      if (e < P::bm * P::bk) {
        as[buf * shape::a_floats + (e % P::bk) * shape::a_stride + e / P::bk] = ra[i];
      }
    }
#pragma unroll
    for (int i = 0; i < shape::b_loads; ++i) {
      const int e = tid + i * threads;
      if (e < P::bk * P::bn) {
        bs[buf * shape::b_floats + e] = rb[i];
      }
    }
  };

  float acc[P::tm][P::tn];
#pragma unroll
  for (int i = 0; i < P::tm; ++i) {
#pragma unroll
    for (int j = 0; j < P::tn; ++j) {
      acc[i][j] = 0.0f;
    }
  }
  load_slice(0);
  store_slice(0);
  __syncthreads();
  for (int64_t s = 0; s < slices; ++s) {
    const int buf = static_cast<int>(s & 1);
    if (s + 1 < slices) {
      load_slice((s + 1) * P::bk);
    }
    const float* at = as + buf * shape::a_floats;
    const float* bt = bs + buf * shape::b_floats;
#pragma unroll
    for (int kk = 0; kk < P::bk; ++kk) {
      float ar[P::tm];
      float br[P::tn];
#pragma unroll
      for (int g = 0; g < P::tm / 4; ++g) {
        const float4 v =
            *reinterpret_cast<const float4*>(at + kk * shape::a_stride + g * row_span + ty * 4);
        ar[g * 4 + 0] = v.x;
        ar[g * 4 + 1] = v.y;
        ar[g * 4 + 2] = v.z;
        ar[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < P::tn / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(bt + kk * P::bn + g * col_span + tx * 4);
        br[g * 4 + 0] = v.x;
        br[g * 4 + 1] = v.y;
        br[g * 4 + 2] = v.z;
        br[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < P::tm; ++i) {
#pragma unroll
        for (int j = 0; j < P::tn; ++j) {
          acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
        }
      }
    }
    if (s + 1 < slices) {
      store_slice(buf ^ 1);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < P::tm; ++i) {
    const int64_t m = m0 + (i / 4) * row_span + ty * 4 + i % 4;
    if (m >= d.m) {
      continue;
    }
#pragma unroll
    for (int g = 0; g < P::tn / 4; ++g) {
      const int64_t n = n0 + g * col_span + tx * 4;
      float out[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        // Columns past N are not computed: the epilogue's operands end at N.
        out[q] = n + q < d.n ? kb::matmul::finish<Op>(acc[i][g * 4 + q], d, m, n + q) : 0.0f;
      }
      if (VecStore && n + 3 < d.n) {
        store_vec<T, float, 4, P::store_hint>(c + m * d.n + n, out);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (n + q < d.n) {
            c[m * d.n + n + q] = cvt<T>(out[q]);
          }
        }
      }
    }
  }
}

// ---- tensor_core ------------------------------------------------------------------------------

namespace tc {

constexpr int bm = 128;
constexpr int bn = 128;
constexpr int threads = 256;
constexpr int b_pitch = bn + 8; // floats: fragment reads of B hit 32 distinct banks

template <int Bk> struct tile {
  static constexpr int a_pitch = Bk + 4; // floats: fragment reads of A hit 32 distinct banks
  static constexpr size_t smem_bytes =
      (static_cast<size_t>(bm) * a_pitch + static_cast<size_t>(Bk) * b_pitch) * sizeof(float);
};

// The staged epilogue's C tile in shared memory: pitch bn + 8 floats (8 banks on per row), so
// that a half-warp's 8-byte fragment pairs (rows g = 0..3, columns 2t) cover the 32 banks once,
// and each row stays 16-byte aligned for the row reads.
constexpr int c_pitch = bn + 8;
constexpr size_t c_tile_bytes = static_cast<size_t>(bm) * c_pitch * sizeof(float);

// P::staged where the parameters name it (0 otherwise: sources written before the axis).
template <class Q, class = void> struct staged_of : std::integral_constant<int, 0> {};
template <class Q>
struct staged_of<Q, std::void_t<decltype(Q::staged)>> : std::integral_constant<int, Q::staged> {};

// P::split and P::presplit where the parameters name them (0 otherwise, as staged_of).
template <class Q, class = void> struct split_of : std::integral_constant<int, 0> {};
template <class Q>
struct split_of<Q, std::void_t<decltype(Q::split)>> : std::integral_constant<int, Q::split> {};
template <class Q, class = void> struct presplit_of : std::integral_constant<int, 0> {};
template <class Q>
struct presplit_of<Q, std::void_t<decltype(Q::presplit)>>
    : std::integral_constant<int, Q::presplit> {};

// The presplit chunks: each element as its (big, small) pair, the elements k and k + 4 of one
// 8-deep step side by side in a float4 (big_k, small_k, big_k+4, small_k+4), so that one 16-byte
// read yields two registers of a fragment (a0 and a2, a1 and a3, b0 and b1) with their smalls.
// A: row m holds bk / 2 float4 (slot (k / 8) * 4 + k % 4), pitch bk / 2 + 4 = 4 mod 8: a quarter
// warp (rows g and g + 1, slots t = 0..3) reads 8 distinct 16-byte bank groups. B: bk / 2 rows
// (the same slots) of bn float4 (column n), pitch bn + 2 = 2 mod 8: the quarter warp lands on
// 2t + g, distinct again. Twice the bytes of the fp32 chunks, so bk = 32 keeps two blocks per SM.
template <int Bk> struct pair_tile {
  static constexpr int a_pitch = Bk / 2 + 4; // float4
  static constexpr int b_pitch = bn + 2;     // float4
  static constexpr size_t smem_bytes =
      (static_cast<size_t>(bm) * a_pitch + static_cast<size_t>(Bk / 2) * b_pitch) * sizeof(float4);
};

// P::flush where the parameters name it (0 otherwise, as staged_of). How often the mma products
// leave the tensor core's accumulator for the fp32 totals (fp32 storage only, see step):
// 0: never (one mma accumulator per output over all of K); 1: every 8-deep k-step (its three mma
// start from zero and the fragment is added to the totals by FADD); 2: every chunk (a second set
// of 64 accumulators, zeroed per chunk and added to the totals after it).
template <class Q, class = void> struct flush_of : std::integral_constant<int, 0> {};
template <class Q>
struct flush_of<Q, std::void_t<decltype(Q::flush)>> : std::integral_constant<int, Q::flush> {};

template <class Q, class = void> struct persistent_of : std::integral_constant<int, 0> {};
template <class Q>
struct persistent_of<Q, std::void_t<decltype(Q::persistent)>>
    : std::integral_constant<int, Q::persistent> {};

// The persistent kernel's shared memory: two fp32 operand buffers and the C tile.
template <int Bk> constexpr size_t persistent_smem_bytes = 2 * tile<Bk>::smem_bytes + c_tile_bytes;

template <class P> constexpr size_t operand_bytes_of() {
  return presplit_of<P>::value != 0 ? pair_tile<P::bk>::smem_bytes : tile<P::bk>::smem_bytes;
}

// Dynamic shared memory of a block: the operand chunks, or the C tile where that is larger.
template <class P> constexpr size_t smem_bytes_of() {
  return staged_of<P>::value != 0 && c_tile_bytes > operand_bytes_of<P>() ? c_tile_bytes
                                                                          : operand_bytes_of<P>();
}

__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// big = tf32(v); small = tf32(v - big), left unset when the storage type is exact in TF32.
// Mode 1 (the integer split) has no cvt: big = v with its low 13 significand bits cleared (one
// LOP; the TF32 mma reads only the top 19 bits of a register) and small = v - big, exact in fp32
// (the cleared bits), passed as raw fp32 bits, of which the tensor core again reads the top 19.
// Error: truncating big leaves |small| < 2^-10 |v| (rounding: 2^-11); the mma's truncation of
// small costs < 2^-10 |small| < 2^-20 |v|; the dropped a_small * b_small is < 2^-20 |a b|. So
// about 3 x 2^-20 of |a b| per product at worst against 3 x 2^-22 for the rounded split, the same
// order as the fp32 accumulation's own rounding over K = 64 (up to 64 x 2^-24 of sum |a b|), and
// both far inside a tolerance of 1e-4.
template <bool Split, int Mode = 0>
__device__ __forceinline__ void split(float v, uint32_t& big, uint32_t& small) {
  if constexpr (Mode == 2) {
    // Rounded without a cvt: adding half of the cleared range before masking rounds to nearest
    // (ties away from zero, as cvt.rna); a carry into the exponent is the correct rounding up.
    big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
    if constexpr (Split) {
      small = __float_as_uint(v - __uint_as_float(big));
    }
  } else if constexpr (Mode == 1) {
    big = __float_as_uint(v) & 0xffffe000u;
    if constexpr (Split) {
      small = __float_as_uint(v - __uint_as_float(big));
    }
  } else {
    big = to_tf32(v);
    if constexpr (Split) {
      small = to_tf32(v - __uint_as_float(big));
    }
  }
}

// 16 bytes from global to shared memory without passing through registers; `bytes` = 0 writes
// zeros (nothing is read).
__device__ __forceinline__ void copy16(float* smem, const void* gmem, int bytes) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void copies_done() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

// The presplit tiles' entry for elements k (lo) and k + 4 (hi).
template <int Mode> __device__ __forceinline__ void store_pair(uint4* dst, float lo, float hi) {
  uint4 e;
  split<true, Mode>(lo, e.x, e.y);
  split<true, Mode>(hi, e.z, e.w);
  *dst = e;
}

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c = a b from a zero accumulator (the step's first mma where its products start fresh).
__device__ __forceinline__ void mma_fresh(float (&c)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

__device__ __forceinline__ void mma_bf16_fresh(float (&c)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// Two floats as a bf16x2 register, each rounded to nearest: lo in the low half (the lower k of
// an mma fragment pair), hi in the high half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ uint32_t pack_bf16_bits(uint32_t lo, uint32_t hi) {
  return pack_bf16(__uint_as_float(lo), __uint_as_float(hi));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Split mode 2: the two cross terms of an 8-deep step as one bf16 mma of depth 16. The k8
// step's fragments of the TF32 mma (A: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B: (t, g),
// (t + 4, g)) are the bf16 mma's (A: (g, 2t..2t+1), (g + 8, 2t..2t+1), then the same at k + 8;
// B: (2t..2t+1, g), then at k + 8) once its k runs 2t -> t and 2t + 1 -> t + 4, the same for A
// and B. Its first 8 k hold a * b_small, its last 8 a_small * b. Per element pair of A:
// cross_a = {bf16x2(a[g][t], a[g][t + 4]), rows g + 8, then the smalls likewise}; of B:
// cross_b = {bf16x2 of the smalls, bf16x2 of the values}.
// Error per product: bf16 rounding (2^-9) of a value times a small (< 2^-11 |v| after the
// rounded split) and of the small itself, 2 x 2^-20 |a b| per cross term, with the dropped
// a_small * b_small (2^-22): about 4.3 x 2^-20 of |a b| against 3 x 2^-20 for mode 1, still the
// order of the fp32 accumulation's own rounding over K = 64.
__device__ __forceinline__ void product_cross(float (&c)[4], const uint32_t (&a_big)[4],
                                              const uint32_t (&a_cross)[4],
                                              const uint32_t (&b_big)[2],
                                              const uint32_t (&b_cross)[2]) {
  mma_bf16(c, a_cross, b_cross);
  mma(c, a_big, b_big);
}

// One tile's product: a_small * b_big + a_big * b_small + a_big * b_big in that order (the small
// terms first, so they are not lost against the big one), or a_big * b_big alone where the
// operands are exact in TF32.
template <bool Split>
__device__ __forceinline__ void product(float (&c)[4], const uint32_t (&a_big)[4],
                                        const uint32_t (&a_small)[4], const uint32_t (&b_big)[2],
                                        const uint32_t (&b_small)[2]) {
  if constexpr (Split) {
    mma(c, a_small, b_big);
    mma(c, a_big, b_small);
  }
  mma(c, a_big, b_big);
}

// The fp32 chunk k0 .. k0 + Bk of A's rows m0 .. m0 + bm into shared memory (pitch
// tile<Bk>::a_pitch) by asynchronous 16-byte copies, no staging registers; past M or K a copy of
// 0 bytes writes zeros. A thread's copies are a fixed number of rows apart, so one pointer walks
// them. Needs K a multiple of 4 and A 16-byte aligned. The caller commits and waits.
template <int Bk>
__device__ __forceinline__ void copy_a(float* as, const float* __restrict__ a, const dims& d,
                                       int64_t m0, int64_t k0, int tid) {
  constexpr int a_pitch = tile<Bk>::a_pitch;
  constexpr int a_quads = Bk / 4; // 16-byte pieces per row of the A chunk
  constexpr int a_rows_per_step = threads / a_quads;
  const int r0 = tid / a_quads;
  const int c4 = tid % a_quads;
  const bool k_in = k0 + c4 * 4 < d.k;
  const float* src = a + (m0 + r0) * d.k + k0 + c4 * 4;
#pragma unroll
  for (int it = 0; it < bm / a_rows_per_step; ++it) {
    const int r = r0 + it * a_rows_per_step;
    const bool in = k_in && m0 + r < d.m;
    copy16(as + r * a_pitch + c4 * 4, in ? src : a, in ? 16 : 0);
    src += a_rows_per_step * d.k;
  }
}

// The chunk's rows k0 .. k0 + Bk of B's columns n0 .. n0 + bn likewise (pitch b_pitch); needs N a
// multiple of 4 and B 16-byte aligned.
template <int Bk>
__device__ __forceinline__ void copy_b(float* bs, const float* __restrict__ b, const dims& d,
                                       int64_t n0, int64_t k0, int tid) {
  constexpr int b_quads = bn / 4;
  constexpr int b_rows_per_step = threads / b_quads;
  const int r0 = tid / b_quads;
  const int c4 = tid % b_quads;
  const bool n_in = n0 + c4 * 4 < d.n;
  const float* src = b + (k0 + r0) * d.n + n0 + c4 * 4;
#pragma unroll
  for (int it = 0; it < Bk / b_rows_per_step; ++it) {
    const int r = r0 + it * b_rows_per_step;
    const bool in = n_in && k0 + r < d.k;
    copy16(bs + r * b_pitch + c4 * 4, in ? src : b, in ? 16 : 0);
    src += b_rows_per_step * d.n;
  }
}

// Both operands' chunk of the tile (m0, n0): A at as, B at bs.
template <int Bk>
__device__ __forceinline__ void copy_chunk(float* as, float* bs, const float* __restrict__ a,
                                           const float* __restrict__ b, const dims& d, int64_t m0,
                                           int64_t n0, int64_t k0, int tid) {
  copy_a<Bk>(as, a, d, m0, k0, tid);
  copy_b<Bk>(bs, b, d, n0, k0, tid);
}

// The warp's accumulators set to zero.
__device__ __forceinline__ void zero(float (&acc)[4][4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        acc[i][j][r] = 0.0f;
      }
    }
  }
}

// acc += part for the warp's accumulators, each an fp32 add rounded to nearest.
__device__ __forceinline__ void add(float (&acc)[4][4][4], const float (&part)[4][4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        acc[i][j][r] += part[i][j][r];
      }
    }
  }
}

// One tile's 8-deep step into acc (product, or product_cross at split mode 2). Fresh: the step's
// mma start from a zeroed fragment, which is then added to acc by FADD (flush = 1).
//
// Why: the tensor core's fp32 accumulation is not IEEE. Its products are exact, but they and the
// accumulator are aligned to the largest exponent with the shifted-out bits truncated, and the
// sum is normalized toward zero (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA
// tensor cores", PeerJ CS 2021; Ootomo and Yokota, "Recovering single precision accuracy from
// Tensor Cores while surpassing the FP32 theoretical peak performance", 2022, who add the mma
// results outside the tensor core for this reason). Each mma into a long-lived accumulator thus
// shrinks it by up to 2^-23 (about 2^-25 on average, always toward zero), and the shrinks add up
// coherently: 3 mma per step over K = 4096 leave a relative error of about 3 (K / 8) 2^-25
// = 4.6e-5, as measured on the H200 (2.9e-5 rel_l2), where the fp32 FMA chain's is about 1e-6. A
// fresh fragment truncates only relative to its own step's sum, an error of random sign across
// steps, and the FADD into the totals rounds to nearest: the result is as accurate as an FMA chain
// (the CPU model in tests/unit/tensor_core_accumulation_test.cpp: 5e-7 rel_l2 at K = 4096, against
// 3.3e-5 unflushed).
template <bool Split, int Mode, bool Fresh>
__device__ __forceinline__ void step(float (&acc)[4], const uint32_t (&a_big)[4],
                                     const uint32_t (&a_small)[4], const uint32_t (&a_cross)[4],
                                     const uint32_t (&b_big)[2], const uint32_t (&b_small)[2],
                                     const uint32_t (&b_cross)[2]) {
  if constexpr (Fresh && Split) {
    float part[4];
    if constexpr (Mode == 2) {
      mma_bf16_fresh(part, a_cross, b_cross);
    } else {
      mma_fresh(part, a_small, b_big);
      mma(part, a_big, b_small);
    }
    mma(part, a_big, b_big);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      acc[r] += part[r];
    }
  } else if constexpr (Split && Mode == 2) {
    product_cross(acc, a_big, a_cross, b_big, b_cross);
  } else {
    product<Split>(acc, a_big, a_small, b_big, b_small);
  }
}

// Split mode 2's A fragments (see a_cross_fragments) from the four values (m, k), (m + 8, k), (m, k
// + 4), (m + 8, k + 4).
__device__ __forceinline__ void a_cross_split(const float (&v)[4], uint32_t (&big)[4],
                                              uint32_t (&cross)[4]) {
  uint32_t sm[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    split<true, 2>(v[r], big[r], sm[r]);
  }
  cross[0] = pack_bf16(v[0], v[2]);
  cross[1] = pack_bf16(v[1], v[3]);
  cross[2] = pack_bf16(__uint_as_float(sm[0]), __uint_as_float(sm[2]));
  cross[3] = pack_bf16(__uint_as_float(sm[1]), __uint_as_float(sm[3]));
}

// Split mode 2's A fragments of one m16 x k8 tile from the fp32 rows in shared memory (pitch
// Pitch): the TF32 big values of (m, k), (m + 8, k), (m, k + 4), (m + 8, k + 4) and the bf16 cross
// pairs {a(k), a(k + 4)} of rows m and m + 8, then {a_small(k), a_small(k + 4)} of both (see
// product_cross). m = the tile's row0 + g, k = its k0 + t.
template <int Pitch>
__device__ __forceinline__ void a_cross_fragments(const float* as, int m, int k, uint32_t (&big)[4],
                                                  uint32_t (&cross)[4]) {
  const float v[4] = {as[m * Pitch + k], as[(m + 8) * Pitch + k], as[m * Pitch + k + 4],
                      as[(m + 8) * Pitch + k + 4]};
  a_cross_split(v, big, cross);
}

// One chunk's products into the warp's 64 x 32 accumulators (4 x 4 tiles of m16n8): A at as (pitch
// tile<Bk>::a_pitch), B at bs (pitch b_pitch), fp32 values split per Mode (see split).
template <bool Split, int Mode, int Bk, int KUnroll, bool Fresh = false>
__device__ __forceinline__ void chunk_product(const float* as, const float* bs,
                                              float (&acc)[4][4][4], int wm, int wn, int g, int t) {
  constexpr int a_pitch = tile<Bk>::a_pitch;
  if constexpr (Split && Mode == 2) {
#pragma unroll KUnroll
    for (int kk = 0; kk < Bk; kk += 8) {
      uint32_t bb[4][2];
      uint32_t bx[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + g;
        const float v0 = bs[(kk + t) * b_pitch + n];
        const float v1 = bs[(kk + t + 4) * b_pitch + n];
        uint32_t s0, s1;
        split<true, 2>(v0, bb[j][0], s0);
        split<true, 2>(v1, bb[j][1], s1);
        bx[j][0] = pack_bf16(__uint_as_float(s0), __uint_as_float(s1));
        bx[j][1] = pack_bf16(v0, v1);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t ab[4];
        uint32_t ax[4];
        a_cross_fragments<a_pitch>(as, wm + i * 16 + g, kk + t, ab, ax);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          step<true, 2, Fresh>(acc[i][j], ab, ab, ax, bb[j], bb[j], bx[j]);
        }
      }
    }
  } else {
#pragma unroll KUnroll
    for (int kk = 0; kk < Bk; kk += 8) {
      uint32_t bb[4][2];
      uint32_t bsm[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + g;
        split<Split, Mode>(bs[(kk + t) * b_pitch + n], bb[j][0], bsm[j][0]);
        split<Split, Mode>(bs[(kk + t + 4) * b_pitch + n], bb[j][1], bsm[j][1]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = wm + i * 16 + g;
        uint32_t ab[4];
        uint32_t asm_[4];
        split<Split, Mode>(as[m * a_pitch + kk + t], ab[0], asm_[0]);
        split<Split, Mode>(as[(m + 8) * a_pitch + kk + t], ab[1], asm_[1]);
        split<Split, Mode>(as[m * a_pitch + kk + t + 4], ab[2], asm_[2]);
        split<Split, Mode>(as[(m + 8) * a_pitch + kk + t + 4], ab[3], asm_[3]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          step<Split, Mode, Fresh>(acc[i][j], ab, asm_, asm_, bb[j], bsm[j], bsm[j]);
        }
      }
    }
  }
}

// The accumulators, through the epilogue, into the C tile in shared memory (pitch c_pitch).
// Accumulator r of tile (i, j) is C[wm + 16i + g + 8(r / 2)][wn + 8j + 2t + r % 2].
template <template <class> class Op>
__device__ __forceinline__ void stage_c(float* cs, const float (&acc)[4][4][4], int wm, int wn,
                                        int g, int t, const dims& d, int64_t m0, int64_t n0) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* srow = cs + (wm + i * 16 + g + h * 8) * c_pitch + wn + 2 * t;
      const int64_t row = m0 + wm + i * 16 + g + h * 8;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = n0 + wn + j * 8 + 2 * t;
        // Past M or N nothing is computed: the epilogue's operands end there.
        const bool in_row = row < d.m;
        *reinterpret_cast<float2*>(srow + j * 8) = make_float2(
            in_row && col < d.n ? kb::matmul::finish<Op>(acc[i][j][2 * h], d, row, col) : 0.0f,
            in_row && col + 1 < d.n ? kb::matmul::finish<Op>(acc[i][j][2 * h + 1], d, row, col + 1)
                                    : 0.0f);
      }
    }
  }
}

// The staged C tile (m0, n0) out to global memory, whole rows per warp: a warp's 16-byte stores
// cover 512 contiguous bytes, guarded past M and N (scalar stores where N or C forbid quads).
template <class T, cache_hint Hint>
__device__ __forceinline__ void store_rows(T* __restrict__ c, const float* cs, const dims& d,
                                           int64_t m0, int64_t n0, int warp, int lane) {
  const int64_t col = n0 + 4 * lane;
  const bool quad = d.n % 4 == 0 && reinterpret_cast<uintptr_t>(c) % 16 == 0;
  for (int r = warp; r < bm; r += threads / 32) {
    const int64_t row = m0 + r;
    if (row >= d.m) {
      break;
    }
    const float4 v = *reinterpret_cast<const float4*>(cs + r * c_pitch + 4 * lane);
    T* crow = c + row * d.n;
    const float out[4] = {v.x, v.y, v.z, v.w};
    if (quad && col + 3 < d.n) {
      store_vec<T, float, 4, Hint>(crow + col, out);
    } else {
      for (int e = 0; e < 4; ++e) {
        if (col + e < d.n) {
          crow[col + e] = cvt<T>(out[e]);
        }
      }
    }
  }
}

// cp.async groups: commit this thread's copies; wait until at most N of its groups are pending.
__device__ __forceinline__ void copies_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void copies_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Bulk (TMA) stores from shared memory: the writes of the generic proxy made visible to the
// async proxy, a store of `bytes` (a multiple of 16, both addresses 16-byte aligned), the commit
// of this thread's bulk group, and the wait until its groups have read their shared memory.
__device__ __forceinline__ void fence_async_shared() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, uint32_t bytes) {
#if __CUDA_ARCH__ >= 900
  const auto src = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(src),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

} // namespace tc

// VecLoad: fp32 storage, K and N multiples of 4 and A, B 16-byte aligned (float4 tile loads);
// VecStore: N even and C aligned to two elements (pairs of outputs per store).
template <template <class> class Op, class P, class T, bool VecLoad, bool VecStore>
__global__ void __launch_bounds__(tc::threads, P::min_blocks)
    tensor_core_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                       dims d) {
  constexpr int bk = P::bk;
  constexpr int a_pitch = tc::tile<bk>::a_pitch;
  constexpr int b_pitch = tc::b_pitch;
  constexpr bool split = sizeof(T) == 4; // fp16 and bf16 values are exact in TF32
  constexpr int split_mode = tc::split_of<P>::value;
  constexpr bool presplit = tc::presplit_of<P>::value != 0;
  constexpr int flush = split ? tc::flush_of<P>::value : 0; // fp16, bf16: see tensor_core
  extern __shared__ float4 tc_smem[];
  float* as = reinterpret_cast<float*>(tc_smem);
  float* bs = as + tc::bm * a_pitch;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int wm = (warp / 4) * 64;
  const int wn = (warp % 4) * 32;
  const int64_t tiles_n = ceil_div(d.n, tc::bn);
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) / tiles_n * tc::bm;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) % tiles_n * tc::bn;
  if (kb::matmul::tile_masked(d.mask, m0, n0, tc::bm, tc::bn)) {
    return; // zero throughout: written by the mask pass
  }
  a += static_cast<int64_t>(blockIdx.z) * d.sa;
  b += static_cast<int64_t>(blockIdx.z) * d.sb;
  c += static_cast<int64_t>(blockIdx.z) * d.sc;

  float acc[4][4][4];
  tc::zero(acc);
  float part[4][4][4]; // flush = 2: the chunk's sums
  float(&sums)[4][4][4] = flush == 2 ? part : acc;

  for (int64_t k0 = 0; k0 < d.k; k0 += bk) {
    if constexpr (flush == 2) {
      tc::zero(part);
    }
    // The chunk into shared memory, zero past M, N and K: as fp32, or split (presplit).
    if constexpr (presplit) {
      // The chunk split once per block on its way in, as (big, small) pairs (tc::pair_tile),
      // zero past M, N and K: the inner loop is then shared-memory reads and mma only, where
      // the per-warp split repeats each A element in the 4 warps of its rows and each B element
      // in the 2 warps of its columns. Scalar loads of the pair (k, k + 4), so that a lane's
      // 16-byte store is whole; consecutive lanes take consecutive slots of a row: the stores
      // are conflict-free, B's loads coalesced, A's in 16-byte runs (the k + 4 loads read the
      // other half of each sector).
      uint4* ap = reinterpret_cast<uint4*>(tc_smem);
      uint4* bp = ap + tc::bm * tc::pair_tile<bk>::a_pitch;
      constexpr int a_slots = bk / 2;
      constexpr int a_step = tc::threads / a_slots; // rows between a thread's pairs
      constexpr int a_pairs = tc::bm / a_step;
      constexpr int b_pairs = a_slots / 2; // rows of pairs per thread (2 per column of B)
      static_assert(tc::threads == 2 * tc::bn, "two threads per column of B");
      float alo[a_pairs], ahi[a_pairs], blo[b_pairs], bhi[b_pairs];
      const int a_row = tid / a_slots;
      const int a_slot = tid % a_slots;
      {
        const int64_t k = k0 + (a_slot / 4) * 8 + a_slot % 4;
        const T* src = a + (m0 + a_row) * d.k + k;
#pragma unroll
        for (int it = 0; it < a_pairs; ++it) {
          const bool m_in = m0 + a_row + it * a_step < d.m;
          alo[it] = m_in && k < d.k ? cvt<float>(src[0]) : 0.0f;
          ahi[it] = m_in && k + 4 < d.k ? cvt<float>(src[4]) : 0.0f;
          src += a_step * d.k;
        }
      }
      // Thread (b_row, b_col) takes the rows of pairs b_row + 2 it; row q: k = (q / 4) * 8 + q % 4.
      const int b_col = tid % tc::bn;
      const int b_row = tid / tc::bn;
      {
        const bool n_in = n0 + b_col < d.n;
        const T* src = b + (k0 + b_row) * d.n + n0 + b_col;
#pragma unroll
        for (int it = 0; it < b_pairs; ++it) {
          const int dk = (it / 2) * 8 + (it % 2) * 2; // k - k0 - b_row
          const int64_t k = k0 + b_row + dk;
          blo[it] = n_in && k < d.k ? cvt<float>(src[dk * d.n]) : 0.0f;
          bhi[it] = n_in && k + 4 < d.k ? cvt<float>(src[(dk + 4) * d.n]) : 0.0f;
        }
      }
#pragma unroll
      for (int it = 0; it < a_pairs; ++it) {
        tc::store_pair<split_mode>(ap + (a_row + it * a_step) * tc::pair_tile<bk>::a_pitch + a_slot,
                                   alo[it], ahi[it]);
      }
#pragma unroll
      for (int it = 0; it < b_pairs; ++it) {
        tc::store_pair<split_mode>(bp + (b_row + 2 * it) * tc::pair_tile<bk>::b_pitch + b_col,
                                   blo[it], bhi[it]);
      }
    } else if constexpr (VecLoad) {
      tc::copy_chunk<bk>(as, bs, reinterpret_cast<const float*>(a),
                         reinterpret_cast<const float*>(b), d, m0, n0, k0, tid);
      tc::copies_done();
    } else {
      for (int idx = tid; idx < tc::bm * bk; idx += tc::threads) {
        const int r = idx / bk;
        const int kc = idx % bk;
        as[r * a_pitch + kc] =
            (m0 + r < d.m && k0 + kc < d.k) ? cvt<float>(a[(m0 + r) * d.k + k0 + kc]) : 0.0f;
      }
      for (int idx = tid; idx < bk * tc::bn; idx += tc::threads) {
        const int r = idx / tc::bn;
        const int nc = idx % tc::bn;
        bs[r * b_pitch + nc] =
            (k0 + r < d.k && n0 + nc < d.n) ? cvt<float>(b[(k0 + r) * d.n + n0 + nc]) : 0.0f;
      }
    }
    __syncthreads();

    if constexpr (presplit) {
      const uint4* ap = reinterpret_cast<const uint4*>(tc_smem);
      const uint4* bp = ap + tc::bm * tc::pair_tile<bk>::a_pitch;
#pragma unroll P::k_unroll
      for (int kk = 0; kk < bk; kk += 8) {
        const int slot = kk / 2 + t; // elements kk + t and kk + t + 4
        uint32_t bb[4][2];
        uint32_t bsm[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint4 v = bp[slot * tc::pair_tile<bk>::b_pitch + wn + j * 8 + g];
          bb[j][0] = v.x;
          bsm[j][0] = v.y;
          bb[j][1] = v.z;
          bsm[j][1] = v.w;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int m = wm + i * 16 + g;
          const uint4 lo = ap[m * tc::pair_tile<bk>::a_pitch + slot];
          const uint4 hi = ap[(m + 8) * tc::pair_tile<bk>::a_pitch + slot];
          const uint32_t ab[4] = {lo.x, hi.x, lo.z, hi.z};
          const uint32_t asm_[4] = {lo.y, hi.y, lo.w, hi.w};
          if constexpr (split && split_mode == 2) {
            // The cross terms' bf16 pairs from the stored (big, small) pairs (tc::product_cross).
            const uint32_t ax[4] = {tc::pack_bf16_bits(lo.x, lo.z), tc::pack_bf16_bits(hi.x, hi.z),
                                    tc::pack_bf16_bits(lo.y, lo.w), tc::pack_bf16_bits(hi.y, hi.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const uint32_t bx[2] = {tc::pack_bf16_bits(bsm[j][0], bsm[j][1]),
                                      tc::pack_bf16_bits(bb[j][0], bb[j][1])};
              tc::step<true, 2, flush == 1>(sums[i][j], ab, asm_, ax, bb[j], bsm[j], bx);
            }
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              tc::step<split, split_mode, flush == 1>(sums[i][j], ab, asm_, asm_, bb[j], bsm[j],
                                                      bsm[j]);
            }
          }
        }
      }
    } else {
      tc::chunk_product<split, split_mode, bk, P::k_unroll, flush == 1>(as, bs, sums, wm, wn, g, t);
    }
    if constexpr (flush == 2) {
      tc::add(acc, part);
    }
    __syncthreads();
  }

  // Accumulator r of tile (i, j) is C[wm + 16i + g + 8(r / 2)][wn + 8j + 2t + r % 2].
  if constexpr (tc::staged_of<P>::value != 0 && sizeof(T) == 4) {
    // Staged: the block's C tile goes through shared memory (free after the last chunk's
    // barrier), then each warp writes whole rows with 16-byte stores: a warp's store covers
    // 512 contiguous bytes (4 full lines) where a fragment store covers 8 rows x 32 bytes, a
    // quarter of the L2 requests per byte written.
    float* cs = reinterpret_cast<float*>(tc_smem);
    tc::stage_c<Op>(cs, acc, wm, wn, g, t, d, m0, n0);
    __syncthreads();
    tc::store_rows<T, P::store_hint>(c, cs, d, m0, n0, warp, lane);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + wm + i * 16 + g + h * 8;
        if (row >= d.m) {
          continue;
        }
        T* crow = c + row * d.n;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = n0 + wn + j * 8 + 2 * t;
          // Columns past N are not computed: the epilogue's operands end at N.
          const float out[2] = {
              col < d.n ? kb::matmul::finish<Op>(acc[i][j][2 * h], d, row, col) : 0.0f,
              col + 1 < d.n ? kb::matmul::finish<Op>(acc[i][j][2 * h + 1], d, row, col + 1) : 0.0f};
          if (VecStore && col + 1 < d.n) {
            store_vec<T, float, 2, P::store_hint>(crow + col, out);
          } else {
            if (col < d.n) {
              crow[col] = cvt<T>(out[0]);
            }
            if (col + 1 < d.n) {
              crow[col + 1] = cvt<T>(out[1]);
            }
          }
        }
      }
    }
  }
}

// persistent = 1 (fp32, K and N multiples of 4, A, B and C 16-byte aligned): one block per SM
// walks the tiles blockIdx.x, blockIdx.x + gridDim.x, ... as a flat sequence of (tile, chunk)
// steps. The next step's chunk is copied (cp.async) into the second operand buffer while the
// current one is multiplied, so the copies' latency hides behind the mma; a whole tile's C goes
// through its own shared buffer and out by bulk stores (TMA, one 512-byte row per copy, issued by
// warp 0), which drain while the next tile is multiplied: the warps never wait for their stores.
// A tile that crosses M or N is written by guarded row stores instead. Shared memory: two
// operand buffers and the C tile (204 KB at bk = 64).
template <template <class> class Op, class P>
__global__ void __launch_bounds__(tc::threads, 1)
    tensor_core_persistent_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, dims d) {
  constexpr int bk = P::bk;
  constexpr bool split = true;
  constexpr int split_mode = tc::split_of<P>::value;
  constexpr int flush = tc::flush_of<P>::value;
  constexpr int operand_floats = tc::tile<bk>::smem_bytes / sizeof(float);
  extern __shared__ float4 tc_smem[];
  float* buf = reinterpret_cast<float*>(tc_smem);
  float* cs = buf + 2 * operand_floats;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int wm = (warp / 4) * 64;
  const int wn = (warp % 4) * 32;
  const int64_t tiles_n = ceil_div(d.n, tc::bn);
  const int64_t tiles = ceil_div(d.m, tc::bm) * tiles_n;
  const int64_t chunks = ceil_div(d.k, bk);
  a += static_cast<int64_t>(blockIdx.z) * d.sa;
  b += static_cast<int64_t>(blockIdx.z) * d.sb;
  c += static_cast<int64_t>(blockIdx.z) * d.sc;
  const auto copy = [&](float* dst, int64_t tile, int64_t chunk) {
    tc::copy_chunk<bk>(dst, dst + tc::bm * tc::tile<bk>::a_pitch, a, b, d, tile / tiles_n * tc::bm,
                       tile % tiles_n * tc::bn, chunk * bk, tid);
  };

  int64_t tile = blockIdx.x;
  if (tile >= tiles) {
    return;
  }
  copy(buf, tile, 0);
  tc::copies_commit();
  int cur = 0;
  for (; tile < tiles; tile += gridDim.x) {
    const int64_t m0 = tile / tiles_n * tc::bm;
    const int64_t n0 = tile % tiles_n * tc::bn;
    float acc[4][4][4];
    tc::zero(acc);
    float part[4][4][4]; // flush = 2: the chunk's sums
    float(&sums)[4][4][4] = flush == 2 ? part : acc;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      if constexpr (flush == 2) {
        tc::zero(part);
      }
      // The next step: the next chunk of this tile, or the first of the block's next tile.
      const int64_t next_tile = chunk + 1 < chunks ? tile : tile + gridDim.x;
      if (next_tile < tiles) {
        copy(buf + (cur ^ 1) * operand_floats, next_tile, chunk + 1 < chunks ? chunk + 1 : 0);
      }
      tc::copies_commit(); // possibly empty: the current chunk is then always the older group
      tc::copies_wait<1>();
      __syncthreads();
      const float* as = buf + cur * operand_floats;
      tc::chunk_product<split, split_mode, bk, P::k_unroll, flush == 1>(
          as, as + tc::bm * tc::tile<bk>::a_pitch, sums, wm, wn, g, t);
      if constexpr (flush == 2) {
        tc::add(acc, part);
      }
      __syncthreads(); // the buffer is free for the copy two steps on
      cur ^= 1;
    }
    // The C buffer is free once the previous tile's bulk stores have read it (warp 0 issued
    // them) and the guarded stores' reads are past (the barrier).
    if (warp == 0) {
      tc::bulk_wait_read();
    }
    __syncthreads();
    tc::stage_c<Op>(cs, acc, wm, wn, g, t, d, m0, n0);
    const bool whole = m0 + tc::bm <= d.m && n0 + tc::bn <= d.n;
#if __CUDA_ARCH__ >= 900
    if (whole) {
      tc::fence_async_shared();
    }
#endif
    __syncthreads();
#if __CUDA_ARCH__ >= 900
    if (whole) {
      if (warp == 0) {
#pragma unroll
        for (int r = lane; r < tc::bm; r += 32) {
          tc::bulk_store(c + (m0 + r) * d.n + n0, cs + r * tc::c_pitch, tc::bn * sizeof(float));
        }
        tc::bulk_commit();
      }
      continue;
    }
#endif
    tc::store_rows<float, P::store_hint>(c, cs, d, m0, n0, warp, lane);
  }
  tc::copies_wait<0>(); // K = 0: the first copy was never waited for
  if (warp == 0) {
    tc::bulk_wait_read(); // the shared memory stays until the last stores have read it
  }
}

// ---- the forms: transposed operands, the mask, diag(a) @ B ------------------------------------

// Batched 32 x 32 tiled transpose of `rows` x `cols` matrices (blockIdx.z: the matrix), moved as
// raw bits W of the storage type's size.
template <class W>
__global__ void __launch_bounds__(256)
    transpose_kernel(const W* __restrict__ in, W* __restrict__ out, int64_t rows, int64_t cols) {
  __shared__ W t[32][33];
  const int64_t z = blockIdx.z;
  in += z * rows * cols;
  out += z * rows * cols;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    if (r0 + i < rows && c0 + threadIdx.x < cols) {
      t[i][threadIdx.x] = in[(r0 + i) * cols + c0 + threadIdx.x];
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    if (c0 + i < cols && r0 + threadIdx.x < rows) {
      out[(c0 + i) * rows + r0 + threadIdx.x] = t[threadIdx.x][i];
    }
  }
}

// The masked elements of every row of C set to zero: a block per row in a grid-stride loop.
template <class T> __global__ void __launch_bounds__(256) mask_kernel(T* __restrict__ c, dims d) {
  for (int64_t r = blockIdx.x; r < d.batch * d.m; r += gridDim.x) {
    const int64_t m = r % d.m;
    const int64_t begin = d.mask == kb::matmul::mask_lower ? m + 1 : 0;
    const int64_t end = d.mask == kb::matmul::mask_lower ? d.n : min64(m, d.n);
    for (int64_t n = begin + threadIdx.x; n < end; n += 256) {
      c[r * d.n + n] = cvt<T>(0.0f);
    }
  }
}

// diag(a) @ B: c[m, n] = epilogue(alpha * a[m] * b[m, n]), V elements of a row per access.
template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    row_scale_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, dims d) {
  const int64_t per_row = d.n / V;
  const int64_t total = d.m * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * P::block + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * P::block) {
    const int64_t m = i / per_row;
    const int64_t at = m * d.n + i % per_row * V;
    const float s = cvt<float>(a[m]);
    float v[V];
    load_vec<float, T, V, P::hint>(b + at, v);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      v[q] = kb::matmul::finish<Op>(s * v[q], d, m, i % per_row * V + q);
    }
    store_vec<T, float, V, P::hint>(c + at, v);
  }
}

#endif

// The plain 2D product of the hand-written kernels (include/kblaster/device/portfolio).
inline bool operands_of(const kb_args* a, const config& c, dims* d) {
  if (a->num_outputs < 1 || c.a < 0 || c.a >= a->num_inputs || c.b < 0 || c.b >= a->num_inputs) {
    return false;
  }
  return kb::matmul::dims_of(a, c, d) && a->outputs[0].dtype == a->inputs[c.a].dtype;
}

namespace forms {

inline uint64_t round_up(uint64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

inline uint64_t storage_bytes(kb_dtype t) {
  return t == KB_FLOAT32 ? 4 : (t == KB_FLOAT64 ? 8 : 2);
}

// Any form of the product (kb::matmul::layout_of) as the strategies run it: a transposed operand
// is first transposed into the workspace (a_bytes, then b_bytes, each rounded to 256 bytes), so
// that every kernel reads row-major A (m x k) and B (k x n); batches are blockIdx.z (or a loop of
// launches); alpha is applied in the epilogue; the mask zeroes its elements in a pass after the
// product (the tiled kernels skip the tiles it zeroes whole).
struct plan {
  kb::matmul::layout L{};
  uint64_t a_bytes = 0;
  uint64_t b_bytes = 0;
  uint64_t bytes() const { return a_bytes + b_bytes; }
};

inline bool plan_of(const kb_args* a, const config& c, plan* p) {
  if (!kb::matmul::layout_of(a, c, &p->L) || a->outputs[0].dtype != a->inputs[c.a].dtype) {
    return false;
  }
  const dims& d = p->L.d;
  const uint64_t e = storage_bytes(a->inputs[c.a].dtype);
  p->a_bytes =
      p->L.trans_a ? round_up(e * static_cast<uint64_t>((d.sa != 0 ? d.batch : 1) * d.m * d.k)) : 0;
  p->b_bytes =
      p->L.trans_b ? round_up(e * static_cast<uint64_t>((d.sb != 0 ? d.batch : 1) * d.k * d.n)) : 0;
  return true;
}

template <class T>
int transpose(const T* in, T* out, int64_t matrices, int64_t rows, int64_t cols,
              cudaStream_t stream) {
  if (ceil_div(rows, 32) > 65535 || matrices > 65535 ||
      ceil_div(cols, 32) > (int64_t{1} << 31) - 1) {
    return -1;
  }
  using W = typename std::conditional<sizeof(T) == 4, uint32_t, uint16_t>::type;
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, 32)),
                  static_cast<unsigned>(ceil_div(rows, 32)), static_cast<unsigned>(matrices));
  transpose_kernel<W><<<grid, dim3(32, 8), 0, stream>>>(reinterpret_cast<const W*>(in),
                                                        reinterpret_cast<W*>(out), rows, cols);
  return static_cast<int>(cudaGetLastError());
}

// The row-major operands: the inputs, or their transposes written to the workspace (checked by
// the caller to hold p.bytes()).
template <class T>
int operands(const kb_args* a, const config& c, const plan& p, const T** A, const T** B) {
  const dims& d = p.L.d;
  *A = static_cast<const T*>(a->inputs[c.a].data);
  *B = static_cast<const T*>(a->inputs[c.b].data);
  char* ws = static_cast<char*>(a->workspace);
  if (p.L.trans_a) {
    T* out = reinterpret_cast<T*>(ws);
    if (const int rc = transpose(*A, out, d.sa != 0 ? d.batch : 1, d.k, d.m, stream_of(a));
        rc != 0) {
      return rc;
    }
    *A = out;
  }
  if (p.L.trans_b) {
    T* out = reinterpret_cast<T*>(ws + p.a_bytes);
    if (const int rc = transpose(*B, out, d.sb != 0 ? d.batch : 1, d.n, d.k, stream_of(a));
        rc != 0) {
      return rc;
    }
    *B = out;
  }
  return 0;
}

template <class T> int apply_mask(const kb_args* a, T* C, const dims& d) {
  if (d.mask == kb::matmul::mask_none) {
    return 0;
  }
  mask_kernel<T><<<capped_grid(d.batch * d.m, 65535), 256, 0, stream_of(a)>>>(C, d);
  return static_cast<int>(cudaGetLastError());
}

// Whether a kernel with blockIdx.x over `blocks` tiles and blockIdx.z over the batch can cover d.
inline bool grid_fits(int64_t blocks, const dims& d) {
  return blocks <= (int64_t{1} << 31) - 1 && d.batch <= 65535;
}

} // namespace forms

template <template <class> class Op, class P> struct matvec {
  static_assert(P::block % 32 == 0 && P::block <= 1024 && P::block >= 64,
                "block: a multiple of 32 in [64, 1024]");
  static_assert(P::rows >= 1 && P::rows <= P::block, "rows: between 1 and the block size");

  static int64_t splits(const dims& d) {
    return P::k_chunk == 0 ? 1 : max64(1, ceil_div(d.k, P::k_chunk));
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p)) {
      return -1;
    }
    const dims& d = p.L.d;
    *bytes = p.bytes() +
             (splits(d) > 1 ? static_cast<uint64_t>(splits(d) * d.m * d.n) * sizeof(float) : 0);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    forms::plan p;
    uint64_t need = 0;
    if (!forms::plan_of(a, c, &p) || p.L.diag || workspace_bytes(a, c, &need) != 0 ||
        a->workspace_bytes < need) {
      return -1;
    }
    const dims& d = p.L.d;
    const int64_t nsplit = splits(d);
    float* partials = reinterpret_cast<float*>(static_cast<char*>(a->workspace) + p.bytes());
    return dispatch_storage(a->inputs[c.a].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const T* A_ = nullptr;
      const T* B_ = nullptr;
      if (const int rc = forms::operands<T>(a, c, p, &A_, &B_); rc != 0) {
        return rc;
      }
      T* C_ = static_cast<T*>(a->outputs[0].data);
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        const int64_t chunk_vecs = ceil_div(ceil_div(d.k, nsplit), W);
        const int64_t work = ceil_div(d.m, P::rows) * d.n * nsplit;
        // The batches one after the other (matrix-vector products are memory bound: each launch
        // streams its own A).
        for (int64_t z = 0; z < d.batch; ++z) {
          const T* Az = A_ + z * d.sa;
          const T* Bz = B_ + z * d.sb;
          T* Cz = C_ + z * d.sc;
          matvec_kernel<Op, P, T, W><<<capped_grid(work), P::block, 0, stream_of(a)>>>(
              Az, Bz, Cz, d, nsplit, chunk_vecs, partials);
          if (nsplit > 1) {
            matvec_finish_kernel<Op, T>
                <<<capped_grid(ceil_div(d.m * d.n, 256), 65535), 256, 0, stream_of(a)>>>(
                    partials, d.m * d.n, nsplit, Cz, d);
          }
        }
        KB_RETURN_IF_CUDA_ERROR(cudaGetLastError());
        return forms::apply_mask<T>(a, C_, d);
      };
      // Vectors along K: B a contiguous vector (N == 1), every row of A aligned.
      if (d.n == 1 && d.k % V == 0 && aligned_to(A_, sizeof(T) * V) &&
          aligned_to(B_, sizeof(T) * V)) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

template <template <class> class Op, class P> struct tiled {
  using shape = tile_shape<P>;
  static_assert(P::tm % 4 == 0 && P::tn % 4 == 0, "tm, tn: multiples of 4");
  static_assert(P::bm % P::tm == 0 && P::bn % P::tn == 0, "bm, bn: multiples of tm, tn");
  static_assert(shape::threads % 32 == 0 && shape::threads <= 1024,
                "(bm / tm) * (bn / tn): a multiple of 32, at most 1024");

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p)) {
      return -1;
    }
    *bytes = p.bytes();
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p) || p.L.diag || a->workspace_bytes < p.bytes()) {
      return -1;
    }
    const dims& d = p.L.d;
    const int64_t blocks = ceil_div(d.m, P::bm) * ceil_div(d.n, P::bn);
    if (!forms::grid_fits(blocks, d)) {
      return -1;
    }
    return dispatch_storage(a->inputs[c.a].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* A_ = nullptr;
      const T* B_ = nullptr;
      if (const int rc = forms::operands<T>(a, c, p, &A_, &B_); rc != 0) {
        return rc;
      }
      T* C_ = static_cast<T*>(a->outputs[0].data);
      const auto go = [&](auto vec_store) {
        const auto kernel = tiled_kernel<Op, P, T, decltype(vec_store)::value>;
        if (const int rc = allow_dynamic_smem(kernel, shape::smem_bytes); rc != 0) {
          return rc;
        }
        if (blocks > 0) {
          kernel<<<dim3(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(d.batch)),
                   shape::threads, shape::smem_bytes, stream_of(a)>>>(A_, B_, C_, d);
        }
        KB_RETURN_IF_CUDA_ERROR(cudaGetLastError());
        return forms::apply_mask<T>(a, C_, d);
      };
      // 4-element stores need every row of C to start aligned.
      if (d.n % 4 == 0 && aligned_to(C_, sizeof(T) * 4)) {
        return go(std::true_type{});
      }
      return go(std::false_type{});
    });
  }
};

template <template <class> class Op, class P> struct tensor_core {
  static_assert(P::bk == 16 || P::bk == 32 || P::bk == 64, "bk: 16, 32 or 64");
  static_assert(P::min_blocks >= 1 && P::min_blocks <= 2, "min_blocks: 1 or 2");
  static_assert(P::k_unroll >= 1, "k_unroll: at least 1");
  static_assert(tc::split_of<P>::value >= 0 && tc::split_of<P>::value <= 2, "split: 0, 1 or 2");
  static_assert(tc::presplit_of<P>::value == 0 || tc::presplit_of<P>::value == 1,
                "presplit: 0 or 1");
  static_assert(tc::persistent_of<P>::value == 0 || tc::persistent_of<P>::value == 1,
                "persistent: 0 or 1");
  static_assert(tc::flush_of<P>::value >= 0 && tc::flush_of<P>::value <= 2, "flush: 0, 1 or 2");

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p)) {
      return -1;
    }
    *bytes = p.bytes();
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p) || p.L.diag || a->workspace_bytes < p.bytes()) {
      return -1;
    }
    const dims& d = p.L.d;
    const int64_t blocks = ceil_div(d.m, tc::bm) * ceil_div(d.n, tc::bn);
    if (!forms::grid_fits(blocks, d)) {
      return -1;
    }
    if (blocks == 0) {
      return 0; // an empty C (K = 0 still writes the epilogue of an empty sum)
    }
    return dispatch_storage(a->inputs[c.a].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* A_ = nullptr;
      const T* B_ = nullptr;
      if (const int rc = forms::operands<T>(a, c, p, &A_, &B_); rc != 0) {
        return rc;
      }
      T* C_ = static_cast<T*>(a->outputs[0].data);
      const unsigned batch = static_cast<unsigned>(d.batch);
      const auto go = [&](auto vec_load, auto vec_store) {
        const auto kernel =
            tensor_core_kernel<Op, P, T, decltype(vec_load)::value, decltype(vec_store)::value>;
        constexpr size_t smem = tc::smem_bytes_of<P>();
        if (const int rc = allow_dynamic_smem(kernel, smem); rc != 0) {
          return rc;
        }
        kernel<<<dim3(static_cast<unsigned>(blocks), 1, batch), tc::threads, smem, stream_of(a)>>>(
            A_, B_, C_, d);
        KB_RETURN_IF_CUDA_ERROR(cudaGetLastError());
        return forms::apply_mask<T>(a, C_, d);
      };
      const bool vec_store = d.n % 2 == 0 && aligned_to(C_, sizeof(T) * 2);
      if constexpr (sizeof(T) == 4 && tc::persistent_of<P>::value != 0 &&
                    tc::presplit_of<P>::value == 0) {
        if (d.k % 4 == 0 && d.n % 4 == 0 && aligned_to(A_, 16) && aligned_to(B_, 16) &&
            aligned_to(C_, 16)) {
          const auto kernel = tensor_core_persistent_kernel<Op, P>;
          constexpr size_t smem = tc::persistent_smem_bytes<P::bk>;
          device_limits lim{};
          KB_RETURN_IF_CUDA_ERROR(query_device(&lim));
          if (static_cast<size_t>(lim.smem_optin) >= smem) {
            if (const int rc = allow_dynamic_smem(kernel, smem); rc != 0) {
              return rc;
            }
            const int64_t grid = min64(blocks, lim.sms);
            kernel<<<dim3(static_cast<unsigned>(grid), 1, batch), tc::threads, smem,
                     stream_of(a)>>>(A_, B_, C_, d);
            KB_RETURN_IF_CUDA_ERROR(cudaGetLastError());
            return forms::apply_mask<T>(a, C_, d);
          }
        }
      }
      if constexpr (sizeof(T) == 4) {
        if (d.k % 4 == 0 && d.n % 4 == 0 && aligned_to(A_, 16) && aligned_to(B_, 16)) {
          return vec_store ? go(std::true_type{}, std::true_type{})
                           : go(std::true_type{}, std::false_type{});
        }
      }
      return vec_store ? go(std::false_type{}, std::true_type{})
                       : go(std::false_type{}, std::false_type{});
    });
  }
};

// diag(a) @ B (and its transposed-B, scaled and masked forms): a row scaling, bound by memory.
template <template <class> class Op, class P> struct row_scale {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p)) {
      return -1;
    }
    *bytes = p.bytes();
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    forms::plan p;
    if (!forms::plan_of(a, c, &p) || !p.L.diag || a->workspace_bytes < p.bytes()) {
      return -1;
    }
    const dims& d = p.L.d;
    return dispatch_storage(a->inputs[c.a].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const T* A_ = nullptr;
      const T* B_ = nullptr;
      if (const int rc = forms::operands<T>(a, c, p, &A_, &B_); rc != 0) {
        return rc;
      }
      T* C_ = static_cast<T*>(a->outputs[0].data);
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        const int64_t work = ceil_div(d.m * (d.n / W), P::block);
        if (work > 0) {
          row_scale_kernel<Op, P, T, W>
              <<<capped_grid(work), P::block, 0, stream_of(a)>>>(A_, B_, C_, d);
        }
        KB_RETURN_IF_CUDA_ERROR(cudaGetLastError());
        return forms::apply_mask<T>(a, C_, d);
      };
      if (d.n % V == 0 && aligned_to(B_, sizeof(T) * V) && aligned_to(C_, sizeof(T) * V)) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

} // namespace kb::strategies::matmul
