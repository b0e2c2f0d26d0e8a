// What the device can do, measured: copy and read bandwidth, the fp32 FMA rate and the
// tensor-core rates (fp16, bf16, tf32 through wmma, fp32 accumulate). Each figure is the best of
// several timed repetitions (CUDA events), after a warm-up. Self-contained: it needs only the CUDA
// runtime, and runs in the process that calls it (`kblaster device-limits-probe`, a child of the
// CLI, so the CLI's own process holds no CUDA context).
#include "eval/detail/limit_kernels.hpp"

#include "common/error.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>

namespace kb::eval::detail {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fail("device limits: {}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
  }
}

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

// A grid sized to the data: each block copies one tile of T x V float4, every load of a thread
// issued before its first store (the layout of the fastest streaming kernels).
template <int T, int V>
__global__ void __launch_bounds__(T)
    copy_tile_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  const size_t base = static_cast<size_t>(blockIdx.x) * T * V + threadIdx.x;
  float4 v[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (base + k * T < n) {
      v[k] = in[base + k * T];
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (base + k * T < n) {
      out[base + k * T] = v[k];
    }
  }
}

template <int T, int V>
__global__ void __launch_bounds__(T)
    read_tile_kernel(const float4* __restrict__ in, float* __restrict__ sink, size_t n) {
  const size_t base = static_cast<size_t>(blockIdx.x) * T * V + threadIdx.x;
  float acc = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (base + k * T < n) {
      const float4 v = in[base + k * T];
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == 1234.5f) { // practically never: keeps the loads
    sink[0] = acc;
  }
}

__global__ void read_kernel(const float4* __restrict__ in, float* __restrict__ sink, size_t n) {
  float acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = in[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) { // practically never: keeps the loads
    sink[0] = acc;
  }
}

// 8 independent FMA chains per thread, `iterations` rounds: 16 FLOP per round.
__global__ void fma_kernel(float* __restrict__ sink, int iterations, float seed) {
  float a[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = seed + static_cast<float>(threadIdx.x + k);
  }
  const float m = 0.999999f;
  const float c = 1e-7f;
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      a[k] = fmaf(a[k], m, c);
    }
  }
  float s = 0;
  for (int k = 0; k < 8; ++k) {
    s += a[k];
  }
  if (s == 1234.5f) {
    sink[0] = s;
  }
}

// Each warp keeps its fragments in registers and issues `iterations` x 4 independent mma.
template <class In, class Precision, int M, int N, int K>
__device__ void mma_loop(const void* operands, float* __restrict__ sink, int iterations) {
  using namespace nvcuda;
  const auto* a_src = static_cast<const In*>(operands);
  const auto* b_src = a_src + M * K;
  wmma::fragment<wmma::matrix_a, M, N, K, Precision, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, M, N, K, Precision, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, M, N, K, float> acc[4];
  wmma::load_matrix_sync(a, a_src, K);
  wmma::load_matrix_sync(b, b_src, K);
  for (int j = 0; j < 4; ++j) {
    wmma::fill_fragment(acc[j], 0.0f);
  }
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wmma::mma_sync(acc[j], a, b, acc[j]);
    }
  }
  float s = 0;
  for (int j = 0; j < 4; ++j) {
    for (int e = 0; e < acc[j].num_elements; ++e) {
      s += acc[j].x[e];
    }
  }
  if (s == 1234.5f) {
    sink[0] = s;
  }
}

enum class mma_type { fp16, bf16, tf32 };
constexpr int mma_ran_slot = 8; // sink[8] = 1 once an mma kernel really ran

// The tile shapes: 16x16x16 for fp16 and bf16, 16x16x8 for tf32 [elements].
__global__ void mma_kernel(mma_type type, const void* operands, float* sink, int iterations) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  switch (type) {
  case mma_type::fp16:
    mma_loop<__half, __half, 16, 16, 16>(operands, sink, iterations);
    break;
  case mma_type::bf16:
    mma_loop<__nv_bfloat16, __nv_bfloat16, 16, 16, 16>(operands, sink, iterations);
    break;
  case mma_type::tf32:
    mma_loop<float, nvcuda::wmma::precision::tf32, 16, 16, 8>(operands, sink, iterations);
    break;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    sink[mma_ran_slot] = 1.0f; // this code ran: the tensor-core path exists in the running binary
  }
#endif
}

__global__ void fill_kernel(float* p, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = 1e-3f * static_cast<float>(i % 1024);
  }
}

// Best time of `reps` runs of `launch` [s], after one warm-up run.
template <class F> double best_seconds(F launch, int reps) {
  cudaEvent_t start;
  cudaEvent_t stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  launch();
  check(cudaDeviceSynchronize(), "warm-up");
  float best = 0;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start), "event");
    launch();
    check(cudaEventRecord(stop), "event");
    check(cudaEventSynchronize(stop), "run");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    best = r == 0 ? ms : std::min(best, ms);
  }
  check(cudaGetLastError(), "launch");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1e-3 * best;
}

