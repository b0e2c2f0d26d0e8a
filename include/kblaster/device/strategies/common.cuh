// What the strategy library's kernels share: storage-type dispatch (fp32, fp16, bf16 storage with
// fp32 compute), vector loads and stores of 4, 8 or 16 bytes with optional streaming cache hints,
// fixed-order warp and block reductions over any state, and device queries for grid sizing.
//
// Every strategy is a class template over the task's `kb_op` and a parameter struct `P` whose
// static constexpr members are the strategy's parameters (the generator in src/search writes it);
// shapes, strides and dtypes are read from kb_args at run time.
#pragma once

#include "kblaster/device/families/common.cuh"

#include <map>
#include <tuple>

namespace kb::strategies {

// The float storage types the strategies instantiate; float64 storage is refused (the kernels
// compute in fp32, which would lose the precision a float64 task asks for).
template <class F> int dispatch_storage(kb_dtype d, F&& f) {
  switch (d) {
  case KB_FLOAT32:
    return call_if_compiled<KB_FLOAT32, float>(f);
  case KB_FLOAT16:
    return call_if_compiled<KB_FLOAT16, __half>(f);
  case KB_BFLOAT16:
    return call_if_compiled<KB_BFLOAT16, __nv_bfloat16>(f);
  default:
    return -1;
  }
}

// Where a row-wise kernel keeps the row between computing its statistics and writing its output:
// nowhere (the row is read twice, the second time mostly from L2), in registers (a compile-time
// number of elements per thread) or in shared memory (as many as the block's opt-in allows).
enum class row_cache { none, registers, shared };

// Cache policy of the bulk loads and stores: default, or streaming (evict-first) for data that is
// touched once and would only push reusable lines out of L2.
enum class cache_hint { normal, streaming };

// Multiprocessor count and opt-in shared memory of the current device.
struct device_limits {
  int sms = 0;
  int smem_optin = 0; // [bytes] per block, with cudaFuncAttributeMaxDynamicSharedMemorySize
};

inline cudaError_t query_device(device_limits* out) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&out->sms, cudaDevAttrMultiProcessorCount, dev);
  }
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&out->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  }
  return e;
}

KB_HD int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
KB_HD int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
KB_HD int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// The most slices a strategy splits one call's work into, each with kernels of its own: the judge
// holds a call's time before its window (kb_launch, its capture and the graph's update, which
// grow with the kernels enqueued) to an empty call's plus one empty round trip, about 50 us,
// and an enqueued kernel costs a few microseconds of it.
inline constexpr int64_t max_launch_groups = 4;

// cudaOccupancyMaxActiveClusters for `kernel` launched as `cfg` (grid: one cluster), asked once
// per kernel, device, block, dynamic shared memory and cluster size and then remembered: the
// query costs tens of microseconds of host time, which every call would otherwise spend before
// its window.
template <class K>
cudaError_t max_active_clusters(K kernel, const cudaLaunchConfig_t& cfg, int cluster, int* out) {
  using key = std::tuple<const void*, int, unsigned, size_t, int>;
  static std::map<key, int> known;
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    return e;
  }
  const key k{reinterpret_cast<const void*>(kernel), dev, cfg.blockDim.x, cfg.dynamicSmemBytes,
              cluster};
  if (const auto it = known.find(k); it != known.end()) {
    *out = it->second;
    return cudaSuccess;
  }
  const cudaError_t e = cudaOccupancyMaxActiveClusters(out, kernel, &cfg);
  if (e == cudaSuccess) {
    known.emplace(k, *out);
  }
  return e;
}

// A grid size for `work` independent pieces, capped for a grid-stride loop.
inline unsigned capped_grid(int64_t work, int64_t cap = (int64_t{1} << 31) - 1) {
  return static_cast<unsigned>(work < 1 ? 1 : (work > cap ? cap : work));
}

inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Elements of T in a vector of `Bytes` bytes (at least one).
template <class T, int Bytes> constexpr int vec_elems() {
  return Bytes / static_cast<int>(sizeof(T)) > 0 ? Bytes / static_cast<int>(sizeof(T)) : 1;
}

// Static shared memory of a kernel, to budget the dynamic part against the opt-in limit.
template <class K> int static_smem(K kernel, size_t* bytes) {
  cudaFuncAttributes attr{};
  KB_RETURN_IF_CUDA_ERROR(cudaFuncGetAttributes(&attr, kernel));
  *bytes = attr.sharedSizeBytes;
  return 0;
}

