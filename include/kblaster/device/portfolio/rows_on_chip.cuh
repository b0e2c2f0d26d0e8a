// Rows held on chip across a cooperative grid, refilled in place: the parts shared by the variants
// 023_inplace (softmax) and 040_coop_inplace (LayerNorm). A row (sample) is cut into slices, one
// per block, each in the block's shared memory. A block folds its slice into four states of the
// task's kb_op (kb_op::accumulate), reduces them over the block and publishes the result with an
// arrival counter (release); once every slice of the row has arrived (acquire), warp 0 of each
// block combines the states in a fixed order (every block gets bitwise the same statistics). Then
// one pass writes the output from shared memory and, in the same loop, loads the block's slice of
// its next row into the slots just consumed: each thread refills only its own slots, so DRAM reads
// and writes overlap without a second buffer.
// Include it after the task's math (KB_TASK_MATH).
#pragma once

#include <kblaster/device/families/common.cuh>

#include <algorithm>

namespace kb::on_chip {

template <int V> using vec = kb::floats<V>;

// Four interleaved states: component j of a vector goes to state j.
template <class Op, int V>
__device__ __forceinline__ void accumulate(typename Op::state (&s)[4],
                                           const typename vec<V>::type& v) {
  float e[V];
  vec<V>::split(v, e);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    s[j] = Op::accumulate(s[j], e[j]);
  }
}

// The block's four states reduced in a fixed order, stored at `slot`, counted in `*arrived`.
// Every thread of the block calls it.
template <class Op>
__device__ __forceinline__ void publish(typename Op::state (&s)[4], typename Op::state* slot,
                                        unsigned* arrived) {
  using S = typename Op::state;
  S t = Op::combine(Op::combine(s[0], s[1]), Op::combine(s[2], s[3]));
  t = kb::block_reduce(t, [](const S& a, const S& b) { return Op::combine(a, b); });
  if (threadIdx.x == 0) {
    *slot = t;
    __threadfence();
    atomicAdd(arrived, 1u);
  }
}

