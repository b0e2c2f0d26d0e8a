// Softmax over dim 1 of a contiguous [M, N] float32 tensor on a cooperative grid cut into groups
// of blocks, a group per row at a time and a slice of the row per block: the parts shared by the
// header softmax_pipeline.cuh (slices held in shared memory) and the variant 023_l2_groups (slices
// read twice, the second time from L2). Here: the workspace (each row's slice states and arrival
// counter), the exchange of a row's states, the one-block-per-row fallback kernel, and the
// candidate's entry points around a group kernel of the form
//   kernel(x, y, rows, n, slices, chunk, partial, arrived, scalars)
// launched with cudaLaunchCooperativeKernel.
// Include it after the task's math (KB_TASK_MATH).
#pragma once

#include <kblaster/device/families/common.cuh>

namespace kb::softmax_groups {

using op = kb_op<float>;
using state = op::state;
using stats = op::stats;

constexpr int max_slices = 128; // slices per row the workspace holds states for

struct workspace_layout {
  size_t states_bytes;
  size_t total;
};

inline workspace_layout layout(int64_t rows) {
  const size_t states = static_cast<size_t>(rows) * max_slices * sizeof(state);
  const size_t aligned = (states + 255) / 256 * 256;
  return {aligned, aligned + static_cast<size_t>(rows) * sizeof(unsigned)};
}

// Called by warp 0 of every block of a row: lane 0 publishes the block's state `t` of slice c and
// counts its arrival (release); the warp waits for the row's `slices` states (acquire), reads them
// at once (lane l: states l, l + 32, ...) and combines them in a fixed order, so that every block
// of the row gets bitwise the same statistics; lane 0 stores them in `row_stats`.
__device__ __forceinline__ void exchange(const state& t, int64_t row, int c, int slices, int64_t n,
                                         state* __restrict__ partial,
                                         unsigned* __restrict__ arrived, const kb::scalars& p,
                                         stats* row_stats) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane == 0) {
    partial[row * slices + c] = t;
    __threadfence();
    atomicAdd(arrived + row, 1u);
  }
  while (kb::load_acquire_gpu(arrived + row) < static_cast<unsigned>(slices)) {
    __nanosleep(32);
  }
  state total = op::init();
  for (int r = lane; r < slices; r += 32) {
    total = op::combine(total, kb::load_cg_any(partial + row * slices + r));
  }
  total =
      kb::warp_reduce(total, [](const state& a, const state& b2) { return op::combine(a, b2); });
  if (lane == 0) {
    *row_stats = op::finalize(total, n, p.v);
  }
}

// Any row: one block per row (grid-stride over rows), statistics then output from global memory.
__global__ void __launch_bounds__(256)
    softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                 kb::scalars p) {
  __shared__ stats row_stats;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    state s = op::init();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      s = op::accumulate(s, xr[i]);
    }
    s = kb::block_reduce(s, [](const state& a, const state& b) { return op::combine(a, b); });
    if (threadIdx.x == 0) {
      row_stats = op::finalize(s, n, p.v);
    }
    __syncthreads();
    const stats st = row_stats;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      y[row * n + i] = op::apply(xr[i], st, 1.0f, 0.0f);
    }
    __syncthreads();
  }
}

// A group kernel's launch: slices == 0 when it does not apply (the fallback runs instead).
struct plan {
  int slices = 0;
  int64_t chunk = 0;
  int grid = 0;
  size_t smem = 0;
};

inline bool shape_of(const kb_args* args, int64_t& rows, int64_t& n) {
  if (!kb::float32_map_args(args, 2) ||
      kb::product(args->inputs[0], 2, args->inputs[0].ndim) != 1) {
    return false;
  }
  rows = kb::product(args->inputs[0], 0, 1);
  n = args->inputs[0].shape[1];
  return true;
}

// kb_workspace_bytes.
inline int workspace_bytes(const kb_args* args, uint64_t* bytes) {
  int64_t rows = 0;
  int64_t n = 0;
  if (!shape_of(args, rows, n)) {
    return -1;
  }
  *bytes = layout(rows).total;
  return 0;
}

// kb_launch: `plan_for(rows, n)` plans the group kernel `kernel` of `threads` threads for aligned
// rows; rows it does not plan (or N % 4 != 0, unaligned tensors) run softmax_rows.
template <class PlanFor>
int launch(const kb_args* args, const void* kernel, int threads, PlanFor&& plan_for) {
  int64_t rows = 0;
  int64_t n = 0;
  if (!shape_of(args, rows, n)) {
    return -1;
  }
  if (rows == 0 || n == 0) {
    return 0;
  }
  const float* x = static_cast<const float*>(args->inputs[0].data);
  float* y = static_cast<float*>(args->outputs[0].data);
  const cudaStream_t stream = kb::stream_of(args);
  kb::scalars p = kb::scalars_of(args);
  const bool aligned = n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const plan pl = aligned ? plan_for(rows, n) : plan{};
  if (pl.slices == 0) {
    softmax_rows<<<kb::grid_for(rows, 1), 256, 0, stream>>>(x, y, rows, n, p);
    return static_cast<int>(cudaGetLastError());
  }
  const workspace_layout w = layout(rows);
  if (args->workspace == nullptr || args->workspace_bytes < w.total) {
    return -1;
  }
  auto* base = static_cast<unsigned char*>(args->workspace);
  state* partial = reinterpret_cast<state*>(base);
  unsigned* arrived = reinterpret_cast<unsigned*>(base + w.states_bytes);
  KB_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(arrived, 0, static_cast<size_t>(rows) * sizeof(unsigned), stream));
  int slices = pl.slices;
  int64_t chunk = pl.chunk;
  void* params[] = {&x, &y, &rows, &n, &slices, &chunk, &partial, &arrived, &p};
  KB_RETURN_IF_CUDA_ERROR(cudaLaunchCooperativeKernel(kernel, dim3(static_cast<unsigned>(pl.grid)),
                                                      dim3(threads), params, pl.smem, stream));
  return static_cast<int>(cudaGetLastError());
}

} // namespace kb::softmax_groups
