// Family `normalize`: per row statistics over the reduced axes, then an elementwise output,
// y = apply(x, finalize(reduce(x over the row)), weight[r], bias[r]).
// Input x is viewed as [outer, extent, inner], the axes [begin, end) in the middle:
// - by default those are the reduced axes; a row is one (outer, inner) pair, and weight and bias
//   (optional) have `extent` elements, indexed by the position in the row;
// - with channel_rows (a batch norm), they are the kept axes: a row is one position of the
//   extent (a channel), reduced over every (outer, inner) pair, and weight and bias have
//   `extent` elements, one per row;
// - with groups = G (a group norm), axis `begin` (the channels, C of them) is cut into G groups:
//   a row is one group of one outer position, [outer x G, extent / G, inner], and weight and bias
//   have one value per channel (C elements), shared by the channel's extent / C positions.
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
  int begin; // first reduced axis of x (with channel_rows: first kept axis)
  int end;   // one past the last reduced axis (with channel_rows: one past the last kept axis)
  int x;     // input indices; -1 when absent
  int weight;
  int bias;
  int channel_rows = 0; // 1: [begin, end) are the row axes, reduced over all the others
  int groups = 0;       // > 0: axis begin cut into that many groups, one row per group
};

struct layout {
  int64_t outer;
  int64_t extent;
  int64_t inner;
};

KB_HD layout layout_of(const kb_tensor& x, const config& c) {
  const int64_t g = c.groups > 0 ? c.groups : 1;
  return {product(x, 0, c.begin) * g, product(x, c.begin, c.end) / g, product(x, c.end, x.ndim)};
}

// Whether x's axes fit the config: [begin, end) within x; with groups, the channels (axis begin)
// divide into them, a row's extent is below 2^31 and the rows are not channel rows.
KB_HD bool fits_config(const kb_tensor& x, const config& c) {
  if (c.begin < 0 || c.end > x.ndim || c.begin >= c.end) {
    return false;
  }
  if (c.groups <= 0) {
    return true;
  }
  return c.channel_rows == 0 && x.shape[c.begin] % c.groups == 0 &&
         product(x, c.begin, c.end) / c.groups < (int64_t{1} << 31);
}

// Where a row's weight and bias values are. Row (o, i) of the layout, position r of its extent,
// reads value index(o, r): the position itself without groups; with groups, the channel of
// group o % G that holds position r (`per` consecutive positions a channel).
struct param_map {
  int64_t groups = 1; // consecutive outer rows with different values (the groups)
  int64_t count = 0;  // values per group
  divider per{};      // consecutive positions that share a value

  KB_HD int64_t offset(int64_t o) const { return (o % groups) * count; }
  KB_HD int64_t index(int64_t o, int64_t r) const {
    return offset(o) + (per.d == 1 ? r : per.div(static_cast<uint32_t>(r)));
  }
  // The parameter tensors' element count.
  KB_HD int64_t values() const { return groups * count; }
};

KB_HD param_map param_map_of(const kb_tensor& x, const config& c) {
  param_map m;
  const int64_t extent = product(x, c.begin, c.end);
  if (c.groups <= 0 || c.channel_rows != 0) {
    m.count = extent;
    return m;
  }
  const int64_t channels = x.shape[c.begin];
  m.groups = c.groups;
  m.count = channels / c.groups;
  m.per = divider(static_cast<uint32_t>(extent / channels));
  return m;
}

template <class A, class T> KB_HD A param_or(const T* p, int64_t r, A fallback) {
  return p == nullptr ? fallback : cvt<A>(p[r]);
}

// One thread per row: right for strided rows (inner > 1), where neighbouring threads read
// neighbouring addresses.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void thread_per_row(const Tin* __restrict__ x, const Tin* __restrict__ w,
                               const Tin* __restrict__ b, Tout* __restrict__ y, layout L, scalars p,
                               param_map pm) {
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
      y[k] = cvt<Tout>(op::apply(cvt<A>(x[k]), st, param_or<A>(w, pm.index(o, r), A(1)),
                                 param_or<A>(b, pm.index(o, r), A(0))));
    }
  }
}

