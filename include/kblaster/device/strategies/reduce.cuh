// Strategy library, family `reduce` (y[o, i] = finalize(reduce over r of x[o, r, i])). Every
// strategy is correct for every layout; the strategy descriptors say where each is fast.
//
// reduce::row_reduce<Op, P>: contiguous rows (inner == 1): a warp (threads_per_row = 32, block 256)
// or a block of threads_per_row threads per row, vector loads, `accumulators` independent states
// per thread. P: threads_per_row, vector_bytes, accumulators.
//
// reduce::split_row<Op, P>: few long rows: `chunk` elements per block, partial states in the
// workspace, a warp per row combines them in a fixed order. P: block, vector_bytes, chunk.
//
// reduce::columns<Op, P> and reduce::split_columns<Op, P>: strided reductions (inner > 1): each
// thread owns V adjacent output columns and walks the reduced axis, `unroll` lines in flight and
// `accumulators` independent states per column; `split` threads of a block share a column's
// extent and meet in shared memory; split_columns further splits the extent over `splits` blocks
// (0: enough to fill the device) with partial states in the workspace and a fixed-order second
// pass. Vector loads when every line is aligned; when the inner size breaks the alignment of the
// lines (4095 floats), reduce::columns with grouped = 1 reads V consecutive lines as `inner` whole
// vectors if the extent is a multiple of V ("grouped": vector q of a group holds the V flattened
// positions V q + k, each of line (V q + k) / inner and column (V q + k) % inner; a thread sums its
// vector position over the groups into V states, written to the workspace, and a second kernel
// combines the V states of each output in line order), else (and in split_columns) each line is
// read with two aligned vectors and the thread's V columns are picked out of them ("shifted"
// loads). P: block_cols, split, vector_bytes, unroll, accumulators (+ grouped for columns, splits
// for split_columns).
#pragma once

#include "kblaster/device/families/reduce.cuh"
#include "kblaster/device/strategies/rows.cuh"

namespace kb::strategies::reduce {

using kb::reduce::config;
using rows::layout;

struct operands {
  const kb_tensor* x = nullptr;
  void* y = nullptr;
  layout L{};
};

inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  out->x = &xt;
  out->y = yt.data;
  out->L = kb::reduce::layout_of(xt, c);
  return c.end <= xt.ndim && is_contiguous(xt) && is_contiguous(yt) &&
         numel(yt) == rows::count(out->L) && yt.dtype == xt.dtype;
}

#if defined(__CUDACC__)

template <template <class> class Op, class P, class T, int V, int Lanes, int Block>
__global__ void __launch_bounds__(Block)
    rows_kernel(const T* __restrict__ x, T* __restrict__ y, layout L, scalars p) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  using G = rows::group<Lanes, Block>;
  constexpr int acc_count = P::accumulators;
  // vectors in flight, a multiple of the accumulators
  constexpr int U = acc_count > 4 ? acc_count : 4;
  const auto combine = [](const S& u, const S& v) { return op::combine(u, v); };
  const int lane = G::lane();
  const int64_t nvec = L.extent / V;
  for (int64_t row = int64_t{blockIdx.x} * G::per_block + G::index(); row < rows::count(L);
       row += int64_t{gridDim.x} * G::per_block) {
    const T* xr = x + rows::base(L, row);
    S s[acc_count];
#pragma unroll
    for (int q = 0; q < acc_count; ++q) {
      s[q] = op::init();
    }
    int64_t j = lane;
    for (; j + int64_t{U - 1} * Lanes < nvec; j += int64_t{U} * Lanes) {
      vec_word<T, V> w[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        w[u] = rows::load_word<T, V>(xr, L.inner, j + int64_t{u} * Lanes);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        A v[V];
        unpack<A, T, V>(w[u], v);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          s[u % acc_count] = op::accumulate(s[u % acc_count], v[k]);
        }
      }
    }
    for (; j < nvec; j += Lanes) {
      A v[V];
      rows::load<A, T, V>(xr, L.inner, j, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        s[0] = op::accumulate(s[0], v[k]);
      }
    }
