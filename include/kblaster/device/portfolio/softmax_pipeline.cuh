// Softmax over dim 1 of a contiguous [M, N] float32 tensor with the row kept on chip (one read and
// one write of x), and the next row's slice loaded while this one waits for its statistics.
// Include it after the task's math (KB_TASK_MATH); it defines the candidate's entry points.
//
// Design. A cooperative grid (every block resident) of KB_SOFTMAX_BLOCKS_PER_SM blocks per SM is
// cut into g groups of S blocks; a row is cut into S slices, and group j walks rows j, j + g, ...
// with block c of the group owning slice c. S is the smallest slice count whose slice fits one
// buffer (a block's shared memory over its buffers), widened so that g * S fills the resident
// blocks. Each block holds two slice buffers (KB_SOFTMAX_BUFFERS 2; with 1, the next load starts
// after the stores and twice as many rows fit on chip): while it waits for the 16-byte aligned bulk
// copy (cp.async.bulk, the TMA engine, completing on an mbarrier) of its current slice, the copy of
// the next row's slice is already in flight, and it stays in flight through the current row's
// reduction, the exchange of the S partial (max, sum) states (workspace plus an arrival counter per
// row, release/acquire; one warp reads the S states at once) and the streaming stores of the output
// from shared memory. Every block of a row combines the S states in the same fixed order, so each
// gets bitwise the same statistics (deterministic). Rows whose slice does not fit, N % 4 != 0 or
// unaligned tensors run a one-block-per-row two-pass kernel (correct, not fast).
// The workspace, the exchange, that fallback and the entry points are softmax_groups.cuh's.
//
// Knobs (macros, set before the include):
//   KB_SOFTMAX_BLOCKS_PER_SM  resident blocks per SM (default 2)
//   KB_SOFTMAX_THREADS        threads per block (default 512)
//   KB_SOFTMAX_BUFFERS        slice buffers per block, 1 or 2 (default 2)
#pragma once

#include <kblaster/device/async_copy.cuh>
#include <kblaster/device/portfolio/softmax_groups.cuh>

#include <algorithm>

#ifndef KB_SOFTMAX_BLOCKS_PER_SM
#define KB_SOFTMAX_BLOCKS_PER_SM 2
#endif
#ifndef KB_SOFTMAX_THREADS
#define KB_SOFTMAX_THREADS 512
#endif
#ifndef KB_SOFTMAX_BUFFERS
#define KB_SOFTMAX_BUFFERS 2
#endif

