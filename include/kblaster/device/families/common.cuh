// What every family driver shares: a generic warp/block reduction over any trivially copyable
// state, launch helpers and the entry points a task's oracle module exports.
#pragma once

#include "kblaster/device/core.cuh"

namespace kb {

#define KB_RETURN_IF_CUDA_ERROR(call)                                                              \
  do {                                                                                             \
    const cudaError_t kb_err_ = (call);                                                            \
    if (kb_err_ != cudaSuccess) {                                                                  \
      return static_cast<int>(kb_err_);                                                            \
    }                                                                                              \
  } while (0)

// The task's scalar parameters (eps, ...), passed to kernels by value.
struct scalars {
  double v[8];
};

inline scalars scalars_of(const kb_args* a) {
  scalars s{};
  for (int i = 0; i < a->num_scalars && i < 8; ++i) {
    s.v[i] = a->scalars[i];
  }
  return s;
}

inline cudaStream_t stream_of(const kb_args* a) {
  return reinterpret_cast<cudaStream_t>(a->stream);
}

// Whether the call's first input and first output are float32, contiguous and of the same number
// of elements, the input with at least `min_ndim` dimensions: the arguments a kernel mapping one
// float32 tensor onto another of its size checks before any device work.
inline bool float32_map_args(const kb_args* a, int min_ndim = 0) {
  if (a->num_inputs < 1 || a->num_outputs < 1) {
    return false;
  }
  const kb_tensor& x = a->inputs[0];
  const kb_tensor& y = a->outputs[0];
  return x.dtype == KB_FLOAT32 && y.dtype == KB_FLOAT32 && x.ndim >= min_ndim && is_contiguous(x) &&
         is_contiguous(y) && numel(x) == numel(y);
}

// float32_map_args (at least min_ndim dims) and inputs 1..params: float32 and contiguous, with one
// value per element of a sample (x's dims after the first), as LayerNorm's weight and bias. *d:
// the elements of a sample.
inline bool float32_sample_params_args(const kb_args* a, int params, int min_ndim, int64_t* d) {
  if (a->num_inputs < 1 + params || !float32_map_args(a, min_ndim)) {
    return false;
  }
  const kb_tensor& x = a->inputs[0];
  *d = product(x, 1, x.ndim);
  for (int i = 1; i <= params; ++i) {
    const kb_tensor& t = a->inputs[i];
    if (t.dtype != KB_FLOAT32 || !is_contiguous(t) || numel(t) != *d) {
      return false;
    }
  }
  return true;
}

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than needed.
inline unsigned grid_for(int64_t n, unsigned block, unsigned max_blocks = 132u * 32u) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

#if defined(__CUDACC__)
// v's 32-bit words, each moved across the warp by `shuffle` (one __shfl_*_sync on a word).
template <class S, class Shuffle>
__device__ __forceinline__ S shfl_words(const S& v, Shuffle shuffle) {
  static_assert(sizeof(S) % 4 == 0, "reduction state must be a multiple of 4 bytes");
  uint32_t words[sizeof(S) / 4];
  memcpy(words, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(S) / 4); ++i) {
    words[i] = shuffle(words[i]);
  }
  S out;
  memcpy(&out, words, sizeof(S));
  return out;
}
template <class S> __device__ __forceinline__ S shfl_down_any(const S& v, int offset) {
  return shfl_words(v, [offset](uint32_t w) { return __shfl_down_sync(0xffffffffu, w, offset); });
}
template <class S> __device__ __forceinline__ S shfl_xor_any(const S& v, int mask) {
  return shfl_words(v, [mask](uint32_t w) { return __shfl_xor_sync(0xffffffffu, w, mask); });
}
// Lane `lane`'s v, in every lane.
template <class S> __device__ __forceinline__ S shfl_idx_any(const S& v, int lane) {
  return shfl_words(v, [lane](uint32_t w) { return __shfl_sync(0xffffffffu, w, lane); });
}

// V consecutive floats as one vector word (float, float2, float4): its type, its components
// split into an array and joined back.
template <int V> struct floats;
template <> struct floats<1> {
  using type = float;
  static __device__ __forceinline__ void split(float v, float (&o)[1]) { o[0] = v; }
  static __device__ __forceinline__ float join(const float (&o)[1]) { return o[0]; }
};
template <> struct floats<2> {
  using type = float2;
  static __device__ __forceinline__ void split(float2 v, float (&o)[2]) {
    o[0] = v.x;
    o[1] = v.y;
  }
  static __device__ __forceinline__ float2 join(const float (&o)[2]) {
    return make_float2(o[0], o[1]);
  }
};
template <> struct floats<4> {
  using type = float4;
  static __device__ __forceinline__ void split(float4 v, float (&o)[4]) {
    o[0] = v.x;
    o[1] = v.y;
    o[2] = v.z;
    o[3] = v.w;
  }
  static __device__ __forceinline__ float4 join(const float (&o)[4]) {
    return make_float4(o[0], o[1], o[2], o[3]);
  }
};

// A 32-bit flag or counter another block releases, read with acquire semantics at GPU scope.
__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A value another block wrote, read from L2 (L1 is not coherent across blocks), whole 32-bit
// words at a time.
template <class S> __device__ __forceinline__ S load_cg_any(const S* p) {
  static_assert(sizeof(S) % 4 == 0, "the value must be whole 32-bit words");
  uint32_t words[sizeof(S) / 4];
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(S) / 4); ++i) {
    words[i] = __ldcg(reinterpret_cast<const unsigned*>(p) + i);
  }
  S out;
  memcpy(&out, words, sizeof(S));
  return out;
}

// Reduces `v` over the warp in a fixed order; the result is valid in lane 0.
template <class S, class Combine> __device__ __forceinline__ S warp_reduce(S v, Combine combine) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v = combine(v, shfl_down_any(v, offset));
  }
  return v;
}

// Reduces `v` over the block (blockDim.x a multiple of 32, at most 1024) in a fixed order, so the
// result is bitwise reproducible; every thread receives it.
template <class S, class Combine> __device__ S block_reduce(S v, Combine combine) {
  __shared__ alignas(16) unsigned char raw[sizeof(S) * 33];
  S* partial = reinterpret_cast<S*>(raw);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_reduce(v, combine);
  __syncthreads(); // the buffer may still be read by a previous call
  if (lane == 0) {
    partial[warp] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    S acc = partial[0];
    for (int i = 1; i < warps; ++i) {
      acc = combine(acc, partial[i]);
    }
    partial[32] = acc;
  }
  __syncthreads();
  return partial[32];
}
#endif

} // namespace kb

// The oracle module of a task exports these (generated by `kblaster` from the task contract):
//   int kbt_oracle(const kb_args* args, int on_gpu);   outputs are float64 tensors
//   int kbt_oracle_workspace(const kb_args* args, uint64_t* bytes);
//   const char* kbt_family(void);
#define KB_ORACLE_EXPORTS(FAMILY_NAME, GPU_CALL, CPU_CALL, WORKSPACE_CALL)                         \
  extern "C" KB_EXPORT int kbt_oracle(const kb_args* args, int on_gpu) {                           \
    return on_gpu ? (GPU_CALL) : (CPU_CALL);                                                       \
  }                                                                                                \
  extern "C" KB_EXPORT int kbt_oracle_workspace(const kb_args* args, uint64_t* bytes) {            \
    *bytes = (WORKSPACE_CALL);                                                                     \
    return 0;                                                                                      \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kbt_family(void) {                                              \
    return FAMILY_NAME;                                                                            \
  }