#pragma unroll
    for (int q = 1; q < acc_count; ++q) {
      s[0] = op::combine(s[0], s[q]);
    }
    const S total = G::allreduce(s[0], combine);
    if (lane == 0) {
      y[row] = cvt<T>(op::finalize(total, L.extent, p.v));
    }
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    split_row_partial_kernel(const T* __restrict__ x, layout L, int64_t splits, int64_t chunk_vecs,
                             typename Op<float>::state* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  const int64_t nvec = L.extent / V;
  for (int64_t blk = blockIdx.x; blk < rows::count(L) * splits; blk += gridDim.x) {
    const int64_t row = blk / splits;
    const int64_t begin = (blk % splits) * chunk_vecs;
    S s = op::init();
    rows::stream<4, T, V>(x + rows::base(L, row), L.inner, begin, min64(nvec, begin + chunk_vecs),
                          threadIdx.x, P::block, [&](int64_t, const vec_word<T, V>& wd) {
                            s = rows::accumulate_word<op, A, T, V>(s, wd);
                          });
    s = block_allreduce<P::block / 32>(s, [](const S& u, const S& v) { return op::combine(u, v); });
    if (threadIdx.x == 0) {
      partials[blk] = s;
    }
  }
}

// A warp per output: combines the output's `count` partial states (`stride` apart) in a fixed
// order.
template <template <class> class Op, class T>
__global__ void __launch_bounds__(256)
    finish_rows_kernel(const typename Op<float>::state* __restrict__ partials, int64_t outputs,
                       int64_t count, T* __restrict__ y, int64_t extent, scalars p) {
  using op = Op<float>;
  const int64_t warps = int64_t{gridDim.x} * 8;
  for (int64_t out = int64_t{blockIdx.x} * 8 + threadIdx.x / 32; out < outputs; out += warps) {
    const auto s = rows::combine_partials<op>(partials + out * count, count);
    if (threadIdx.x % 32 == 0) {
      y[out] = cvt<T>(op::finalize(s, extent, p.v));
    }
  }
}

// How a thread reads its V columns of one line.
enum class line_mode { aligned, shifted };

// Columns i0 .. i0 + V - 1 of the line starting at element `line`. Shifted: the line's start is
// not a multiple of V, so the values sit across two aligned vectors; elements past the tensor's
// end (total) are never read.
template <line_mode M, class T, int V>
__device__ __forceinline__ void load_line(const T* __restrict__ x, int64_t e, int64_t total,
                                          float (&v)[V]) {
  if constexpr (V == 1 || M == line_mode::aligned) {
    load_vec<float, T, V>(x + e, v);
  } else {
    const int m = static_cast<int>(e % V);
    const int64_t a0 = e - m;
    if (a0 + 2 * V <= total) {
      float lo[V];
      float hi[V];
      load_vec<float, T, V>(x + a0, lo);
      if (m != 0) {
        load_vec<float, T, V>(x + a0 + V, hi);
      }
#pragma unroll
      for (int shift = 0; shift < V; ++shift) {
        if (m == shift) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            v[k] = k + shift < V ? lo[k + shift] : hi[k + shift - V];
          }
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v[k] = e + k < total ? cvt<float>(x[e + k]) : 0.0f;
      }
    }
  }
}

// Folds `steps` lines into Acc x V fresh states, U lines in flight (load(t, v) reads the V values
// of line t; line u of a batch goes to accumulator u % Acc), then the accumulators into s[0] in a
// fixed order.
template <class Op, int U, int Acc, int V, class Load>
__device__ __forceinline__ void fold_lines(int64_t steps, Load&& load,
                                           typename Op::state (&s)[Acc][V]) {
  static_assert(U % Acc == 0, "unroll: a multiple of the accumulators");
#pragma unroll
  for (int a = 0; a < Acc; ++a) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s[a][k] = Op::init();
    }
  }
  int64_t t = 0;
  for (; t + U <= steps; t += U) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      load(t + u, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        s[u % Acc][k] = Op::accumulate(s[u % Acc][k], v[u][k]);
      }
    }
  }
  for (; t < steps; ++t) {
    float v[V];
    load(t, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s[0][k] = Op::accumulate(s[0][k], v[k]);
    }
  }
