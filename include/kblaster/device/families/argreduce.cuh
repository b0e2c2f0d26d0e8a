// Family `argreduce`: y[o, i] = the index r of the largest (argmax) or smallest (argmin) x[o, r, i]
// over one axis `dim` of x, viewed as [outer, extent, inner]; an int64 output of outer * inner
// elements (keepdim or not). As PyTorch: ties give the first index, and NaN counts as both the
// largest and the smallest value (the first NaN of a row wins under argmax and argmin alike).
//
// The operation is fully described by the contract's [argreduce] table, carried by the config; a
// task's math file provides kb_op<A> (unused here: an arg-reduction has no epilogue).
#pragma once

#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/normalize.cuh"

namespace kb::argreduce {

enum op_kind : int { argmax = 0, argmin = 1 };

struct config {
  int dim; // the reduced axis of x
  int op;  // op_kind
  int x;   // the input index of x
};

using normalize::layout;

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  return {product(x, 0, c.dim), product(x, c.dim, c.dim + 1), product(x, c.dim + 1, x.ndim)};
}

// The running choice of an arg-reduction: a value and its index along the axis (-1: none yet).
template <class A> struct best {
  A value;
  int64_t index;
};

template <class A> KB_HD best<A> none() {
  return {A(0), -1};
}

// Whether (v, i) is preferred to (b, bi): the first NaN wins, then the larger (argmax) or smaller
// (argmin) value, equal values to the smaller index. A total order on (value, index) pairs, so
// the result does not depend on the order in which candidates are combined.
template <class A> KB_HD bool better(int op, A v, int64_t i, A b, int64_t bi) {
  if (i < 0) {
    return false;
  }
  if (bi < 0) {
    return true;
  }
  const bool vn = v != v;
  const bool bn = b != b;
  if (vn || bn) {
    return vn && (!bn || i < bi);
  }
  if (v == b) {
    return i < bi;
  }
  return op == argmax ? v > b : v < b;
}

template <class A> KB_HD best<A> pick(int op, const best<A>& a, const best<A>& b) {
  return better(op, b.value, b.index, a.value, a.index) ? b : a;
}

// One output by a plain walk of its axis in increasing index (the oracle's and the baseline's
// order; any order gives the same result).
template <class A, class Tin>
KB_HD best<A> walk(const Tin* x, const layout& L, int64_t o, int64_t i, int op) {
  best<A> b = none<A>();
  const int64_t base = o * L.extent * L.inner + i;
  for (int64_t r = 0; r < L.extent; ++r) {
    const A v = cvt<A>(x[base + r * L.inner]);
    if (better(op, v, r, b.value, b.index)) {
      b = {v, r};
    }
  }
  return b;
}

#if defined(__CUDACC__)
template <class A, class Tin, class Tout>
__global__ void thread_per_output(const Tin* __restrict__ x, Tout* __restrict__ y, layout L,
                                  int op) {
  const int64_t rows = L.outer * L.inner;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[row] = static_cast<Tout>(walk<A>(x, L, row / L.inner, row % L.inner, op).index);
  }
}
#endif

// Checks the call (x of a floating dtype, both contiguous, outer * inner outputs of dtype Tout)
// and runs one thread per output: in A = double into a float64 output (the GPU oracle), or in
// float into the int64 output (the baseline).
template <class A, class Tout> int launch_naive(const kb_args* a, const config& c) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return -1;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  const layout L = layout_of(xt, c);
  if (c.dim >= xt.ndim || !is_contiguous(xt) || !is_contiguous(yt) ||
      numel(yt) != L.outer * L.inner || yt.dtype != dtype_of<Tout>()) {
    return -1;
  }
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    if constexpr (std::is_same<A, float>::value && std::is_same<Tin, double>::value) {
      return -1; // the baseline computes in fp32: float64 storage is the oracle's
    } else {
      constexpr unsigned block = 256;
      thread_per_output<A, Tin, Tout>
          <<<grid_for(L.outer * L.inner, block), block, 0, stream_of(a)>>>(
              static_cast<const Tin*>(xt.data), static_cast<Tout*>(yt.data), L, c.op);
      return static_cast<int>(cudaGetLastError());
    }
  });
}

inline int oracle_cpu(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  double* y = static_cast<double*>(a->outputs[0].data);
  for (int64_t o = 0; o < L.outer; ++o) {
    for (int64_t i = 0; i < L.inner; ++i) {
      best<double> b = none<double>();
      const int64_t base = o * L.extent * L.inner + i;
      for (int64_t r = 0; r < L.extent; ++r) {
        const double v = read_as_double(xt.data, xt.dtype, base + r * L.inner);
        if (better(c.op, v, r, b.value, b.index)) {
          b = {v, r};
        }
      }
      y[o * L.inner + i] = static_cast<double>(b.index);
    }
  }
  return 0;
}

} // namespace kb::argreduce

#define KB_ARGREDUCE_ORACLE(OP, CONFIG)                                                            \
  KB_ORACLE_EXPORTS("argreduce", (kb::argreduce::launch_naive<double, double>(args, CONFIG)),      \
                    (kb::argreduce::oracle_cpu(args, CONFIG)), 0)

#define KB_ARGREDUCE_BASELINE(OP, CONFIG)                                                          \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::argreduce::launch_naive<float, int64_t>(args, CONFIG);                              \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: argreduce, one thread per output walking its axis";                          \
  }