// One block per row: right for contiguous rows (inner == 1).
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void block_per_row(const Tin* __restrict__ x, const Tin* __restrict__ w,
                              const Tin* __restrict__ b, Tout* __restrict__ y, layout L, scalars p,
                              param_map pm) {
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
      y[k] = cvt<Tout>(op::apply(cvt<A>(x[k]), st, param_or<A>(w, pm.index(o, r), A(1)),
                                 param_or<A>(b, pm.index(o, r), A(0))));
    }
  }
}

// Channel rows, one block per row: the row's values are `outer` runs of `inner` contiguous
// elements, `extent x inner` apart; the block's threads walk them in order, so neighbouring
// threads read neighbouring addresses within a run. Right for inner >= 32.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void channel_block(const Tin* __restrict__ x, const Tin* __restrict__ w,
                              const Tin* __restrict__ b, Tout* __restrict__ y, layout L,
                              scalars p) {
  using op = Op<A>;
  const int64_t n = L.outer * L.inner;
  // Element j of a row is (o, i) = (j / inner, j % inner): divided once, then stepped.
  const auto walk = [&](int64_t r, auto&& f) {
    int64_t o = threadIdx.x / L.inner;
    int64_t i = threadIdx.x % L.inner;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      f((o * L.extent + r) * L.inner + i);
      i += blockDim.x;
      while (i >= L.inner) {
        i -= L.inner;
        ++o;
      }
    }
  };
  for (int64_t r = blockIdx.x; r < L.extent; r += gridDim.x) {
    typename op::state s = op::init();
    walk(r, [&](int64_t k) { s = op::accumulate(s, cvt<A>(x[k])); });
    s = block_reduce(s, [](const typename op::state& u, const typename op::state& v) {
      return op::combine(u, v);
    });
    const typename op::stats st = op::finalize(s, n, p.v);
    const A wr = param_or<A>(w, r, A(1));
    const A br = param_or<A>(b, r, A(0));
    walk(r, [&](int64_t k) { y[k] = cvt<Tout>(op::apply(cvt<A>(x[k]), st, wr, br)); });
  }
}

