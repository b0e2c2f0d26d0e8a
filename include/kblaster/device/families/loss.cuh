// Family `loss`: a per-row statistic over the class axis combined with the logit of the row's
// target, then one scalar over all rows:
//   loss = finalize_rows(sum over rows of row_loss(reduce(x[row, :]), x[row, target[row]])).
// x is viewed as [outer, extent, inner] (extent = classes); target has outer * inner int64 values.
//
// A task's math file defines
//   template <class A> struct kb_op {
//     struct state { ... };
//     static KB_HD state init();
//     static KB_HD state accumulate(state s, A x);
//     static KB_HD state combine(state a, state b);
//     static KB_HD A row_loss(state s, A x_target, int64_t n, const double* params);
//     static KB_HD A finalize_rows(A sum, int64_t rows);   // e.g. the mean
//   };
//
// Pointwise losses (the target is a floating-point tensor of x's shape, or of a trailing part of
// it that PyTorch broadcasts over the leading axes: MSE, L1, Huber, KL divergence, hinge, ...):
//   loss = finalize(sum over every element i of elem(x[i], t[i % numel(t)]), n, rows)
// with n the element count and rows = outer * inner of the reduced axes (e.g. the batch). The
// math, usually generated from the contract's [loss] expressions (docs/task-format.md), defines
//   template <class A> struct kb_op {
//     static KB_HD A elem(A x, A t, const double* params);
//     static KB_HD A finalize(A sum, int64_t n, int64_t rows);
//   };
#pragma once

#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/normalize.cuh"

namespace kb::loss {

struct config {
  int begin;
  int end;
  int x;
  int target;
};

using normalize::layout;

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  return {product(x, 0, c.begin), product(x, c.begin, c.end), product(x, c.end, x.ndim)};
}

template <template <class> class Op, class A, class Tin>
__global__ void row_losses(const Tin* __restrict__ x, const int64_t* __restrict__ target,
                           A* __restrict__ losses, layout L, scalars p) {
  using op = Op<A>;
  const int64_t rows = L.outer * L.inner;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t o = row / L.inner;
    const int64_t i = row % L.inner;
    const int64_t base = o * L.extent * L.inner + i;
    typename op::state s = op::init();
    for (int64_t r = threadIdx.x; r < L.extent; r += blockDim.x) {
      s = op::accumulate(s, cvt<A>(x[base + r * L.inner]));
    }
    s = block_reduce(s, [](const typename op::state& u, const typename op::state& v) {
      return op::combine(u, v);
    });
    if (threadIdx.x == 0) {
      const int64_t t = target[row];
      const A xt = (t >= 0 && t < L.extent) ? cvt<A>(x[base + t * L.inner]) : A(NAN);
      losses[row] = op::row_loss(s, xt, L.extent, p.v);
    }
  }
}

template <template <class> class Op, class A, class Tout>
__global__ void sum_rows(const A* __restrict__ losses, int64_t rows, Tout* __restrict__ y) {
  A acc = A(0);
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    acc += losses[r];
  }
  acc = block_reduce(acc, [](A u, A v) { return u + v; });
  if (threadIdx.x == 0) {
    y[0] = cvt<Tout>(Op<A>::finalize_rows(acc, rows));
  }
}

template <class A> uint64_t workspace_bytes(const kb_args* a, const config& c) {
  const layout L = layout_of(a->inputs[c.x], c);
  return static_cast<uint64_t>(L.outer * L.inner) * sizeof(A);
}