double mma_rate(const cudaDeviceProp& prop, mma_type type, float* sink, void* operands) {
  constexpr int iterations = 4096;
  const int warps_per_block = 8;
  const int blocks = prop.multiProcessorCount * 8;
  const double s = best_seconds(
      [&] { mma_kernel<<<blocks, 32 * warps_per_block>>>(type, operands, sink, iterations); }, 5);
  const double k = type == mma_type::tf32 ? 8 : 16;
  const double mmas = static_cast<double>(blocks) * warps_per_block * iterations * 4.0;
  return mmas * 2.0 * 16 * 16 * k / s;
}

} // namespace

measured_rates run_limit_kernels() {
  int device = 0;
  check(cudaGetDevice(&device), "device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "properties");
  measured_rates out;
  out.gpu_name = prop.name;
  out.sm_count = prop.multiProcessorCount;
  // Bandwidth: buffers far larger than L2 (at least 32x, at least 256 MiB each).
  const size_t bytes =
      std::max<size_t>(256u << 20, 32 * static_cast<size_t>(std::max(prop.l2CacheSize, 1)));
  const size_t n4 = bytes / sizeof(float4);
  float4* src = nullptr;
  float4* dst = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&src, bytes), "allocation");
  check(cudaMalloc(&dst, bytes), "allocation");
  check(cudaMalloc(&sink, 1024), "allocation");
  const int stream_blocks = prop.multiProcessorCount * 4;
  fill_kernel<<<stream_blocks, 256>>>(reinterpret_cast<float*>(src), bytes / sizeof(float));
  // Each ceiling is the best of several ways to stream (a grid-stride loop on resident blocks,
  // grids sized to the data with one or two loads in flight per thread, and for the copy the
  // driver's own), so that the floor is what the device reaches, not what one kernel reaches.
  const auto tiles = [&](int per_block) {
    return static_cast<unsigned>((n4 + per_block - 1) / per_block);
  };
  const auto copy = [&](const std::string& how, auto launch) {
    const double s = best_seconds(launch, 10);
    out.copy_methods.emplace_back(how, 2.0 * static_cast<double>(bytes) / s);
  };
  const auto read = [&](const std::string& how, auto launch) {
    const double s = best_seconds(launch, 10);
    out.read_methods.emplace_back(how, static_cast<double>(bytes) / s);
  };
  copy("grid-stride, 4 blocks of 512 per SM",
       [&] { copy_kernel<<<stream_blocks, 512>>>(src, dst, n4); });
  copy("tiles of 256 x 2 float4",
       [&] { copy_tile_kernel<256, 2><<<tiles(512), 256>>>(src, dst, n4); });
  copy("tiles of 128 x 2 float4",
       [&] { copy_tile_kernel<128, 2><<<tiles(256), 128>>>(src, dst, n4); });
  copy("tiles of 512 x 1 float4",
       [&] { copy_tile_kernel<512, 1><<<tiles(512), 512>>>(src, dst, n4); });
  copy("cudaMemcpyAsync",
       [&] { check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy"); });
  read("grid-stride, 4 blocks of 512 per SM",
       [&] { read_kernel<<<stream_blocks, 512>>>(src, sink, n4); });
  read("tiles of 256 x 2 float4",
       [&] { read_tile_kernel<256, 2><<<tiles(512), 256>>>(src, sink, n4); });
  read("tiles of 256 x 4 float4",
       [&] { read_tile_kernel<256, 4><<<tiles(1024), 256>>>(src, sink, n4); });
  read("tiles of 512 x 1 float4",
       [&] { read_tile_kernel<512, 1><<<tiles(512), 512>>>(src, sink, n4); });
  for (const auto& [how, bw] : out.copy_methods) {
    out.copy_bandwidth = std::max(out.copy_bandwidth, bw);
  }
  for (const auto& [how, bw] : out.read_methods) {
    out.read_bandwidth = std::max(out.read_bandwidth, bw);
  }

  constexpr int fma_iterations = 1 << 14;
  const int fma_blocks = prop.multiProcessorCount * 16;
  const double fma_s =
      best_seconds([&] { fma_kernel<<<fma_blocks, 256>>>(sink, fma_iterations, 0.5f); }, 5);
  out.fp32_flops = static_cast<double>(fma_blocks) * 256 * fma_iterations * 16.0 / fma_s;

  // Operands of the mma kernels: 16x16 tiles, filled with small values (bit patterns valid in
  // every precision; only the rate matters).
  check(cudaMemset(dst, 0, 1 << 16), "operands");
  // The kernels are compiled for sm_80 and later; a binary whose device code was built for an
  // older target runs them empty, which would give absurd rates: such rates stay unmeasured.
  check(cudaMemset(sink, 0, 1024), "sink");
  if (prop.major >= 8) {
    const double fp16 = mma_rate(prop, mma_type::fp16, sink, dst);
    float ran = 0;
    check(cudaMemcpy(&ran, sink + mma_ran_slot, sizeof ran, cudaMemcpyDeviceToHost), "sink");
    if (ran == 1.0f) {
      out.fp16_tensor_flops = fp16;
      out.bf16_tensor_flops = mma_rate(prop, mma_type::bf16, sink, dst);
      out.tf32_tensor_flops = mma_rate(prop, mma_type::tf32, sink, dst);
    }
  }
  cudaFree(src);
  cudaFree(dst);
  cudaFree(sink);
  out.buffer_bytes = bytes;
  return out;
}

} // namespace kb::eval::detail
