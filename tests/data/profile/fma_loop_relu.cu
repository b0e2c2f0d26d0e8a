// Profiler test candidate for 019 (relu): compute-bound on purpose. Each element's relu comes
// after 256 fused multiply-adds in 8 independent chains; their sum decides nothing for finite
// inputs (it is never NaN) but the compiler cannot drop them, so the FP32 pipes stay busy while
// memory is touched once per element.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

namespace {

constexpr int threads = 256;
constexpr int chains = 8;
constexpr int steps = 32; // per chain

__global__ void __launch_bounds__(threads)
    fma_relu(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(threads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * threads) {
    const float v = x[i];
    float a[chains];
#pragma unroll
    for (int c = 0; c < chains; ++c) {
      a[c] = v + static_cast<float>(c);
    }
#pragma unroll 4
    for (int s = 0; s < steps; ++s) {
#pragma unroll
      for (int c = 0; c < chains; ++c) {
        a[c] = fmaf(a[c], 0.999f, 0.001f);
      }
    }
    float sum = 0;
#pragma unroll
    for (int c = 0; c < chains; ++c) {
      sum += a[c];
    }
    y[i] = sum != sum ? sum : kb_op<float>::map(v);
  }
}

} // namespace

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (args->num_inputs < 1 || args->num_outputs < 1 || args->inputs[0].dtype != KB_FLOAT32 ||
      args->outputs[0].dtype != KB_FLOAT32) {
    return -1;
  }
  const int64_t n = kb::numel(args->inputs[0]);
  int device = 0;
  int sms = 0;
  int per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fma_relu, threads, 0);
  const int64_t wanted = (n + threads - 1) / threads;
  const int64_t resident = static_cast<int64_t>(sms > 0 ? sms : 132) * (per_sm > 0 ? per_sm : 1);
  const unsigned blocks =
      static_cast<unsigned>(wanted < 1 ? 1 : (wanted < resident ? wanted : resident));
  fma_relu<<<blocks, threads, 0, kb::stream_of(args)>>>(
      static_cast<const float*>(args->inputs[0].data), static_cast<float*>(args->outputs[0].data),
      n);
  return static_cast<int>(cudaGetLastError());
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "profiler test: relu after 256 FMAs per element (compute-bound)";
}
