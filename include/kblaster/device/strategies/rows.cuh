// Row access shared by the row-wise strategies (normalize, reduce, loss). x is viewed as
// [outer, extent, inner]; a row is one (outer, inner) pair and holds `extent` elements `inner`
// apart. A row is walked in "vectors": V consecutive elements loaded as one access when the row
// is contiguous and aligned (the launcher checks it and otherwise instantiates V = 1, where a
// vector is one element and the stride is `inner`).
#pragma once

#include "kblaster/device/families/normalize.cuh"
#include "kblaster/device/strategies/common.cuh"

#include <initializer_list>

namespace kb::strategies::rows {

using layout = kb::normalize::layout;

KB_HD int64_t count(const layout& L) {
  return L.outer * L.inner;
}

// Offset of the first element of row `row`.
KB_HD int64_t base(const layout& L, int64_t row) {
  const int64_t o = row / L.inner;
  const int64_t i = row % L.inner;
  return o * L.extent * L.inner + i;
}

// Whether rows can be walked in vectors of V: contiguous rows whose length is a multiple of V,
// every pointer aligned to a whole vector (so every row starts aligned).
template <class T, int V>
bool vectorizable(const layout& L, std::initializer_list<const void*> pointers) {
  if (V == 1) {
    return true;
  }
  if (L.inner != 1 || L.extent % V != 0) {
    return false;
  }
  for (const void* p : pointers) {
    if (p != nullptr && !aligned_to(p, sizeof(T) * V)) {
      return false;
    }
  }
  return true;
}

#if defined(__CUDACC__)

template <class A, class T, int V, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void load(const T* row, int64_t stride, int64_t j, A (&v)[V]) {
  if constexpr (V > 1) {
    load_vec<A, T, V, H>(row + j * V, v);
  } else {
    v[0] = load_one<A, T, H>(row + j * stride);
  }
}

template <class T, int V, cache_hint H = cache_hint::normal>
__device__ __forceinline__ vec_word<T, V> load_word(const T* row, int64_t stride, int64_t j) {
  return load_raw<T, V, H>(V > 1 ? row + j * V : row + j * stride);
}

template <class T, class A, int V, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void store(T* row, int64_t stride, int64_t j, const A (&v)[V]) {
  if constexpr (V > 1) {
    store_vec<T, A, V, H>(row + j * V, v);
  } else {
    store_one<T, A, H>(row + j * stride, v[0]);
  }
}

// The per-element parameter (weight or bias) of vector j, or `fallback` when absent. Parameters
// have `extent` contiguous elements.
template <class A, class T, int V>
__device__ __forceinline__ void load_param(const T* p, int64_t j, A fallback, A (&v)[V]) {
  if (p == nullptr) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[k] = fallback;
    }
  } else {
    load_vec<A, T, V>(p + j * V, v);
  }
}

// Calls f(j, word) for vectors j = begin + lane, begin + lane + lanes, ... below end, with U
// vectors loaded before the first is used; `word` is the vector's raw storage (unpack it to
// compute, or keep it as is). Each thread visits its vectors in increasing j.
template <int U, class T, int V, cache_hint H = cache_hint::normal, class F>
__device__ __forceinline__ void stream(const T* row, int64_t stride, int64_t begin, int64_t end,
                                       int lane, int lanes, F&& f) {
  int64_t j = begin + lane;
  for (; j + int64_t{U - 1} * lanes < end; j += int64_t{U} * lanes) {
    vec_word<T, V> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      v[u] = load_word<T, V, H>(row, stride, j + int64_t{u} * lanes);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      f(j + int64_t{u} * lanes, v[u]);
    }
  }
  for (; j < end; j += lanes) {
    f(j, load_word<T, V, H>(row, stride, j));
  }
}

// Calls f(t, word) for t in [begin, end), vector t at p + t * stride (one thread walking a strided
// line, U vectors in flight).
template <int U, class T, int V, cache_hint H = cache_hint::normal, class F>
__device__ __forceinline__ void strided_stream(const T* p, int64_t stride, int64_t begin,
                                               int64_t end, F&& f) {
  int64_t t = begin;
  for (; t + U <= end; t += U) {
    vec_word<T, V> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      v[u] = load_raw<T, V, H>(p + (t + u) * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      f(t + u, v[u]);
    }
  }
  for (; t < end; ++t) {
    f(t, load_raw<T, V, H>(p + t * stride));
  }
}

// The V values of a vector folded into state s in order (Op::accumulate over A).
template <class Op, class A, class T, int V, class S>
__device__ __forceinline__ S accumulate_word(S s, const vec_word<T, V>& wd) {
  A v[V];
  unpack<A, T, V>(wd, v);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    s = Op::accumulate(s, v[k]);
  }
  return s;
}

// Combines `count` partial states of one row in a fixed order: lane l folds partials l, l + 32,
// ... and the warp reduces the lanes. Called by a whole warp; every lane gets the same bits.
template <class Op, class S>
__device__ __forceinline__ S combine_partials(const S* partials, int64_t count) {
  const int lane = threadIdx.x % 32;
  S s = Op::init();
  for (int64_t q = lane; q < count; q += 32) {
    s = Op::combine(s, partials[q]);
  }
  return warp_allreduce(s, [](const S& u, const S& v) { return Op::combine(u, v); });
}

// A group of `Lanes` threads that owns one row at a time: a warp (Lanes == 32) or the whole block
// (Lanes == block size).
template <int Lanes, int Block> struct group {
  static_assert(Lanes == 32 || Lanes == Block, "a row belongs to a warp or to the whole block");
  static constexpr int per_block = Block / Lanes;
  static __device__ __forceinline__ int lane() {
    return Lanes == 32 ? static_cast<int>(threadIdx.x % 32) : static_cast<int>(threadIdx.x);
  }
  static __device__ __forceinline__ int index() {
    return Lanes == 32 ? static_cast<int>(threadIdx.x / 32) : 0;
  }
  template <class S, class Combine>
  static __device__ __forceinline__ S allreduce(S v, Combine combine) {
    if constexpr (Lanes == 32) {
      return warp_allreduce(v, combine);
    } else {
      return block_allreduce<Block / 32>(v, combine);
    }
  }
};

#endif

} // namespace kb::strategies::rows
