// Strategies of the `conv` family (include/kblaster/device/families/conv.cuh): an implicit GEMM
// on tensor cores at fp32 accuracy, and a direct kernel for the convolutions whose reduction is
// too short for a GEMM (depthwise). Both handle every form of the family: rank 1 to 3, forward
// and transposed, groups, stride, padding, dilation, output padding, any size (tails are zero
// filled or masked), fp32, fp16 and bf16 storage. Both finish each output with the family's
// epilogue hook (kb::conv::epilogue: bias, per-channel scale, the task's kb_op<A>::epilogue).
//
// implicit_gemm, per group g: C[m, n] = sum over k of A[m, k] B[k, n] (conv_index.h): m runs
// over (batch, output position), n over the group's output channels, k over (input channel of
// the group, kernel tap). A is never materialized: each thread of a block loads its row's input
// values for the chunk's k straight from x (zero where a tap reads padding or, transposed, falls
// between strides: the gradient form's gather, (o + pad - t dil) % stride == 0). Products on
// tensor cores with the 3xTF32 split of the matmul strategy (big = v with its low 13 bits
// cleared, small = v - big; three mma.sync m16n8k8 per product), so the result keeps fp32
// accuracy; fp16 and bf16 values are exact in TF32 and take one mma. With `flush` (as
// matmul.tensor_core's: 1 every k-step, 2 every chunk) the mma sums go into fp32 totals by
// round-to-nearest adds, so the tensor core's truncating accumulation does not build up over K
// (without it, about 3 (K / 8) 2^-25 relative). The accumulation order is
// fixed by the shape and the parameters (bitwise reproducible); split-K partial sums go to the
// workspace and are added in split order by a second kernel (no atomics).
#pragma once

#include "kblaster/device/families/conv.cuh"
#include "kblaster/device/strategies/common.cuh"
#include "kblaster/device/strategies/matmul.cuh"

namespace kb::strategies::conv {

using kb::conv::config;
using kb::conv::geometry;

#if defined(__CUDACC__)

namespace ig {

constexpr int threads = 256; // 8 warps: 2 along M, 4 along N

// Shared memory of one pipeline stage: A as [bk][bm + 8] (k-major: the loads of consecutive rows
// m land in consecutive banks, and the fragment reads (t, g) hit 8t + g, all 32 banks), B as
// [bn][bk + 4] (n-major: the fragment reads hit (bk + 4) g + t, all 32 banks for bk = 16, 32).
template <int Bm, int Bn, int Bk> struct tile {
  static constexpr int a_pitch = Bm + 8;
  static constexpr int b_pitch = Bk + 4;
  static constexpr int a_floats = Bk * a_pitch;
  static constexpr int b_floats = Bn * b_pitch;
  static constexpr int stage_floats = a_floats + b_floats;
};

__device__ __forceinline__ void copy4(float* smem, const float* gmem, bool valid) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(gmem),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// One element into shared memory: fp32 by cp.async (zero fill when invalid: nothing is read,
// but `src` is still a valid address), other storage converted through registers.
template <class T> __device__ __forceinline__ void load_one(float* dst, const T* src, bool valid) {
  if constexpr (std::is_same<T, float>::value) {
    copy4(dst, src, valid);
  } else {
    *dst = valid ? cvt<float>(src[0]) : 0.0f;
  }
}

} // namespace ig

// Packs the weights of every group as [G][Np][Kp] fp32, zero past N and K (the `transform`
// axis): B's chunks are then whole 16-byte rows, loaded by cp.async without bounds checks.
template <class T>
__global__ void pack_weights(const T* __restrict__ w, float* __restrict__ out, geometry g,
                             int64_t np, int64_t kp) {
  const int64_t total = g.groups * np * kp;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i % kp;
    const int64_t n = i / kp % np;
    const int64_t grp = i / (kp * np);
    out[i] =
        n < g.gemm_n() && k < g.gemm_k() ? cvt<float>(w[kb::conv::b_offset(g, grp, k, n)]) : 0.0f;
  }
}

