// Variant of 023 (softmax over dim 1), the portfolio kernel until 023_pipe1_b2t512 measured faster
// (4.607 ms against 5.208; evidence/h200/variants/023-8b33036): the row kept on chip (1 read + 1
// write) without thread-block clusters. A cooperative (all blocks resident) grid of 512-thread
// blocks, two per SM, walks items (row, slice): a row is cut into 16 slices of at most 96 KB, slice
// c of row r is item r * 16 + c and item i runs on block i mod G (G a multiple of 16, so the 16
// slices of a row run on 16 different resident blocks at the same time). A block streams its slice
// into shared memory (16-byte evict-first loads, 6 in flight per thread) while folding it into
// online (max, sum) states, reduces them over the block, publishes the block's state in the
// workspace and increments the row's arrival counter (release); thread 0 waits until the 16 slices
// have arrived (acquire), combines the 16 states in slice order (every block of the row gets
// bitwise the same statistics) and the block writes kb_op::apply from shared memory with streaming
// stores. Unlike a cluster, the 16 blocks need not sit in one GPC and do not run in lock step, and
// two blocks per SM overlap one block's loads with the other's stores. The counters are zeroed on
// the stream before the kernel. Deadlock-free: all blocks are resident (cooperative launch) and an
// item only waits for items of its own row, whose blocks have finished every earlier row.
//
// Bytes: 8 * M * N = 12.9 GB at 4096 x 393216; floor 3.00 ms at 4.3 TB/s; target below 4.78 ms.
// Rows longer than 16 x the shared-memory slice (about 450K floats) are refused.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

#include <algorithm>

namespace {

using op = kb_op<float>;
using state = op::state;
using stats = op::stats;

constexpr int slices = 16;
constexpr int threads = 512;
// 16-byte loads in flight per thread (12 per thread per slice at N = 393216)
constexpr int batch = 6;

struct workspace_layout {
  size_t states_bytes;
  size_t total;
};

workspace_layout layout(int64_t rows) {
  const size_t states = static_cast<size_t>(rows) * slices * sizeof(state);
  const size_t states_aligned = (states + 255) / 256 * 256;
  return {states_aligned, states_aligned + static_cast<size_t>(rows) * sizeof(unsigned)};
}

template <bool Vec>
__global__ void __launch_bounds__(threads, 2)
    softmax_coop(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                 int64_t chunk, state* __restrict__ partial, unsigned* __restrict__ arrived,
                 kb::scalars p) {
  extern __shared__ float4 stage4[];
  float* stage = reinterpret_cast<float*>(stage4);
  __shared__ stats row_stats;
  const int64_t items = rows * slices;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t row = item / slices;
    const int c = static_cast<int>(item % slices);
    const int64_t lo = c * chunk;
    const int64_t cnt = n - lo < chunk ? (n - lo > 0 ? n - lo : 0) : chunk;
    state s[4] = {op::init(), op::init(), op::init(), op::init()};
    if (Vec) {
      const int64_t n4 = cnt / 4;
      const float4* x4 = reinterpret_cast<const float4*>(x + row * n + lo);
      for (int64_t base = 0; base < n4; base += static_cast<int64_t>(threads) * batch) {
        float4 v[batch];
#pragma unroll
        for (int k = 0; k < batch; ++k) {
          const int64_t i = base + k * threads + threadIdx.x;
          if (i < n4) {
            v[k] = __ldcs(x4 + i);
          }
        }
#pragma unroll
        for (int k = 0; k < batch; ++k) {
          const int64_t i = base + k * threads + threadIdx.x;
          if (i < n4) {
            stage4[i] = v[k];
            s[0] = op::accumulate(s[0], v[k].x);
            s[1] = op::accumulate(s[1], v[k].y);
            s[2] = op::accumulate(s[2], v[k].z);
            s[3] = op::accumulate(s[3], v[k].w);
          }
        }
      }
    } else {
      const float* xr = x + row * n + lo;
      for (int64_t i = threadIdx.x; i < cnt; i += threads) {
        const float v = xr[i];
        stage[i] = v;
        s[0] = op::accumulate(s[0], v);
      }
    }
    state t = op::combine(op::combine(s[0], s[1]), op::combine(s[2], s[3]));
    t = kb::block_reduce(t, [](const state& a, const state& b) { return op::combine(a, b); });
    if (threadIdx.x == 0) {
      partial[row * slices + c] = t;
      __threadfence();
      atomicAdd(arrived + row, 1u);
      while (kb::load_acquire_gpu(arrived + row) < static_cast<unsigned>(slices)) {
        __nanosleep(64);
      }
      state total = kb::load_cg_any(partial + row * slices);
      for (int r = 1; r < slices; ++r) {
        total = op::combine(total, kb::load_cg_any(partial + row * slices + r));
      }
      row_stats = op::finalize(total, n, p.v);
    }
    __syncthreads();
    const stats st = row_stats;
    if (Vec) {
      const int64_t n4 = cnt / 4;
      float4* y4 = reinterpret_cast<float4*>(y + row * n + lo);
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < n4; i += threads) {
        const float4 v = stage4[i];
        __stcs(y4 + i, make_float4(op::apply(v.x, st, 1.0f, 0.0f), op::apply(v.y, st, 1.0f, 0.0f),
                                   op::apply(v.z, st, 1.0f, 0.0f), op::apply(v.w, st, 1.0f, 0.0f)));
      }
    } else {
      float* yr = y + row * n + lo;
      for (int64_t i = threadIdx.x; i < cnt; i += threads) {
        yr[i] = op::apply(stage[i], st, 1.0f, 0.0f);
      }
    }
    __syncthreads(); // row_stats is rewritten by the next item
  }
}

