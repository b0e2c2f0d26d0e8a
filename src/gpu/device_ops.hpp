// Harness kernels (input generation, poison, digests, error metrics, L2 flush, the blocking
// kernel) behind host functions, and their CPU twins for host buffers. Both sides run the same
// element functions from include/kblaster/device/core.cuh.
#pragma once

#include "common/error.hpp"

#include <kblaster/device/core.cuh>

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include <cstdint>

namespace kb::gpu {

// A CUDA error raised in the harness's own calls. Errors that corrupt the context are often a
// candidate's asynchronous fault surfacing late; the parent attributes those to the candidate
// that ran last.
class cuda_error : public error {
public:
  cuda_error(cudaError_t code, const std::string& what)
      : error(fmt::format("CUDA error in the harness ({}): {} ({})", what, cudaGetErrorName(code),
                          cudaGetErrorString(code))),
        m_code(code) {}
  bool sticky() const {
    switch (m_code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
    }
  }

private:
  cudaError_t m_code;
};

inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    throw cuda_error(e, what);
  }
}

// A contiguous view of `data` with this dtype and shape.
inline kb_tensor contiguous_view(void* data, kb_dtype dtype, const std::vector<int64_t>& shape) {
  kb_tensor v{};
  v.data = data;
  v.dtype = dtype;
  v.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.shape[i] = shape[static_cast<size_t>(i)];
    v.strides[i] = stride;
    stride *= shape[static_cast<size_t>(i)];
  }
  return v;
}

// The arguments of one call; the vectors must outlive it.
inline kb_args make_args(const std::vector<kb_tensor>& inputs,
                         const std::vector<kb_tensor>& outputs, const std::vector<double>& scalars,
                         void* workspace, uint64_t workspace_bytes, cudaStream_t stream) {
  kb_args a{};
  a.abi_version = KB_ABI_VERSION;
  a.num_inputs = static_cast<int32_t>(inputs.size());
  a.inputs = inputs.data();
  a.num_outputs = static_cast<int32_t>(outputs.size());
  a.outputs = outputs.data();
  a.num_scalars = static_cast<int32_t>(scalars.size());
  a.scalars = scalars.data();
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  a.stream = reinterpret_cast<CUstream_st*>(stream);
  return a;
}

// The poison pattern of one evaluation (see core.cuh), drawn from `rng`: for each floating-point
// dtype a quiet NaN of random sign and random payload, neither zero nor all ones (so never a NaN
// the hardware or a conversion makes); for each integer dtype a random negative value below
// -2^62 (int64) or -2^30 (int32), far from indices and counts.
poison_pattern draw_poison(std::mt19937_64& rng);

// GPU side: asynchronous on `stream` unless the function returns a value.
void gpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed,
                     cudaStream_t stream);
void gpu_fill_poison(void* data, kb_dtype dtype, int64_t n, const poison_pattern& poison,
                     cudaStream_t stream);
void gpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value, cudaStream_t stream);
// dst[i] = src[i % src_n], converted.
void gpu_copy_cyclic(const void* src, kb_dtype src_dtype, int64_t src_n, void* dst,
                     kb_dtype dst_dtype, int64_t dst_n, cudaStream_t stream);
// Order-independent digest of the bytes (synchronises the stream).
uint64_t gpu_digest(const void* data, uint64_t bytes, cudaStream_t stream);
// The judge's secret for keyed digests: drawn per job from its generator, never sent to a runner.
struct digest_key {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};
// Adds to out[0] the keyed digest of the `bytes` bytes at 16-byte aligned `data` (elements of
// `dtype`), and to out[1] the number of its elements holding `poison`. Asynchronous on `stream`;
// `out` is device memory the caller zeroed. Any changed or moved word changes the digest with
// high probability, and without the key nobody can compute it.
void gpu_keyed_check(const void* data, uint64_t bytes, kb_dtype dtype, const digest_key& key,
                     const poison_pattern& poison, unsigned long long* out, cudaStream_t stream);
struct moments {
  double sum;
  double sum_sq;
};
moments gpu_moments(const double* ref, int64_t n, cudaStream_t stream);
// Error metrics of y against the float64 reference; elements holding `poison` count as unwritten
// (synchronises the stream).
error_metrics gpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n,
                          const tolerance_spec& t, const poison_pattern& poison,
                          cudaStream_t stream);

// Launches a kernel that spins until *flag becomes non-zero (host-mapped memory) or `timeout_ns`
// passes; on timeout it sets *timed_out. Work queued behind it starts together, so host launch
// overhead stays out of event intervals.
void gpu_block_stream(volatile int* flag, int* timed_out, uint64_t timeout_ns, cudaStream_t stream);

// CPU side, host buffers.
void cpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed);
void cpu_fill_poison(void* data, kb_dtype dtype, int64_t n, const poison_pattern& poison);
void cpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value);
void cpu_copy_cyclic(const void* src, kb_dtype src_dtype, int64_t src_n, void* dst,
                     kb_dtype dst_dtype, int64_t dst_n);
uint64_t cpu_digest(const void* data, uint64_t bytes);
moments cpu_moments(const double* ref, int64_t n);
error_metrics cpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n,
                          const tolerance_spec& t, const poison_pattern& poison);

} // namespace kb::gpu