// One (group, tile of M, tile of N) per block along x, the split of K along y.
template <template <class> class Op, class P, class T, bool Transposed, bool Packed>
__global__ void __launch_bounds__(ig::threads)
    implicit_gemm_kernel(const T* __restrict__ x, const T* __restrict__ w,
                         const float* __restrict__ wp, T* __restrict__ y,
                         float* __restrict__ partials, geometry g,
                         kb::conv::epilogue<Op, float, T> ep, int64_t kp, int chunks_per_split) {
  constexpr int bm = P::bm;
  constexpr int bn = P::bn;
  constexpr int bk = P::bk;
  constexpr int stages = P::stages;
  using tl = ig::tile<bm, bn, bk>;
  constexpr int wm = bm / 2; // warp tile
  constexpr int wn = bn / 4;
  constexpr int mi_n = wm / 16;
  constexpr int ni_n = wn / 8;
  constexpr bool split = std::is_same<T, float>::value; // fp16 and bf16 are exact in TF32
  // How often the mma products leave the tensor core's accumulator (matmul::tc::flush_of and
  // matmul::tc::step): 0 never, 1 every 8-deep k-step, 2 every chunk; fp32 storage only.
  constexpr int flush = split ? matmul::tc::flush_of<P>::value : 0;
  static_assert(matmul::tc::flush_of<P>::value >= 0 && matmul::tc::flush_of<P>::value <= 2,
                "flush: 0, 1 or 2");
  constexpr int a_elems = bm * bk / ig::threads;
  constexpr int a_step = ig::threads / bm;
  static_assert(ig::threads % bm == 0 && ig::threads % bk == 0, "tile shape");

  extern __shared__ float4 conv_smem4[];
  float* smem = reinterpret_cast<float*>(conv_smem4);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int gq = lane / 4;
  const int tq = lane % 4;
  const int warp_m = (warp / 4) * wm;
  const int warp_n = (warp % 4) * wn;

  const int64_t M = g.gemm_m();
  const int64_t N = g.gemm_n();
  const int64_t K = g.gemm_k();
  const int64_t m_tiles = (M + bm - 1) / bm;
  const int64_t n_tiles = (N + bn - 1) / bn;
  const int64_t tile = blockIdx.x;
  const int64_t m0 = tile % m_tiles * bm;
  const int64_t n0 = tile / m_tiles % n_tiles * bn;
  const int64_t grp = tile / (m_tiles * n_tiles);
  const int64_t chunks = (K + bk - 1) / bk;
  const int64_t chunk_begin = static_cast<int64_t>(blockIdx.y) * chunks_per_split;
  const int64_t chunk_end =
      chunk_begin + chunks_per_split < chunks ? chunk_begin + chunks_per_split : chunks;
  const int64_t nchunks = chunk_end > chunk_begin ? chunk_end - chunk_begin : 0;

  // This thread's A row (fixed for the whole K loop) and its first k.
  const int a_row = tid % bm;
  const int a_k0 = tid / bm;
  const int64_t am = m0 + a_row;
  const bool row_ok = am < M;
  const kb::conv::m_index mi = kb::conv::split_m(g, row_ok ? am : 0);
  int64_t base[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    base[d] = Transposed ? mi.o[d] + g.pad[d] : mi.o[d] * g.stride[d] - g.pad[d];
  }
  const T* x_row = x + (mi.b * g.cin + grp * g.cin_group()) * g.in_volume();
  const int cg = static_cast<int>(g.cin_group());
  kb::conv::k_state ks{};
  {
    const kb::conv::k_index k0 = kb::conv::split_k(g, chunk_begin * bk + a_k0);
    ks = {static_cast<int>(k0.c), static_cast<int>(k0.t[0]), static_cast<int>(k0.t[1]),
          static_cast<int>(k0.t[2])};
  }

  const auto load_chunk = [&](int64_t chunk, int buf) {
    float* as = smem + buf * tl::stage_floats;
    float* bs = as + tl::a_floats;
    // A: a_elems values of this thread's row, k = a_k0 + e a_step (ks runs ahead in order).
#pragma unroll
    for (int e = 0; e < a_elems; ++e) {
      const int kk = a_k0 + e * a_step;
      const int id = kb::conv::tap_position<Transposed>(
          base[0], static_cast<int64_t>(ks.kd) * g.dil[0], g.stride[0], g.in[0]);
      const int ih = kb::conv::tap_position<Transposed>(
          base[1], static_cast<int64_t>(ks.kh) * g.dil[1], g.stride[1], g.in[1]);
      const int iw = kb::conv::tap_position<Transposed>(
          base[2], static_cast<int64_t>(ks.kw) * g.dil[2], g.stride[2], g.in[2]);
      const bool valid = row_ok && ks.c < cg && id >= 0 && ih >= 0 && iw >= 0;
      const int64_t off =
          valid ? ((static_cast<int64_t>(ks.c) * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw : 0;
      ig::load_one(as + kk * tl::a_pitch + a_row, valid ? x_row + off : x, valid);
      ks.advance(a_step, g);
    }
    // B: the group's weights for k in the chunk and n in the tile, as [n][k].
    const int64_t k0 = chunk * bk;
    if constexpr (Packed) {
      constexpr int vecs = bn * bk / 4;
#pragma unroll
      for (int i = tid; i < vecs; i += ig::threads) {
        const int n = i / (bk / 4);
        const int k4 = i % (bk / 4);
        matmul::tc::copy16(bs + n * tl::b_pitch + k4 * 4,
                           wp + ((grp * ((N + bn - 1) / bn * bn) + n0 + n) * kp + k0 + k4 * 4), 16);
      }
    } else {
      const int kk = tid % bk;
      const int64_t k = k0 + kk;
      const bool k_ok = k < K;
#pragma unroll
      for (int e = 0; e < bn * bk / ig::threads; ++e) {
        const int n = tid / bk + e * (ig::threads / bk);
        const bool valid = k_ok && n0 + n < N;
        const int64_t off = valid ? kb::conv::b_offset(g, grp, k, n0 + n) : 0;
        ig::load_one(bs + n * tl::b_pitch + kk, valid ? w + off : w, valid);
      }
    }
  };

  float acc[mi_n][ni_n][4];
#pragma unroll
  for (int i = 0; i < mi_n; ++i) {
#pragma unroll
    for (int j = 0; j < ni_n; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        acc[i][j][r] = 0.0f;
      }
    }
  }

  float part[mi_n][ni_n][4]; // flush = 2: the chunk's sums
  const auto compute = [&](int buf) {
    float(&sums)[mi_n][ni_n][4] = flush == 2 ? part : acc;
    if constexpr (flush == 2) {
#pragma unroll
      for (int i = 0; i < mi_n; ++i) {
#pragma unroll
        for (int j = 0; j < ni_n; ++j) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            part[i][j][r] = 0.0f;
          }
        }
      }
    }
    const float* as = smem + buf * tl::stage_floats;
    const float* bs = as + tl::a_floats;
#pragma unroll
    for (int kk = 0; kk < bk; kk += 8) {
      uint32_t bb[ni_n][2];
      uint32_t bsm[ni_n][2];
#pragma unroll
      for (int j = 0; j < ni_n; ++j) {
        const int n = warp_n + j * 8 + gq;
        matmul::tc::split<split, 1>(bs[n * tl::b_pitch + kk + tq], bb[j][0], bsm[j][0]);
        matmul::tc::split<split, 1>(bs[n * tl::b_pitch + kk + tq + 4], bb[j][1], bsm[j][1]);
      }
#pragma unroll
      for (int i = 0; i < mi_n; ++i) {
        const int m = warp_m + i * 16 + gq;
        uint32_t ab[4];
        uint32_t asm_[4];
        matmul::tc::split<split, 1>(as[(kk + tq) * tl::a_pitch + m], ab[0], asm_[0]);
        matmul::tc::split<split, 1>(as[(kk + tq) * tl::a_pitch + m + 8], ab[1], asm_[1]);
        matmul::tc::split<split, 1>(as[(kk + tq + 4) * tl::a_pitch + m], ab[2], asm_[2]);
        matmul::tc::split<split, 1>(as[(kk + tq + 4) * tl::a_pitch + m + 8], ab[3], asm_[3]);
#pragma unroll
        for (int j = 0; j < ni_n; ++j) {
          matmul::tc::step<split, 1, flush == 1>(sums[i][j], ab, asm_, asm_, bb[j], bsm[j], bsm[j]);
        }
      }
    }
    if constexpr (flush == 2) {
#pragma unroll
      for (int i = 0; i < mi_n; ++i) {
#pragma unroll
        for (int j = 0; j < ni_n; ++j) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            acc[i][j][r] += part[i][j][r];
          }
        }
      }
    }
  };

  if constexpr (stages == 1) {
    for (int64_t c = 0; c < nchunks; ++c) {
      load_chunk(chunk_begin + c, 0);
      ig::commit();
      ig::wait_groups<0>();
      __syncthreads();
      compute(0);
      __syncthreads();
    }
  } else {
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
      if (s < nchunks) {
        load_chunk(chunk_begin + s, s);
      }
      ig::commit();
    }
    for (int64_t c = 0; c < nchunks; ++c) {
      ig::wait_groups<stages - 2>();
      __syncthreads(); // chunk c is in; every warp is done with the buffer refilled next
      if (c + stages - 1 < nchunks) {
        load_chunk(chunk_begin + c + stages - 1, static_cast<int>((c + stages - 1) % stages));
      }
      ig::commit();
      compute(static_cast<int>(c % stages));
    }
    ig::wait_groups<0>();
  }

  // c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at (g + 8, 2t), (g + 8, 2t + 1).
  const int64_t ov = g.out_volume();
