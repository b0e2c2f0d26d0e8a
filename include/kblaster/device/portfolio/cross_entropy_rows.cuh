// Mean cross-entropy of logits [rows, C] (float32) against int64 targets, one read of the logits:
// a warp per row computes logsumexp and gathers the target's logit, then a deterministic mean.
// Include it after the task's math (KB_TASK_MATH, whose state is the online-softmax (max, sum)
// pair); it defines the candidate's entry points.
//
// Design. Each lane of a row's warp takes 8 independent 16-byte loads per round (C = 4096: four
// rounds). Per round it first takes the maximum of its 32 values (no exponential), rescales its
// running sum once if the maximum grew, then adds exp(x - max) for the 32 values: one
// exponential per element and no branch per element, where folding each value into the online
// state (kb_op::accumulate) branches on every value and evaluates an exponential on both paths.
// The lanes' states are combined over the warp by a fixed shuffle tree; lane 0 reads the
// target's logit and writes kb_op::row_loss to the workspace. The mean, in float64 and in a fixed
// order (bitwise reproducible):
//   KB_CE_FUSED_MEAN 0: a second kernel of 1024 threads, 8 independent loads in flight each;
//   KB_CE_FUSED_MEAN 1: each block sums its rows' losses into a partial, the last block to
//     arrive (an arrival counter zeroed on the stream before the kernel) sums the partials.
// C % 4 != 0 or unaligned logits take scalar loads with the same structure.
//
// Knobs (macros, set before the include):
//   KB_CE_LOAD_HINT   1: evict-first loads (ld.global.cs), 0: plain loads (default 0)
//   KB_CE_FUSED_MEAN  see above (default 0)
#pragma once

#ifndef KB_CE_LOAD_HINT
#define KB_CE_LOAD_HINT 0
#endif
#ifndef KB_CE_FUSED_MEAN
#define KB_CE_FUSED_MEAN 0
#endif

namespace {

using op = kb_op<float>;
using state = op::state;

constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int batch = 8; // 16-byte loads in flight per lane
constexpr int sum_threads = 1024;

__device__ __forceinline__ state combine(const state& a, const state& b) {
  return op::combine(a, b);
}

template <class T> __device__ __forceinline__ T load(const T* p) {
#if KB_CE_LOAD_HINT
  return __ldcs(p);
#else
  return *p;
#endif
}

// Folds n values (n <= N, the valid ones first) into the lane's (max, sum): the maximum first,
// one rescale, then one exponential per value.
template <int N> __device__ __forceinline__ void fold(state& s, const float (&v)[N], int n) {
  float m = s.max;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < n) {
      m = kb::fn::max(m, v[k]);
    }
  }
  if (m == -INFINITY) {
    return; // every value so far is -inf: nothing to add
  }
  if (m > s.max) {
    s.sum = s.max == -INFINITY ? 0.0f : s.sum * kb::fn::exp(s.max - m);
    s.max = m;
  }
  float add = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < n) {
      add += kb::fn::exp(v[k] - m);
    }
  }
  s.sum += add;
}

// The losses of the block's rows, in row order, summed in float64 (thread 0's result).
__device__ double block_losses(const float* losses, int64_t first, int64_t rows) {
  double acc = 0;
  for (int w = 0; w < warps && first + w < rows; ++w) {
    acc += static_cast<double>(losses[first + w]);
  }
  return acc;
}

template <bool Vec>
__global__ void __launch_bounds__(threads)
    row_losses(const float* __restrict__ x, const int64_t* __restrict__ target,
               float* __restrict__ losses, double* __restrict__ partial,
               unsigned* __restrict__ arrived, float* __restrict__ y, int64_t rows, int64_t c,
               kb::scalars p) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  if (row < rows) { // whole warps only: the shuffles below stay warp-uniform
    const float* xr = x + row * c;
    state s = op::init();
    if (Vec) {
      const int64_t c4 = c / 4;
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      for (int64_t base = 0; base < c4; base += 32 * batch) {
        float v[4 * batch];
        int n = 0;
#pragma unroll
        for (int k = 0; k < batch; ++k) {
          const int64_t i = base + k * 32 + lane;
          if (i < c4) {
            const float4 q = load(x4 + i);
            v[4 * k] = q.x;
            v[4 * k + 1] = q.y;
            v[4 * k + 2] = q.z;
            v[4 * k + 3] = q.w;
            n = 4 * (k + 1);
          }
        }
        fold(s, v, n);
      }
    } else {
      for (int64_t base = 0; base < c; base += 32 * batch) {
        float v[batch];
        int n = 0;
#pragma unroll
        for (int k = 0; k < batch; ++k) {
          const int64_t i = base + k * 32 + lane;
          if (i < c) {
            v[k] = load(xr + i);
            n = k + 1;
          }
        }
        fold(s, v, n);
      }
    }
    s = kb::warp_reduce(s, [](const state& a, const state& b) { return combine(a, b); });
    if (lane == 0) {
      const int64_t tg = target[row];
      const float xt = (tg >= 0 && tg < c) ? xr[tg] : NAN;
      losses[row] = op::row_loss(s, xt, c, p.v);
    }
  }