template <class K> int allow_dynamic_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    KB_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  return 0;
}

#if defined(__CUDACC__)

template <int Bytes> struct raw_word;
template <> struct raw_word<2> { using type = unsigned short; };
template <> struct raw_word<4> { using type = unsigned int; };
template <> struct raw_word<8> { using type = uint2; };
template <> struct raw_word<16> { using type = uint4; };

// N consecutive T as one machine word of N * sizeof(T) bytes.
template <class T, int N> using vec_word = typename raw_word<N * sizeof(T)>::type;

template <class T, int N, cache_hint H = cache_hint::normal>
__device__ __forceinline__ vec_word<T, N> load_raw(const T* p) {
  if constexpr (H == cache_hint::streaming) {
    return __ldcs(reinterpret_cast<const vec_word<T, N>*>(p));
  } else {
    return __ldg(reinterpret_cast<const vec_word<T, N>*>(p));
  }
}

template <class T, int N, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void store_raw(T* p, vec_word<T, N> w) {
  if constexpr (H == cache_hint::streaming) {
    __stcs(reinterpret_cast<vec_word<T, N>*>(p), w);
  } else {
    *reinterpret_cast<vec_word<T, N>*>(p) = w;
  }
}

template <class A, class T, int N>
__device__ __forceinline__ void unpack(const vec_word<T, N>& w, A (&out)[N]) {
  T v[N];
  memcpy(v, &w, sizeof(w));
#pragma unroll
  for (int i = 0; i < N; ++i) {
    out[i] = cvt<A>(v[i]);
  }
}

template <class T, class A, int N>
__device__ __forceinline__ vec_word<T, N> pack(const A (&in)[N]) {
  T v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = cvt<T>(in[i]);
  }
  vec_word<T, N> w;
  memcpy(&w, v, sizeof(w));
  return w;
}

// Loads N consecutive T from p (aligned to N * sizeof(T)) as one access and converts them to A.
template <class A, class T, int N, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void load_vec(const T* p, A (&out)[N]) {
  unpack<A, T, N>(load_raw<T, N, H>(p), out);
}

// Converts N values of A to T and stores them to p (aligned to N * sizeof(T)) as one access.
template <class T, class A, int N, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void store_vec(T* p, const A (&in)[N]) {
  store_raw<T, N, H>(p, pack<T, A, N>(in));
}

template <class A, class T, cache_hint H = cache_hint::normal>
__device__ __forceinline__ A load_one(const T* p) {
  A out[1];
  load_vec<A, T, 1, H>(p, out);
  return out[0];
}

template <class T, class A, cache_hint H = cache_hint::normal>
__device__ __forceinline__ void store_one(T* p, A v) {
  const A in[1] = {v};
  store_vec<T, A, 1, H>(p, in);
}

// Every lane receives lane 0's value.
template <class S> __device__ __forceinline__ S warp_broadcast(S v) {
  static_assert(sizeof(S) % 4 == 0, "reduction state must be a multiple of 4 bytes");
  uint32_t words[sizeof(S) / 4];
  memcpy(words, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(S) / 4); ++i) {
    words[i] = __shfl_sync(0xffffffffu, words[i], 0);
  }
  memcpy(&v, words, sizeof(S));
  return v;
}

// Reduces over the warp in a fixed order and hands every lane lane 0's result, so all lanes hold
// bitwise the same value even when `combine` is not commutative in rounding.
template <class S, class Combine>
__device__ __forceinline__ S warp_allreduce(S v, Combine combine) {
  return warp_broadcast(warp_reduce(v, combine));
}

// Reduces over a block of Warps warps in a fixed order; every thread receives the result. Two
// barriers: the per-warp slots and the result slot are distinct, so back-to-back calls are safe.
template <int Warps, class S, class Combine>
__device__ __forceinline__ S block_allreduce(S v, Combine combine) {
  __shared__ alignas(16) unsigned char raw[sizeof(S) * (Warps + 1)];
  S* slot = reinterpret_cast<S*>(raw);
  v = warp_reduce(v, combine);
  if constexpr (Warps == 1) {
    return warp_broadcast(v);
  } else {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) {
      slot[warp] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      S acc = slot[0];
#pragma unroll
      for (int i = 1; i < Warps; ++i) {
        acc = combine(acc, slot[i]);
      }
      slot[Warps] = acc;
    }
    __syncthreads();
    return slot[Warps];
  }
}

#endif

} // namespace kb::strategies
