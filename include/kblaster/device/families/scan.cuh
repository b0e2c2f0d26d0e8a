// Family `scan`: the cumulative sum or product of x along one axis `dim`, x viewed as
// [outer, extent, inner] (a row is one (outer, inner) pair, `extent` elements `inner` apart);
// the output has x's shape. Options, as PyTorch expresses them:
//   reverse:   from the end of the axis (torch.cumsum(x.flip(dim), dim).flip(dim));
//   exclusive: each output leaves out its own element (the first is the identity, 0 or 1);
//   masked:    the values are x * mask, mask an input of x's shape (bool as 0/1, or any number),
//              as torch.cumsum(x * mask, dim).
//
// The operation is fully described by the contract's [scan] table, carried by the config. A
// task's math file defines
//   template <class A> struct kb_op {
//     static KB_HD A epilogue(A v, const double* params);   // applied to each output value
//   };
// (the generated default is the identity).
#pragma once

#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/normalize.cuh"

namespace kb::scan {

enum op_kind : int { sum = 0, prod = 1 };

struct config {
  int dim;       // the scanned axis of x
  int op;        // op_kind
  int reverse;   // 1: from the end of the axis
  int exclusive; // 1: each output leaves out its own element
  int x;         // the input index of x
  int mask;      // the input index of the mask, or -1
};

using normalize::layout;

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  return {product(x, 0, c.dim), product(x, c.dim, c.dim + 1), product(x, c.dim + 1, x.ndim)};
}

template <class A> KB_HD A identity(int op) {
  return op == sum ? A(0) : A(1);
}
template <class A> KB_HD A apply(int op, A a, A b) {
  return op == sum ? a + b : a * b;
}

// Element i of a mask of any dtype, as float.
KB_HD float mask_as_float(const void* p, kb_dtype d, int64_t i) {
  switch (d) {
  case KB_FLOAT32:
    return static_cast<const float*>(p)[i];
  case KB_FLOAT16:
    return cvt<float>(static_cast<const __half*>(p)[i]);
  case KB_BFLOAT16:
    return cvt<float>(static_cast<const __nv_bfloat16*>(p)[i]);
  case KB_INT32:
    return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  case KB_INT64:
    return static_cast<float>(static_cast<const int64_t*>(p)[i]);
  case KB_FLOAT64:
    return static_cast<float>(static_cast<const double*>(p)[i]);
  }
  return 0.0f;
}

// The position along the axis of the q-th element in scan order.
KB_HD int64_t position(const layout& L, int reverse, int64_t q) {
  return reverse ? L.extent - 1 - q : q;
}

// Whether the call's tensors fit the config: x contiguous, the output contiguous of x's size, the
// mask (when used) of x's size and contiguous.
inline bool args_fit(const kb_args* a, const config& c) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs || c.mask >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  if (c.dim >= xt.ndim || !is_contiguous(xt) || !is_contiguous(yt) || numel(yt) != numel(xt)) {
    return false;
  }
  if (c.mask >= 0) {
    const kb_tensor& mt = a->inputs[c.mask];
    if (!is_contiguous(mt) || numel(mt) != numel(xt)) {
      return false;
    }
  }
  return c.op == sum || c.op == prod;
}

#if defined(__CUDACC__)
// A thread per row, in scan order, accumulating in A.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void thread_per_row(const Tin* __restrict__ x, const void* __restrict__ mask,
                               kb_dtype mask_type, Tout* __restrict__ y, layout L, config c,
                               scalars p) {
  const int64_t rows = L.outer * L.inner;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (row / L.inner) * L.extent * L.inner + row % L.inner;
    A acc = identity<A>(c.op);
    for (int64_t q = 0; q < L.extent; ++q) {
      const int64_t i = base + position(L, c.reverse, q) * L.inner;
      A v = cvt<A>(x[i]);
      if (mask != nullptr) {
        v = v * A(mask_as_float(mask, mask_type, i));
      }
      A out;
      if (c.exclusive) {
        out = acc;
        acc = apply(c.op, acc, v);
      } else {
        acc = apply(c.op, acc, v);
        out = acc;
      }
      y[i] = cvt<Tout>(Op<A>::epilogue(out, p.v));
    }
  }
}
#endif

// One thread per row: in double into a float64 output (the GPU oracle; a float64 mask is read
// exactly only by the CPU oracle), or in float into x's dtype (the baseline).
template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  if (!args_fit(a, c)) {
    return -1;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  const layout L = layout_of(xt, c);
  const void* mask = c.mask >= 0 ? a->inputs[c.mask].data : nullptr;
  const kb_dtype mask_type = c.mask >= 0 ? a->inputs[c.mask].dtype : KB_FLOAT32;
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
      thread_per_row<Op, A, Tin, Tout>
          <<<grid_for(L.outer * L.inner, block), block, 0, stream_of(a)>>>(
              static_cast<const Tin*>(xt.data), mask, mask_type, static_cast<Tout*>(yt.data), L, c,
              scalars_of(a));
      return static_cast<int>(cudaGetLastError());
    }
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  double* y = static_cast<double*>(a->outputs[0].data);
  const scalars p = scalars_of(a);
  for (int64_t row = 0; row < L.outer * L.inner; ++row) {
    const int64_t base = (row / L.inner) * L.extent * L.inner + row % L.inner;
    double acc = identity<double>(c.op);
    for (int64_t q = 0; q < L.extent; ++q) {
      const int64_t i = base + position(L, c.reverse, q) * L.inner;
      double v = read_as_double(xt.data, xt.dtype, i);
      if (c.mask >= 0) {
        v *= read_as_double(a->inputs[c.mask].data, a->inputs[c.mask].dtype, i);
      }
      if (c.exclusive) {
        y[i] = Op<double>::epilogue(acc, p.v);
        acc = apply(c.op, acc, v);
      } else {
        acc = apply(c.op, acc, v);
        y[i] = Op<double>::epilogue(acc, p.v);
      }
    }
  }
  return 0;
}

} // namespace kb::scan

#define KB_SCAN_ORACLE(OP, CONFIG)                                                                 \
  KB_ORACLE_EXPORTS("scan", (kb::scan::launch_naive<OP, double, false>(args, CONFIG)),             \
                    (kb::scan::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_SCAN_BASELINE(OP, CONFIG)                                                               \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::scan::launch_naive<OP, float, true>(args, CONFIG);                                  \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: scan, one thread per row walking it in order";                               \
  }