#pragma unroll
  for (int a = 1; a < Acc; ++a) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s[0][k] = Op::combine(s[0][k], s[a][k]);
    }
  }
}

// The `Split` threads (rows ty of the block) that share BlockCols x V columns meet in shared
// memory (`part`: (Split - 1) x BlockCols x V states): row 0 combines rows 1 .. Split - 1 in
// order. Called by the whole block.
template <class Op, int Split, int BlockCols, int V>
__device__ __forceinline__ void combine_split(typename Op::state* part, int tx, int ty, bool active,
                                              typename Op::state (&s)[V]) {
  if constexpr (Split > 1) {
    if (active && ty > 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        part[((ty - 1) * BlockCols + tx) * V + k] = s[k];
      }
    }
    __syncthreads();
    if (active && ty == 0) {
      for (int w = 1; w < Split; ++w) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          s[k] = Op::combine(s[k], part[((w - 1) * BlockCols + tx) * V + k]);
        }
      }
    }
    __syncthreads(); // the partials are reused by the block's next columns
  }
}

template <template <class> class Op, class P, class T, int V, line_mode M>
__global__ void __launch_bounds__(P::block_cols* P::split)
    columns_kernel(const T* __restrict__ x, T* __restrict__ y, layout L, scalars p, int64_t splits,
                   int64_t chunk, typename Op<float>::state* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  constexpr int cols = P::block_cols * V;
  constexpr int U = P::unroll;
  constexpr int acc_count = P::accumulators;
  __shared__ alignas(
      16) unsigned char part_raw[P::split > 1 ? sizeof(S) * (P::split - 1) * cols : 1];
  S* part = reinterpret_cast<S*>(part_raw);
  const int tx = threadIdx.x % P::block_cols;
  const int ty = threadIdx.x / P::block_cols;
  const int64_t per_outer = ceil_div(L.inner, cols);
  const int64_t total = L.outer * L.extent * L.inner;
  const int64_t outputs = L.outer * L.inner;
  for (int64_t blk = blockIdx.x; blk < L.outer * per_outer * splits; blk += gridDim.x) {
    const int64_t q = blk % splits;
    const int64_t o = blk / splits / per_outer;
    const int64_t i0 = (blk / splits % per_outer) * cols + int64_t{tx} * V;
    const bool active = i0 < L.inner;
    const int64_t r_begin = q * chunk + ty;
    const int64_t r_end = min64(L.extent, (q + 1) * chunk);
    const int64_t steps = r_begin < r_end ? ceil_div(r_end - r_begin, P::split) : 0;
    // element of the thread's first line
    const int64_t first = (o * L.extent + r_begin) * L.inner + i0;
    const int64_t step = int64_t{P::split} * L.inner;
    S s[acc_count][V];
    if (active) {
      fold_lines<op, U>(
          steps, [&](int64_t t, A(&v)[V]) { load_line<M, T, V>(x, first + t * step, total, v); },
          s);
    }
    combine_split<op, P::split, P::block_cols>(part, tx, ty, active, s[0]);
    if (active && ty == 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (i0 + k < L.inner) {
          const int64_t out = o * L.inner + i0 + k;
          if (splits == 1) {
            y[out] = cvt<T>(op::finalize(s[0][k], L.extent, p.v));
          } else {
            partials[q * outputs + out] = s[0][k];
          }
        }
      }
    }
  }
}