namespace {

using kb::softmax_groups::max_slices;
using kb::softmax_groups::plan;
using kb::softmax_groups::state;
using kb::softmax_groups::stats;
using op = kb::softmax_groups::op;

constexpr int threads = KB_SOFTMAX_THREADS;
constexpr int blocks_per_sm = KB_SOFTMAX_BLOCKS_PER_SM;
constexpr int buffers = KB_SOFTMAX_BUFFERS;
static_assert(buffers == 1 || buffers == 2, "one slice buffer, or two (the next row's load ahead)");

using kb::async::bulk_load;
using kb::async::wait_parity;

__global__ void __launch_bounds__(threads, blocks_per_sm)
    softmax_pipeline(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                     int slices, int64_t chunk, state* __restrict__ partial,
                     unsigned* __restrict__ arrived, kb::scalars p) {
  extern __shared__ float4 buf4[]; // `buffers` buffers of `chunk` floats
  __shared__ alignas(8) uint64_t full[2];
  __shared__ stats row_stats;
  const int c = static_cast<int>(blockIdx.x % slices);
  const int64_t first = blockIdx.x / slices;
  const int64_t step = gridDim.x / slices;
  const int64_t lo = c * chunk;
  const int64_t cnt = n - lo < chunk ? (n - lo > 0 ? n - lo : 0) : chunk;
  const uint32_t bytes = static_cast<uint32_t>(cnt * sizeof(float));
  float* const stage = reinterpret_cast<float*>(buf4);
  const auto buf = [&](int b) { return stage + b * chunk; };
  if (threadIdx.x == 0) {
    kb::async::barrier_init(&full[0]);
    kb::async::barrier_init(&full[1]);
    kb::async::barrier_init_fence();
    if (first < rows) {
      bulk_load(buf(0), x + first * n + lo, bytes, &full[0]);
    }
  }
  __syncthreads();
  const int64_t n4 = cnt / 4;
  int k = 0;
  for (int64_t row = first; row < rows; row += step, ++k) {
    const int b = k % buffers;
    // The other buffer was last read by the stores of the previous row, which every thread
    // finished before the barrier that ended it.
    if (buffers == 2 && threadIdx.x == 0 && row + step < rows) {
      bulk_load(buf(b ^ 1), x + (row + step) * n + lo, bytes, &full[b ^ 1]);
    }
    wait_parity(&full[b], static_cast<uint32_t>((k / buffers) & 1));
    const float4* s4 = reinterpret_cast<const float4*>(buf(b));
    state s[4] = {op::init(), op::init(), op::init(), op::init()};
    for (int64_t i = threadIdx.x; i < n4; i += threads) {
      const float4 v = s4[i];
      s[0] = op::accumulate(s[0], v.x);
      s[1] = op::accumulate(s[1], v.y);
      s[2] = op::accumulate(s[2], v.z);
      s[3] = op::accumulate(s[3], v.w);
    }
    state t = op::combine(op::combine(s[0], s[1]), op::combine(s[2], s[3]));
    t = kb::block_reduce(t, [](const state& a, const state& b2) { return op::combine(a, b2); });
    if (threadIdx.x < 32) {
      kb::softmax_groups::exchange(t, row, c, slices, n, partial, arrived, p, &row_stats);
    }
    __syncthreads();
    const stats st = row_stats;
    float4* y4 = reinterpret_cast<float4*>(y + row * n + lo);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n4; i += threads) {
      const float4 v = s4[i];
      __stcs(y4 + i, make_float4(op::apply(v.x, st, 1.0f, 0.0f), op::apply(v.y, st, 1.0f, 0.0f),
                                 op::apply(v.z, st, 1.0f, 0.0f), op::apply(v.w, st, 1.0f, 0.0f)));
    }
    __syncthreads(); // buffer b is free and row_stats may be rewritten
    if (buffers == 1 && threadIdx.x == 0 && row + step < rows) {
      bulk_load(buf(0), x + (row + step) * n + lo, bytes, &full[0]);
    }
  }
}

// The pipeline's launch plan for rows of n floats on the current device; slices == 0 if it does
// not apply.
plan plan_for(int64_t rows, int64_t n) {
  plan out;
  int dev = 0;
  int optin = 0;
  int per_sm = 0;
  int sms = 0;
  int reserved = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) !=
          cudaSuccess) {
    return out;
  }
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, softmax_pipeline) != cudaSuccess) {
    return out;
  }
  const int64_t per_block = static_cast<int64_t>(per_sm) / blocks_per_sm - reserved -
                            static_cast<int64_t>(fa.sharedSizeBytes) - 128;
  const int64_t dynamic = std::min<int64_t>(
      per_block, static_cast<int64_t>(optin) - static_cast<int64_t>(fa.sharedSizeBytes));
  const int64_t buffer_floats = dynamic / buffers / 16 * 4; // one buffer, a whole number of float4
  if (buffer_floats < 4) {
    return out;
  }
  const int64_t resident = static_cast<int64_t>(blocks_per_sm) * sms;
  const int64_t needed = (n + buffer_floats - 1) / buffer_floats;
  if (needed > max_slices || needed > resident) {
    return out;
  }
  const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(rows, resident / needed));
  const int64_t slices = std::min<int64_t>(max_slices, resident / groups);
  int64_t chunk = (n + slices - 1) / slices;
  chunk = (chunk + 3) / 4 * 4;
  if (chunk > buffer_floats) {
    return out;
  }
  out.slices = static_cast<int>(slices);
  out.chunk = chunk;
  out.grid = static_cast<int>(groups * slices);
  out.smem = static_cast<size_t>(buffers * chunk) * sizeof(float);
  if (cudaFuncSetAttribute(softmax_pipeline, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(out.smem)) != cudaSuccess) {
    return plan{};
  }
  int occupancy = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, softmax_pipeline, threads,
                                                    out.smem) != cudaSuccess ||
      static_cast<int64_t>(occupancy) * sms < out.grid) {
    return plan{};
  }
  return out;
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::softmax_groups::workspace_bytes(args, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::softmax_groups::launch(args, reinterpret_cast<const void*>(softmax_pipeline), threads,
                                    plan_for);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "softmax: the row in shared memory across a group of resident blocks (cooperative grid), "
         "each slice "
         "loaded by a bulk copy (TMA, mbarrier) one row ahead, states exchanged through the "
         "workspace";
}
