// A plain ReLU with no project header: a grid-stride loop over float4, float32 only. It needs no
// task math, so it runs on any task whose one input and one output are float32 tensors of the
// same size (the native 019 and an imported KernelBench ReLU alike).
#include <kblaster/candidate.h>

#include <cuda_runtime.h>

namespace {

__global__ void relu4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
       i += (long long)gridDim.x * blockDim.x) {
    const float4 v = x[i];
    y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
  }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long long from,
                          long long n) {
  const long long i = from + blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = fmaxf(x[i], 0.f);
  }
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  if (a->num_inputs != 1 || a->num_outputs != 1 || a->inputs[0].dtype != KB_FLOAT32 ||
      a->outputs[0].dtype != KB_FLOAT32) {
    return 1;
  }
  long long n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) {
    n *= a->inputs[0].shape[i];
  }
  const float* x = static_cast<const float*>(a->inputs[0].data);
  float* y = static_cast<float*>(a->outputs[0].data);
  const auto s = reinterpret_cast<cudaStream_t>(a->stream);
  const long long n4 = (reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(y) % 16 == 0)
                           ? n / 4
                           : 0;
  if (n4 > 0) {
    relu4<<<132 * 8, 256, 0, s>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                  n4);
  }
  const long long rest = n - 4 * n4;
  if (rest > 0) {
    relu_tail<<<(unsigned)((rest + 255) / 256), 256, 0, s>>>(x, y, 4 * n4, n);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
