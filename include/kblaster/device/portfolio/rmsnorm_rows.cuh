// The portfolio's RMSNorm kernel for the deep case (101 fp32, 102 fp16, 103 bf16 share it): one
// block per token row held in registers, fp32 accumulation through the task's kb_op, dispatch on
// the dtype at run time. Include it after the task's math (KB_TASK_MATH); it defines the
// candidate's entry points.
#pragma once

namespace {

using op = kb_op<float>;
using state = op::state;

constexpr int max_threads = 1024;
constexpr int row_threads = 512; // the most threads a register-resident row uses

// A pack is what one thread loads at once: 16 bytes (raw bits in a uint4, E = 16 / sizeof(T)
// elements) on the vector path, or one element of T on the scalar path.
template <class T, bool Vec> struct pack_of;
template <class T> struct pack_of<T, true> {
  using type = uint4;
  static constexpr int elems = 16 / static_cast<int>(sizeof(T));
};
template <class T> struct pack_of<T, false> {
  using type = T;
  static constexpr int elems = 1;
};

__device__ __forceinline__ uint32_t word(const uint4& u, int i) {
  return i == 0 ? u.x : (i == 1 ? u.y : (i == 2 ? u.z : u.w));
}
__device__ __forceinline__ void set_word(uint4& u, int i, uint32_t v) {
  if (i == 0) {
    u.x = v;
  } else if (i == 1) {
    u.y = v;
  } else if (i == 2) {
    u.z = v;
  } else {
    u.w = v;
  }
}

template <class T> __device__ __forceinline__ float from_bits(uint32_t b);
template <> __device__ __forceinline__ float from_bits<float>(uint32_t b) {
  return __uint_as_float(b);
}
template <> __device__ __forceinline__ float from_bits<__half>(uint32_t b) {
  return kb::cvt<float>(__ushort_as_half(static_cast<unsigned short>(b)));
}
template <> __device__ __forceinline__ float from_bits<__nv_bfloat16>(uint32_t b) {
  return kb::cvt<float>(__ushort_as_bfloat16(static_cast<unsigned short>(b)));
}
template <class T> __device__ __forceinline__ uint32_t to_bits(float f);
template <> __device__ __forceinline__ uint32_t to_bits<float>(float f) {
  return __float_as_uint(f);
}
template <> __device__ __forceinline__ uint32_t to_bits<__half>(float f) {
  return __half_as_ushort(kb::cvt<__half>(f));
}
template <> __device__ __forceinline__ uint32_t to_bits<__nv_bfloat16>(float f) {
  return __bfloat16_as_ushort(kb::cvt<__nv_bfloat16>(f));
}

// Element e of a pack, as float (e is a compile-time constant after unrolling).
template <class T> __device__ __forceinline__ float element(const uint4& u, int e) {
  if constexpr (sizeof(T) == 4) {
    return from_bits<T>(word(u, e));
  } else {
    return from_bits<T>((word(u, e / 2) >> (16 * (e % 2))) & 0xffffu);
  }
}
template <class T> __device__ __forceinline__ float element(const T& v, int) {
  return kb::cvt<float>(v);
}

// The pack made of the E float values o[0..E), each rounded once to T.
template <class T, int E> __device__ __forceinline__ uint4 make_pack(const float (&o)[E], uint4*) {
  uint4 u{};
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      set_word(u, e, to_bits<T>(o[e]));
    }
  } else {
#pragma unroll
    for (int i = 0; i < E / 2; ++i) {
      set_word(u, i, to_bits<T>(o[2 * i]) | (to_bits<T>(o[2 * i + 1]) << 16));
    }
  }
  return u;
}
template <class T, int E> __device__ __forceinline__ T make_pack(const float (&o)[E], T*) {
  return kb::cvt<T>(o[0]);
}

