// The portfolio's streaming kernel for elementwise tasks (019, 026, 088 share it): a persistent
// grid of resident 256-thread blocks, 4 independent 16-byte loads in flight per thread, the task's
// kb_op<float>::map, 16-byte streaming stores, and a scalar path for tails and unaligned tensors.
// Include it after the task's math (KB_TASK_MATH); it defines the candidate's entry points.
#pragma once

namespace {

constexpr int threads = 256;
constexpr int unroll = 4; // float4 loads in flight per thread

int sm_count() {
  static const int n = [] {
    int dev = 0;
    int v = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v > 0 ? v : 132;
  }();
  return n;
}

// Blocks of `kernel` that are resident at once on the whole device.
template <class Kernel> unsigned resident_blocks(Kernel kernel, int block, size_t smem) {
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem);
  return static_cast<unsigned>(sm_count() * (per_sm > 0 ? per_sm : 1));
}

__device__ __forceinline__ float4 map4(float4 v) {
  using op = kb_op<float>;
  return make_float4(op::map(v.x), op::map(v.y), op::map(v.z), op::map(v.w));
}

__global__ void __launch_bounds__(threads)
    map_vec4(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  const int64_t tile = static_cast<int64_t>(threads) * unroll;
  for (int64_t base = blockIdx.x * tile; base < n4;
       base += static_cast<int64_t>(gridDim.x) * tile) {
    float4 v[unroll];
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const int64_t i = base + k * threads + threadIdx.x;
      if (i < n4) {
        v[k] = __ldcs(x4 + i);
      }
    }
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const int64_t i = base + k * threads + threadIdx.x;
      if (i < n4) {
        __stcs(y4 + i, map4(v[k]));
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
    const int64_t i = 4 * n4 + threadIdx.x;
    y[i] = kb_op<float>::map(x[i]);
  }
}

__global__ void __launch_bounds__(threads)
    map_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(threads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * threads) {
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
    static const unsigned max_blocks = resident_blocks(map_vec4, threads, 0);
    map_vec4<<<kb::grid_for(n / 4 > 0 ? n / 4 : 1, threads * unroll, max_blocks), threads, 0,
               stream>>>(x, y, n);
  } else {
    static const unsigned max_blocks = resident_blocks(map_scalar, threads, 0);
    map_scalar<<<kb::grid_for(n, threads, max_blocks), threads, 0, stream>>>(x, y, n);
  }
  return static_cast<int>(cudaGetLastError());
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: elementwise, persistent grid of resident 256-thread blocks, 4 x float4 loads "
         "in flight per thread, streaming stores";
}
