// A streaming elementwise kernel with a grid sized to the data (one tile per block, no
// grid-stride loop, no persistent blocks), the way PyTorch's vectorized elementwise kernel runs:
// each thread issues KB_EW_VECS independent 16-byte loads before any use, maps them with the
// task's kb_op<float>::map and stores them. Full tiles run without any bounds check; the last
// partial tile (and the n % 4 tail) is handled by the last block with guarded code. Include it
// after the task's math (KB_TASK_MATH); it defines the candidate's entry points.
//
// Knobs (macros, set before the include):
//   KB_EW_THREADS  threads per block (default 128)
//   KB_EW_VECS     16-byte loads per thread (default 4)
//   KB_EW_HINTS    1: evict-first loads and streaming stores (ld.global.cs / st.global.cs);
//                  2: read-only loads that skip L1 and ask L2 for 256-byte lines
//                     (ld.global.nc.L1::no_allocate.L2::256B), plain stores;
//                  0: plain loads and stores (default 0)
#pragma once

#ifndef KB_EW_THREADS
#define KB_EW_THREADS 128
#endif
#ifndef KB_EW_VECS
#define KB_EW_VECS 4
#endif
#ifndef KB_EW_HINTS
#define KB_EW_HINTS 0
#endif

namespace {

constexpr int ew_threads = KB_EW_THREADS;
constexpr int ew_vecs = KB_EW_VECS;
constexpr int64_t ew_tile = static_cast<int64_t>(ew_threads) * ew_vecs; // float4 per block

__device__ __forceinline__ float4 ew_map4(float4 v) {
  using op = kb_op<float>;
  return make_float4(op::map(v.x), op::map(v.y), op::map(v.z), op::map(v.w));
}

__device__ __forceinline__ float4 ew_load(const float4* p) {
#if KB_EW_HINTS == 1
  return __ldcs(p);
#elif KB_EW_HINTS == 2
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
#else
  return *p;
#endif
}

__device__ __forceinline__ void ew_store(float4* p, float4 v) {
#if KB_EW_HINTS == 1
  __stcs(p, v);
#else
  *p = v;
#endif
}

// Blocks [0, full) own whole tiles; block `full` (if any) owns the rest of the float4s and the
// scalar tail.
__global__ void __launch_bounds__(ew_threads)
    ew_map(const float* __restrict__ x, float* __restrict__ y, int64_t n, int64_t full) {
  const int64_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * ew_tile + threadIdx.x;
  if (static_cast<int64_t>(blockIdx.x) < full) {
    float4 v[ew_vecs];
#pragma unroll
    for (int k = 0; k < ew_vecs; ++k) {
      v[k] = ew_load(x4 + base + k * ew_threads);
    }
#pragma unroll
    for (int k = 0; k < ew_vecs; ++k) {
      ew_store(y4 + base + k * ew_threads, ew_map4(v[k]));
    }
    return;
  }
  for (int64_t i = base; i < n4; i += ew_threads) {
    ew_store(y4 + i, ew_map4(ew_load(x4 + i)));
  }
  if (threadIdx.x < n - 4 * n4) {
    const int64_t i = 4 * n4 + threadIdx.x;
    y[i] = kb_op<float>::map(x[i]);
  }
}

__global__ void __launch_bounds__(256)
    ew_map_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * 256LL + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * 256) {
    y[i] = kb_op<float>::map(x[i]);
  }
}

} // namespace

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (!kb::float32_map_args(args)) {
    return -1;
  }
  const kb_tensor& xt = args->inputs[0];
  const int64_t n = kb::numel(xt);
  if (n == 0) {
    return 0;
  }
  const float* x = static_cast<const float*>(xt.data);
  float* y = static_cast<float*>(args->outputs[0].data);
  const cudaStream_t stream = kb::stream_of(args);
  const bool aligned =
      (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(y) % 16 == 0);
  if (aligned) {
    const int64_t n4 = n / 4;
    const int64_t full = n4 / ew_tile;
    const bool rest = n4 % ew_tile != 0 || n % 4 != 0;
    const int64_t blocks = full + (rest ? 1 : 0);
    if (blocks > 0x7fffffffLL) {
      return -1;
    }
    ew_map<<<static_cast<unsigned>(blocks), ew_threads, 0, stream>>>(x, y, n, full);
  } else {
    ew_map_scalar<<<kb::grid_for(n, 256), 256, 0, stream>>>(x, y, n);
  }
  return static_cast<int>(cudaGetLastError());
}

#define KB_EW_STR2(v) #v
#define KB_EW_STR(v) KB_EW_STR2(v)

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: elementwise, grid sized to the data, " KB_EW_STR(
      KB_EW_THREADS) " threads x " KB_EW_STR(KB_EW_VECS) " float4 per thread, streaming "
                                                         "hints " KB_EW_STR(KB_EW_HINTS);
}