// KB_RMSNORM_ROWS_PLAIN = 1 (the default): plain loads and stores of x and y; 0: evict-first
// loads and streaming stores, the variants 10x_rows_hints. On the H200 the plain forms were
// faster at 4096 x 4096 and 32768 x 4096 for all three dtypes, by 2.0%-7.7%
// (evidence/h200/variants/0343fe1/).
#ifndef KB_RMSNORM_ROWS_PLAIN
#define KB_RMSNORM_ROWS_PLAIN 1
#endif
#if KB_RMSNORM_ROWS_PLAIN
template <class P> __device__ __forceinline__ P load_stream(const P* p) {
  return *p;
}
#else
template <class P> __device__ __forceinline__ P load_stream(const P* p) {
  return __ldcs(p);
}
#endif
template <class P> __device__ __forceinline__ P load_cached(const P* p) {
  return __ldg(p);
}
template <> __device__ __forceinline__ __half load_stream(const __half* p) {
  return *p;
}
template <> __device__ __forceinline__ __half load_cached(const __half* p) {
  return *p;
}
template <> __device__ __forceinline__ __nv_bfloat16 load_stream(const __nv_bfloat16* p) {
  return *p;
}
template <> __device__ __forceinline__ __nv_bfloat16 load_cached(const __nv_bfloat16* p) {
  return *p;
}
#if KB_RMSNORM_ROWS_PLAIN
template <class P> __device__ __forceinline__ void store_stream(P* p, const P& v) {
  *p = v;
}
#else
template <class P> __device__ __forceinline__ void store_stream(P* p, const P& v) {
  __stcs(p, v);
}
#endif
template <> __device__ __forceinline__ void store_stream(__half* p, const __half& v) {
  *p = v;
}
template <> __device__ __forceinline__ void store_stream(__nv_bfloat16* p, const __nv_bfloat16& v) {
  *p = v;
}

__device__ __forceinline__ state combine(const state& a, const state& b) {
  return op::combine(a, b);
}

// The squares of a pack's elements added into 4 interleaved states (element e into s[e % 4]).
template <class T, bool Vec>
__device__ __forceinline__ void accumulate_pack(state (&s)[4],
                                                const typename pack_of<T, Vec>::type& v) {
#pragma unroll
  for (int e = 0; e < pack_of<T, Vec>::elems; ++e) {
    s[e % 4] = op::accumulate(s[e % 4], element<T>(v, e));
  }
}

// A pack of x normalised (1/rms, the weight's pack applied per element), rounded once to T and
// stored at yr[j].
template <class T, bool Vec>
__device__ __forceinline__ void store_normalized(typename pack_of<T, Vec>::type* yr, int64_t j,
                                                 const typename pack_of<T, Vec>::type& x,
                                                 const typename pack_of<T, Vec>::type& w,
                                                 const op::stats& inv_rms) {
  using P = typename pack_of<T, Vec>::type;
  constexpr int E = pack_of<T, Vec>::elems;
  float o[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    o[e] = op::apply(element<T>(x, e), inv_rms, element<T>(w, e), 0.0f);
  }
  store_stream(yr + j, make_pack<T, E>(o, static_cast<P*>(nullptr)));
}

// A row held in registers (thread t owns the packs t, t + blockDim.x, ..., at most VPT of them)
// normalised and written: the sum of squares over 4 interleaved states combined in a fixed order,
// a fixed-order block reduction, 1/rms, the weight applied per element, one rounding to T.
// KB_RMSNORM_ROWS_ONE_BARRIER = 1 (variants 10x_rows_onebar, 10x_rows_minb3): the one-row kernel
// exchanges the warps' partial sums through shared memory behind one barrier, and every thread
// combines them in the same fixed order (warp 0, 1, ...), instead of kb::block_reduce's three
// barriers and one thread's serial combine. 0 (the default): kb::block_reduce.
#ifndef KB_RMSNORM_ROWS_ONE_BARRIER
#define KB_RMSNORM_ROWS_ONE_BARRIER 0
#endif
// KB_RMSNORM_ROWS_MIN_BLOCKS (variants 10x_rows_minb3): the one-row kernel's launch bounds ask for
// that many blocks of 512 threads per SM, so the register cap is 65536 / (512 * N): 3 gives 42,
// that is 6 rows of 256 threads (fp32 hidden 4096) per SM instead of 4. Unset: no minimum.
#ifdef KB_RMSNORM_ROWS_MIN_BLOCKS
#define KB_RMSNORM_ROWS_BOUNDS __launch_bounds__(row_threads, KB_RMSNORM_ROWS_MIN_BLOCKS)
#else
#define KB_RMSNORM_ROWS_BOUNDS __launch_bounds__(row_threads)
#endif

