// Strategy library, family `loss` (loss = finalize_rows(sum over rows of row_loss(reduce(row),
// x[row, target[row]]))). Every row's loss is computed in one pass over the row with the target's
// logit gathered by the row's owner; a block sums its rows' losses in a fixed order (in double)
// into one workspace slot, and one block sums the slots in a fixed order: no atomics, the result
// is bitwise reproducible.
//
// loss::warp_row<Op, P> and loss::block_row<Op, P>: a warp or the whole block owns a row;
// rows_per_block consecutive rows share one partial. P: block, vector_bytes, rows_per_block.
//
// loss::columns<Op, P>: strided rows (inner > 1): a thread per row, the warp's rows adjacent
// along the inner dimension (coalesced), `unroll` classes in flight. P: block, unroll.
//
// loss::pointwise<Op, P>: pointwise losses over two tensors (kb::loss::pointwise_config): a fixed
// grid of `partials` blocks walks the elements, `unroll` pairs loaded per thread before they are
// used, each thread summing in double; block sums in a fixed order. P: block, unroll, partials.
#pragma once

#include "kblaster/device/families/loss.cuh"
#include "kblaster/device/strategies/rows.cuh"

// KB_LOSS_ROWS_MIN_BLOCKS (a macro set before the include, for experiments): the rows kernel's
// minimum resident blocks per SM, which caps its registers. Unset, the launch bounds name only the
// block size.
#if defined(KB_LOSS_ROWS_MIN_BLOCKS)
#define KB_LOSS_ROWS_BOUNDS(block) __launch_bounds__(block, KB_LOSS_ROWS_MIN_BLOCKS)
#else
#define KB_LOSS_ROWS_BOUNDS(block) __launch_bounds__(block)
#endif

namespace kb::strategies::loss {

using kb::loss::config;
using rows::layout;

struct operands {
  const kb_tensor* x = nullptr;
  const int64_t* target = nullptr;
  const kb_tensor* y = nullptr;
  layout L{};
};

inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs || c.target < 0 ||
      c.target >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& tt = a->inputs[c.target];
  out->x = &xt;
  out->target = static_cast<const int64_t*>(tt.data);
  out->y = &a->outputs[0];
  out->L = kb::loss::layout_of(xt, c);
  const kb_dtype yd = out->y->dtype;
  return c.end <= xt.ndim && is_contiguous(xt) && tt.dtype == KB_INT64 &&
         numel(tt) == rows::count(out->L) && numel(*out->y) == 1 &&
         (yd == KB_FLOAT32 || yd == KB_FLOAT16 || yd == KB_BFLOAT16);
}

#if defined(__CUDACC__)

template <template <class> class Op, class P, class T, int V, int Lanes, int Block>
__global__ void KB_LOSS_ROWS_BOUNDS(Block)
    rows_kernel(const T* __restrict__ x, const int64_t* __restrict__ target, layout L, scalars p,
                double* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  using G = rows::group<Lanes, Block>;
  __shared__ double group_sum[G::per_block];
  const auto combine = [](const S& u, const S& v) { return op::combine(u, v); };
  const int lane = G::lane();
  const int64_t nvec = L.extent / V;
  const int64_t nrows = rows::count(L);
  const int64_t first = int64_t{blockIdx.x} * P::rows_per_block;
  const int64_t last = min64(nrows, first + P::rows_per_block);
  double sum = 0; // of this group's rows, in row order (meaningful in lane 0)
  for (int64_t row = first + G::index(); row < last; row += G::per_block) {
    const int64_t off = rows::base(L, row);
    S s = op::init();
    rows::stream<4, T, V>(x + off, L.inner, 0, nvec, lane, Lanes,
                          [&](int64_t, const vec_word<T, V>& wd) {
                            A v[V];
                            unpack<A, T, V>(wd, v);
#pragma unroll
                            for (int k = 0; k < V; ++k) {
                              s = op::accumulate(s, v[k]);
                            }
                          });
    s = G::allreduce(s, combine);
    if (lane == 0) {
      const int64_t t = target[row];
      const A xt = (t >= 0 && t < L.extent) ? cvt<A>(x[off + t * L.inner]) : A(NAN);
      sum += static_cast<double>(op::row_loss(s, xt, L.extent, p.v));
    }
  }
  if (lane == 0) {
    group_sum[G::index()] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double acc = group_sum[0];
    for (int g = 1; g < G::per_block; ++g) {
      acc += group_sum[g];
    }
    partials[blockIdx.x] = acc;
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    columns_kernel(const T* __restrict__ x, const int64_t* __restrict__ target, layout L, scalars p,
                   double* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  constexpr int cols = P::block * V;
  const int64_t per_outer = ceil_div(L.inner, cols);
  const int64_t o = blockIdx.x / per_outer;
  const int64_t i0 = (blockIdx.x % per_outer) * cols + int64_t{threadIdx.x} * V;
  double sum = 0; // of this thread's rows, in column order
  if (i0 < L.inner) {
    const int64_t base = o * L.extent * L.inner + i0;
    S s[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s[k] = op::init();
    }
    rows::strided_stream<P::unroll, T, V>(x + base, L.inner, 0, L.extent,
                                          [&](int64_t, const vec_word<T, V>& wd) {
                                            A v[V];
                                            unpack<A, T, V>(wd, v);
#pragma unroll
                                            for (int k = 0; k < V; ++k) {
                                              s[k] = op::accumulate(s[k], v[k]);
                                            }
                                          });
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t t = target[o * L.inner + i0 + k];
      const A xt = (t >= 0 && t < L.extent) ? cvt<A>(x[base + t * L.inner + k]) : A(NAN);
      sum += static_cast<double>(op::row_loss(s[k], xt, L.extent, p.v));
    }
  }
  sum = block_allreduce<P::block / 32>(sum, [](double u, double v) { return u + v; });
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
  }
}

