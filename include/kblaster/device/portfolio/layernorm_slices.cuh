// LayerNorm over all but the first dimension with weight and bias, in three stages: the parts of
// the portfolio kernel portfolio/core10/040_layernorm.cu (its file gives the design and the
// bytes) and of the variant portfolio/variants/040_norm_prefetch.cu. x is viewed as [B, D].
// Stage 1: Welford partial states per (32768-value slice, sample). Stage 2: a warp per sample
// combines its partials in a fixed order into (mean, rstd). Stage 3: one block per slice of
// columns, taken in reverse order, each thread holding its weight and bias in registers while it
// walks every sample. No atomics: the result is bitwise reproducible.
// candidate<PerThread, Prefetch>: PerThread vectors per thread in stage 3; with Prefetch, each
// thread issues sample s + 1's loads before it normalizes and stores sample s.
// Include it after the task's math (KB_TASK_MATH).
#pragma once

#include <kblaster/device/families/common.cuh>

namespace kb::layernorm_slices {

using op = kb_op<float>;
using state = op::state;
using stats = op::stats;

constexpr int threads = 256;
constexpr int64_t stat_slice = 32768; // values per statistics block
constexpr int batch = 8;              // loads in flight per thread in stage 1
constexpr int finalize_warps = 8;

__device__ __forceinline__ state combine(const state& a, const state& b) {
  return op::combine(a, b);
}

template <int V> using vec = kb::floats<V>;

template <int V>
__global__ void __launch_bounds__(threads)
    partial_stats(const float* __restrict__ x, state* __restrict__ partial, int64_t samples,
                  int64_t d, int64_t slices) {
  using T = typename vec<V>::type;
  const int64_t slice = blockIdx.x / samples;
  const int64_t sample = blockIdx.x % samples;
  const int64_t lo = slice * stat_slice;
  const int64_t cnt = (d - lo < stat_slice ? d - lo : stat_slice) / V; // d % V == 0 here
  const T* src = reinterpret_cast<const T*>(x + sample * d + lo);
  state s[4] = {op::init(), op::init(), op::init(), op::init()};
  for (int64_t base = 0; base < cnt; base += static_cast<int64_t>(threads) * batch) {
    T v[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      const int64_t i = base + k * threads + threadIdx.x;
      if (i < cnt) {
        v[k] = __ldg(src + i); // default eviction: stage 3 re-reads the tail of x from L2
      }
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      if (base + k * threads + threadIdx.x < cnt) {
        float e[V];
        vec<V>::split(v[k], e);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          s[(V == 4 ? j : k) % 4] = op::accumulate(s[(V == 4 ? j : k) % 4], e[j]);
        }
      }
    }
  }
  state t = combine(combine(s[0], s[1]), combine(s[2], s[3]));
  t = kb::block_reduce(t, [](const state& a, const state& b) { return combine(a, b); });
  if (threadIdx.x == 0) {
    partial[sample * slices + slice] = t;
  }
}

__global__ void __launch_bounds__(finalize_warps * 32)
    finalize_stats(const state* __restrict__ partial, stats* __restrict__ st, int64_t samples,
                   int64_t d, int64_t slices, kb::scalars p) {
  const int lane = threadIdx.x % 32;
  const int64_t sample = blockIdx.x * static_cast<int64_t>(finalize_warps) + threadIdx.x / 32;
  if (sample >= samples) {
    return; // whole warps only
  }
  state s = op::init();
  for (int64_t i = lane; i < slices; i += 32) {
    s = combine(s, partial[sample * slices + i]);
  }
  s = kb::warp_reduce(s, [](const state& a, const state& b) { return combine(a, b); });
  if (lane == 0) {
    st[sample] = op::finalize(s, d, p.v);
  }
}

// This thread's vectors of sample s (`threads` apart from `first`), evict-first.
template <int V, int per_thread>
__device__ __forceinline__ void load_sample(typename vec<V>::type (&v)[per_thread],
                                            const typename vec<V>::type* xv, int64_t s,
                                            int64_t first, int64_t dv) {
#pragma unroll
  for (int u = 0; u < per_thread; ++u) {
    const int64_t i = first + u * threads;
    if (i < dv) {
      v[u] = __ldcs(xv + s * dv + i);
    }
  }
}

// One sample's vectors v (those of this thread, `threads` apart from `first`) normalized and
// stored with streaming stores.
template <int V, int per_thread>
__device__ __forceinline__ void apply_sample(const typename vec<V>::type (&v)[per_thread],
                                             const stats& sst, const float (&wr)[per_thread][V],
                                             const float (&br)[per_thread][V],
                                             typename vec<V>::type* yv, int64_t first, int64_t dv) {
#pragma unroll
  for (int u = 0; u < per_thread; ++u) {
    const int64_t i = first + u * threads;
    if (i < dv) {
      float e[V];
      vec<V>::split(v[u], e);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        e[j] = op::apply(e[j], sst, wr[u][j], br[u][j]);
      }
      __stcs(yv + i, vec<V>::join(e));
    }
  }
}

