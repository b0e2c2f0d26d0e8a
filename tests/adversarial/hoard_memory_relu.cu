// Broken ABI, and a way to switch off the judge's checks: when it loads, the library allocates all
// but 16 GiB of the device's memory and keeps it. The judge allocates its timing buffers after
// the runners have loaded, so it finds too little room to time the official shape, or to keep the
// fresh inputs its reuse check needs (where reuse goes unchecked, a cache of answers would pass).
// The kernel itself is an honest ReLU. The judge knows the free memory before any runner started
// and counts its own allocations, so what the runners hold beyond their contexts shows as an
// excess: `abi.allocation`.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace {

constexpr size_t keep_free = size_t{16} << 30;
constexpr size_t chunk = size_t{1} << 30;
constexpr int max_chunks = 1024;
void* hoard[max_chunks];

__attribute__((constructor)) void take_the_device() {
  size_t free_bytes = 0;
  size_t total = 0;
  for (int i = 0; i < max_chunks; ++i) {
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess || free_bytes < keep_free + chunk) {
      break;
    }
    if (cudaMalloc(&hoard[i], chunk) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
  }
}

__global__ void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = x[i] > 0.f ? x[i] : 0.f;
  }
}

int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    n *= t.shape[i];
  }
  return n;
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  const int64_t n = numel(a->inputs[0]);
  if (n == 0) {
    return 0;
  }
  relu<<<1024, 256, 0, static_cast<cudaStream_t>(a->stream)>>>(
      static_cast<const float*>(a->inputs[0].data), static_cast<float*>(a->outputs[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
