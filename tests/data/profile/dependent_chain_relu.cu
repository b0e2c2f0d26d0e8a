// Profiler test candidate for 019 (relu): latency-bound on purpose. Every thread walks its
// elements as one dependent chain (the next address waits for the value just loaded, through a
// NaN test that is never true for finite inputs), and a large dynamic shared-memory request keeps
// one block of four warps per SM. Two blocks per SM in all make two full waves, so the grid is
// not small; with four warps and one load in flight each, neither the SM nor memory gets busy.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

namespace {

constexpr int threads = 128;
// Dynamic shared memory the kernel never touches: asking for more than half an SM's holds one
// block per SM.
constexpr int shared_bytes = 160 * 1024;

__global__ void __launch_bounds__(threads)
    chain_relu(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * threads;
  int64_t i = blockIdx.x * static_cast<int64_t>(threads) + threadIdx.x;
  while (i < n) {
    const float v = x[i];
    y[i] = kb_op<float>::map(v);
    i += stride + (v != v ? 1 : 0);
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
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaFuncSetAttribute(chain_relu, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes);
  const unsigned blocks = static_cast<unsigned>(2 * (sms > 0 ? sms : 132));
  chain_relu<<<blocks, threads, shared_bytes, kb::stream_of(args)>>>(
      static_cast<const float*>(args->inputs[0].data), static_cast<float*>(args->outputs[0].data),
      n);
  return static_cast<int>(cudaGetLastError());
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "profiler test: relu as one dependent chain per thread, one block per SM (latency-bound)";
}