// Each warp's total of v in shared memory (partial[warp]), visible to the whole block behind one
// barrier; for a kernel that reduces once (the buffer is not reused).
template <class S, class Combine>
__device__ __forceinline__ const S* warp_partials_once(S v, Combine combine) {
  __shared__ S partial[32];
  v = kb::warp_reduce(v, combine);
  if (threadIdx.x % 32 == 0) {
    partial[threadIdx.x / 32] = v;
  }
  __syncthreads();
  return partial;
}

// Reduces v over the block for a kernel that reduces once: the warps' partials
// (warp_partials_once), combined by every thread in warp order.
template <class S, class Combine>
__device__ __forceinline__ S block_reduce_once(S v, Combine combine) {
  const S* partial = warp_partials_once(v, combine);
  S acc = partial[0];
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int i = 1; i < warps; ++i) {
    acc = combine(acc, partial[i]);
  }
  return acc;
}

// Reduces v over the block for a kernel that reduces once: the warps' partials
// (warp_partials_once), then in every warp a pairwise tree over them in registers (lane i
// holds warp i's partial; at each step the lane with the lower index is the left operand, so all
// lanes of a pair hold the same bits), and lane 0's total broadcast. The chain after the barrier
// is one shared load and log2(warps) + 1 shuffles, where kb::block_reduce has two more barriers
// and one thread combining the warps' partials one after another (15 dependent shared loads at
// 16 warps) while the block waits. The same fixed order everywhere, so the result is reproducible.
template <class S, class Combine>
__device__ __forceinline__ S block_reduce_tree(S v, Combine combine) {
  const S* partial = warp_partials_once(v, combine);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  S acc = partial[lane < warps ? lane : 0];
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const S other = kb::shfl_xor_any(acc, offset);
    if ((lane ^ offset) < warps) {
      acc = (lane & offset) != 0 ? combine(other, acc) : combine(acc, other);
    }
  }
  return kb::shfl_idx_any(acc, 0);
}

// KB_RMSNORM_ROWS_TREE = 1 (variants 10x_rows_tree*): the one-row kernel reduces with
// block_reduce_tree. 0 (the default): as KB_RMSNORM_ROWS_ONE_BARRIER says.
#ifndef KB_RMSNORM_ROWS_TREE
#define KB_RMSNORM_ROWS_TREE 0
#endif

// Reduce: 0 kb::block_reduce, 1 block_reduce_once, 2 block_reduce_tree.
template <class T, bool Vec, int VPT, int Reduce = 0>
__device__ __forceinline__ void normalize_row(const typename pack_of<T, Vec>::type (&xv)[VPT],
                                              const typename pack_of<T, Vec>::type (&wv)[VPT],
                                              typename pack_of<T, Vec>::type* yr, int64_t nv,
                                              int64_t h, const kb::scalars& p) {
  state s[4] = {op::init(), op::init(), op::init(), op::init()};
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    if (threadIdx.x + static_cast<int64_t>(u) * blockDim.x < nv) {
      accumulate_pack<T, Vec>(s, xv[u]);
    }
  }
  state t = combine(combine(s[0], s[1]), combine(s[2], s[3]));
  if constexpr (Reduce == 2) {
    t = block_reduce_tree(t, [](const state& a, const state& b) { return combine(a, b); });
  } else if constexpr (Reduce == 1) {
    t = block_reduce_once(t, [](const state& a, const state& b) { return combine(a, b); });
  } else {
    t = kb::block_reduce(t, [](const state& a, const state& b) { return combine(a, b); });
  }
  const op::stats inv_rms = op::finalize(t, h, p.v);
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (j < nv) {
      store_normalized<T, Vec>(yr, j, xv[u], wv[u], inv_rms);
    }
  }
}