// One block: the partials in a fixed order, then finalize_rows.
template <template <class> class Op>
__global__ void __launch_bounds__(1024)
    finish_kernel(const double* __restrict__ partials, int64_t count, int64_t rows, void* y,
                  kb_dtype yd) {
  double acc = 0;
  for (int64_t q = threadIdx.x; q < count; q += 1024) {
    acc += partials[q];
  }
  acc = block_allreduce<32>(acc, [](double u, double v) { return u + v; });
  if (threadIdx.x == 0) {
    write_from_double(y, yd, 0,
                      static_cast<double>(Op<float>::finalize_rows(static_cast<float>(acc), rows)));
  }
}

#endif

template <template <class> class Op>
int finish(const kb_args* a, const operands& o, const double* partials, int64_t count) {
  finish_kernel<Op>
      <<<1, 1024, 0, stream_of(a)>>>(partials, count, rows::count(o.L), o.y->data, o.y->dtype);
  return static_cast<int>(cudaGetLastError());
}

template <template <class> class Op, class P, int Lanes> struct row_strategy {
  static constexpr int block = P::block;
  static constexpr int lanes = Lanes == 0 ? P::block : Lanes;
  static_assert(block % 32 == 0 && block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::rows_per_block >= 1, "rows_per_block: at least 1");

  static int64_t partial_count(const layout& L) {
    return ceil_div(rows::count(L), P::rows_per_block);
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    *bytes = static_cast<uint64_t>(partial_count(o.L)) * sizeof(double);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o) ||
        a->workspace_bytes < static_cast<uint64_t>(partial_count(o.L)) * sizeof(double) ||
        partial_count(o.L) > (int64_t{1} << 31) - 1) {
      return -1;
    }
    double* partials = static_cast<double*>(a->workspace);
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        rows_kernel<Op, P, T, W, lanes, block>
            <<<static_cast<unsigned>(partial_count(o.L)), block, 0, stream_of(a)>>>(
                static_cast<const T*>(o.x->data), o.target, o.L, scalars_of(a), partials);
        return finish<Op>(a, o, partials, partial_count(o.L));
      };
      if (rows::vectorizable<T, V>(o.L, {o.x->data})) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

// A warp per row.
template <template <class> class Op, class P> using warp_row = row_strategy<Op, P, 32>;
// A block per row.
template <template <class> class Op, class P> using block_row = row_strategy<Op, P, 0>;

