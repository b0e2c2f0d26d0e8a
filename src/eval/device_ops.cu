#include "eval/detail/device_ops.hpp"

#include "common/error.hpp"

#include <kblaster/device/families/common.cuh>

#include <vector>

namespace kb::eval::detail {

namespace {

void check(cudaError_t e, const char* what) { cuda_check(e, what); }

constexpr unsigned block = 256;

__global__ void fill_random_kernel(void* data, kb_dtype dtype, int64_t n, distribution d, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    write_from_double(data, dtype, i, sample(d, seed, static_cast<uint64_t>(i)));
  }
}

__device__ void write_poison(void* data, kb_dtype dtype, int64_t i) {
  switch (dtype) {
  case KB_FLOAT32: static_cast<uint32_t*>(data)[i] = poison_f32; break;
  case KB_FLOAT64: static_cast<uint64_t*>(data)[i] = poison_f64; break;
  case KB_FLOAT16: static_cast<uint16_t*>(data)[i] = poison_f16; break;
  case KB_BFLOAT16: static_cast<uint16_t*>(data)[i] = poison_bf16; break;
  case KB_INT64: static_cast<uint64_t*>(data)[i] = poison_i64; break;
  case KB_INT32: static_cast<uint32_t*>(data)[i] = 0x5A5A5A5Au; break;
  }
}

__global__ void fill_poison_kernel(void* data, kb_dtype dtype, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    write_poison(data, dtype, i);
  }
}

__global__ void fill_value_kernel(void* data, kb_dtype dtype, int64_t n, double v) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    write_from_double(data, dtype, i, v);
  }
}

__global__ void copy_cyclic_kernel(const void* src, kb_dtype sd, int64_t sn, void* dst, kb_dtype dd, int64_t dn) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < dn; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    bool poison = false;
    write_from_double(dst, dd, i, read_as_double(src, sd, i % sn, &poison));
  }
}

__global__ void digest_kernel(const unsigned char* data, uint64_t bytes, unsigned long long* out) {
  const uint64_t words = bytes / 8;
  uint64_t acc = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < words; i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t w;
    memcpy(&w, data + 8 * i, 8);
    acc += hash_word(w, i);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8 != 0) {
    uint64_t w = 0;
    memcpy(&w, data + 8 * words, bytes % 8);
    acc += hash_word(w, words);
  }
  acc = block_reduce(acc, [](uint64_t a, uint64_t b) { return a + b; });
  if (threadIdx.x == 0) {
    atomicAdd(out, static_cast<unsigned long long>(acc));
  }
}

struct moments_pair {
  double sum;
  double sum_sq;
};

__global__ void moments_kernel(const double* ref, int64_t n, moments_pair* out) {
  moments_pair acc{0, 0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = ref[i];
    if (is_finite(v)) {
      acc.sum += v;
      acc.sum_sq += v * v;
    }
  }
  acc = block_reduce(acc, [](moments_pair a, moments_pair b) { return moments_pair{a.sum + b.sum, a.sum_sq + b.sum_sq}; });
  if (threadIdx.x == 0) {
    out[blockIdx.x] = acc;
  }
}


__global__ void compare_kernel(const void* y, kb_dtype dtype, const double* ref, int64_t n, tolerance_spec t, error_metrics* out) {
  __shared__ unsigned long long histogram[error_histogram_bins];
  __shared__ error_metrics partial[block / 32];
  for (int i = threadIdx.x; i < error_histogram_bins; i += blockDim.x) {
    histogram[i] = 0;
  }
  __syncthreads();
  error_metrics m;
  reset(m);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    bool poison = false;
    const double v = read_as_double(y, dtype, i, &poison);
    const int bin = accumulate(m, v, ref[i], poison, t, static_cast<uint64_t>(i));
    if (bin >= 0) {
      atomicAdd(&histogram[bin], 1ull);
    }
  }
  // Per-warp merges through shared memory (the struct is too large for shuffles), then one thread.
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int l = 0; l < 32; ++l) {
    if (lane == l) {
      if (l == 0) {
        partial[warp] = m;
      } else {
        merge(partial[warp], m);
      }
    }
    __syncwarp();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    error_metrics total = partial[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      merge(total, partial[w]);
    }
    for (int b = 0; b < error_histogram_bins; ++b) {
      total.histogram[b] = histogram[b];
    }
    out[blockIdx.x] = total;
  }
}