// One row per block; thread t owns the packs t, t + blockDim.x, ... (at most VPT of them).
template <class T, bool Vec, int VPT>
__global__ void KB_RMSNORM_ROWS_BOUNDS rmsnorm_rows(const T* __restrict__ x,
                                                    const T* __restrict__ w, T* __restrict__ y,
                                                    int64_t h, kb::scalars p) {
  using P = typename pack_of<T, Vec>::type;
  constexpr int E = pack_of<T, Vec>::elems;
  const int64_t nv = h / E; // h % E == 0 here
  const P* xr = reinterpret_cast<const P*>(x) + blockIdx.x * nv;
  const P* wr = reinterpret_cast<const P*>(w);
  P* yr = reinterpret_cast<P*>(y) + blockIdx.x * nv;
  P xv[VPT];
  P wv[VPT];
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (j < nv) {
      xv[u] = load_stream(xr + j);
      wv[u] = load_cached(wr + j);
    }
  }
  constexpr int reduce = KB_RMSNORM_ROWS_TREE != 0 ? 2 : (KB_RMSNORM_ROWS_ONE_BARRIER != 0 ? 1 : 0);
  normalize_row<T, Vec, VPT, reduce>(xv, wv, yr, nv, h, p);
}

// KB_RMSNORM_ROWS_PERSIST = 1: as rmsnorm_rows, but a grid of as many blocks as fit on the
// device at once, each walking rows blockIdx.x, + gridDim.x, ...: the weight is loaded once per
// block, and the next row's loads are issued before this row's reduction and stores, so a block
// keeps its loads in flight through the phases where the one-row block has none (at 4096 tokens
// the one-row grid is about two waves, each paying a load round trip, a block reduction and the
// stores in turn). Each row is reduced by the same threads in the same order as rmsnorm_rows,
// so the results are the same bits.
#ifndef KB_RMSNORM_ROWS_PERSIST
#define KB_RMSNORM_ROWS_PERSIST 0
#endif
template <class T, bool Vec, int VPT>
__global__ void __launch_bounds__(row_threads)
    rmsnorm_rows_persist(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                         int64_t h, int64_t rows, kb::scalars p) {
  using P = typename pack_of<T, Vec>::type;
  constexpr int E = pack_of<T, Vec>::elems;
  const int64_t nv = h / E;
  const P* wr = reinterpret_cast<const P*>(w);
  P xv[VPT];
  P nx[VPT];
  P wv[VPT];
  int64_t row = blockIdx.x;
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (j < nv) {
      wv[u] = load_cached(wr + j);
      xv[u] = load_stream(reinterpret_cast<const P*>(x) + row * nv + j);
    }
  }
  for (; row < rows; row += gridDim.x) {
    const int64_t next = row + gridDim.x;
    if (next < rows) {
#pragma unroll
      for (int u = 0; u < VPT; ++u) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
        if (j < nv) {
          nx[u] = load_stream(reinterpret_cast<const P*>(x) + next * nv + j);
        }
      }
    }
    normalize_row<T, Vec, VPT>(xv, wv, reinterpret_cast<P*>(y) + row * nv, nv, h, p);
#pragma unroll
    for (int u = 0; u < VPT; ++u) {
      xv[u] = nx[u];
    }
  }
}

