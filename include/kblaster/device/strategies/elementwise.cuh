// Strategy library, family `elementwise` (y[i] = map(x[i])).
//
// elementwise::vectorized<Op, P>, P's members:
//   block          threads per block (multiple of 32)
//   vector_bytes   bytes per load and store (4, 8 or 16); 16-byte accesses when x and y share
//                  their alignment, a scalar head up to the first aligned element and a scalar
//                  tail; plain scalar accesses when they do not
//   unroll         vectors per thread per step, all loaded before the first is used
//   blocks_per_sm  0: one pass (a block per block * unroll vectors); k: k blocks per
//                  multiprocessor walking the tensor in a grid-stride loop
//   hint           cache_hint of the loads and stores
#pragma once

#include "kblaster/device/strategies/common.cuh"

namespace kb::strategies::elementwise {

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    vectorized_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t head, int64_t nvec,
                      int64_t n) {
  using A = float;
  constexpr int U = P::unroll;
  constexpr cache_hint H = P::hint;
  constexpr int64_t chunk = int64_t{P::block} * U; // vectors per block and step
  const T* xb = x + head;
  T* yb = y + head;
  const int64_t chunks = ceil_div(nvec, chunk);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t first = c * chunk + threadIdx.x;
    A v[U][V];
    if ((c + 1) * chunk <= nvec) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        load_vec<A, T, V, H>(xb + (first + int64_t{u} * P::block) * V, v[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int i = 0; i < V; ++i) {
          v[u][i] = Op<A>::map(v[u][i]);
        }
        store_vec<T, A, V, H>(yb + (first + int64_t{u} * P::block) * V, v[u]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (first + int64_t{u} * P::block < nvec) {
          load_vec<A, T, V, H>(xb + (first + int64_t{u} * P::block) * V, v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (first + int64_t{u} * P::block < nvec) {
#pragma unroll
          for (int i = 0; i < V; ++i) {
            v[u][i] = Op<A>::map(v[u][i]);
          }
          store_vec<T, A, V, H>(yb + (first + int64_t{u} * P::block) * V, v[u]);
        }
      }
    }
  }
  // The scalar elements: the head before the first aligned vector and the tail after the last.
  const int64_t tail_begin = head + nvec * V;
  const int64_t scalars = head + (n - tail_begin);
  for (int64_t j = blockIdx.x * int64_t{P::block} + threadIdx.x; j < scalars;
       j += int64_t{gridDim.x} * P::block) {
    const int64_t i = j < head ? j : tail_begin + (j - head);
    y[i] = cvt<T>(Op<A>::map(cvt<A>(x[i])));
  }
}

template <template <class> class Op, class P> struct vectorized {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::vector_bytes == 4 || P::vector_bytes == 8 || P::vector_bytes == 16,
                "vector_bytes: 4, 8 or 16");
  static_assert(P::unroll >= 1, "unroll: at least 1");

  template <class T, int V> static int run(const T* x, T* y, int64_t n, cudaStream_t stream) {
    int64_t head = 0;
    int64_t nvec = n;
    if constexpr (V > 1) {
      constexpr uintptr_t bytes = sizeof(T) * V;
      const uintptr_t misalign = reinterpret_cast<uintptr_t>(x) % bytes;
      head = min64(n, static_cast<int64_t>(((bytes - misalign) % bytes) / sizeof(T)));
      nvec = (n - head) / V;
    }
    int64_t blocks = ceil_div(nvec, int64_t{P::block} * P::unroll);
    if (P::blocks_per_sm > 0) {
      device_limits dev;
      KB_RETURN_IF_CUDA_ERROR(query_device(&dev));
      blocks = min64(blocks, int64_t{P::blocks_per_sm} * dev.sms);
    }
    vectorized_kernel<Op, P, T, V>
        <<<capped_grid(blocks), P::block, 0, stream>>>(x, y, head, nvec, n);
    return static_cast<int>(cudaGetLastError());
  }

  static int launch(const kb_args* a) {
    if (a->num_inputs < 1 || a->num_outputs < 1) {
      return -1;
    }
    const kb_tensor& xt = a->inputs[0];
    const kb_tensor& yt = a->outputs[0];
    if (numel(xt) != numel(yt) || !is_contiguous(xt) || !is_contiguous(yt) ||
        xt.dtype != yt.dtype) {
      return -1;
    }
    const int64_t n = numel(xt);
    return dispatch_storage(xt.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const T* x = static_cast<const T*>(xt.data);
      T* y = static_cast<T*>(yt.data);
      // Vectors need x and y at the same offset from a vector boundary.
      if (reinterpret_cast<uintptr_t>(x) % (sizeof(T) * V) ==
          reinterpret_cast<uintptr_t>(y) % (sizeof(T) * V)) {
        return run<T, V>(x, y, n, stream_of(a));
      }
      return run<T, 1>(x, y, n, stream_of(a));
    });
  }
};

} // namespace kb::strategies::elementwise