#if KB_CE_FUSED_MEAN
  __shared__ bool last;
  __syncthreads(); // the block's losses are written
  if (threadIdx.x == 0) {
    __threadfence();
    partial[blockIdx.x] = block_losses(losses, static_cast<int64_t>(blockIdx.x) * warps, rows);
    __threadfence();
    last = atomicAdd(arrived, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) {
    return;
  }
  __threadfence(); // every block's partial is visible to the last one
  double acc = 0;
  for (int64_t b = threadIdx.x; b < gridDim.x; b += threads) {
    acc += __ldcg(partial + b);
  }
  acc = kb::block_reduce(acc, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) {
    y[0] = static_cast<float>(kb_op<double>::finalize_rows(acc, rows));
  }
#else
  (void)partial;
  (void)arrived;
  (void)y;
#endif
}

__global__ void __launch_bounds__(sum_threads)
    mean_of_rows(const float* __restrict__ losses, int64_t rows, float* __restrict__ y) {
  double acc = 0;
  constexpr int unroll = 8;
  for (int64_t base = 0; base < rows; base += static_cast<int64_t>(sum_threads) * unroll) {
    float v[unroll];
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const int64_t r = base + k * sum_threads + threadIdx.x;
      v[k] = r < rows ? losses[r] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      acc += static_cast<double>(v[k]);
    }
  }
  acc = kb::block_reduce(acc, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) {
    y[0] = static_cast<float>(kb_op<double>::finalize_rows(acc, rows));
  }
}

struct workspace_layout {
  size_t losses;  // [rows] float
  size_t partial; // offset of [blocks] double
  size_t arrived; // offset of the counter
  size_t total;
};

workspace_layout layout(int64_t rows) {
  const size_t blocks = static_cast<size_t>((rows + warps - 1) / warps);
  workspace_layout w{};
  w.losses = 0;
  w.partial = (static_cast<size_t>(rows) * sizeof(float) + 255) / 256 * 256;
  w.arrived = w.partial + (blocks * sizeof(double) + 255) / 256 * 256;
  w.total = w.arrived + 256;
  return w;
}

bool ce_shape(const kb_args* args, int64_t& rows, int64_t& c) {
  if (args->num_inputs < 2 || args->num_outputs < 1) {
    return false;
  }
  const kb_tensor& xt = args->inputs[0];
  const kb_tensor& tt = args->inputs[1];
  const kb_tensor& yt = args->outputs[0];
  // Logits [rows, classes] (the class axis is the last one), int64 targets [rows], scalar loss.
  if (xt.dtype != KB_FLOAT32 || yt.dtype != KB_FLOAT32 || tt.dtype != KB_INT64 || xt.ndim != 2 ||
      !kb::is_contiguous(xt) || !kb::is_contiguous(tt) || kb::numel(yt) != 1) {
    return false;
  }
  rows = xt.shape[0];
  c = xt.shape[1];
  return kb::numel(tt) == rows && rows > 0 && c > 0;
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  int64_t rows = 0;
  int64_t c = 0;
  if (!ce_shape(args, rows, c)) {
    return -1;
  }
  *bytes = layout(rows).total;
  return 0;
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  int64_t rows = 0;
  int64_t c = 0;
  if (!ce_shape(args, rows, c)) {
    return -1;
  }
  const workspace_layout w = layout(rows);
  if (args->workspace == nullptr || args->workspace_bytes < w.total) {
    return -1;
  }
  const float* x = static_cast<const float*>(args->inputs[0].data);
  const auto* tgt = static_cast<const int64_t*>(args->inputs[1].data);
  float* y = static_cast<float*>(args->outputs[0].data);
  auto* base = static_cast<unsigned char*>(args->workspace);
  float* losses = reinterpret_cast<float*>(base + w.losses);
  double* partial = reinterpret_cast<double*>(base + w.partial);
  unsigned* arrived = reinterpret_cast<unsigned*>(base + w.arrived);
  const cudaStream_t stream = kb::stream_of(args);
  const unsigned grid = static_cast<unsigned>((rows + warps - 1) / warps);
  const kb::scalars p = kb::scalars_of(args);
#if KB_CE_FUSED_MEAN
  KB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(arrived, 0, sizeof(unsigned), stream));
#endif
  if (c % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    row_losses<true><<<grid, threads, 0, stream>>>(x, tgt, losses, partial, arrived, y, rows, c, p);
  } else {
    row_losses<false>
        <<<grid, threads, 0, stream>>>(x, tgt, losses, partial, arrived, y, rows, c, p);
  }
#if !KB_CE_FUSED_MEAN
  mean_of_rows<<<1, sum_threads, 0, stream>>>(losses, rows, y);
#endif
  return static_cast<int>(cudaGetLastError());
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "cross-entropy: one warp per row, per round the lane's maximum then one exponential per "
         "value, float64 "
         "fixed-order mean";
}