template <int V, int per_thread, bool prefetch>
__global__ void __launch_bounds__(threads)
    normalize(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
              const stats* __restrict__ st, float* __restrict__ y, int64_t samples, int64_t d) {
  using T = typename vec<V>::type;
  constexpr int64_t slice_vecs = static_cast<int64_t>(threads) * per_thread;
  const int64_t dv = d / V;
  const int64_t slice = gridDim.x - 1 - blockIdx.x;
  const int64_t first = slice * slice_vecs + threadIdx.x;
  const T* xv = reinterpret_cast<const T*>(x);
  const T* wv = reinterpret_cast<const T*>(w);
  const T* bv = reinterpret_cast<const T*>(b);
  T* yv = reinterpret_cast<T*>(y);
  float wr[per_thread][V];
  float br[per_thread][V];
#pragma unroll
  for (int u = 0; u < per_thread; ++u) {
    const int64_t i = first + u * threads;
    if (i < dv) {
      vec<V>::split(__ldg(wv + i), wr[u]);
      vec<V>::split(__ldg(bv + i), br[u]);
    }
  }
  if constexpr (!prefetch) {
    for (int64_t s = 0; s < samples; ++s) {
      const stats sst = st[s];
      T v[per_thread];
      load_sample<V, per_thread>(v, xv, s, first, dv);
      apply_sample<V, per_thread>(v, sst, wr, br, yv + s * dv, first, dv);
    }
  } else {
    T cur[per_thread];
    T nxt[per_thread];
    if (samples > 0) {
      load_sample<V, per_thread>(cur, xv, 0, first, dv);
    }
    for (int64_t s = 0; s < samples; ++s) {
      if (s + 1 < samples) {
        load_sample<V, per_thread>(nxt, xv, s + 1, first, dv);
      }
      apply_sample<V, per_thread>(cur, st[s], wr, br, yv + s * dv, first, dv);
#pragma unroll
      for (int u = 0; u < per_thread; ++u) {
        cur[u] = nxt[u];
      }
    }
  }
}

struct plan {
  int64_t samples;
  int64_t d;
  int64_t slices; // statistics slices per sample
};

inline bool plan_of(const kb_args* a, plan* pl) {
  int64_t d = 0;
  if (!kb::float32_sample_params_args(a, 2, 2, &d)) {
    return false;
  }
  pl->samples = a->inputs[0].shape[0];
  pl->d = d;
  pl->slices = (d + stat_slice - 1) / stat_slice;
  return true;
}

constexpr uint64_t align_up(uint64_t v) {
  return (v + 255) / 256 * 256;
}

inline uint64_t partial_bytes(const plan& pl) {
  return align_up(static_cast<uint64_t>(pl.samples * pl.slices) * sizeof(state));
}

template <int V, int per_thread, bool prefetch>
int run(const kb_args* a, const plan& pl, state* partial, stats* st) {
  const float* x = static_cast<const float*>(a->inputs[0].data);
  const float* w = static_cast<const float*>(a->inputs[1].data);
  const float* b = static_cast<const float*>(a->inputs[2].data);
  float* y = static_cast<float*>(a->outputs[0].data);
  const cudaStream_t stream = kb::stream_of(a);
  const int64_t stat_blocks = pl.samples * pl.slices;
  const int64_t norm_blocks = (pl.d / V + threads * per_thread - 1) / (threads * per_thread);
  if (stat_blocks > 0x7fffffffLL || norm_blocks > 0x7fffffffLL) {
    return -1;
  }
  partial_stats<V><<<static_cast<unsigned>(stat_blocks), threads, 0, stream>>>(
      x, partial, pl.samples, pl.d, pl.slices);
  finalize_stats<<<static_cast<unsigned>((pl.samples + finalize_warps - 1) / finalize_warps),
                   finalize_warps * 32, 0, stream>>>(partial, st, pl.samples, pl.d, pl.slices,
                                                     kb::scalars_of(a));
  normalize<V, per_thread, prefetch><<<static_cast<unsigned>(norm_blocks), threads, 0, stream>>>(
      x, w, b, st, y, pl.samples, pl.d);
  return static_cast<int>(cudaGetLastError());
}

template <int PerThread, bool Prefetch> struct candidate {
  static int workspace_bytes(const kb_args* args, uint64_t* bytes) {
    plan pl{};
    if (!plan_of(args, &pl)) {
      return -1;
    }
    *bytes = partial_bytes(pl) + static_cast<uint64_t>(pl.samples) * sizeof(stats);
    return 0;
  }

  static int launch(const kb_args* args) {
    plan pl{};
    if (!plan_of(args, &pl)) {
      return -1;
    }
    if (pl.samples == 0 || pl.d == 0) {
      return 0;
    }
    if (args->workspace_bytes <
        partial_bytes(pl) + static_cast<uint64_t>(pl.samples) * sizeof(stats)) {
      return -1;
    }
    auto* partial = static_cast<state*>(args->workspace);
    auto* st =
        reinterpret_cast<stats*>(static_cast<unsigned char*>(args->workspace) + partial_bytes(pl));
    bool aligned = pl.d % 4 == 0;
    for (const void* ptr : {args->inputs[0].data, args->inputs[1].data, args->inputs[2].data,
                            args->outputs[0].data}) {
      aligned = aligned && reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
    }
    return aligned ? run<4, PerThread, Prefetch>(args, pl, partial, st)
                   : run<1, PerThread, Prefetch>(args, pl, partial, st);
  }
};

} // namespace kb::layernorm_slices