// Two fixed-order stages (no atomics), so the result is bitwise reproducible.
template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  if (!is_contiguous(xt) || a->inputs[c.target].dtype != KB_INT64 ||
      numel(a->inputs[c.target]) != L.outer * L.inner || numel(a->outputs[0]) != 1 ||
      a->workspace_bytes < workspace_bytes<A>(a, c)) {
    return -1;
  }
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const int64_t rows = L.outer * L.inner;
    A* losses = static_cast<A*>(a->workspace);
    const unsigned grid = static_cast<unsigned>(rows < 65535 * 32 ? rows : 65535 * 32);
    row_losses<Op, A, Tin><<<grid, 256, 0, stream_of(a)>>>(
        static_cast<const Tin*>(xt.data), static_cast<const int64_t*>(a->inputs[c.target].data),
        losses, L, scalars_of(a));
    sum_rows<Op, A, Tout>
        <<<1, 1024, 0, stream_of(a)>>>(losses, rows, static_cast<Tout*>(a->outputs[0].data));
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  using op = Op<double>;
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  const int64_t* target = static_cast<const int64_t*>(a->inputs[c.target].data);
  const scalars p = scalars_of(a);
  double sum = 0;
  for (int64_t o = 0; o < L.outer; ++o) {
    for (int64_t i = 0; i < L.inner; ++i) {
      const int64_t base = o * L.extent * L.inner + i;
      typename op::state s = op::init();
      for (int64_t r = 0; r < L.extent; ++r) {
        s = op::accumulate(s, read_as_double(xt.data, xt.dtype, base + r * L.inner));
      }
      const int64_t t = target[o * L.inner + i];
      const double x_t =
          (t >= 0 && t < L.extent) ? read_as_double(xt.data, xt.dtype, base + t * L.inner) : NAN;
      sum += op::row_loss(s, x_t, L.extent, p.v);
    }
  }
  static_cast<double*>(a->outputs[0].data)[0] = op::finalize_rows(sum, L.outer * L.inner);
  return 0;
}

// ---- pointwise losses -------------------------------------------------------------------------

struct pointwise_config {
  int begin;
  int end;
  int x;
  int target;
};

// Elements per thread of the plain driver: a block sums 256 * this many consecutive elements.
constexpr int pointwise_items = 4;

KB_HD int64_t pointwise_partials(int64_t n) {
  return (n + 256 * pointwise_items - 1) / (256 * pointwise_items);
}

inline bool pointwise_operands(const kb_args* a, const pointwise_config& c) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs || c.target < 0 ||
      c.target >= a->num_inputs) {
    return false;
  }
  const kb_tensor& x = a->inputs[c.x];
  const kb_tensor& t = a->inputs[c.target];
  return is_contiguous(x) && is_contiguous(t) && x.dtype == t.dtype && numel(t) > 0 &&
         numel(x) % numel(t) == 0 && numel(a->outputs[0]) == 1 && c.end <= x.ndim;
}

// The target's element for x's element i: t's elements cycle over x's (a target of a trailing
// part of x's shape, broadcast over the leading axes); nt == n for a target of x's shape.
KB_HD int64_t target_index(int64_t i, int64_t n, int64_t nt) {
  return nt == n ? i : i % nt;
}

template <class A> uint64_t pointwise_workspace_bytes(const kb_args* a, const pointwise_config& c) {
  if (!pointwise_operands(a, c)) {
    return 0;
  }
  return static_cast<uint64_t>(pointwise_partials(numel(a->inputs[c.x]))) * sizeof(A);
}

template <template <class> class Op, class A, class Tin>
__global__ void pointwise_partial_sums(const Tin* __restrict__ x, const Tin* __restrict__ t,
                                       int64_t n, int64_t nt, scalars p, A* __restrict__ partials) {
  const int64_t base = int64_t{blockIdx.x} * 256 * pointwise_items;
  A acc = A(0);
  for (int k = 0; k < pointwise_items; ++k) {
    const int64_t i = base + int64_t{k} * 256 + threadIdx.x;
    if (i < n) {
      acc += Op<A>::elem(cvt<A>(x[i]), cvt<A>(t[target_index(i, n, nt)]), p.v);
    }
  }
  acc = block_reduce(acc, [](A u, A v) { return u + v; });
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
  }
}

template <template <class> class Op, class A, class Tout>
__global__ void pointwise_finish(const A* __restrict__ partials, int64_t count, int64_t n,
                                 int64_t rows, Tout* __restrict__ y) {
  A acc = A(0);
  for (int64_t q = threadIdx.x; q < count; q += blockDim.x) {
    acc += partials[q];
  }
  acc = block_reduce(acc, [](A u, A v) { return u + v; });
  if (threadIdx.x == 0) {
    y[0] = cvt<Tout>(Op<A>::finalize(acc, n, rows));
  }
}

