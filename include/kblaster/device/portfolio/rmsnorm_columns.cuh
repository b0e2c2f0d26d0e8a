// RMSNorm over dim 1 of [B, C, H, W] (C <= 64 channels of stride H*W): one read and one write of
// x, the channel column kept in registers. Include it after the task's math (KB_TASK_MATH); it
// defines the candidate's entry points.
//
// Design: x is viewed as [outer, C, inner]. Each thread owns 2 neighbouring positions of the
// inner axis (8-byte loads; a warp reads 256 contiguous bytes per channel, a 128-thread block
// 1 KB) and loads all C <= 64 channel values of both into registers up front (128 independent
// loads in flight), folds them into the sum of squares in channel order (kb_op::accumulate),
// finalizes 1/rms (kb_op::finalize) and writes kb_op::apply with 8-byte stores. Odd inner sizes
// or unaligned tensors use 1 position per thread; more than 64 channels (or a sample of 2^32
// elements or more) fall back to a two-pass thread-per-column loop.
//
// Knobs (macros, set before the include):
//   KB_RMS_LOAD_HINT   1: evict-first loads (ld.global.cs), 0: plain loads (default 1)
//   KB_RMS_STORE_HINT  1: streaming stores (st.global.cs), 0: plain stores (default 1)
#pragma once

#include <kblaster/device/families/common.cuh>

#ifndef KB_RMS_LOAD_HINT
#define KB_RMS_LOAD_HINT 1
#endif
#ifndef KB_RMS_STORE_HINT
#define KB_RMS_STORE_HINT 1
#endif

namespace {

using op = kb_op<float>;

constexpr int max_channels = 64;

template <int V> using vec = kb::floats<V>;

// Threads per block and the minimum resident blocks, so that the register file holds the
// 64 x V values of every resident thread.
template <int V> struct shape_of {
  static constexpr int threads = 128;
  static constexpr int min_blocks = V == 2 ? 3 : 4;
};

// V positions per thread; C = 64 when there are exactly 64 channels (no guards), 0 for c <= 64.
template <int V, int C>
__global__ void __launch_bounds__(shape_of<V>::threads, shape_of<V>::min_blocks)
    rmsnorm_columns(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int c,
                    int64_t inner, uint32_t x_stride, uint32_t y_stride, kb::scalars p) {
  using T = typename vec<V>::type;
  const int64_t groups = inner / V; // inner % V == 0 here
  const int64_t t = blockIdx.x * static_cast<int64_t>(shape_of<V>::threads) + threadIdx.x;
  if (t >= outer * groups) {
    return;
  }
  const int64_t o = t / groups;
  const int64_t base = o * c * inner + (t - o * groups) * V;
  const T* xs = reinterpret_cast<const T*>(x + base);
  T* ys = reinterpret_cast<T*>(y + base);
  // One channel, in units of T. 32-bit offsets (c * inner < 2^32, checked at launch) keep the 64
  // addresses from occupying register pairs, and the separate x and y strides (equal for
  // contiguous tensors) keep the compiler from holding the 64 load offsets alive for the stores.
  const uint32_t xs_stride = x_stride / V;
  const uint32_t ys_stride = y_stride / V;

  T v[max_channels];
#pragma unroll
  for (int ch = 0; ch < max_channels; ++ch) {
    if (C == max_channels || ch < c) {
#if KB_RMS_LOAD_HINT
      v[ch] = __ldcs(xs + static_cast<uint32_t>(ch) * xs_stride);
#else
      v[ch] = xs[static_cast<uint32_t>(ch) * xs_stride];
#endif
    }
  }
  op::state s[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    s[j] = op::init();
  }
#pragma unroll
  for (int ch = 0; ch < max_channels; ++ch) {
    if (C == max_channels || ch < c) {
      float e[V];
      vec<V>::split(v[ch], e);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        s[j] = op::accumulate(s[j], e[j]);
      }
    }
  }
  op::stats st[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    st[j] = op::finalize(s[j], c, p.v);
  }
#pragma unroll
  for (int ch = 0; ch < max_channels; ++ch) {
    if (C == max_channels || ch < c) {
      float e[V];
      vec<V>::split(v[ch], e);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        e[j] = op::apply(e[j], st[j], 1.0f, 0.0f);
      }
#if KB_RMS_STORE_HINT
      __stcs(ys + static_cast<uint32_t>(ch) * ys_stride, vec<V>::join(e));
#else
      ys[static_cast<uint32_t>(ch) * ys_stride] = vec<V>::join(e);
#endif
    }
  }
}