struct prepared {
  size_t smem_budget;
  int blocks_per_sm;
};

template <bool Vec> prepared prepare(size_t smem) {
  int dev = 0;
  int optin = 0;
  int per_sm = 0;
  int sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaFuncAttributes fa{};
  cudaFuncGetAttributes(&fa, softmax_coop<Vec>);
  const size_t half = static_cast<size_t>(per_sm) / 2;
  const size_t limit = std::min(static_cast<size_t>(optin), half > 1024 ? half - 1024 : 0);
  const size_t budget = limit > fa.sharedSizeBytes + 256 ? limit - fa.sharedSizeBytes - 256 : 0;
  cudaFuncSetAttribute(softmax_coop<Vec>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(budget));
  int blocks = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, softmax_coop<Vec>, threads, smem);
  return {budget, blocks * sms};
}

template <bool Vec>
int launch(const float* x, float* y, int64_t rows, int64_t n, const kb_args* a) {
  int64_t chunk = (n + slices - 1) / slices;
  chunk = (chunk + 3) / 4 * 4;
  const size_t bytes = static_cast<size_t>(chunk) * sizeof(float);
  const prepared pr = prepare<Vec>(bytes);
  if (bytes > pr.smem_budget || pr.blocks_per_sm < slices) {
    return -1;
  }
  const int64_t items = rows * slices;
  int64_t grid = static_cast<int64_t>(pr.blocks_per_sm) / slices * slices;
  grid = std::min(grid, items);
  const workspace_layout w = layout(rows);
  if (a->workspace == nullptr || a->workspace_bytes < w.total) {
    return -1;
  }
  auto* base = static_cast<unsigned char*>(a->workspace);
  state* partial = reinterpret_cast<state*>(base);
  unsigned* arrived = reinterpret_cast<unsigned*>(base + w.states_bytes);
  const cudaStream_t stream = kb::stream_of(a);
  KB_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(arrived, 0, static_cast<size_t>(rows) * sizeof(unsigned), stream));
  kb::scalars p = kb::scalars_of(a);
  void* params[] = {&x, &y, &rows, &n, &chunk, &partial, &arrived, &p};
  KB_RETURN_IF_CUDA_ERROR(cudaLaunchCooperativeKernel(
      reinterpret_cast<const void*>(softmax_coop<Vec>), dim3(static_cast<unsigned>(grid)),
      dim3(threads), params, bytes, stream));
  return static_cast<int>(cudaGetLastError());
}

bool softmax_shape(const kb_args* args, int64_t& rows, int64_t& n) {
  if (!kb::float32_map_args(args, 2) ||
      kb::product(args->inputs[0], 2, args->inputs[0].ndim) != 1) {
    return false;
  }
  rows = kb::product(args->inputs[0], 0, 1);
  n = args->inputs[0].shape[1];
  return true;
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  int64_t rows = 0;
  int64_t n = 0;
  if (!softmax_shape(args, rows, n)) {
    return -1;
  }
  *bytes = layout(rows).total;
  return 0;
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  int64_t rows = 0;
  int64_t n = 0;
  if (!softmax_shape(args, rows, n)) {
    return -1;
  }
  if (rows == 0 || n == 0) {
    return 0;
  }
  const float* x = static_cast<const float*>(args->inputs[0].data);
  float* y = static_cast<float*>(args->outputs[0].data);
  const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(y) % 16 == 0;
  return vec ? launch<true>(x, y, rows, n, args) : launch<false>(x, y, rows, n, args);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio variant: softmax, cooperative grid, 16 slices of a row in shared memory on 16 "
         "resident blocks, "
         "states exchanged through the workspace with an arrival counter, 2 blocks per SM";
}