template <template <class> class Op, class P> struct columns {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");

  template <int V> static int64_t partial_count(const layout& L) {
    return L.outer * ceil_div(L.inner, int64_t{P::block} * V);
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    // the most any vector width needs
    *bytes = static_cast<uint64_t>(partial_count<1>(o.L)) * sizeof(double);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o) ||
        a->workspace_bytes < static_cast<uint64_t>(partial_count<1>(o.L)) * sizeof(double) ||
        partial_count<1>(o.L) > (int64_t{1} << 31) - 1) {
      return -1;
    }
    double* partials = static_cast<double*>(a->workspace);
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        const int64_t count = partial_count<W>(o.L);
        columns_kernel<Op, P, T, W><<<static_cast<unsigned>(count), P::block, 0, stream_of(a)>>>(
            static_cast<const T*>(o.x->data), o.target, o.L, scalars_of(a), partials);
        return finish<Op>(a, o, partials, count);
      };
      if (o.L.inner % V == 0 && aligned_to(o.x->data, sizeof(T) * V)) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

#if defined(__CUDACC__)

template <template <class> class Op, class P, class T>
__global__ void __launch_bounds__(P::block)
    pointwise_kernel(const T* __restrict__ x, const T* __restrict__ t, int64_t n, int64_t nt,
                     scalars p, double* __restrict__ partials) {
  using A = float;
  constexpr int U = P::unroll;
  double acc = 0; // this thread's elements, in order
  const int64_t step = int64_t{gridDim.x} * P::block * U;
  for (int64_t first = int64_t{blockIdx.x} * P::block * U + threadIdx.x; first < n; first += step) {
    A xv[U];
    A tv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = first + int64_t{u} * P::block;
      if (i < n) {
        xv[u] = cvt<A>(x[i]);
        tv[u] = cvt<A>(t[kb::loss::target_index(i, n, nt)]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (first + int64_t{u} * P::block < n) {
        acc += static_cast<double>(Op<A>::elem(xv[u], tv[u], p.v));
      }
    }
  }
  acc = block_allreduce<P::block / 32>(acc, [](double u, double v) { return u + v; });
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
  }
}

template <template <class> class Op>
__global__ void __launch_bounds__(1024)
    pointwise_finish_kernel(const double* __restrict__ partials, int64_t count, int64_t n,
                            int64_t rows, void* y, kb_dtype yd) {
  double acc = 0;
  for (int64_t q = threadIdx.x; q < count; q += 1024) {
    acc += partials[q];
  }
  acc = block_allreduce<32>(acc, [](double u, double v) { return u + v; });
  if (threadIdx.x == 0) {
    write_from_double(y, yd, 0,
                      static_cast<double>(Op<float>::finalize(static_cast<float>(acc), n, rows)));
  }
}

#endif

template <template <class> class Op, class P> struct pointwise {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::unroll >= 1 && P::partials >= 1, "unroll and partials: at least 1");

  static bool operands(const kb_args* a, const kb::loss::pointwise_config& c) {
    if (!kb::loss::pointwise_operands(a, c)) {
      return false;
    }
    const kb_dtype yd = a->outputs[0].dtype;
    return yd == KB_FLOAT32 || yd == KB_FLOAT16 || yd == KB_BFLOAT16;
  }

  static int workspace_bytes(const kb_args* a, const kb::loss::pointwise_config& c,
                             uint64_t* bytes) {
    if (!operands(a, c)) {
      return -1;
    }
    *bytes = static_cast<uint64_t>(P::partials) * sizeof(double);
    return 0;
  }

  static int launch(const kb_args* a, const kb::loss::pointwise_config& c) {
    if (!operands(a, c) ||
        a->workspace_bytes < static_cast<uint64_t>(P::partials) * sizeof(double)) {
      return -1;
    }
    const kb_tensor& xt = a->inputs[c.x];
    const int64_t n = numel(xt);
    const int64_t rows = product(xt, 0, c.begin) * product(xt, c.end, xt.ndim);
    double* partials = static_cast<double*>(a->workspace);
    return dispatch_storage(xt.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      pointwise_kernel<Op, P, T><<<P::partials, P::block, 0, stream_of(a)>>>(
          static_cast<const T*>(xt.data), static_cast<const T*>(a->inputs[c.target].data), n,
          numel(a->inputs[c.target]), scalars_of(a), partials);
      pointwise_finish_kernel<Op><<<1, 1024, 0, stream_of(a)>>>(
          partials, P::partials, n, rows, a->outputs[0].data, a->outputs[0].dtype);
      return static_cast<int>(cudaGetLastError());
    });
  }
};

} // namespace kb::strategies::loss