#pragma unroll
  for (int i = 0; i < mi_n; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + warp_m + i * 16 + gq + h * 8;
      if (m >= M) {
        continue;
      }
      const int64_t b = m / ov;
      const int64_t o = m - b * ov;
#pragma unroll
      for (int j = 0; j < ni_n; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t n = n0 + warp_n + j * 8 + 2 * tq + e;
          if (n >= N) {
            continue;
          }
          const float v = acc[i][j][h * 2 + e];
          if (partials != nullptr) {
            partials[((static_cast<int64_t>(blockIdx.y) * g.groups + grp) * M + m) * N + n] = v;
          } else {
            const int64_t co = grp * N + n;
            y[(b * g.cout + co) * ov + o] = cvt<T>(ep(v, co));
          }
        }
      }
    }
  }
}

// The split-K partial sums added in split order, then the epilogue.
template <template <class> class Op, class T>
__global__ void split_finish(const float* __restrict__ partials, T* __restrict__ y, geometry g,
                             int splits, kb::conv::epilogue<Op, float, T> ep) {
  const int64_t ov = g.out_volume();
  const int64_t total = g.n * g.cout * ov;
  const int64_t M = g.gemm_m();
  const int64_t N = g.gemm_n();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t co = i / ov % g.cout;
    const int64_t m = i / (g.cout * ov) * ov + i % ov;
    const int64_t grp = co / N;
    const int64_t n = co % N;
    float v = 0.0f;
    for (int z = 0; z < splits; ++z) {
      v += partials[((static_cast<int64_t>(z) * g.groups + grp) * M + m) * N + n];
    }
    y[i] = cvt<T>(ep(v, co));
  }
}

