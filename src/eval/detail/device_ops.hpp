// Harness kernels (input generation, poison, digests, error metrics, L2 flush, the blocking
// kernel) behind host functions, and their CPU twins for host buffers. Both sides run the same
// element functions from include/kblaster/device/core.cuh.
#pragma once

#include <kblaster/device/core.cuh>

#include <cstdint>

namespace kb::eval::detail {

// GPU side: asynchronous on `stream` unless the function returns a value.
void gpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed, cudaStream_t stream);
void gpu_fill_poison(void* data, kb_dtype dtype, int64_t n, cudaStream_t stream);
void gpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value, cudaStream_t stream);
// dst[i] = src[i % src_n], converted.
void gpu_copy_cyclic(const void* src, kb_dtype src_dtype, int64_t src_n, void* dst, kb_dtype dst_dtype, int64_t dst_n,
                     cudaStream_t stream);
// Order-independent digest of the bytes (synchronises the stream).
uint64_t gpu_digest(const void* data, uint64_t bytes, cudaStream_t stream);
struct moments {
  double sum;
  double sum_sq;
};
moments gpu_moments(const double* ref, int64_t n, cudaStream_t stream);
// Error metrics of y against the float64 reference (synchronises the stream).
error_metrics gpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n, const tolerance_spec& t,
                          cudaStream_t stream);

// Launches a kernel that spins until *flag becomes non-zero (host-mapped memory) or `timeout_ns`
// passes; on timeout it sets *timed_out. Work queued behind it starts together, so host launch
// overhead stays out of event intervals.
void gpu_block_stream(volatile int* flag, int* timed_out, uint64_t timeout_ns, cudaStream_t stream);

// CPU side, host buffers.
void cpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed);
void cpu_fill_poison(void* data, kb_dtype dtype, int64_t n);
void cpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value);
void cpu_copy_cyclic(const void* src, kb_dtype src_dtype, int64_t src_n, void* dst, kb_dtype dst_dtype, int64_t dst_n);
uint64_t cpu_digest(const void* data, uint64_t bytes);
moments cpu_moments(const double* ref, int64_t n);
error_metrics cpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n, const tolerance_spec& t);

} // namespace kb::eval::detail
