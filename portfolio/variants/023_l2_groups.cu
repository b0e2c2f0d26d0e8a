// Variant of 023 (softmax over dim 1): two passes over each row, the second from L2, on a
// persistent cooperative grid. The portfolio kernel (header softmax_pipeline.cuh) holds each
// slice in shared memory, so a block has nothing to do while its row's states are exchanged and
// only 2 blocks fit per SM: 4.6597 ms, 65% of the 3.02 ms floor (evidence/h200/core10 at
// bc0f754). The search's normalize.split_row reads the row twice with the second read from L2, but
// launches two kernels per group of rows (hundreds per call) and reached about the same time.
//
// Design: a cooperative grid of 4 blocks of 256 threads per SM, no shared-memory buffer, cut into
// g groups of S blocks. S is chosen so that the rows in flight (g of them, 1.5 MB each at the
// official shape) fit in half the L2: the second read of a row then hits L2, and DRAM sees x once
// and y once. Group j walks rows j, j + g, ...; block c owns slice c. Per row: pass 1 loads the
// slice (8 float4 per thread in flight, default L2 policy) into four online (max, sum) states per
// thread, reduces them over the block, publishes the block's state in the workspace and
// increments the row's arrival counter (release); warp 0 waits for the S states (acquire) and
// combines them in a fixed order (every block of the row gets bitwise the same statistics); pass 2
// reads the slice again and writes kb_op::apply with streaming stores. While one block waits for
// its row's states, the SM's other three blocks (other groups) load or store. N % 4 != 0,
// unaligned tensors or more than 128 slices per row run a one-block-per-row two-pass kernel
// (the workspace, the exchange, that fallback and the entry points: header softmax_groups.cuh).
// Hypothesis: about 1 read + 1 write of DRAM with the exchange hidden by the other blocks: near
// 3.5 ms. Not yet measured.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

#include <kblaster/device/portfolio/softmax_groups.cuh>

#include <algorithm>

namespace {

using kb::softmax_groups::plan;
using kb::softmax_groups::state;
using kb::softmax_groups::stats;
using op = kb::softmax_groups::op;

constexpr int threads = 256;
constexpr int blocks_per_sm = 4;
constexpr int batch = 8; // float4 loads in flight per thread

// Pass 1 over this block's slice: four online states per thread, then the block's state.
__device__ __forceinline__ state slice_state(const float4* __restrict__ s4, int64_t n4) {
  state s[4] = {op::init(), op::init(), op::init(), op::init()};
  for (int64_t base = threadIdx.x; base < n4; base += static_cast<int64_t>(threads) * batch) {
    float4 v[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      const int64_t i = base + static_cast<int64_t>(k) * threads;
      if (i < n4) {
        v[k] = s4[i];
      }
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      if (base + static_cast<int64_t>(k) * threads < n4) {
        s[0] = op::accumulate(s[0], v[k].x);
        s[1] = op::accumulate(s[1], v[k].y);
        s[2] = op::accumulate(s[2], v[k].z);
        s[3] = op::accumulate(s[3], v[k].w);
      }
    }
  }
  const state t = op::combine(op::combine(s[0], s[1]), op::combine(s[2], s[3]));
  return kb::block_reduce(t, [](const state& a, const state& b) { return op::combine(a, b); });
}

// Pass 2: the slice read again (from L2) and written with streaming stores.
__device__ __forceinline__ void slice_apply(const float4* __restrict__ s4, float4* __restrict__ y4,
                                            int64_t n4, const stats& st) {
  for (int64_t base = threadIdx.x; base < n4; base += static_cast<int64_t>(threads) * batch) {
    float4 v[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      const int64_t i = base + static_cast<int64_t>(k) * threads;
      if (i < n4) {
        v[k] = __ldcs(s4 + i); // last use of x: evict first
      }
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      const int64_t i = base + static_cast<int64_t>(k) * threads;
      if (i < n4) {
        __stcs(y4 + i,
               make_float4(op::apply(v[k].x, st, 1.0f, 0.0f), op::apply(v[k].y, st, 1.0f, 0.0f),
                           op::apply(v[k].z, st, 1.0f, 0.0f), op::apply(v[k].w, st, 1.0f, 0.0f)));
      }
    }
  }
}

__global__ void __launch_bounds__(threads, blocks_per_sm)
    softmax_l2_groups(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                      int slices, int64_t chunk, state* __restrict__ partial,
                      unsigned* __restrict__ arrived, kb::scalars p) {
  __shared__ stats row_stats;
  const int c = static_cast<int>(blockIdx.x % slices);
  const int64_t step = gridDim.x / slices;
  const int64_t lo = c * chunk;
  const int64_t cnt = n - lo < chunk ? (n - lo > 0 ? n - lo : 0) : chunk;
  const int64_t n4 = cnt / 4;
  for (int64_t row = blockIdx.x / slices; row < rows; row += step) {
    const float4* s4 = reinterpret_cast<const float4*>(x + row * n + lo);
    const state t = slice_state(s4, n4);
    if (threadIdx.x < 32) {
      kb::softmax_groups::exchange(t, row, c, slices, n, partial, arrived, p, &row_stats);
    }
    __syncthreads();
    const stats st = row_stats;
    slice_apply(s4, reinterpret_cast<float4*>(y + row * n + lo), n4, st);
    __syncthreads(); // row_stats may be rewritten
  }
}

// Groups of S blocks such that the rows in flight fit in half the L2; slices == 0 if the grid
// cannot be resident or a row needs more than max_slices.
plan plan_for(int64_t rows, int64_t n) {
  int dev = 0;
  int sms = 0;
  int l2 = 0;
  int occupancy = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, softmax_l2_groups, threads, 0) !=
          cudaSuccess) {
    return {};
  }
  const int64_t resident = static_cast<int64_t>(std::min(occupancy, blocks_per_sm)) * sms;
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(float));
  const int64_t fit = std::max<int64_t>(1, (static_cast<int64_t>(l2) / 2) / row_bytes);
  int64_t slices = (resident + fit - 1) / fit; // rows in flight = resident / slices <= fit
  slices = std::max<int64_t>(1, std::min<int64_t>(slices, (n + 3) / 4));
  if (slices > kb::softmax_groups::max_slices || resident == 0) {
    return {};
  }
  const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(rows, resident / slices));
  plan out;
  out.slices = static_cast<int>(slices);
  out.chunk = ((n + slices - 1) / slices + 3) / 4 * 4;
  out.grid = static_cast<int>(groups * slices);
  return out;
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::softmax_groups::workspace_bytes(args, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::softmax_groups::launch(args, reinterpret_cast<const void*>(softmax_l2_groups), threads,
                                    plan_for);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "variant: softmax, two passes per row with the second from L2, groups of resident blocks "
         "sized so the rows in flight fit half the L2, states exchanged through the workspace";
}