// Grouped lines: slab o is extent / V groups of `inner` vectors of V (V consecutive lines); the
// thread of vector position q sums it over the groups (split threads of a block take every
// split-th group and meet in shared memory) and writes partial[(o * inner + q) * V + k].
template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block_cols* P::split)
    grouped_columns_kernel(const T* __restrict__ x, layout L,
                           typename Op<float>::state* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  constexpr int U = P::unroll;
  constexpr int acc_count = P::accumulators;
  __shared__ alignas(
      16) unsigned char part_raw[P::split > 1 ? sizeof(S) * (P::split - 1) * P::block_cols * V : 1];
  S* part = reinterpret_cast<S*>(part_raw);
  const int tx = threadIdx.x % P::block_cols;
  const int ty = threadIdx.x / P::block_cols;
  const int64_t per_outer = ceil_div(L.inner, int64_t{P::block_cols});
  const int64_t groups = L.extent / V;
  for (int64_t blk = blockIdx.x; blk < L.outer * per_outer; blk += gridDim.x) {
    const int64_t o = blk / per_outer;
    const int64_t q = (blk % per_outer) * P::block_cols + tx;
    const bool active = q < L.inner;
    const int64_t steps = ty < groups ? ceil_div(groups - ty, P::split) : 0;
    // the thread's vector in its first group
    const T* first = x + (o * groups + ty) * L.inner * V + q * V;
    const int64_t step = int64_t{P::split} * L.inner * V;
    S s[acc_count][V];
    if (active) {
      fold_lines<op, U>(
          steps, [&](int64_t t, A(&v)[V]) { load_vec<A, T, V>(first + t * step, v); }, s);
    }
    combine_split<op, P::split, P::block_cols>(part, tx, ty, active, s[0]);
    if (active && ty == 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        partials[(o * L.inner + q) * V + k] = s[0][k];
      }
    }
  }
}

// Grouped lines, second pass: output (o, i) combines, for line offsets rr = 0 .. V - 1 in order,
// the partial of flattened position rr * inner + i of slab o.
template <template <class> class Op, class T, int V>
__global__ void __launch_bounds__(256)
    finish_grouped_kernel(const typename Op<float>::state* __restrict__ partials, layout L,
                          T* __restrict__ y, scalars p) {
  using op = Op<float>;
  const int64_t outputs = L.outer * L.inner;
  for (int64_t out = int64_t{blockIdx.x} * 256 + threadIdx.x; out < outputs;
       out += int64_t{gridDim.x} * 256) {
    const int64_t o = out / L.inner;
    const int64_t i = out % L.inner;
    const auto* slab = partials + o * L.inner * V;
    typename op::state s = slab[i];
    for (int rr = 1; rr < V; ++rr) {
      s = op::combine(s, slab[rr * L.inner + i]);
    }
    y[out] = cvt<T>(op::finalize(s, L.extent, p.v));
  }
}

// A thread per output: combines the output's partial states (one per split, `outputs` apart).
template <template <class> class Op, class T>
__global__ void __launch_bounds__(256)
    finish_columns_kernel(const typename Op<float>::state* __restrict__ partials, int64_t outputs,
                          int64_t splits, T* __restrict__ y, int64_t extent, scalars p) {
  using op = Op<float>;
  for (int64_t out = int64_t{blockIdx.x} * 256 + threadIdx.x; out < outputs;
       out += int64_t{gridDim.x} * 256) {
    typename op::state s = partials[out];
    for (int64_t q = 1; q < splits; ++q) {
      s = op::combine(s, partials[q * outputs + out]);
    }
    y[out] = cvt<T>(op::finalize(s, extent, p.v));
  }
}

#endif

template <class P, class Run> int dispatch_rows(const operands& o, Run&& run) {
  return dispatch_storage(o.x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = vec_elems<T, P::vector_bytes>();
    if (rows::vectorizable<T, V>(o.L, {o.x->data})) {
      return run(type_tag<T>{}, std::integral_constant<int, V>{});
    }
    return run(type_tag<T>{}, std::integral_constant<int, 1>{});
  });
}

