// Family `normalize`: per row statistics over the reduced axes, then an elementwise output,
// y = apply(x, finalize(reduce(x over the row)), weight[r], bias[r]).
// Input x is viewed as [outer, extent, inner], the reduced axes in the middle; a row is one
// (outer, inner) pair; weight and bias (optional) have `extent` elements.
//
// A task's math file defines
//   template <class A> struct kb_op {
//     struct state { ... };                       // trivially copyable, size a multiple of 4
//     using stats = ...;                          // what the output step needs of the row
//     static KB_HD state init();
//     static KB_HD state accumulate(state s, A x);
//     static KB_HD state combine(state a, state b);
//     static KB_HD stats finalize(state s, int64_t n, const double* params);
//     static KB_HD A apply(A x, const stats& st, A weight, A bias);  // weight 1, bias 0 if absent
//   };
#pragma once

#include "kblaster/device/families/common.cuh"

namespace kb::normalize {

struct config {
  int begin; // first reduced axis of x
  int end;   // one past the last reduced axis
  int x;     // input indices; -1 when absent
  int weight;
  int bias;
};

struct layout {
  int64_t outer;
  int64_t extent;
  int64_t inner;
};

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  return {product(x, 0, c.begin), product(x, c.begin, c.end), product(x, c.end, x.ndim)};
}

template <class A, class T> KB_HD A param_or(const T* p, int64_t r, A fallback) {
  return p == nullptr ? fallback : cvt<A>(p[r]);
}

// One thread per row: right for strided rows (inner > 1), where neighbouring threads read
// neighbouring addresses.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void thread_per_row(const Tin* __restrict__ x, const Tin* __restrict__ w,
                               const Tin* __restrict__ b, Tout* __restrict__ y, layout L,
                               scalars p) {
  using op = Op<A>;
  const int64_t rows = L.outer * L.inner;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = row / L.inner;
    const int64_t i = row % L.inner;
    const int64_t base = o * L.extent * L.inner + i;
    typename op::state s = op::init();
    for (int64_t r = 0; r < L.extent; ++r) {
      s = op::accumulate(s, cvt<A>(x[base + r * L.inner]));
    }
    const typename op::stats st = op::finalize(s, L.extent, p.v);
    for (int64_t r = 0; r < L.extent; ++r) {
      const int64_t k = base + r * L.inner;
      y[k] =
          cvt<Tout>(op::apply(cvt<A>(x[k]), st, param_or<A>(w, r, A(1)), param_or<A>(b, r, A(0))));
    }
  }
}

// One block per row: right for contiguous rows (inner == 1).
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void block_per_row(const Tin* __restrict__ x, const Tin* __restrict__ w,
                              const Tin* __restrict__ b, Tout* __restrict__ y, layout L,
                              scalars p) {
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
    const typename op::stats st = op::finalize(s, L.extent, p.v);
    for (int64_t r = threadIdx.x; r < L.extent; r += blockDim.x) {
      const int64_t k = base + r * L.inner;
      y[k] =
          cvt<Tout>(op::apply(cvt<A>(x[k]), st, param_or<A>(w, r, A(1)), param_or<A>(b, r, A(0))));
    }
  }
}

template <class T> const T* input_or_null(const kb_args* a, int index) {
  return index < 0 ? nullptr : static_cast<const T*>(a->inputs[index].data);
}

// The plain driver: with A = double and a float64 output it is the GPU oracle; with A = float it
// is the baseline.
template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  if (!is_contiguous(xt) || !is_contiguous(a->outputs[0]) || numel(xt) != numel(a->outputs[0]) ||
      c.end > xt.ndim) {
    return -1;
  }
  for (int idx : {c.weight, c.bias}) {
    if (idx >= 0 && a->inputs[idx].dtype != xt.dtype) {
      return -1;
    }
  }
  const layout L = layout_of(xt, c);
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const Tin* x = static_cast<const Tin*>(xt.data);
    const Tin* w = input_or_null<Tin>(a, c.weight);
    const Tin* b = input_or_null<Tin>(a, c.bias);
    Tout* y = static_cast<Tout*>(a->outputs[0].data);
    const int64_t rows = L.outer * L.inner;
    if (L.inner > 1) {
      constexpr unsigned block = 256;
      thread_per_row<Op, A, Tin, Tout>
          <<<grid_for(rows, block), block, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a));
    } else {
      const unsigned grid = static_cast<unsigned>(rows < 65535 * 32 ? rows : 65535 * 32);
      block_per_row<Op, A, Tin, Tout><<<grid, 256, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a));
    }
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  using op = Op<double>;
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  double* y = static_cast<double*>(a->outputs[0].data);
  const scalars p = scalars_of(a);
  const auto read = [&](int input, int64_t k) {
    return read_as_double(a->inputs[input].data, a->inputs[input].dtype, k);
  };
  for (int64_t o = 0; o < L.outer; ++o) {
    for (int64_t i = 0; i < L.inner; ++i) {
      const int64_t base = o * L.extent * L.inner + i;
      typename op::state s = op::init();
      for (int64_t r = 0; r < L.extent; ++r) {
        s = op::accumulate(s, read(c.x, base + r * L.inner));
      }
      const typename op::stats st = op::finalize(s, L.extent, p.v);
      for (int64_t r = 0; r < L.extent; ++r) {
        const int64_t k = base + r * L.inner;
        y[k] = op::apply(read(c.x, k), st, c.weight >= 0 ? read(c.weight, r) : 1.0,
                         c.bias >= 0 ? read(c.bias, r) : 0.0);
      }
    }
  }
  return 0;
}

} // namespace kb::normalize

#define KB_NORMALIZE_ORACLE(OP, CONFIG)                                                            \
  KB_ORACLE_EXPORTS("normalize", (kb::normalize::launch_naive<OP, double, false>(args, CONFIG)),   \
                    (kb::normalize::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_NORMALIZE_BASELINE(OP, CONFIG)                                                          \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::normalize::launch_naive<OP, float, true>(args, CONFIG);                             \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: normalize, one block per contiguous row or one thread per strided row";      \
  }