// More than 64 channels: statistics, then a second read for the output.
__global__ void __launch_bounds__(256)
    rmsnorm_columns_two_pass(const float* __restrict__ x, float* __restrict__ y, int64_t outer,
                             int64_t c, int64_t inner, kb::scalars p) {
  const int64_t t = blockIdx.x * 256LL + threadIdx.x;
  if (t >= outer * inner) {
    return;
  }
  const int64_t o = t / inner;
  const int64_t base = o * c * inner + (t - o * inner);
  op::state s = op::init();
  for (int64_t ch = 0; ch < c; ++ch) {
    s = op::accumulate(s, x[base + ch * inner]);
  }
  const op::stats st = op::finalize(s, c, p.v);
  for (int64_t ch = 0; ch < c; ++ch) {
    y[base + ch * inner] = op::apply(x[base + ch * inner], st, 1.0f, 0.0f);
  }
}

} // namespace

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  if (!kb::float32_map_args(args, 2)) {
    return -1;
  }
  const kb_tensor& xt = args->inputs[0];
  const int64_t outer = kb::product(xt, 0, 1);
  const int64_t c = xt.shape[1];
  const int64_t inner = kb::product(xt, 2, xt.ndim);
  if (outer * inner == 0 || c == 0) {
    return 0;
  }
  const float* x = static_cast<const float*>(xt.data);
  float* y = static_cast<float*>(args->outputs[0].data);
  const cudaStream_t stream = kb::stream_of(args);
  const kb::scalars p = kb::scalars_of(args);
  const int64_t blocks_limit = 0x7fffffffLL;
  if (c > max_channels || c * inner >= (1LL << 32)) {
    const int64_t blocks = (outer * inner + 255) / 256;
    if (blocks > blocks_limit) {
      return -1;
    }
    rmsnorm_columns_two_pass<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, y, outer, c,
                                                                                inner, p);
  } else {
    const int v = (inner % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(y) % 8 == 0)
                      ? 2
                      : 1;
    const int64_t items = outer * (inner / v);
    const int64_t blocks = (items + 127) / 128;
    if (blocks > blocks_limit) {
      return -1;
    }
    const auto stride = static_cast<uint32_t>(inner);
    const int ci = static_cast<int>(c);
    const auto grid = static_cast<unsigned>(blocks);
    if (v == 2 && c == max_channels) {
      rmsnorm_columns<2, max_channels>
          <<<grid, shape_of<2>::threads, 0, stream>>>(x, y, outer, ci, inner, stride, stride, p);
    } else if (v == 2) {
      rmsnorm_columns<2, 0>
          <<<grid, shape_of<2>::threads, 0, stream>>>(x, y, outer, ci, inner, stride, stride, p);
    } else if (c == max_channels) {
      rmsnorm_columns<1, max_channels>
          <<<grid, shape_of<1>::threads, 0, stream>>>(x, y, outer, ci, inner, stride, stride, p);
    } else {
      rmsnorm_columns<1, 0>
          <<<grid, shape_of<1>::threads, 0, stream>>>(x, y, outer, ci, inner, stride, stride, p);
    }
  }
  return static_cast<int>(cudaGetLastError());
}

#define KB_RMS_STR2(v) #v
#define KB_RMS_STR(v) KB_RMS_STR2(v)

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: strided RMSNorm, thread per 2 inner positions, all 64 channels in registers, "
         "one read and one "
         "write, load hint " KB_RMS_STR(KB_RMS_LOAD_HINT) ", store hint " KB_RMS_STR(
             KB_RMS_STORE_HINT);
}
