// The harness's input generator as a small C-ABI shared library (libkblaster_generator.so), for
// processes outside the harness that must draw exactly the inputs the judge draws:
// scripts/pytorch_oracle.py calls it through ctypes on tensors it allocated. The values come
// from include/kblaster/device/core.cuh, the same code the worker and the CPU checks run, so a
// (distribution, seed, index) gives the same bits everywhere.
#include "kblaster/device/core.cuh"

#define KB_GEN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

__global__ void fill_kernel(void* data, kb_dtype dtype, int64_t n, kb::distribution d, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kb::write_from_double(data, dtype, i, kb::sample(d, seed, static_cast<uint64_t>(i)));
  }
}

bool valid(int dtype, int kind) {
  return dtype >= KB_FLOAT32 && dtype <= KB_INT32 && kind >= kb::KB_DIST_UNIFORM && kind <= kb::KB_DIST_RANDINT;
}

} // namespace

// The version of this interface; changes when a signature or the generated values change.
KB_GEN_EXPORT int kb_gen_abi_version(void) { return 1; }

// The seed of input tensor `index` (0-based, in the contract's order) of input set `seed`.
KB_GEN_EXPORT uint64_t kb_gen_tensor_seed(uint64_t seed, int index) { return kb::tensor_seed(seed, index); }

// Fills n elements of host memory of kb_dtype `dtype` with distribution (kind, a, b) as
// kb_dist_kind documents it. Returns 0, or -1 on bad arguments.
KB_GEN_EXPORT int kb_gen_fill_host(void* data, int dtype, int64_t n, int kind, double a, double b, uint64_t seed) {
  if (data == nullptr || n < 0 || !valid(dtype, kind)) {
    return -1;
  }
  const kb::distribution d{kind, a, b};
  for (int64_t i = 0; i < n; ++i) {
    kb::write_from_double(data, static_cast<kb_dtype>(dtype), i, kb::sample(d, seed, static_cast<uint64_t>(i)));
  }
  return 0;
}

// The same into device memory on `stream` (a cudaStream_t, 0 for the default stream); returns 0
// or the cudaError_t of the launch (the caller synchronises).
KB_GEN_EXPORT int kb_gen_fill_device(void* data, int dtype, int64_t n, int kind, double a, double b, uint64_t seed,
                                     void* stream) {
  if (data == nullptr || n < 0 || !valid(dtype, kind)) {
    return -1;
  }
  if (n == 0) {
    return 0;
  }
  const int64_t blocks = (n + 255) / 256;
  fill_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), 256, 0,
                static_cast<cudaStream_t>(stream)>>>(data, static_cast<kb_dtype>(dtype), n, kb::distribution{kind, a, b},
                                                     seed);
  return static_cast<int>(cudaGetLastError());
}