// The direct kernel: a thread per `outputs_per_thread` adjacent outputs along the last spatial
// dim, each weight loaded once for them; the taps' positions from conv_index.h (forward and
// transposed alike).
template <template <class> class Op, class P, class T>
__global__ void __launch_bounds__(P::block)
    direct_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, geometry g,
                  kb::conv::epilogue<Op, float, T> ep) {
  constexpr int V = P::outputs_per_thread;
  const int64_t wq_n = (g.out[2] + V - 1) / V;
  const int64_t total = g.n * g.cout * g.out[0] * g.out[1] * wq_n;
  const int64_t cg = g.cin_group();
  const int64_t og = g.cout_group();
  const int64_t iv = g.in_volume();
  const int64_t ov = g.out_volume();
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = idx;
    const int64_t wq = r % wq_n;
    r /= wq_n;
    const int64_t oh = r % g.out[1];
    r /= g.out[1];
    const int64_t od = r % g.out[0];
    r /= g.out[0];
    const int64_t co = r % g.cout;
    const int64_t b = r / g.cout;
    const int64_t grp = co / og;
    const int64_t n = co % og;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      acc[v] = 0.0f;
    }
    for (int64_t c = 0; c < cg; ++c) {
      const T* xc = x + (b * g.cin + grp * cg + c) * iv;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const int64_t id = kb::conv::input_position(g, 0, od, kd);
        if (id < 0) {
          continue;
        }
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const int64_t ih = kb::conv::input_position(g, 1, oh, kh);
          if (ih < 0) {
            continue;
          }
          const T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const float wv = cvt<float>(w[kb::conv::b_offset(
                g, grp, (c * g.k[0] + kd) * g.k[1] * g.k[2] + kh * g.k[2] + kw, n)]);
#pragma unroll
            for (int v = 0; v < V; ++v) {
              const int64_t ow = wq * V + v;
              const int64_t iw = ow < g.out[2] ? kb::conv::input_position(g, 2, ow, kw) : -1;
              if (iw >= 0) {
                acc[v] = fmaf(cvt<float>(xrow[iw]), wv, acc[v]);
              }
            }
          }
        }
      }
    }
    T* yo = y + (b * g.cout + co) * ov + (od * g.out[1] + oh) * g.out[2];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int64_t ow = wq * V + v;
      if (ow < g.out[2]) {
        yo[ow] = cvt<T>(ep(acc[v], co));
      }
    }
  }
}

