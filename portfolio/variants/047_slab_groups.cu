// Variant of 047: the portfolio's kernel until 78cc544 (replaced by the strategy reduce.columns at
// grouped=1, 1.9387 ms against this kernel's 1.9702 in evidence/h200/variants/78cc544).
// Was: portfolio candidate for 047 (sum over dim 1 of [B, R, N], N = 4095): 16-byte loads despite
// the odd row length, a deterministic two-stage reduction.
//
// Design: rows of 4095 floats break 16-byte alignment, but 4 consecutive rows (4N floats) are N
// whole float4s. With R % 4 == 0 each slab [R, N] is a stack of R/4 groups of N float4; the float4
// q of every group holds the same 4 (row mod 4, column) positions, p = 4q + j -> (p / N, p % N).
// Stage 1: a block of 32 x 8 threads takes 32 consecutive float4 columns q of one slab; warp w
// walks the groups w, w + 8, ... with 8 loads in flight per thread (512 contiguous bytes per warp
// load, 128 B in flight per thread) and keeps 4 running sums (kb_op::accumulate); the 8 warps are
// combined in shared memory in warp order and the 4 partial sums of each q go to the workspace.
// Stage 2: one thread per output combines the 4 partials of (row mod 4 = 0..3) in that order
// (kb_op::combine, kb_op::finalize). Fixed orders throughout, no atomics. R % 4 != 0 or an
// unaligned x takes a scalar path: 32 columns x 8 row-strided warps per block, the same shared-
// memory combine, written straight to y.
//
// Bytes: 4 * B * R * N + 4 * B * N = 8.59 GB at 128 x 4096 x 4095; floor 2.00 ms at 4.3 TB/s.
// The workspace round trip adds 8.4 MB + 8.4 MB (0.2%). Predicted 2.03-2.10 ms (within 1.05x),
// against 2.11 ms for torch.sum (eager, the fastest PyTorch method here).
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH

namespace {

using op = kb_op<float>;
using state = op::state;

constexpr int lanes = 32; // columns (float4 or float) per block
constexpr int splits = 8; // warps per block, each over every 8th group or row
constexpr int threads = lanes * splits;
constexpr int batch = 8; // loads in flight per thread

// Stage 1 of the vector path: partial[b, q, j] = sum over groups g of x4[b, g, q].j
__global__ void __launch_bounds__(threads)
    group_sums(const float4* __restrict__ x4, state* __restrict__ partial, int64_t slabs,
               int64_t groups, int64_t n) {
  __shared__ state part[splits][4][lanes];
  const int64_t tiles = (n + lanes - 1) / lanes;
  const int64_t b = blockIdx.x / tiles;
  const int64_t q = (blockIdx.x % tiles) * lanes + threadIdx.x % lanes;
  const int w = threadIdx.x / lanes;
  state s[4] = {op::init(), op::init(), op::init(), op::init()};
  if (q < n) {
    const float4* src = x4 + b * groups * n + q;
    for (int64_t g0 = w; g0 < groups; g0 += static_cast<int64_t>(splits) * batch) {
      float4 v[batch];
#pragma unroll
      for (int k = 0; k < batch; ++k) {
        const int64_t g = g0 + static_cast<int64_t>(k) * splits;
        if (g < groups) {
          v[k] = __ldcs(src + g * n);
        }
      }
#pragma unroll
      for (int k = 0; k < batch; ++k) {
        if (g0 + static_cast<int64_t>(k) * splits < groups) {
          s[0] = op::accumulate(s[0], v[k].x);
          s[1] = op::accumulate(s[1], v[k].y);
          s[2] = op::accumulate(s[2], v[k].z);
          s[3] = op::accumulate(s[3], v[k].w);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    part[w][j][threadIdx.x % lanes] = s[j];
  }
  __syncthreads();
  // Warps 0-3 each finish one component j for the 32 columns, combining the 8 warps in order.
  if (w < 4 && q < n) {
    const int lane = threadIdx.x % lanes;
    state t = part[0][w][lane];
    for (int k = 1; k < splits; ++k) {
      t = op::combine(t, part[k][w][lane]);
    }
    partial[(b * n + q) * 4 + w] = t;
  }
}

// Stage 2 of the vector path: y[b, col] = combine over rr = 0..3 of the partial at position
// rr * n + col of slab b's 4n partials.
__global__ void __launch_bounds__(256)
    combine_groups(const state* __restrict__ partial, float* __restrict__ y, int64_t slabs,
                   int64_t n, int64_t r, kb::scalars p) {
  const int64_t t = blockIdx.x * 256LL + threadIdx.x;
  if (t >= slabs * n) {
    return;
  }
  const int64_t b = t / n;
  const int64_t col = t - b * n;
  const state* ps = partial + b * 4 * n + col;
  state s = ps[0];
  for (int rr = 1; rr < 4; ++rr) {
    s = op::combine(s, ps[rr * n]);
  }
  y[t] = op::finalize(s, r, p.v);
}

// The scalar path: block = 32 columns of one slab; warp w sums rows w, w + 8, ...
__global__ void __launch_bounds__(threads)
    column_sums(const float* __restrict__ x, float* __restrict__ y, int64_t slabs, int64_t r,
                int64_t n, kb::scalars p) {
  __shared__ state part[splits][lanes];
  const int64_t tiles = (n + lanes - 1) / lanes;
  const int64_t b = blockIdx.x / tiles;
  const int lane = threadIdx.x % lanes;
  const int64_t col = (blockIdx.x % tiles) * lanes + lane;
  const int w = threadIdx.x / lanes;
  state s = op::init();
  if (col < n) {
    const float* src = x + b * r * n + col;
    for (int64_t r0 = w; r0 < r; r0 += static_cast<int64_t>(splits) * batch) {
      float v[batch];
#pragma unroll
      for (int k = 0; k < batch; ++k) {
        const int64_t row = r0 + static_cast<int64_t>(k) * splits;
        if (row < r) {
          v[k] = src[row * n];
        }
      }
#pragma unroll
      for (int k = 0; k < batch; ++k) {
        if (r0 + static_cast<int64_t>(k) * splits < r) {
          s = op::accumulate(s, v[k]);
        }
      }
    }
  }
  part[w][lane] = s;
  __syncthreads();
  if (w == 0 && col < n) {
    state t = part[0][lane];
    for (int k = 1; k < splits; ++k) {
      t = op::combine(t, part[k][lane]);
    }
    y[b * n + col] = op::finalize(t, r, p.v);
  }
}

uint64_t partial_bytes(const kb_tensor& xt) {
  const int64_t outputs = kb::product(xt, 0, 1) * kb::product(xt, 2, xt.ndim);
  return xt.shape[1] % 4 == 0 ? static_cast<uint64_t>(outputs) * 4 * sizeof(state) : 0;
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  if (args->num_inputs < 1 || args->inputs[0].ndim < 2) {
    return -1;
  }
  *bytes = partial_bytes(args->inputs[0]);
  return 0;
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (args->num_inputs < 1 || args->num_outputs < 1) {
    return -1;
  }
  const kb_tensor& xt = args->inputs[0];
  const kb_tensor& yt = args->outputs[0];
  if (xt.dtype != KB_FLOAT32 || yt.dtype != KB_FLOAT32 || xt.ndim < 2 || !kb::is_contiguous(xt) ||
      !kb::is_contiguous(yt)) {
    return -1;
  }
  // x viewed as [slabs, r, n]: the reduced axis 1 between the outer and inner axes.
  const int64_t slabs = kb::product(xt, 0, 1);
  const int64_t r = xt.shape[1];
  const int64_t n = kb::product(xt, 2, xt.ndim);
  if (kb::numel(yt) != slabs * n) {
    return -1;
  }
  if (slabs * n == 0) {
    return 0;
  }
  const int64_t blocks = slabs * ((n + lanes - 1) / lanes);
  if (blocks > 0x7fffffffLL) {
    return -1;
  }
  const cudaStream_t stream = kb::stream_of(args);
  const kb::scalars p = kb::scalars_of(args);
  float* y = static_cast<float*>(yt.data);
  const bool vec = r % 4 == 0 && reinterpret_cast<uintptr_t>(xt.data) % 16 == 0 &&
                   args->workspace != nullptr && args->workspace_bytes >= partial_bytes(xt);
  if (vec) {
    state* partial = static_cast<state*>(args->workspace);
    group_sums<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        static_cast<const float4*>(xt.data), partial, slabs, r / 4, n);
    combine_groups<<<static_cast<unsigned>((slabs * n + 255) / 256), 256, 0, stream>>>(
        partial, y, slabs, n, r, p);
  } else {
    column_sums<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        static_cast<const float*>(xt.data), y, slabs, r, n, p);
  }
  return static_cast<int>(cudaGetLastError());
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: sum over dim 1, float4 loads over groups of 4 rows, 8 row-split warps per "
         "block, fixed-order 2-stage combine";
}