template <template <class> class Op, class P> struct row_reduce {
  static constexpr int block = P::threads_per_row == 32 ? 256 : P::threads_per_row;
  static_assert(P::threads_per_row % 32 == 0 && P::threads_per_row <= 1024,
                "threads_per_row: a multiple of 32, at most 1024");
  static_assert(P::accumulators == 1 || P::accumulators == 2 || P::accumulators == 4,
                "accumulators: 1, 2 or 4");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_rows<P>(o, [&](auto tag, auto vec) {
      using T = typename decltype(tag)::type;
      constexpr int V = decltype(vec)::value;
      using G = rows::group<P::threads_per_row, block>;
      rows_kernel<Op, P, T, V, P::threads_per_row, block>
          <<<capped_grid(ceil_div(rows::count(o.L), G::per_block)), block, 0, stream_of(a)>>>(
              static_cast<const T*>(o.x->data), static_cast<T*>(o.y), o.L, scalars_of(a));
      return static_cast<int>(cudaGetLastError());
    });
  }
};

template <template <class> class Op, class P> struct split_row {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  using S = typename Op<float>::state;

  static int64_t splits(const layout& L) { return max64(1, ceil_div(L.extent, P::chunk)); }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    *bytes = static_cast<uint64_t>(rows::count(o.L) * splits(o.L)) * sizeof(S);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    uint64_t need = 0;
    if (!operands_of(a, c, &o) || workspace_bytes(a, c, &need) != 0 || a->workspace_bytes < need) {
      return -1;
    }
    return dispatch_rows<P>(o, [&](auto tag, auto vec) {
      using T = typename decltype(tag)::type;
      constexpr int V = decltype(vec)::value;
      const int64_t nsplit = splits(o.L);
      const int64_t chunk_vecs = ceil_div(ceil_div(o.L.extent, nsplit), V);
      const int64_t outputs = rows::count(o.L);
      S* partials = static_cast<S*>(a->workspace);
      split_row_partial_kernel<Op, P, T, V>
          <<<capped_grid(outputs * nsplit), P::block, 0, stream_of(a)>>>(
              static_cast<const T*>(o.x->data), o.L, nsplit, chunk_vecs, partials);
      finish_rows_kernel<Op, T><<<capped_grid(ceil_div(outputs, 8), 65535), 256, 0, stream_of(a)>>>(
          partials, outputs, nsplit, static_cast<T*>(o.y), o.L.extent, scalars_of(a));
      return static_cast<int>(cudaGetLastError());
    });
  }
};

