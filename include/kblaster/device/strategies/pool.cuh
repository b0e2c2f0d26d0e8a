// Strategy library, family `pool` (max and average pooling over 1-3 trailing dims, PyTorch's
// semantics: include/kblaster/device/families/pool.cuh). Every strategy is correct for every
// geometry; the strategy descriptors say where each is fast.
//
// pool::direct<Op, P>: one thread per output column position and `rows_per_thread` consecutive
// output rows: a warp covers 32 consecutive outputs along the innermost dim (coalesced stores,
// loads `stride` apart), the thread's rows share window rows through L1. P: block,
// rows_per_thread.
//
// pool::tiled<Op, P>: a block per tile of tile_h x tile_w outputs of one output depth of one
// plane: for each depth tap of the window the block stages the tile's input footprint (with the
// halo, padding as -inf for max and 0 for avg) in shared memory with coalesced loads along the
// innermost dim, then each thread pools its outputs from shared memory; every input element is
// read from memory once per depth tap instead of once per window covering it. A footprint over
// 48 KiB falls back to the direct kernel. P: tile_w, tile_h, block.
#pragma once

#include "kblaster/device/families/pool.cuh"
#include "kblaster/device/strategies/common.cuh"

namespace kb::strategies::pool {

using kb::pool::config;
using kb::pool::geometry;

struct operands {
  const kb_tensor* x = nullptr;
  void* y = nullptr;
  geometry g{};
};

inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  out->x = &xt;
  out->y = yt.data;
  return kb::pool::geometry_of(xt, yt, c, &out->g) && yt.dtype == xt.dtype;
}

#if defined(__CUDACC__)

template <template <class> class Op, int Block, int Rows, class T>
__global__ void __launch_bounds__(Block)
    direct_kernel(const T* __restrict__ x, T* __restrict__ y, geometry g, config c, scalars p) {
  const int64_t row_groups = ceil_div(g.out[1], Rows);
  const int64_t work = g.planes * g.out[0] * row_groups * g.out[2];
  for (int64_t t = int64_t{blockIdx.x} * Block + threadIdx.x; t < work;
       t += int64_t{gridDim.x} * Block) {
    const int64_t ow = t % g.out[2];
    int64_t rest = t / g.out[2];
    const int64_t oh0 = (rest % row_groups) * Rows;
    rest /= row_groups;
    const int64_t od = rest % g.out[0];
    const int64_t plane = rest / g.out[0];
    const T* xp = x + plane * g.in_plane();
    T* yp = y + (plane * g.out[0] + od) * g.out[1] * g.out[2];
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const int64_t oh = oh0 + r;
      if (oh < g.out[1]) {
        const float v = kb::pool::pool_one<float>(
            g, c, od, oh, ow, [xp](int64_t i) { return load_one<float, T>(xp + i); });
        store_one<T, float>(yp + oh * g.out[2] + ow, Op<float>::epilogue(v, p.v));
      }
    }
  }
}

// Tile footprint of `th` output rows and TW output columns: rows and columns of input staged.
struct footprint {
  int64_t rows;
  int64_t cols;
};

inline footprint footprint_of(const config& c, int64_t th, int64_t tw) {
  return {(th - 1) * c.stride[1] + int64_t{c.kernel[1] - 1} * c.dilation[1] + 1,
          (tw - 1) * c.stride[2] + int64_t{c.kernel[2] - 1} * c.dilation[2] + 1};
}

