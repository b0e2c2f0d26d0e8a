// Strategy library, family `argreduce` (y[o, i] = argmax or argmin over r of x[o, r, i], int64).
// Every strategy is correct for every layout; the strategy descriptors say where each is fast.
// The choice is a total order on (value, index) pairs (kb::argreduce::better: NaN first, then the
// value, ties to the smaller index), so every combining order gives the same index.
//
// argreduce::by_rows<Op, P>: contiguous rows (inner == 1): a warp (threads_per_row = 32, block 256)
// or a block of threads_per_row threads per row, vector loads with `unroll` vectors in flight per
// thread, the (value, index) pairs reduced with warp shuffles and a fixed-order block reduction.
// Strided rows (inner > 1) take the same kernel with one-element loads `inner` apart.
// P: threads_per_row, vector_bytes, unroll.
//
// argreduce::by_columns<Op, P>: strided axes (inner > 1): a thread per output, consecutive threads
// on consecutive inner positions (coalesced loads), walking the axis with `unroll` loads in flight;
// `split` threads share an output's axis (r = s, s + split, ...) and meet in shared memory in a
// fixed order. P: block_cols, split, unroll.
#pragma once

#include "kblaster/device/families/argreduce.cuh"
#include "kblaster/device/strategies/rows.cuh"

namespace kb::strategies::argreduce {

using kb::argreduce::best;
using kb::argreduce::config;
using rows::layout;

struct operands {
  const kb_tensor* x = nullptr;
  int64_t* y = nullptr;
  layout L{};
};

inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  out->x = &xt;
  out->y = static_cast<int64_t*>(yt.data);
  out->L = kb::argreduce::layout_of(xt, c);
  return c.dim < xt.ndim && is_contiguous(xt) && is_contiguous(yt) &&
         numel(yt) == rows::count(out->L) && yt.dtype == KB_INT64 && out->L.extent >= 1;
}

// Calls run(op) with the operation as a compile-time constant.
template <class Run> int dispatch_op(const config& c, Run&& run) {
  if (c.op == kb::argreduce::argmax) {
    return run(std::integral_constant<int, kb::argreduce::argmax>{});
  }
  if (c.op == kb::argreduce::argmin) {
    return run(std::integral_constant<int, kb::argreduce::argmin>{});
  }
  return -1;
}

#if defined(__CUDACC__)

template <int Op> __device__ __forceinline__ void consider(best<float>& b, float v, int64_t r) {
  if (kb::argreduce::better(Op, v, r, b.value, b.index)) {
    b = {v, r};
  }
}

template <int Op, class P, class T, int V, int Lanes, int Block>
__global__ void __launch_bounds__(Block)
    rows_kernel(const T* __restrict__ x, int64_t* __restrict__ y, layout L) {
  using G = rows::group<Lanes, Block>;
  const int lane = G::lane();
  const int64_t nvec = L.extent / V;
  for (int64_t row = int64_t{blockIdx.x} * G::per_block + G::index(); row < rows::count(L);
       row += int64_t{gridDim.x} * G::per_block) {
    best<float> b = kb::argreduce::none<float>();
    rows::stream<P::unroll, T, V>(x + rows::base(L, row), L.inner, 0, nvec, lane, Lanes,
                                  [&](int64_t j, const vec_word<T, V>& w) {
                                    float v[V];
                                    unpack<float, T, V>(w, v);
#pragma unroll
                                    for (int k = 0; k < V; ++k) {
                                      consider<Op>(b, v[k], j * V + k);
                                    }
                                  });
    b = G::allreduce(b, [](const best<float>& u, const best<float>& w) {
      return kb::argreduce::pick(Op, u, w);
    });
    if (lane == 0) {
      y[row] = b.index;
    }
  }
}

template <int Op, class P, class T>
__global__ void __launch_bounds__(P::block_cols* P::split)
    columns_kernel(const T* __restrict__ x, int64_t* __restrict__ y, layout L) {
  constexpr int Cols = P::block_cols;
  constexpr int Split = P::split;
  constexpr int U = P::unroll;
  __shared__ best<float> part[Split > 1 ? Split : 1][Cols];
  const int tx = static_cast<int>(threadIdx.x % Cols);
  const int ty = static_cast<int>(threadIdx.x / Cols);
  const int64_t outputs = rows::count(L);
  for (int64_t q0 = int64_t{blockIdx.x} * Cols; q0 < outputs; q0 += int64_t{gridDim.x} * Cols) {
    const int64_t q = q0 + tx;
    best<float> b = kb::argreduce::none<float>();
    if (q < outputs) {
      const T* p = x + rows::base(L, q);
      int64_t r = ty;
      for (; r + int64_t{U - 1} * Split < L.extent; r += int64_t{U} * Split) {
        float v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          v[u] = load_one<float, T>(p + (r + int64_t{u} * Split) * L.inner);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          consider<Op>(b, v[u], r + int64_t{u} * Split);
        }
      }
      for (; r < L.extent; r += Split) {
        consider<Op>(b, load_one<float, T>(p + r * L.inner), r);
      }
    }
    if constexpr (Split > 1) {
      __syncthreads(); // the previous output's partials have been read
      part[ty][tx] = b;
      __syncthreads();
      if (ty == 0) {
        for (int s = 1; s < Split; ++s) {
          b = kb::argreduce::pick(Op, b, part[s][tx]);
        }
      }
    }
    if (ty == 0 && q < outputs) {
      y[q] = b.index;
    }
  }
}

#endif

template <template <class> class Op, class P> struct by_rows {
  static constexpr int block = P::threads_per_row == 32 ? 256 : P::threads_per_row;
  static_assert(P::threads_per_row % 32 == 0 && P::threads_per_row <= 1024,
                "threads_per_row: a multiple of 32, at most 1024");
  static_assert(P::unroll >= 1, "unroll: at least 1");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_op(c, [&](auto op) {
      constexpr int K = decltype(op)::value;
      return dispatch_storage(o.x->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int V = vec_elems<T, P::vector_bytes>();
        using G = rows::group<P::threads_per_row, block>;
        const unsigned grid = capped_grid(ceil_div(rows::count(o.L), G::per_block));
        const T* x = static_cast<const T*>(o.x->data);
        if (rows::vectorizable<T, V>(o.L, {o.x->data})) {
          rows_kernel<K, P, T, V, P::threads_per_row, block>
              <<<grid, block, 0, stream_of(a)>>>(x, o.y, o.L);
        } else {
          rows_kernel<K, P, T, 1, P::threads_per_row, block>
              <<<grid, block, 0, stream_of(a)>>>(x, o.y, o.L);
        }
        return static_cast<int>(cudaGetLastError());
      });
    });
  }
};

template <template <class> class Op, class P> struct by_columns {
  static_assert(P::block_cols % 32 == 0 && P::block_cols * P::split <= 1024,
                "block_cols * split: at most 1024 threads");
  static_assert(P::unroll >= 1, "unroll: at least 1");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_op(c, [&](auto op) {
      constexpr int K = decltype(op)::value;
      return dispatch_storage(o.x->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const unsigned grid = capped_grid(ceil_div(rows::count(o.L), P::block_cols));
        columns_kernel<K, P, T><<<grid, P::block_cols * P::split, 0, stream_of(a)>>>(
            static_cast<const T*>(o.x->data), o.y, o.L);
        return static_cast<int>(cudaGetLastError());
      });
    });
  }
};

} // namespace kb::strategies::argreduce