template <template <class> class Op, class P, bool Split> struct columns_strategy {
  static_assert(P::block_cols % 32 == 0 && P::block_cols * P::split <= 1024,
                "block_cols: a multiple of 32; block_cols * split <= 1024");
  using S = typename Op<float>::state;

  // Blocks along the reduced axis: P::splits, or (0) enough blocks for about two waves of the
  // device, keeping at least 64 lines per thread.
  static int splits(const layout& L, int64_t* out) {
    if constexpr (!Split) {
      *out = 1;
      return 0;
    } else {
      if (P::splits > 0) {
        *out = min64(P::splits, max64(1, L.extent));
        return 0;
      }
      device_limits dev;
      KB_RETURN_IF_CUDA_ERROR(query_device(&dev));
      const int64_t column_blocks = L.outer * ceil_div(L.inner, int64_t{P::block_cols});
      const int64_t wanted =
          ceil_div(int64_t{dev.sms} * 2 * (2048 / (P::block_cols * P::split)), column_blocks);
      *out = max64(1, min64(wanted, L.extent / (int64_t{P::split} * 64)));
      return 0;
    }
  }

  // Vector elements of the storage type (at least 1).
  // Vector elements of the storage type (vec_elems; -1 for a type the strategies refuse).
  static int vector_elems(kb_dtype d) {
    return dispatch_storage(
        d, [](auto tag) { return vec_elems<typename decltype(tag)::type, P::vector_bytes>(); });
  }

  // P::grouped where the strategy has the axis (reduce::columns), else 0.
  template <class Q, class = void> struct grouped_of : std::integral_constant<int, 0> {};
  template <class Q>
  struct grouped_of<Q, std::void_t<decltype(Q::grouped)>>
      : std::integral_constant<int, Q::grouped> {};

  // Whether the grouped read applies (reduce::columns with grouped = 1): vectors wider than one
  // element, an inner size that breaks their alignment, and an extent of whole groups. Decided
  // from the shape (the workspace is sized before the tensors exist); an unaligned tensor falls
  // back to the shifted pairs.
  static bool grouped_shape(const operands& o) {
    const int v = vector_elems(o.x->dtype);
    return !Split && grouped_of<P>::value == 1 && v > 1 && o.L.inner > 1 && o.L.inner % v != 0 &&
           o.L.extent % v == 0 && o.L.extent >= v;
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    int64_t n = 1;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    if (const int rc = splits(o.L, &n); rc != 0) {
      return rc;
    }
    if (grouped_shape(o)) {
      *bytes = static_cast<uint64_t>(rows::count(o.L) * vector_elems(o.x->dtype)) * sizeof(S);
      return 0;
    }
    *bytes = n > 1 ? static_cast<uint64_t>(n * rows::count(o.L)) * sizeof(S) : 0;
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    int64_t nsplit = 1;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    if (const int rc = splits(o.L, &nsplit); rc != 0) {
      return rc;
    }
    if (nsplit > 1 &&
        a->workspace_bytes < static_cast<uint64_t>(nsplit * rows::count(o.L)) * sizeof(S)) {
      return -1;
    }
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const int64_t chunk = ceil_div(o.L.extent, nsplit);
      const auto go = [&](auto vec, auto mode) {
        constexpr int W = decltype(vec)::value;
        constexpr line_mode M = decltype(mode)::value;
        const int64_t blocks = o.L.outer * ceil_div(o.L.inner, int64_t{P::block_cols} * W) * nsplit;
        S* partials = static_cast<S*>(a->workspace);
        columns_kernel<Op, P, T, W, M>
            <<<capped_grid(blocks), P::block_cols * P::split, 0, stream_of(a)>>>(
                static_cast<const T*>(o.x->data), static_cast<T*>(o.y), o.L, scalars_of(a), nsplit,
                chunk, partials);
        if (nsplit > 1) {
          const int64_t outputs = rows::count(o.L);
          finish_columns_kernel<Op, T>
              <<<capped_grid(ceil_div(outputs, 256), 65535), 256, 0, stream_of(a)>>>(
                  partials, outputs, nsplit, static_cast<T*>(o.y), o.L.extent, scalars_of(a));
        }
        return static_cast<int>(cudaGetLastError());
      };
      using aligned = std::integral_constant<line_mode, line_mode::aligned>;
      using shifted = std::integral_constant<line_mode, line_mode::shifted>;
      if constexpr (!Split && V > 1 && grouped_of<P>::value == 1) {
        const uint64_t need = static_cast<uint64_t>(rows::count(o.L) * V) * sizeof(S);
        if (grouped_shape(o) && aligned_to(o.x->data, sizeof(T) * V) &&
            a->workspace_bytes >= need) {
          S* partials = static_cast<S*>(a->workspace);
          const int64_t blocks = o.L.outer * ceil_div(o.L.inner, int64_t{P::block_cols});
          grouped_columns_kernel<Op, P, T, V>
              <<<capped_grid(blocks), P::block_cols * P::split, 0, stream_of(a)>>>(
                  static_cast<const T*>(o.x->data), o.L, partials);
          finish_grouped_kernel<Op, T, V>
              <<<capped_grid(ceil_div(rows::count(o.L), 256), 65535), 256, 0, stream_of(a)>>>(
                  partials, o.L, static_cast<T*>(o.y), scalars_of(a));
          return static_cast<int>(cudaGetLastError());
        }
      }
      if (V > 1 && aligned_to(o.x->data, sizeof(T) * V) && o.L.inner >= V) {
        if (o.L.inner % V == 0) {
          return go(std::integral_constant<int, V>{}, aligned{});
        }
        return go(std::integral_constant<int, V>{}, shifted{});
      }
      return go(std::integral_constant<int, 1>{}, aligned{});
    });
  }
};

template <template <class> class Op, class P> using columns = columns_strategy<Op, P, false>;
template <template <class> class Op, class P> using split_columns = columns_strategy<Op, P, true>;

} // namespace kb::strategies::reduce