template <template <class> class Op, class P, class T>
__global__ void __launch_bounds__(P::block)
    tiled_kernel(const T* __restrict__ x, T* __restrict__ y, geometry g, config c, scalars p,
                 int th, footprint f) {
  constexpr int TW = P::tile_w;
  constexpr int Block = P::block;
  constexpr int Per = (P::tile_h * TW + Block - 1) / Block;
  extern __shared__ float tile[];
  const bool is_max = c.kind == kb::pool::max;
  const float pad = is_max ? -INFINITY : 0.0f;
  const int64_t th_count = ceil_div(g.out[1], th);
  const int64_t tw_count = ceil_div(g.out[2], TW);
  const int64_t work = g.planes * g.out[0] * th_count * tw_count;
  const int64_t footprint_elems = f.rows * f.cols;
  for (int64_t b = blockIdx.x; b < work; b += gridDim.x) {
    const int64_t oh_tile = b / tw_count % th_count;
    const int64_t ow0 = (b % tw_count) * TW;
    const int64_t oh0 = oh_tile * th;
    int64_t rest = b / tw_count / th_count;
    const int64_t od = rest % g.out[0];
    const int64_t plane = rest / g.out[0];
    const T* xp = x + plane * g.in_plane();
    const int64_t h0 = oh0 * c.stride[1] - c.padding[1];
    const int64_t w0 = ow0 * c.stride[2] - c.padding[2];
    float acc[Per];
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      acc[j] = pad;
    }
    const int64_t d_start = od * c.stride[0] - c.padding[0];
    for (int kd = 0; kd < c.kernel[0]; ++kd) {
      const int64_t d = d_start + int64_t{kd} * c.dilation[0];
      if (d < 0 || d >= g.in[0]) {
        continue; // uniform across the block
      }
      __syncthreads(); // the previous footprint has been read
      const T* xd = xp + d * g.in[1] * g.in[2];
      for (int64_t i = threadIdx.x; i < footprint_elems; i += Block) {
        const int64_t h = h0 + i / f.cols;
        const int64_t w = w0 + i % f.cols;
        tile[i] = h >= 0 && h < g.in[1] && w >= 0 && w < g.in[2]
                      ? load_one<float, T>(xd + h * g.in[2] + w)
                      : pad;
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < Per; ++j) {
        const int t = static_cast<int>(threadIdx.x) + j * Block;
        const int r = t / TW;
        const int col = t % TW;
        if (r < th && oh0 + r < g.out[1] && ow0 + col < g.out[2]) {
          const float* base = tile + int64_t{r} * c.stride[1] * f.cols + int64_t{col} * c.stride[2];
          float a = acc[j];
          for (int kh = 0; kh < c.kernel[1]; ++kh) {
            const float* line = base + int64_t{kh} * c.dilation[1] * f.cols;
            for (int kw = 0; kw < c.kernel[2]; ++kw) {
              const float v = line[int64_t{kw} * c.dilation[2]];
              if (is_max) {
                if (v > a || v != v) {
                  a = v;
                }
              } else {
                a += v;
              }
            }
          }
          acc[j] = a;
        }
      }
    }
    T* yp = y + (plane * g.out[0] + od) * g.out[1] * g.out[2];
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      const int t = static_cast<int>(threadIdx.x) + j * Block;
      const int64_t oh = oh0 + t / TW;
      const int64_t ow = ow0 + t % TW;
      if (t / TW < th && oh < g.out[1] && ow < g.out[2]) {
        float v = acc[j];
        if (!is_max) {
          const kb::pool::span w[3] = {kb::pool::span_of(g, c, 0, od),
                                       kb::pool::span_of(g, c, 1, oh),
                                       kb::pool::span_of(g, c, 2, ow)};
          const bool empty = w[0].lo >= w[0].hi || w[1].lo >= w[1].hi || w[2].lo >= w[2].hi;
          v = empty ? 0.0f : v / static_cast<float>(kb::pool::avg_divisor(c, w));
        }
        store_one<T, float>(yp + oh * g.out[2] + ow, Op<float>::epilogue(v, p.v));
      }
    }
  }
}

#endif

template <template <class> class Op, int Block, int Rows, class T>
int launch_direct(const kb_args* a, const operands& o, const config& c) {
  const int64_t work = o.g.planes * o.g.out[0] * ceil_div(o.g.out[1], Rows) * o.g.out[2];
  direct_kernel<Op, Block, Rows, T><<<capped_grid(ceil_div(work, Block)), Block, 0, stream_of(a)>>>(
      static_cast<const T*>(o.x->data), static_cast<T*>(o.y), o.g, c, scalars_of(a));
  return static_cast<int>(cudaGetLastError());
}

template <template <class> class Op, class P> struct direct {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::rows_per_thread >= 1, "rows_per_thread: at least 1");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return launch_direct<Op, P::block, P::rows_per_thread, T>(a, o, c);
    });
  }
};

template <template <class> class Op, class P> struct tiled {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::tile_w >= 1 && P::tile_h >= 1, "tile_w, tile_h: at least 1");
  static constexpr int64_t max_footprint_bytes = 48 * 1024;

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const int th = static_cast<int>(min64(P::tile_h, o.g.out[1]));
      // The footprint of th rows and the full tile width (the kernel indexes columns by tile_w).
      const footprint full = footprint_of(c, th, P::tile_w);
      const int64_t bytes = full.rows * full.cols * static_cast<int64_t>(sizeof(float));
      if (bytes > max_footprint_bytes) {
        return launch_direct<Op, 256, 1, T>(a, o, c);
      }
      const int64_t work =
          o.g.planes * o.g.out[0] * ceil_div(o.g.out[1], th) * ceil_div(o.g.out[2], P::tile_w);
      tiled_kernel<Op, P, T>
          <<<capped_grid(work), P::block, static_cast<size_t>(bytes), stream_of(a)>>>(
              static_cast<const T*>(o.x->data), static_cast<T*>(o.y), o.g, c, scalars_of(a), th,
              full);
      return static_cast<int>(cudaGetLastError());
    });
  }
};

} // namespace kb::strategies::pool