// The `count` states at `states`, once `*arrived` reached `count`, combined by warp 0 (lane l takes
// l, l + 32, ..., then a fixed shuffle tree) and finalized. Every thread of the block calls it.
template <class Op>
__device__ __forceinline__ typename Op::stats
gather(const typename Op::state* states, const unsigned* arrived, unsigned count, int64_t n,
       const kb::scalars& p, typename Op::stats* shared_stats) {
  using S = typename Op::state;
  if (threadIdx.x == 0) {
    while (kb::load_acquire_gpu(arrived) < count) {
      __nanosleep(32);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    S s = Op::init();
    for (unsigned c = threadIdx.x; c < count; c += 32) {
      s = Op::combine(s, kb::load_cg_any(states + c));
    }
    s = kb::warp_reduce(s, [](const S& a, const S& b) { return Op::combine(a, b); });
    if (threadIdx.x == 0) {
      *shared_stats = Op::finalize(s, n, p.v);
    }
  }
  __syncthreads();
  const typename Op::stats st = *shared_stats;
  __syncthreads(); // shared_stats is rewritten for the next row
  return st;
}

// This thread's batch of the slice from `base`: up to Batch evict-first loads in flight.
template <int V, int Threads, int Batch>
__device__ __forceinline__ void load_batch(const typename vec<V>::type* src, int64_t base,
                                           int64_t cnt, typename vec<V>::type (&v)[Batch]) {
#pragma unroll
  for (int k = 0; k < Batch; ++k) {
    const int64_t i = base + k * Threads;
    if (i < cnt) {
      v[k] = __ldcs(src + i);
    }
  }
}

// The batch into this thread's own slots of `stage`, folded into `s`.
template <class Op, int V, int Threads, int Batch>
__device__ __forceinline__ void stage_batch(const typename vec<V>::type (&v)[Batch],
                                            typename vec<V>::type* stage, int64_t base, int64_t cnt,
                                            typename Op::state (&s)[4]) {
#pragma unroll
  for (int k = 0; k < Batch; ++k) {
    const int64_t i = base + k * Threads;
    if (i < cnt) {
      stage[i] = v[k];
      accumulate<Op, V>(s, v[k]);
    }
  }
}

// The block's slice `src[0, cnt)` into `stage`, folded into `s` (evict-first loads, Batch per
// thread in flight).
template <class Op, int V, int Threads, int Batch>
__device__ __forceinline__ void load_slice(const typename vec<V>::type* src,
                                           typename vec<V>::type* stage, int64_t cnt,
                                           typename Op::state (&s)[4]) {
  using T = typename vec<V>::type;
  for (int64_t base = threadIdx.x; base < cnt; base += static_cast<int64_t>(Threads) * Batch) {
    T v[Batch];
    load_batch<V, Threads, Batch>(src, base, cnt, v);
    stage_batch<Op, V, Threads, Batch>(v, stage, base, cnt, s);
  }
}

// One pass over the slice: dst[i] = out(stage[i], i) with streaming stores and, when `next` is
// not null, stage[i] = next[i] folded into `s` (each thread refills only the slots it just read).
// out(float (&e)[V], int64_t i) rewrites e in place.
template <class Op, int V, int Threads, int Batch, class Out>
__device__ __forceinline__ void
store_and_refill(typename vec<V>::type* stage, int64_t cnt, typename vec<V>::type* dst,
                 const typename vec<V>::type* next, typename Op::state (&s)[4], Out out) {
  using T = typename vec<V>::type;
  for (int64_t base = threadIdx.x; base < cnt; base += static_cast<int64_t>(Threads) * Batch) {
    T v[Batch];
    if (next != nullptr) {
      load_batch<V, Threads, Batch>(next, base, cnt, v);
    }
#pragma unroll
    for (int k = 0; k < Batch; ++k) {
      const int64_t i = base + k * Threads;
      if (i < cnt) {
        float e[V];
        vec<V>::split(stage[i], e);
        out(e, i);
        __stcs(dst + i, vec<V>::join(e));
      }
    }
    if (next != nullptr) {
      stage_batch<Op, V, Threads, Batch>(v, stage, base, cnt, s);
    }
  }
}

// Host side: the dynamic shared memory a block may take with `blocks_per_sm` blocks per SM (the
// kernel's static shared memory, at most `static_bytes`, and the per-block reservation kept out).
inline size_t slice_limit(int blocks_per_sm, size_t static_bytes) {
  int dev = 0;
  int per_sm = 0;
  int optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  const size_t share = static_cast<size_t>(per_sm) / static_cast<size_t>(blocks_per_sm);
  const size_t keep = 1024 + static_bytes;
  return std::min(static_cast<size_t>(optin), share > keep ? share - keep : 0);
}

// Host side: the resident grid of `blocks_per_sm` blocks per SM.
inline int resident_grid(int blocks_per_sm) {
  int dev = 0;
  int sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms * blocks_per_sm;
}

// Host side: the kernel accepts `limit` bytes of dynamic shared memory and `blocks_per_sm` of its
// blocks fit on an SM at `bytes` each (0 on success, a CUDA error or -1).
template <class Kernel>
int prepare(Kernel kernel, int threads, int blocks_per_sm, size_t limit, size_t bytes) {
  KB_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(limit)));
  int resident = 0;
  KB_RETURN_IF_CUDA_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, threads, bytes));
  return resident >= blocks_per_sm ? 0 : -1;
}

// Host side: the workspace of `rows` rows of up to `slots` states each, then a counter per row.
template <class State> struct workspace_layout {
  int64_t rows = 0;
  size_t states_bytes = 0;
  size_t total = 0;
  workspace_layout(int64_t rows_, int64_t slots) : rows(rows_) {
    const size_t states = static_cast<size_t>(rows) * static_cast<size_t>(slots) * sizeof(State);
    states_bytes = (states + 255) / 256 * 256;
    total = states_bytes + static_cast<size_t>(rows) * sizeof(unsigned);
  }
  // The call's workspace cut into the states and the counters, the counters zeroed on the call's
  // stream (0, a CUDA error, or -1 when the workspace is missing or short).
  int carve(const kb_args* a, State** states, unsigned** arrived) const {
    if (a->workspace == nullptr || a->workspace_bytes < total) {
      return -1;
    }
    auto* base = static_cast<unsigned char*>(a->workspace);
    *states = reinterpret_cast<State*>(base);
    *arrived = reinterpret_cast<unsigned*>(base + states_bytes);
    KB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(
        *arrived, 0, static_cast<size_t>(rows) * sizeof(unsigned), kb::stream_of(a)));
    return 0;
  }
};

} // namespace kb::on_chip