// The plain driver: a block per 1024 consecutive elements, then one block over the block sums,
// both in a fixed order (bitwise reproducible).
template <template <class> class Op, class A, bool OutputIsInputType>
int launch_pointwise(const kb_args* a, const pointwise_config& c) {
  if (!pointwise_operands(a, c) || a->workspace_bytes < pointwise_workspace_bytes<A>(a, c)) {
    return -1;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const int64_t n = numel(xt);
  const layout L = {product(xt, 0, c.begin), product(xt, c.begin, c.end),
                    product(xt, c.end, xt.ndim)};
  const int64_t count = pointwise_partials(n);
  if (count > 2147483647 || (!OutputIsInputType && a->outputs[0].dtype != KB_FLOAT64) ||
      (OutputIsInputType && a->outputs[0].dtype != xt.dtype)) {
    return -1;
  }
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    A* partials = static_cast<A*>(a->workspace);
    if (count > 0) {
      pointwise_partial_sums<Op, A, Tin><<<static_cast<unsigned>(count), 256, 0, stream_of(a)>>>(
          static_cast<const Tin*>(xt.data), static_cast<const Tin*>(a->inputs[c.target].data), n,
          numel(a->inputs[c.target]), scalars_of(a), partials);
    }
    pointwise_finish<Op, A, Tout><<<1, 1024, 0, stream_of(a)>>>(
        partials, count, n, L.outer * L.inner, static_cast<Tout*>(a->outputs[0].data));
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op>
int oracle_pointwise_cpu(const kb_args* a, const pointwise_config& c) {
  using op = Op<double>;
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& tt = a->inputs[c.target];
  const int64_t n = numel(xt);
  const int64_t nt = numel(tt);
  const scalars p = scalars_of(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += op::elem(read_as_double(xt.data, xt.dtype, i),
                    read_as_double(tt.data, tt.dtype, target_index(i, n, nt)), p.v);
  }
  static_cast<double*>(a->outputs[0].data)[0] =
      op::finalize(sum, n, product(xt, 0, c.begin) * product(xt, c.end, xt.ndim));
  return 0;
}

} // namespace kb::loss

#define KB_POINTWISE_LOSS_ORACLE(OP, CONFIG)                                                       \
  KB_ORACLE_EXPORTS("loss", (kb::loss::launch_pointwise<OP, double, false>(args, CONFIG)),         \
                    (kb::loss::oracle_pointwise_cpu<OP>(args, CONFIG)),                            \
                    (kb::loss::pointwise_workspace_bytes<double>(args, CONFIG)))

#define KB_POINTWISE_LOSS_BASELINE(OP, CONFIG)                                                     \
  extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {              \
    if (!kb::loss::pointwise_operands(args, CONFIG)) {                                             \
      return -1;                                                                                   \
    }                                                                                              \
    *bytes = kb::loss::pointwise_workspace_bytes<float>(args, CONFIG);                             \
    return 0;                                                                                      \
  }                                                                                                \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::loss::launch_pointwise<OP, float, true>(args, CONFIG);                              \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: pointwise loss, a block per 1024 elements, then one block over the block "   \
           "sums";                                                                                 \
  }

#define KB_LOSS_ORACLE(OP, CONFIG)                                                                 \
  KB_ORACLE_EXPORTS("loss", (kb::loss::launch_naive<OP, double, false>(args, CONFIG)),             \
                    (kb::loss::oracle_cpu<OP>(args, CONFIG)),                                      \
                    (kb::loss::workspace_bytes<double>(args, CONFIG)))

#define KB_LOSS_BASELINE(OP, CONFIG)                                                               \
  extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {              \
    *bytes = kb::loss::workspace_bytes<float>(args, CONFIG);                                       \
    return 0;                                                                                      \
  }                                                                                                \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::loss::launch_naive<OP, float, true>(args, CONFIG);                                  \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: loss, one block per row, then one block over the rows";                      \
  }
