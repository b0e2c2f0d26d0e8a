// Family `pool`: PyTorch's MaxPool1d/2d/3d and AvgPool1d/2d/3d over the last `rank` dims of a
// contiguous x (the dims before them are independent planes, e.g. N x C). The spatial dims sit in
// three slots (D, H, W); a pool of lower rank leaves the outer slots at the identity window
// (kernel 1, stride 1, no padding, input and output extent 1), so one implementation serves 1-3D.
//
// Per slot s, output o covers the input positions o * stride - padding + k * dilation for
// k < kernel; positions outside the input are padding. As PyTorch:
//   max: the largest value of the window's input positions (-inf when it has none); a NaN wins
//        (the first one kept), as `v > m || isnan(v)`;
//   avg: the sum over the window clipped to the input, divided by divisor_override when set, else
//        by the window's size clipped to the padded input (count_include_pad) or to the input.
// The output extent is PyTorch's (floor, or ceil with the last window starting inside the input
// or its left padding).
//
// A task's math file defines
//   template <class A> struct kb_op {
//     static KB_HD A epilogue(A v, const double* params);   // applied to each output value
//   };
// (the generated default is the identity).
#pragma once

#include "kblaster/device/families/common.cuh"

namespace kb::pool {

enum kind_t : int { max = 0, avg = 1 };

struct config {
  int kind; // kind_t
  int rank; // pooled dims, 1-3
  int kernel[3];
  int stride[3];
  int padding[3];
  int dilation[3];
  int ceil_mode;
  int count_include_pad;
  int divisor_override; // 0: none
  int x;                // the input index of x
};

KB_HD int64_t output_size(int64_t in, int kernel, int stride, int padding, int dilation,
                          bool ceil_mode) {
  const int64_t num = in + 2 * int64_t{padding} - int64_t{dilation} * (kernel - 1) - 1 +
                      (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + padding) {
    --out;
  }
  return out;
}

// One call's extents: the planes and, per slot, the input and output extents.
struct geometry {
  int64_t planes;
  int64_t in[3];
  int64_t out[3];
  KB_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  KB_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  KB_HD int64_t outputs() const { return planes * out_plane(); }
};

// The geometry of x under c, and whether y is the contiguous output of that shape (x's dims with
// the pooled ones replaced by the output extents). False for anything else.
KB_HD bool geometry_of(const kb_tensor& x, const kb_tensor& y, const config& c, geometry* g) {
  if (c.rank < 1 || c.rank > 3 || x.ndim < c.rank + 1 || y.ndim != x.ndim || !is_contiguous(x) ||
      !is_contiguous(y)) {
    return false;
  }
  for (int s = 0; s < 3; ++s) {
    if (c.kernel[s] < 1 || c.stride[s] < 1 || c.dilation[s] < 1 || c.padding[s] < 0) {
      return false;
    }
  }
  g->planes = product(x, 0, x.ndim - c.rank);
  for (int i = 0; i < x.ndim - c.rank; ++i) {
    if (y.shape[i] != x.shape[i]) {
      return false;
    }
  }
  for (int s = 0; s < 3; ++s) {
    const int dim = x.ndim - 3 + s;
    g->in[s] = s >= 3 - c.rank ? x.shape[dim] : 1;
    g->out[s] = output_size(g->in[s], c.kernel[s], c.stride[s], c.padding[s], c.dilation[s],
                            c.ceil_mode != 0);
    if (g->out[s] < 1 || (s >= 3 - c.rank && y.shape[dim] != g->out[s])) {
      return false;
    }
  }
  return true;
}

// The window of output o along slot s: first position (may be negative) and, for avg, the
// clipped bounds [lo, hi) and the size of the window clipped to the padded input.
struct span {
  int64_t start;
  int64_t lo;
  int64_t hi;
  int64_t padded;
};

KB_HD span span_of(const geometry& g, const config& c, int s, int64_t o) {
  span w;
  w.start = o * c.stride[s] - c.padding[s];
  int64_t end = w.start + c.kernel[s];
  const int64_t limit = g.in[s] + c.padding[s];
  end = end < limit ? end : limit;
  w.padded = end - w.start;
  w.lo = w.start > 0 ? w.start : 0;
  w.hi = end < g.in[s] ? end : g.in[s];
  return w;
}

// The divisor of an average window (PyTorch's divide_factor).
KB_HD int64_t avg_divisor(const config& c, const span (&w)[3]) {
  if (c.divisor_override > 0) {
    return c.divisor_override;
  }
  if (c.count_include_pad) {
    return w[0].padded * w[1].padded * w[2].padded;
  }
  return (w[0].hi - w[0].lo) * (w[1].hi - w[1].lo) * (w[2].hi - w[2].lo);
}

// The pooled value of output (od, oh, ow) of one plane, with load(i) giving the plane's input
// element i (d * H * W + h * W + w) as A.
template <class A, class Load>
KB_HD A pool_one(const geometry& g, const config& c, int64_t od, int64_t oh, int64_t ow,
                 Load&& load) {
  const int64_t o[3] = {od, oh, ow};
  span w[3];
  for (int s = 0; s < 3; ++s) {
    w[s] = span_of(g, c, s, o[s]);
  }
  if (c.kind == max) {
    A m = A(-INFINITY);
    for (int kd = 0; kd < c.kernel[0]; ++kd) {
      const int64_t d = w[0].start + int64_t{kd} * c.dilation[0];
      if (d < 0 || d >= g.in[0]) {
        continue;
      }
      for (int kh = 0; kh < c.kernel[1]; ++kh) {
        const int64_t h = w[1].start + int64_t{kh} * c.dilation[1];
        if (h < 0 || h >= g.in[1]) {
          continue;
        }
        for (int kw = 0; kw < c.kernel[2]; ++kw) {
          const int64_t x = w[2].start + int64_t{kw} * c.dilation[2];
          if (x < 0 || x >= g.in[2]) {
            continue;
          }
          const A v = load((d * g.in[1] + h) * g.in[2] + x);
          if (v > m || v != v) {
            m = v;
          }
        }
      }
    }
    return m;
  }
  if (w[0].lo >= w[0].hi || w[1].lo >= w[1].hi || w[2].lo >= w[2].hi) {
    return A(0);
  }
  A sum = A(0);
  for (int64_t d = w[0].lo; d < w[0].hi; ++d) {
    for (int64_t h = w[1].lo; h < w[1].hi; ++h) {
      for (int64_t x = w[2].lo; x < w[2].hi; ++x) {
        sum += load((d * g.in[1] + h) * g.in[2] + x);
      }
    }
  }
  return sum / A(avg_divisor(c, w));
}

// Output index q of the flattened output as (plane, od, oh, ow).
KB_HD void unflatten(const geometry& g, int64_t q, int64_t* plane, int64_t* od, int64_t* oh,
                     int64_t* ow) {
  *ow = q % g.out[2];
  q /= g.out[2];
  *oh = q % g.out[1];
  q /= g.out[1];
  *od = q % g.out[0];
  *plane = q / g.out[0];
}

#if defined(__CUDACC__)
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void thread_per_output(const Tin* __restrict__ x, Tout* __restrict__ y, geometry g,
                                  config c, scalars p) {
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < g.outputs();
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t plane, od, oh, ow;
    unflatten(g, q, &plane, &od, &oh, &ow);
    const Tin* xp = x + plane * g.in_plane();
    const A v = pool_one<A>(g, c, od, oh, ow, [xp](int64_t i) { return cvt<A>(xp[i]); });
    y[q] = cvt<Tout>(Op<A>::epilogue(v, p.v));
  }
}
#endif