// Rows too long for registers: statistics, then a second pass over the row (from L1/L2).
template <class T>
__global__ void __launch_bounds__(max_threads)
    rmsnorm_rows_two_pass(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                          int64_t h, kb::scalars p) {
  const T* xr = x + blockIdx.x * h;
  T* yr = y + blockIdx.x * h;
  state s = op::init();
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    s = op::accumulate(s, kb::cvt<float>(xr[j]));
  }
  s = kb::block_reduce(s, [](const state& a, const state& b) { return combine(a, b); });
  const op::stats inv_rms = op::finalize(s, h, p.v);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    yr[j] = kb::cvt<T>(op::apply(kb::cvt<float>(xr[j]), inv_rms, kb::cvt<float>(w[j]), 0.0f));
  }
}

// KB_RMSNORM_ROWS_L2PASS = 1 (variants 10x_rows_l2pass, 10x_rows_l2last): rows on the vector
// path go through two passes per block of at most 256 threads, U = 2 packs per thread per step:
// the sum of squares over the row, then the row read again (from L2: the block read it a moment
// ago) with the weight, normalised and stored. Few registers per thread, so 8 blocks fit on an
// SM; torch.compile's RMSNorm kernel (Inductor's looped reduction) has this shape. 2 also loads
// x in the first pass with an L2 evict-last policy, so it stays for the second. 3 (variants
// 10x_rows_reload): the whole row in one step per pass, on blocks of up to 512 threads of 1, 2 or
// 4 packs (as the portfolio kernel holds it, but not across the reduction): the second pass
// reads the row again (from L1) instead of keeping it in registers. Inductor's persistent-rblock
// configuration of the same looped kernel has this shape.
#ifndef KB_RMSNORM_ROWS_L2PASS
#define KB_RMSNORM_ROWS_L2PASS 0
#endif
template <int Hint, class P> __device__ __forceinline__ P load_first(const P* p) {
  if constexpr (Hint == 2 && sizeof(P) == 16) {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    uint4 v;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(policy));
    return v;
  } else {
    return *p;
  }
}

template <class T, int U, int Hint, int MaxThreads = 256>
__global__ void __launch_bounds__(MaxThreads)
    rmsnorm_rows_l2pass(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                        int64_t h, kb::scalars p) {
  using P = typename pack_of<T, true>::type;
  constexpr int E = pack_of<T, true>::elems;
  const int64_t nv = h / E;
  const P* xr = reinterpret_cast<const P*>(x) + blockIdx.x * nv;
  const P* wr = reinterpret_cast<const P*>(w);
  P* yr = reinterpret_cast<P*>(y) + blockIdx.x * nv;
  const int64_t step = static_cast<int64_t>(U) * blockDim.x;
  state s[4] = {op::init(), op::init(), op::init(), op::init()};
  for (int64_t base = threadIdx.x; base < nv; base += step) {
    P v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = base + static_cast<int64_t>(u) * blockDim.x;
      if (j < nv) {
        v[u] = load_first<Hint>(xr + j);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + static_cast<int64_t>(u) * blockDim.x < nv) {
        accumulate_pack<T, true>(s, v[u]);
      }
    }
  }
  state t = combine(combine(s[0], s[1]), combine(s[2], s[3]));
  t = block_reduce_once(t, [](const state& a, const state& b) { return combine(a, b); });
  const op::stats inv_rms = op::finalize(t, h, p.v);
  for (int64_t base = threadIdx.x; base < nv; base += step) {
    P v[U];
    P wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = base + static_cast<int64_t>(u) * blockDim.x;
      if (j < nv) {
        v[u] = xr[j];
        wv[u] = load_cached(wr + j);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = base + static_cast<int64_t>(u) * blockDim.x;
      if (j < nv) {
        store_normalized<T, true>(yr, j, v[u], wv[u], inv_rms);
      }
    }
  }
}