__global__ void block_stream_kernel(volatile int* flag, int* timed_out, uint64_t timeout_ns) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*flag == 0) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

unsigned grid(int64_t n) { return grid_for(n, block, 132u * 8u); }

} // namespace

void gpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed, cudaStream_t stream) {
  fill_random_kernel<<<grid(n), block, 0, stream>>>(data, dtype, n, d, seed);
  check(cudaGetLastError(), "fill_random");
}

void gpu_fill_poison(void* data, kb_dtype dtype, int64_t n, cudaStream_t stream) {
  fill_poison_kernel<<<grid(n), block, 0, stream>>>(data, dtype, n);
  check(cudaGetLastError(), "fill_poison");
}

void gpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value, cudaStream_t stream) {
  fill_value_kernel<<<grid(n), block, 0, stream>>>(data, dtype, n, value);
  check(cudaGetLastError(), "fill_value");
}

void gpu_copy_cyclic(const void* src, kb_dtype sd, int64_t sn, void* dst, kb_dtype dd, int64_t dn, cudaStream_t stream) {
  copy_cyclic_kernel<<<grid(dn), block, 0, stream>>>(src, sd, sn, dst, dd, dn);
  check(cudaGetLastError(), "copy_cyclic");
}

uint64_t gpu_digest(const void* data, uint64_t bytes, cudaStream_t stream) {
  unsigned long long* out = nullptr;
  check(cudaMallocAsync(&out, sizeof *out, stream), "digest alloc");
  check(cudaMemsetAsync(out, 0, sizeof *out, stream), "digest memset");
  digest_kernel<<<grid(static_cast<int64_t>(bytes / 8 + 1)), block, 0, stream>>>(static_cast<const unsigned char*>(data), bytes, out);
  check(cudaGetLastError(), "digest");
  unsigned long long host = 0;
  check(cudaMemcpyAsync(&host, out, sizeof host, cudaMemcpyDeviceToHost, stream), "digest copy");
  check(cudaFreeAsync(out, stream), "digest free");
  check(cudaStreamSynchronize(stream), "digest sync");
  return host;
}

moments gpu_moments(const double* ref, int64_t n, cudaStream_t stream) {
  const unsigned g = grid(n);
  moments_pair* out = nullptr;
  check(cudaMallocAsync(&out, g * sizeof *out, stream), "moments alloc");
  moments_kernel<<<g, block, 0, stream>>>(ref, n, out);
  check(cudaGetLastError(), "moments");
  std::vector<moments_pair> host(g);
  check(cudaMemcpyAsync(host.data(), out, g * sizeof *out, cudaMemcpyDeviceToHost, stream), "moments copy");
  check(cudaFreeAsync(out, stream), "moments free");
  check(cudaStreamSynchronize(stream), "moments sync");
  moments total{0, 0};
  for (const auto& p : host) {
    total.sum += p.sum;
    total.sum_sq += p.sum_sq;
  }
  return total;
}

error_metrics gpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n, const tolerance_spec& t, cudaStream_t stream) {
  const unsigned g = grid(n);
  error_metrics* out = nullptr;
  check(cudaMallocAsync(&out, g * sizeof *out, stream), "compare alloc");
  compare_kernel<<<g, block, 0, stream>>>(y, dtype, ref, n, t, out);
  check(cudaGetLastError(), "compare");
  std::vector<error_metrics> host(g);
  check(cudaMemcpyAsync(host.data(), out, g * sizeof *out, cudaMemcpyDeviceToHost, stream), "compare copy");
  check(cudaFreeAsync(out, stream), "compare free");
  check(cudaStreamSynchronize(stream), "compare sync");
  error_metrics total;
  reset(total);
  for (const auto& m : host) {
    merge(total, m);
  }
  return total;
}

void gpu_block_stream(volatile int* flag, int* timed_out, uint64_t timeout_ns, cudaStream_t stream) {
  block_stream_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  check(cudaGetLastError(), "block_stream");
}

} // namespace kb::eval::detail
