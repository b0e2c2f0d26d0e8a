// Broken: a block-per-row softmax whose shared-memory tree reductions lack the barriers between
// steps, so threads read partial sums before they are written.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void racy_softmax(const float* x, float* y, int64_t cols) {
  __shared__ float buf[256];
  const float* row = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  buf[threadIdx.x] = m;
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + step]);
  }
  const float mx = buf[0];
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - mx);
  buf[threadIdx.x] = s;
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) buf[threadIdx.x] += buf[threadIdx.x + step];
  }
  const float inv = 1.f / buf[0];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = expf(row[c] - mx) * inv;
}

extern "C" int kb_launch(const kb_args* a) {
  const kb_tensor& x = a->inputs[0];
  racy_softmax<<<(unsigned)x.shape[0], 256, 0, (cudaStream_t)a->stream>>>((const float*)x.data, (float*)a->outputs[0].data, x.shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