// KB_RMSNORM_ROWS_VPT (1, 2 or 4; default 4): the packs per thread of rows that fit that many per
// thread in one block of row_threads (fp32 hidden 4096 at 2: 512 threads of 2 packs instead of 256
// of 4); longer rows take 4, then 8 per thread as before. The variants 10x_rows_vpt1 and
// 10x_rows_vpt2 measure fewer packs per thread: shorter per-thread chains and fewer registers per
// thread, against more threads and a wider block reduction per row.
#ifndef KB_RMSNORM_ROWS_VPT
#define KB_RMSNORM_ROWS_VPT 4
#endif
static_assert(KB_RMSNORM_ROWS_VPT == 1 || KB_RMSNORM_ROWS_VPT == 2 || KB_RMSNORM_ROWS_VPT == 4,
              "KB_RMSNORM_ROWS_VPT is 1, 2 or 4");

// KB_RMSNORM_ROWS_CAP_BLOCKS = N > 0 (variants 10x_rows_cap*): the one-row kernel of 4 packs per
// thread is launched with enough dynamic shared memory (unused) that at most N blocks fit on an
// SM, the carveout set to the most shared memory. At 16-bit hidden 4096 the portfolio kernel has
// 9 rows of 128 threads per SM, 72 KB of loads in flight, Inductor's kernel 4 rows of 512 threads;
// under Nsight Compute (clean caches) ours are the shorter ones at 4096 x 4096, under the judge's
// protocol (L2 full of the flush's dirty lines) slower, 0.90x-0.95x of the fastest method. N rows
// per SM measures whether fewer loads in flight contend less with those lines' write-back. 0 (the
// default): no cap.
#ifndef KB_RMSNORM_ROWS_CAP_BLOCKS
#define KB_RMSNORM_ROWS_CAP_BLOCKS 0
#endif
// The dynamic shared memory that leaves room for at most `blocks` blocks of `kernel` per SM
// (0 when blocks is 0), with the kernel's attributes set for it; -1 when the device says no.
// Computed once per process (the first call's device).
template <class Kernel> int cap_blocks_smem(Kernel kernel, int blocks) {
  if (blocks <= 0) {
    return 0;
  }
  int dev = 0;
  int per_sm = 0;
  int reserved = 0;
  cudaFuncAttributes attr{};
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) !=
          cudaSuccess ||
      cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    return -1;
  }
  const int bytes = per_sm / blocks - reserved - static_cast<int>(attr.sharedSizeBytes);
  if (bytes <= 0 ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) !=
          cudaSuccess ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared) != cudaSuccess) {
    return -1;
  }
  return bytes;
}

unsigned warps_for(int64_t packs, int per_thread) {
  const int64_t t = (packs + per_thread - 1) / per_thread;
  return static_cast<unsigned>((t + 31) / 32 * 32);
}

