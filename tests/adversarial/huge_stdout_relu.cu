// Correct relu that writes 3 GiB to stdout in its first call. The tool must not crash or keep it:
// the runner's file-size limit ends the process (SIGXFSZ) and the candidate is rejected.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
__global__ void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
static int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

extern "C" int kb_launch(const kb_args* a) {
  static bool done = false;
  if (!done) {
    done = true;
    std::vector<char> block(1 << 20, '\xFF');
    for (int i = 0; i < 3072; ++i) fwrite(block.data(), 1, block.size(), stdout);
    fflush(stdout);
  }
  relu<<<1024, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, numel(a->inputs[0]));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
