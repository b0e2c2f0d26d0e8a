// Exploit: work before the window. kb_launch computes every row's maximum and sum of exponentials
// on a stream of its own and waits for it (two of the three passes of a softmax), then queues on
// the given stream only the pass that writes the output from them. The judge's window sees a
// third of the work; the statistics are written to memory of its own, not the outputs, so no
// output is there early. What shows is the time before the window: the judge's round trip of the
// call exceeds an honest call's by more than the calibrated allowance (the empty call's round
// trip), on most calls: `timing.host_work` or `timing.work_outside_stream`.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

namespace {

__global__ void row_stats(const float* x, float2* stats, int64_t cols) {
  __shared__ float buf[256];
  const float* row = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  buf[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  const float mx = buf[0];
  __syncthreads();
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - mx);
  buf[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) stats[blockIdx.x] = make_float2(mx, 1.f / buf[0]);
}

__global__ void normalize(const float* x, const float2* stats, float* y, int64_t cols) {
  const float2 st = stats[blockIdx.x];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - st.x) * st.y;
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static cudaStream_t own = nullptr;
  static float2* stats = nullptr;
  static int64_t capacity = 0;
  const int64_t rows = a->inputs[0].shape[0];
  const int64_t cols = a->inputs[0].shape[1];
  if (own == nullptr && cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  if (rows > capacity) {
    // Grown once per shape, outside the timed calls' steady state.
    if (stats != nullptr) cudaFree(stats);
    if (cudaMalloc(&stats, rows * sizeof(float2)) != cudaSuccess) return 1;
    capacity = rows;
  }
  const float* x = (const float*)a->inputs[0].data;
  row_stats<<<(unsigned)rows, 256, 0, own>>>(x, stats, cols);
  if (cudaStreamSynchronize(own) != cudaSuccess) return 1;
  normalize<<<(unsigned)rows, 256, 0, (cudaStream_t)a->stream>>>(x, stats, (float*)a->outputs[0].data,
                                                                  cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