#endif // __CUDACC__

// Checks shared by the strategies: the geometry, x, weight and y in one storage type.
inline bool operands_of(const kb_args* a, const config& c, geometry* g) {
  return kb::conv::geometry_of(a, c, g) && a->outputs[0].dtype == a->inputs[c.x].dtype;
}

// The library's offer of each strategy (kb::conv::implicit_gemm_fits, direct_fits) at a call's
// geometry, named after the strategy's entry with `_fits`: a conv chain runs a later convolution
// that the candidate's strategy does not fit (a pointwise after a depthwise) with the other one.
inline bool implicit_gemm_fits(const kb_args* a, const config& c) {
  geometry g{};
  return operands_of(a, c, &g) && kb::conv::implicit_gemm_fits(g.gemm_k(), g.gemm_n());
}
inline bool direct_fits(const kb_args* a, const config& c) {
  geometry g{};
  return operands_of(a, c, &g) && kb::conv::direct_fits(g.gemm_k(), g.gemm_n());
}

template <template <class> class Op, class P> struct implicit_gemm {
  static_assert(P::bm == 64 || P::bm == 128, "bm");
  static_assert(P::bn == 32 || P::bn == 64 || P::bn == 128, "bn");
  static_assert(P::bk == 16 || P::bk == 32, "bk");
  static_assert(P::stages >= 1 && P::stages <= 4, "stages");

  static constexpr size_t smem_bytes =
      static_cast<size_t>(P::stages) * ig::tile<P::bm, P::bn, P::bk>::stage_floats * sizeof(float);
  static constexpr uint64_t split_budget = uint64_t{512} << 20; // bytes of partial sums at most

  // Splits of K actually used: P::split_k when the partial sums fit the budget and every split
  // gets at least one chunk, else 1.
  static int splits(const geometry& g) {
    const int64_t chunks = (g.gemm_k() + P::bk - 1) / P::bk;
    const uint64_t bytes = static_cast<uint64_t>(P::split_k) *
                           static_cast<uint64_t>(g.n * g.cout * g.out_volume()) * sizeof(float);
    return P::split_k > 1 && chunks >= P::split_k && bytes <= split_budget ? P::split_k : 1;
  }
  static int64_t packed_n(const geometry& g) { return (g.gemm_n() + P::bn - 1) / P::bn * P::bn; }
  static int64_t packed_k(const geometry& g) { return (g.gemm_k() + P::bk - 1) / P::bk * P::bk; }
  static uint64_t packed_bytes(const geometry& g) {
    return P::transform
               ? (static_cast<uint64_t>(g.groups * packed_n(g) * packed_k(g)) * sizeof(float) +
                  255) /
                     256 * 256
               : 0;
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    geometry g{};
    if (!operands_of(a, c, &g)) {
      return -1;
    }
    const int s = splits(g);
    *bytes = packed_bytes(g) +
             (s > 1 ? static_cast<uint64_t>(s) *
                          static_cast<uint64_t>(g.n * g.cout * g.out_volume()) * sizeof(float)
                    : 0);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
#if defined(__CUDACC__)
    geometry g{};
    uint64_t need = 0;
    if (!operands_of(a, c, &g) || workspace_bytes(a, c, &need) != 0 || a->workspace_bytes < need ||
        (need > 0 && !aligned_to(a->workspace, 16))) {
      return -1;
    }
    const int s = splits(g);
    float* wp = P::transform ? static_cast<float*>(a->workspace) : nullptr;
    float* partials =
        s > 1 ? reinterpret_cast<float*>(static_cast<char*>(a->workspace) + packed_bytes(g))
              : nullptr;
    const int64_t chunks = (g.gemm_k() + P::bk - 1) / P::bk;
    const int chunks_per_split = static_cast<int>((chunks + s - 1) / s);
    const int64_t tiles =
        (g.gemm_m() + P::bm - 1) / P::bm * ((g.gemm_n() + P::bn - 1) / P::bn) * g.groups;
    if (tiles > (int64_t{1} << 31) - 1) {
      return -1;
    }
    return dispatch_storage(a->inputs[c.x].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = static_cast<const T*>(a->inputs[c.x].data);
      const T* w = static_cast<const T*>(a->inputs[c.weight].data);
      T* y = static_cast<T*>(a->outputs[0].data);
      const auto ep = kb::conv::epilogue_of<Op, float, T>(a, c);
      if (P::transform) {
        const int64_t total = g.groups * packed_n(g) * packed_k(g);
        pack_weights<T><<<capped_grid(ceil_div(total, 256), 65535), 256, 0, stream_of(a)>>>(
            w, wp, g, packed_n(g), packed_k(g));
      }
      const auto go = [&](auto kernel) {
        if (const int rc = allow_dynamic_smem(kernel, smem_bytes); rc != 0) {
          return rc;
        }
        kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(s)), ig::threads,
                 smem_bytes, stream_of(a)>>>(x, w, wp, y, partials, g, ep, packed_k(g),
                                             chunks_per_split);
        return static_cast<int>(cudaGetLastError());
      };
      int rc = g.transposed ? go(implicit_gemm_kernel<Op, P, T, true, P::transform != 0>)
                            : go(implicit_gemm_kernel<Op, P, T, false, P::transform != 0>);
      if (rc != 0 || s == 1) {
        return rc;
      }
      const int64_t total = g.n * g.cout * g.out_volume();
      split_finish<Op, T><<<capped_grid(ceil_div(total, 256), 65535), 256, 0, stream_of(a)>>>(
          partials, y, g, s, ep);
      return static_cast<int>(cudaGetLastError());
    });
#else
    (void)a;
    (void)c;
    return -1;
#endif
  }
};

template <template <class> class Op, class P> struct direct {
  static int launch(const kb_args* a, const config& c) {
#if defined(__CUDACC__)
    geometry g{};
    if (!operands_of(a, c, &g)) {
      return -1;
    }
    return dispatch_storage(a->inputs[c.x].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const int64_t total = g.n * g.cout * g.out[0] * g.out[1] *
                            ((g.out[2] + P::outputs_per_thread - 1) / P::outputs_per_thread);
      direct_kernel<Op, P, T>
          <<<capped_grid(ceil_div(total, P::block), int64_t{1} << 20), P::block, 0, stream_of(a)>>>(
              static_cast<const T*>(a->inputs[c.x].data),
              static_cast<const T*>(a->inputs[c.weight].data), static_cast<T*>(a->outputs[0].data),
              g, kb::conv::epilogue_of<Op, float, T>(a, c));
      return static_cast<int>(cudaGetLastError());
    });
#else
    (void)a;
    (void)c;
    return -1;
#endif
  }
};

} // namespace kb::strategies::conv
