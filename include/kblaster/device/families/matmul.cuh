// Family `matmul`: c[m, n] = epilogue(sum over k of a[m, k] * b[k, n]), row-major a (M x K),
// b (K x N) and c (M x N); matrix-vector products are the case N = 1.
//
// A task's math file defines
//   template <class A> struct kb_op {
//     static KB_HD A epilogue(A acc);   // identity for a plain product
//   };
#pragma once

#include "kblaster/device/families/common.cuh"

namespace kb::matmul {

struct config {
  int a;
  int b;
};

struct dims {
  int64_t m;
  int64_t n;
  int64_t k;
};

// One block per output element, reducing over k: right when N is small (matrix-vector).
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void block_per_output(const Tin* __restrict__ a, const Tin* __restrict__ b, Tout* __restrict__ c, dims d) {
  const int64_t outputs = d.m * d.n;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t m = o / d.n;
    const int64_t n = o % d.n;
    A acc = A(0);
    for (int64_t k = threadIdx.x; k < d.k; k += blockDim.x) {
      acc = fn::fma(cvt<A>(a[m * d.k + k]), cvt<A>(b[k * d.n + n]), acc);
    }
    acc = block_reduce(acc, [](A u, A v) { return u + v; });
    if (threadIdx.x == 0) {
      c[o] = cvt<Tout>(Op<A>::epilogue(acc));
    }
  }
}

// The textbook shared-memory tiled product, one output per thread.
constexpr int tile = 16;

template <template <class> class Op, class A, class Tin, class Tout>
__global__ void tiled(const Tin* __restrict__ a, const Tin* __restrict__ b, Tout* __restrict__ c, dims d) {
  __shared__ A as[tile][tile];
  __shared__ A bs[tile][tile + 1];
  const int64_t row = blockIdx.y * static_cast<int64_t>(tile) + threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(tile) + threadIdx.x;
  A acc = A(0);
  for (int64_t k0 = 0; k0 < d.k; k0 += tile) {
    const int64_t ka = k0 + threadIdx.x;
    const int64_t kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < d.m && ka < d.k) ? cvt<A>(a[row * d.k + ka]) : A(0);
    bs[threadIdx.y][threadIdx.x] = (kb < d.k && col < d.n) ? cvt<A>(b[kb * d.n + col]) : A(0);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < tile; ++k) {
      acc = fn::fma(as[threadIdx.y][k], bs[k][threadIdx.x], acc);
    }
    __syncthreads();
  }
  if (row < d.m && col < d.n) {
    c[row * d.n + col] = cvt<Tout>(Op<A>::epilogue(acc));
  }
}

inline bool dims_of(const kb_args* a, const config& c, dims* d) {
  const kb_tensor& at = a->inputs[c.a];
  const kb_tensor& bt = a->inputs[c.b];
  if (at.ndim != 2 || bt.ndim != 2 || at.shape[1] != bt.shape[0] || !is_contiguous(at) || !is_contiguous(bt) ||
      !is_contiguous(a->outputs[0]) || numel(a->outputs[0]) != at.shape[0] * bt.shape[1] || at.dtype != bt.dtype) {
    return false;
  }
  *d = {at.shape[0], bt.shape[1], at.shape[1]};
  return true;
}

template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  dims d{};
  if (!dims_of(a, c, &d)) {
    return -1;
  }
  return dispatch_float(a->inputs[c.a].dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const Tin* A_ = static_cast<const Tin*>(a->inputs[c.a].data);
    const Tin* B_ = static_cast<const Tin*>(a->inputs[c.b].data);
    Tout* C_ = static_cast<Tout*>(a->outputs[0].data);
    if (d.n < tile) {
      const int64_t outputs = d.m * d.n;
      const unsigned grid = static_cast<unsigned>(outputs < 65535 * 32 ? outputs : 65535 * 32);
      block_per_output<Op, A, Tin, Tout><<<grid, 256, 0, stream_of(a)>>>(A_, B_, C_, d);
    } else {
      const dim3 grid(static_cast<unsigned>((d.n + tile - 1) / tile), static_cast<unsigned>((d.m + tile - 1) / tile));
      tiled<Op, A, Tin, Tout><<<grid, dim3(tile, tile), 0, stream_of(a)>>>(A_, B_, C_, d);
    }
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  dims d{};
  if (!dims_of(a, c, &d)) {
    return -1;
  }
  const kb_tensor& at = a->inputs[c.a];
  const kb_tensor& bt = a->inputs[c.b];
  double* y = static_cast<double*>(a->outputs[0].data);
  for (int64_t m = 0; m < d.m; ++m) {
    for (int64_t n = 0; n < d.n; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < d.k; ++k) {
        acc += read_as_double(at.data, at.dtype, m * d.k + k) *
               read_as_double(bt.data, bt.dtype, k * d.n + n);
      }
      y[m * d.n + n] = Op<double>::epilogue(acc);
    }
  }
  return 0;
}

} // namespace kb::matmul

#define KB_MATMUL_ORACLE(OP, CONFIG)                                                               \
  KB_ORACLE_EXPORTS("matmul", (kb::matmul::launch_naive<OP, double, false>(args, CONFIG)),         \
                    (kb::matmul::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_MATMUL_BASELINE(OP, CONFIG)                                                             \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                       \
    return kb::matmul::launch_naive<OP, float, true>(args, CONFIG);                                \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                      \
    return "baseline: matmul, shared-memory 16x16 tiles (one block per output when N < 16)";       \
  }