template <class T, bool Vec>
int launch_rows(const T* x, const T* w, T* y, int64_t rows, int64_t h, const kb_args* a) {
  const cudaStream_t stream = kb::stream_of(a);
  const kb::scalars p = kb::scalars_of(a);
  const int64_t nv = h / pack_of<T, Vec>::elems;
  const auto grid = static_cast<unsigned>(rows);
  if constexpr (KB_RMSNORM_ROWS_L2PASS == 3 && Vec) {
    const auto threads = [&](int u) {
      return warps_for(nv, u) < row_threads ? warps_for(nv, u) : static_cast<unsigned>(row_threads);
    };
    if (nv <= row_threads) {
      rmsnorm_rows_l2pass<T, 1, 1, row_threads><<<grid, threads(1), 0, stream>>>(x, w, y, h, p);
    } else if (nv <= 2LL * row_threads) {
      rmsnorm_rows_l2pass<T, 2, 1, row_threads><<<grid, threads(2), 0, stream>>>(x, w, y, h, p);
    } else {
      rmsnorm_rows_l2pass<T, 4, 1, row_threads><<<grid, threads(4), 0, stream>>>(x, w, y, h, p);
    }
    return static_cast<int>(cudaGetLastError());
  } else if constexpr (KB_RMSNORM_ROWS_L2PASS != 0 && Vec) {
    const unsigned threads = warps_for(nv, 2) < 256 ? warps_for(nv, 2) : 256;
    rmsnorm_rows_l2pass<T, 2, KB_RMSNORM_ROWS_L2PASS><<<grid, threads, 0, stream>>>(x, w, y, h, p);
    return static_cast<int>(cudaGetLastError());
  }
  if (KB_RMSNORM_ROWS_PERSIST && nv <= 4LL * row_threads) {
    const auto kernel = rmsnorm_rows_persist<T, Vec, 4>;
    const unsigned threads = warps_for(nv, 4);
    int per_sm = 0;
    int dev = 0;
    int sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(threads),
                                                      0) != cudaSuccess ||
        per_sm < 1) {
      return -1;
    }
    const int64_t resident = static_cast<int64_t>(per_sm) * sms;
    kernel<<<static_cast<unsigned>(rows < resident ? rows : resident), threads, 0, stream>>>(
        x, w, y, h, rows, p);
  } else if (KB_RMSNORM_ROWS_VPT < 4 &&
             nv <= static_cast<int64_t>(KB_RMSNORM_ROWS_VPT) * row_threads) {
    rmsnorm_rows<T, Vec, KB_RMSNORM_ROWS_VPT>
        <<<grid, warps_for(nv, KB_RMSNORM_ROWS_VPT), 0, stream>>>(x, w, y, h, p);
  } else if (nv <= 4LL * row_threads) {
    int smem = 0;
    if constexpr (KB_RMSNORM_ROWS_CAP_BLOCKS > 0) {
      static const int capped =
          cap_blocks_smem(rmsnorm_rows<T, Vec, 4>, KB_RMSNORM_ROWS_CAP_BLOCKS);
      if (capped < 0) {
        return -1;
      }
      smem = capped;
    }
    rmsnorm_rows<T, Vec, 4>
        <<<grid, warps_for(nv, 4), static_cast<size_t>(smem), stream>>>(x, w, y, h, p);
  } else if (nv <= 8LL * row_threads) {
    rmsnorm_rows<T, Vec, 8><<<grid, warps_for(nv, 8), 0, stream>>>(x, w, y, h, p);
  } else {
    rmsnorm_rows_two_pass<T><<<grid, max_threads, 0, stream>>>(x, w, y, h, p);
  }
  return static_cast<int>(cudaGetLastError());
}

} // namespace

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (args->num_inputs < 2 || args->num_outputs < 1) {
    return -1;
  }
  const kb_tensor& xt = args->inputs[0];
  const kb_tensor& wt = args->inputs[1];
  const kb_tensor& yt = args->outputs[0];
  if (xt.ndim < 1 || wt.dtype != xt.dtype || yt.dtype != xt.dtype || !kb::is_contiguous(xt) ||
      !kb::is_contiguous(wt) || !kb::is_contiguous(yt) || kb::numel(xt) != kb::numel(yt)) {
    return -1;
  }
  const int64_t h = xt.shape[xt.ndim - 1];
  if (kb::numel(wt) != h) {
    return -1;
  }
  const int64_t rows = h == 0 ? 0 : kb::numel(xt) / h;
  if (rows == 0) {
    return 0;
  }
  if (rows > 0x7fffffffLL) {
    return -1;
  }
  const bool aligned = reinterpret_cast<uintptr_t>(xt.data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(wt.data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(yt.data) % 16 == 0;
  auto run = [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(xt.data);
    const T* w = static_cast<const T*>(wt.data);
    T* y = static_cast<T*>(yt.data);
    return aligned && h % pack_of<T, true>::elems == 0
               ? launch_rows<T, true>(x, w, y, rows, h, args)
               : launch_rows<T, false>(x, w, y, rows, h, args);
  };
  switch (xt.dtype) {
  case KB_FLOAT32:
    return run(kb::type_tag<float>{});
  case KB_FLOAT16:
    return run(kb::type_tag<__half>{});
  case KB_BFLOAT16:
    return run(kb::type_tag<__nv_bfloat16>{});
  default:
    return -1;
  }
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: RMSNorm rows, one block per row held in registers (<= 4 x 16 B per thread), "
         "fp32 accumulation, one read and one write";
}
