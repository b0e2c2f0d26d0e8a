// Family `reduce`: y[o, i] = finalize(reduce over r of x[o, r, i]), the reduced axes in the middle
// of x viewed as [outer, extent, inner]; the output has outer * inner elements (keepdim or not).
//
// A task's math file defines
//   template <class A> struct kb_op {
//     struct state { ... };                        // trivially copyable, size a multiple of 4
//     static KB_HD state init();
//     static KB_HD state accumulate(state s, A x);
//     static KB_HD state combine(state a, state b);
//     static KB_HD A finalize(state s, int64_t n, const double* params);
//   };
#pragma once

#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/normalize.cuh"

namespace kb::reduce {

struct config {
  int begin;
  int end;
  int x;
};

using normalize::layout;

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  return {product(x, 0, c.begin), product(x, c.begin, c.end), product(x, c.end, x.ndim)};
}

template <template <class> class Op, class A, class Tin, class Tout>
__global__ void thread_per_output(const Tin* __restrict__ x, Tout* __restrict__ y, layout L,
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
    y[row] = cvt<Tout>(op::finalize(s, L.extent, p.v));
  }
}

template <template <class> class Op, class A, class Tin, class Tout>
__global__ void block_per_output(const Tin* __restrict__ x, Tout* __restrict__ y, layout L,
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
    if (threadIdx.x == 0) {
      y[row] = cvt<Tout>(op::finalize(s, L.extent, p.v));
    }
  }
}

template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  const kb_tensor& xt = a->inputs[c.x];
  const layout L = layout_of(xt, c);
  if (!is_contiguous(xt) || !is_contiguous(a->outputs[0]) ||
      numel(a->outputs[0]) != L.outer * L.inner || c.end > xt.ndim) {
    return -1;
  }
  return dispatch_float(xt.dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const Tin* x = static_cast<const Tin*>(xt.data);
    Tout* y = static_cast<Tout*>(a->outputs[0].data);
    const int64_t rows = L.outer * L.inner;
    if (L.inner > 1) {
      constexpr unsigned block = 256;
      thread_per_output<Op, A, Tin, Tout>
          <<<grid_for(rows, block), block, 0, stream_of(a)>>>(x, y, L, scalars_of(a));
    } else {
      const unsigned grid = static_cast<unsigned>(rows < 65535 * 32 ? rows : 65535 * 32);
      block_per_output<Op, A, Tin, Tout><<<grid, 256, 0, stream_of(a)>>>(x, y, L, scalars_of(a));
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
  for (int64_t o = 0; o < L.outer; ++o) {
    for (int64_t i = 0; i < L.inner; ++i) {
      const int64_t base = o * L.extent * L.inner + i;
      typename op::state s = op::init();
      for (int64_t r = 0; r < L.extent; ++r) {
        s = op::accumulate(s, read_as_double(xt.data, xt.dtype, base + r * L.inner));
      }
      y[o * L.inner + i] = op::finalize(s, L.extent, p.v);
    }
  }
  return 0;
}

} // namespace kb::reduce

#define KB_REDUCE_ORACLE(OP, CONFIG)                                                               \
  KB_ORACLE_EXPORTS("reduce", (kb::reduce::launch_naive<OP, double, false>(args, CONFIG)),         \
                    (kb::reduce::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_REDUCE_BASELINE(OP, CONFIG)                                                             \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::reduce::launch_naive<OP, float, true>(args, CONFIG);                                \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: reduce, one thread per strided output or one block per contiguous row";      \
  }
