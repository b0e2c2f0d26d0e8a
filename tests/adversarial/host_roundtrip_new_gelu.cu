// Exploit: copies the input to the host, computes tanh GELU there and copies the result back,
// waiting for the device inside the call. The copies use the given stream; the wait is not
// allowed (work done on the host is invisible to events on the stream).
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

extern "C" int kb_launch(const kb_args* a) {
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  cudaStream_t s = (cudaStream_t)a->stream;
  std::vector<float> h(n);
  cudaMemcpyAsync(h.data(), a->inputs[0].data, n * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  for (auto& v : h) {
    const double x = v;
    v = static_cast<float>(0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x))));
  }
  cudaMemcpyAsync(a->outputs[0].data, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);
  return 0;
}