// One thread per output: in double into a float64 output (the GPU oracle), or in float into
// x's dtype (the baseline).
template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return -1;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  geometry g;
  if (!geometry_of(xt, yt, c, &g)) {
    return -1;
  }
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    if (yt.dtype != dtype_of<Tout>()) {
      return -1;
    }
    if constexpr (OutputIsInputType && std::is_same<Tin, double>::value) {
      return -1; // the baseline computes in fp32: float64 storage is the oracle's
    } else {
      constexpr unsigned block = 256;
      thread_per_output<Op, A, Tin, Tout><<<grid_for(g.outputs(), block), block, 0, stream_of(a)>>>(
          static_cast<const Tin*>(xt.data), static_cast<Tout*>(yt.data), g, c, scalars_of(a));
      return static_cast<int>(cudaGetLastError());
    }
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  geometry g;
  if (!geometry_of(xt, yt, c, &g)) {
    return -1;
  }
  double* y = static_cast<double*>(yt.data);
  const scalars p = scalars_of(a);
  for (int64_t q = 0; q < g.outputs(); ++q) {
    int64_t plane, od, oh, ow;
    unflatten(g, q, &plane, &od, &oh, &ow);
    const int64_t base = plane * g.in_plane();
    const double v = pool_one<double>(
        g, c, od, oh, ow, [&](int64_t i) { return read_as_double(xt.data, xt.dtype, base + i); });
    y[q] = Op<double>::epilogue(v, p.v);
  }
  return 0;
}

} // namespace kb::pool

#define KB_POOL_ORACLE(OP, CONFIG)                                                                 \
  KB_ORACLE_EXPORTS("pool", (kb::pool::launch_naive<OP, double, false>(args, CONFIG)),             \
                    (kb::pool::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_POOL_BASELINE(OP, CONFIG)                                                               \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::pool::launch_naive<OP, float, true>(args, CONFIG);                                  \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: pool, one thread per output walking its window";                             \
  }
