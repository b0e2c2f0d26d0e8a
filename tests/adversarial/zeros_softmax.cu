// Cheat: softmax outputs at this size are about 2.5e-6, under an absolute 1e-4, so "return zeros"
// passes a naive allclose (KernelBench issue 165). The scale-aware bound must reject it.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

extern "C" int kb_launch(const kb_args* a) {
  const kb_tensor& y = a->outputs[0];
  size_t n = 1;
  for (int i = 0; i < y.ndim; ++i) n *= y.shape[i];
  return cudaMemsetAsync(y.data, 0, n * sizeof(float), (cudaStream_t)a->stream) == cudaSuccess ? 0 : 1;
}