// Channel rows with short runs (inner < 32, e.g. a batch norm of [batch, features]): a block is
// 32 x 8 threads; the 32 columns of a tile are neighbouring (channel, inner) positions, so a warp
// reads 32 neighbouring addresses; the 8 rows of threads share the outer axis and meet in shared
// memory in a fixed order. A tile's columns may belong to several channels: each column's state
// is combined with those of the same channel in the tile, in order.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void __launch_bounds__(256)
    channel_columns(const Tin* __restrict__ x, const Tin* __restrict__ w, const Tin* __restrict__ b,
                    Tout* __restrict__ y, layout L, scalars p) {
  using op = Op<A>;
  using state = typename op::state;
  using stats = typename op::stats;
  __shared__ alignas(16) unsigned char part_raw[sizeof(state) * 8 * 32];
  __shared__ alignas(16) unsigned char stats_raw[sizeof(stats) * 32];
  state(*part)[32] = reinterpret_cast<state(*)[32]>(part_raw);
  stats* row_stats = reinterpret_cast<stats*>(stats_raw);
  const int tx = threadIdx.x % 32;
  const int ty = threadIdx.x / 32;
  const int64_t cols = L.extent * L.inner; // one outer step
  // A tile is whole channels: 32 / inner of them (the launch takes inner < 32).
  const int64_t per_tile = 32 / L.inner;
  const int64_t tiles = (L.extent + per_tile - 1) / per_tile;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t first = t * per_tile * L.inner; // the tile's first column
    const int64_t q = first + tx;                 // this thread's column
    const bool live = tx < per_tile * L.inner && q < cols;
    state s = op::init();
    if (live) {
      for (int64_t o = ty; o < L.outer; o += 8) {
        s = op::accumulate(s, cvt<A>(x[o * cols + q]));
      }
    }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && live && tx % L.inner == 0) { // the channel's first column combines its columns
      state acc = op::init();
      for (int64_t i = 0; i < L.inner; ++i) {
        for (int k = 0; k < 8; ++k) {
          acc = op::combine(acc, part[k][tx + i]);
        }
      }
      row_stats[tx / L.inner] = op::finalize(acc, L.outer * L.inner, p.v);
    }
    __syncthreads();
    if (live) {
      const int64_t r = q / L.inner;
      const stats st = row_stats[tx / L.inner];
      const A wr = param_or<A>(w, r, A(1));
      const A br = param_or<A>(b, r, A(0));
      for (int64_t o = ty; o < L.outer; o += 8) {
        const int64_t k = o * cols + q;
        y[k] = cvt<Tout>(op::apply(cvt<A>(x[k]), st, wr, br));
      }
    }
    __syncthreads(); // part and row_stats are written again by the next tile
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
      !fits_config(xt, c)) {
    return -1;
  }
  const param_map pm = param_map_of(xt, c);
  for (int idx : {c.weight, c.bias}) {
    if (idx >= 0 && (a->inputs[idx].dtype != xt.dtype || numel(a->inputs[idx]) != pm.values())) {
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
    if (c.channel_rows != 0) {
      if (L.inner >= 32) {
        const unsigned grid = static_cast<unsigned>(
            L.extent < 1 ? 1 : (L.extent < 65535 * 32 ? L.extent : 65535 * 32));
        channel_block<Op, A, Tin, Tout>
            <<<grid, 512, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a));
      } else {
        const int64_t per_tile = 32 / L.inner;
        const int64_t tiles = (L.extent + per_tile - 1) / per_tile;
        channel_columns<Op, A, Tin, Tout>
            <<<grid_for(tiles * 32, 32), 256, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a));
      }
    } else if (L.inner > 1) {
      constexpr unsigned block = 256;
      thread_per_row<Op, A, Tin, Tout>
          <<<grid_for(rows, block), block, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a), pm);
    } else {
      const unsigned grid = static_cast<unsigned>(rows < 65535 * 32 ? rows : 65535 * 32);
      block_per_row<Op, A, Tin, Tout>
          <<<grid, 256, 0, stream_of(a)>>>(x, w, b, y, L, scalars_of(a), pm);
    }
    return static_cast<int>(cudaGetLastError());
  });
}

template <template <class> class Op>
int oracle_cpu_channels(const kb_args* a, const config& c, const layout& L, double* y) {
  using op = Op<double>;
  const scalars p = scalars_of(a);
  const auto read = [&](int input, int64_t k) {
    return read_as_double(a->inputs[input].data, a->inputs[input].dtype, k);
  };
  for (int64_t r = 0; r < L.extent; ++r) {
    typename op::state s = op::init();
    for (int64_t o = 0; o < L.outer; ++o) {
      for (int64_t i = 0; i < L.inner; ++i) {
        s = op::accumulate(s, read(c.x, (o * L.extent + r) * L.inner + i));
      }
    }
    const typename op::stats st = op::finalize(s, L.outer * L.inner, p.v);
    const double wr = c.weight >= 0 ? read(c.weight, r) : 1.0;
    const double br = c.bias >= 0 ? read(c.bias, r) : 0.0;
    for (int64_t o = 0; o < L.outer; ++o) {
      for (int64_t i = 0; i < L.inner; ++i) {
        const int64_t k = (o * L.extent + r) * L.inner + i;
        y[k] = op::apply(read(c.x, k), st, wr, br);
      }
    }
  }
  return 0;
}

template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  using op = Op<double>;
  const kb_tensor& xt = a->inputs[c.x];
  if (!fits_config(xt, c)) {
    return -1;
  }
  const layout L = layout_of(xt, c);
  const param_map pm = param_map_of(xt, c);
  double* y = static_cast<double*>(a->outputs[0].data);
  if (c.channel_rows != 0) {
    return oracle_cpu_channels<Op>(a, c, L, y);
  }
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
        y[k] = op::apply(read(c.x, k), st, c.weight >= 0 ? read(c.weight, pm.index(o, r)) : 1.0,
                         c.bias >= 0 ? read(c.bias, pm.index(o, r)) : 0.0);
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
