// Family `elementwise`: y[i] = op(x[i]) over tensors of the same shape.
//
// A task's math file defines
//   template <class A> struct kb_op {
//     static KB_HD A map(A x);        // A is float in kernels, double in the oracle
//   };
#pragma once

#include "kblaster/device/families/common.cuh"

namespace kb::elementwise {

template <template <class> class Op, class A, class Tin, class Tout>
__global__ void naive_kernel(const Tin* __restrict__ x, Tout* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = cvt<Tout>(Op<A>::map(cvt<A>(x[i])));
  }
}

// The plain driver: one element per thread in a grid-stride loop. With A = double and a float64
// output it is the GPU oracle; with A = float it is the baseline.
template <template <class> class Op, class A, class Tout> int launch_naive(const kb_args* a) {
  if (a->num_inputs < 1 || a->num_outputs < 1 || numel(a->inputs[0]) != numel(a->outputs[0]) ||
      !is_contiguous(a->inputs[0]) || !is_contiguous(a->outputs[0])) {
    return -1;
  }
  const int64_t n = numel(a->inputs[0]);
  return dispatch_float(a->inputs[0].dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    constexpr unsigned block = 256;
    naive_kernel<Op, A, Tin, Tout><<<grid_for(n, block), block, 0, stream_of(a)>>>(
        static_cast<const Tin*>(a->inputs[0].data), static_cast<Tout*>(a->outputs[0].data), n);
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a) {
  const int64_t n = numel(a->inputs[0]);
  double* y = static_cast<double*>(a->outputs[0].data);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = Op<double>::map(read_as_double(a->inputs[0].data, a->inputs[0].dtype, i));
  }
  return 0;
}

template <template <class> class Op> int baseline(const kb_args* a) {
  return dispatch_float(a->outputs[0].dtype, [&](auto tag) {
    using Tout = typename decltype(tag)::type;
    return launch_naive<Op, float, Tout>(a);
  });
}

} // namespace kb::elementwise

#define KB_ELEMENTWISE_ORACLE(OP)                                                                  \
  KB_ORACLE_EXPORTS("elementwise", (kb::elementwise::launch_naive<OP, double, double>(args)),      \
                    (kb::elementwise::oracle_cpu<OP>(args)), 0)

#define KB_ELEMENTWISE_BASELINE(OP)                                                                \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::elementwise::baseline<OP>(args);                                                    \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: elementwise, one element per thread";                                        \
  }
