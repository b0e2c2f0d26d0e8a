// Strategy library, family `scan` (cumulative sum or product along one axis, reverse, exclusive,
// masked: include/kblaster/device/families/scan.cuh). Every strategy is correct for every layout;
// the strategy descriptors say where each is fast. Values are combined in fp32 in an order fixed
// by the shape and the parameters (bitwise reproducible); with compensated = 1 the carries between
// warps and tiles are kept in double, so the error of a long row grows with the tile, not the row.
//
// scan::block_rows<Op, P>: a block per row, the row walked in tiles of block x items_per_thread
// elements in scan order: warp w scans its 32 x items_per_thread elements (coalesced loads, one
// 32-element shuffle scan per item), the warps' totals meet in shared memory in warp order, and
// the row's carry passes from tile to tile. Strided rows take the same kernel with loads `inner`
// apart. P: block, items_per_thread, compensated.
//
// scan::split_row<Op, P>: few long rows: each row in chunks of `chunk` elements (scan order), a
// block per chunk; pass 1 writes each chunk's total (double, fixed-order block reduction) to the
// workspace, pass 2 starts each chunk from the fold of the row's earlier totals in chunk order and
// scans it as block_rows does. P: block, items_per_thread, chunk, compensated.
//
// scan::columns<Op, P>: strided axes (inner > 1): a thread per row (an (outer, inner) pair),
// neighbouring threads on neighbouring inner positions (coalesced), walking the axis with
// `unroll` loads in flight. P: block, unroll, compensated.
#pragma once

#include "kblaster/device/families/scan.cuh"
#include "kblaster/device/strategies/rows.cuh"

namespace kb::strategies::scan {

using kb::scan::config;
using rows::layout;

struct operands {
  const kb_tensor* x = nullptr;
  void* y = nullptr;
  const void* mask = nullptr;
  kb_dtype mask_type = KB_FLOAT32;
  layout L{};
};

inline bool operands_of(const kb_args* a, const config& c, operands* out) {
  if (!kb::scan::args_fit(a, c)) {
    return false;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& yt = a->outputs[0];
  out->x = &xt;
  out->y = yt.data;
  out->L = kb::scan::layout_of(xt, c);
  if (c.mask >= 0) {
    out->mask = a->inputs[c.mask].data;
    out->mask_type = a->inputs[c.mask].dtype;
  }
  return yt.dtype == xt.dtype;
}

template <class Run> int dispatch_op(const config& c, Run&& run) {
  if (c.op == kb::scan::sum) {
    return run(std::integral_constant<int, kb::scan::sum>{});
  }
  if (c.op == kb::scan::prod) {
    return run(std::integral_constant<int, kb::scan::prod>{});
  }
  return -1;
}

#if defined(__CUDACC__)

template <int K, class A> __device__ __forceinline__ A combine(A a, A b) {
  if constexpr (K == kb::scan::sum) {
    return a + b;
  } else {
    return a * b;
  }
}
template <int K, class A> __device__ __forceinline__ A unit() {
  return K == kb::scan::sum ? A(0) : A(1);
}

// Inclusive scan over the warp in lane order (Hillis-Steele, fixed order).
template <int K> __device__ __forceinline__ float warp_inclusive(float v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float n = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) {
      v = combine<K>(n, v);
    }
  }
  return v;
}

template <class T>
__device__ __forceinline__ float value_at(const T* x, const void* mask, kb_dtype mask_type,
                                          int64_t i) {
  float v = load_one<float, T>(x + i);
  if (mask != nullptr) {
    v *= kb::scan::mask_as_float(mask, mask_type, i);
  }
  return v;
}

// Scans the elements q_begin .. q_end - 1 (scan order) of the row at `base`, starting from
// `carry`, in tiles of Block x Items: warp w scans its 32 x Items elements with shuffles, the
// warps' totals meet in shared memory in warp order, the carry passes from tile to tile. Called by
// the whole block (barriers inside); returns the carry after q_end - 1.
template <template <class> class Op, int K, int Block, int Items, class Acc, class T>
__device__ __forceinline__ Acc scan_segment(const T* __restrict__ x, const void* __restrict__ mask,
                                            kb_dtype mask_type, T* __restrict__ y, const layout& L,
                                            int64_t base, int64_t q_begin, int64_t q_end, Acc carry,
                                            int reverse, int exclusive, const scalars& p,
                                            float* warp_total) {
  constexpr int Warps = Block / 32;
  constexpr int64_t Tile = int64_t{Block} * Items;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  for (int64_t t0 = q_begin; t0 < q_end; t0 += Tile) {
    const int64_t seg = t0 + int64_t{warp} * 32 * Items;
    float v[Items];
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int64_t q = seg + int64_t{k} * 32 + lane;
      v[k] = q < q_end
                 ? value_at(x, mask, mask_type, base + kb::scan::position(L, reverse, q) * L.inner)
                 : unit<K, float>();
    }
    float running = unit<K, float>();
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const float inc = warp_inclusive<K>(v[k], lane);
      float exc = __shfl_up_sync(0xffffffffu, inc, 1);
      exc = lane == 0 ? unit<K, float>() : exc;
      v[k] = combine<K>(running, exclusive ? exc : inc);
      running = combine<K>(running, __shfl_sync(0xffffffffu, inc, 31));
    }
    if (lane == 0) {
      warp_total[warp] = running;
    }
    __syncthreads();
    Acc prefix = carry;
    Acc total = carry;
#pragma unroll
    for (int w = 0; w < Warps; ++w) {
      if (w == warp) {
        prefix = total;
      }
      total = combine<K>(total, static_cast<Acc>(warp_total[w]));
    }
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int64_t q = seg + int64_t{k} * 32 + lane;
      if (q < q_end) {
        const float out = static_cast<float>(combine<K>(prefix, static_cast<Acc>(v[k])));
        store_one<T, float>(y + base + kb::scan::position(L, reverse, q) * L.inner,
                            Op<float>::epilogue(out, p.v));
      }
    }
    carry = total;
    __syncthreads(); // warp_total is rewritten by the next tile
  }
  return carry;
}

template <template <class> class Op, int K, int Block, int Items, class Acc, class T>
__global__ void __launch_bounds__(Block)
    rows_kernel(const T* __restrict__ x, const void* __restrict__ mask, kb_dtype mask_type,
                T* __restrict__ y, layout L, int reverse, int exclusive, scalars p) {
  __shared__ float warp_total[Block / 32];
  for (int64_t row = blockIdx.x; row < rows::count(L); row += gridDim.x) {
    scan_segment<Op, K, Block, Items, Acc, T>(x, mask, mask_type, y, L, rows::base(L, row), 0,
                                              L.extent, unit<K, Acc>(), reverse, exclusive, p,
                                              warp_total);
  }
}

// Split rows, pass 1: the total of each chunk of `chunk` elements (scan order) of each row, in a
// fixed order (each thread's strided elements in order, then the warps' shuffles, then the warps
// in order), into totals[row * splits + chunk] in double.
template <int K, int Block, class T>
__global__ void __launch_bounds__(Block)
    chunk_totals_kernel(const T* __restrict__ x, const void* __restrict__ mask, kb_dtype mask_type,
                        layout L, int reverse, int64_t chunk, int64_t splits,
                        double* __restrict__ totals) {
  for (int64_t b = blockIdx.x; b < rows::count(L) * splits; b += gridDim.x) {
    const int64_t row = b / splits;
    const int64_t q_begin = (b % splits) * chunk;
    const int64_t q_end = min64(L.extent, q_begin + chunk);
    const int64_t base = rows::base(L, row);
    double acc = unit<K, double>();
    for (int64_t q = q_begin + threadIdx.x; q < q_end; q += Block) {
      acc = combine<K>(
          acc, static_cast<double>(value_at(x, mask, mask_type,
                                            base + kb::scan::position(L, reverse, q) * L.inner)));
    }
    acc = block_allreduce<Block / 32>(acc, [](double u, double v) { return combine<K>(u, v); });
    if (threadIdx.x == 0) {
      totals[b] = acc;
    }
  }
}

// Split rows, pass 2: each chunk starts from the fold of the row's earlier chunk totals (in
// chunk order) and scans its elements.
template <template <class> class Op, int K, int Block, int Items, class Acc, class T>
__global__ void __launch_bounds__(Block)
    chunk_scan_kernel(const T* __restrict__ x, const void* __restrict__ mask, kb_dtype mask_type,
                      T* __restrict__ y, layout L, int reverse, int exclusive, scalars p,
                      int64_t chunk, int64_t splits, const double* __restrict__ totals) {
  __shared__ float warp_total[Block / 32];
  __shared__ double start;
  for (int64_t b = blockIdx.x; b < rows::count(L) * splits; b += gridDim.x) {
    const int64_t row = b / splits;
    const int64_t s = b % splits;
    __syncthreads(); // `start` of the previous chunk has been read
    if (threadIdx.x == 0) {
      double carry = unit<K, double>();
      for (int64_t i = 0; i < s; ++i) {
        carry = combine<K>(carry, totals[row * splits + i]);
      }
      start = carry;
    }
    __syncthreads();
    const int64_t q_begin = s * chunk;
    scan_segment<Op, K, Block, Items, Acc, T>(
        x, mask, mask_type, y, L, rows::base(L, row), q_begin, min64(L.extent, q_begin + chunk),
        static_cast<Acc>(start), reverse, exclusive, p, warp_total);
  }
}

template <template <class> class Op, int K, int Block, int U, class Acc, class T>
__global__ void __launch_bounds__(Block)
    columns_kernel(const T* __restrict__ x, const void* __restrict__ mask, kb_dtype mask_type,
                   T* __restrict__ y, layout L, int reverse, int exclusive, scalars p) {
  for (int64_t row = int64_t{blockIdx.x} * Block + threadIdx.x; row < rows::count(L);
       row += int64_t{gridDim.x} * Block) {
    const int64_t base = rows::base(L, row);
    Acc acc = unit<K, Acc>();
    for (int64_t q0 = 0; q0 < L.extent; q0 += U) {
      float v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t q = q0 + u;
        v[u] = q < L.extent ? value_at(x, mask, mask_type,
                                       base + kb::scan::position(L, reverse, q) * L.inner)
                            : unit<K, float>();
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t q = q0 + u;
        if (q < L.extent) {
          float out;
          if (exclusive) {
            out = static_cast<float>(acc);
            acc = combine<K>(acc, static_cast<Acc>(v[u]));
          } else {
            acc = combine<K>(acc, static_cast<Acc>(v[u]));
            out = static_cast<float>(acc);
          }
          store_one<T, float>(y + base + kb::scan::position(L, reverse, q) * L.inner,
                              Op<float>::epilogue(out, p.v));
        }
      }
    }
  }
}

#endif

template <template <class> class Op, class P> struct block_rows {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::items_per_thread >= 1, "items_per_thread: at least 1");

  static int launch(const kb_args* a, const config& c) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    return dispatch_op(c, [&](auto op) {
      constexpr int K = decltype(op)::value;
      return dispatch_storage(o.x->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Acc = typename std::conditional<P::compensated != 0, double, float>::type;
        rows_kernel<Op, K, P::block, P::items_per_thread, Acc, T>
            <<<capped_grid(rows::count(o.L)), P::block, 0, stream_of(a)>>>(
                static_cast<const T*>(o.x->data), o.mask, o.mask_type, static_cast<T*>(o.y), o.L,
                c.reverse, c.exclusive, scalars_of(a));
        return static_cast<int>(cudaGetLastError());
      });
    });
  }
};

template <template <class> class Op, class P> struct split_row {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
  static_assert(P::items_per_thread >= 1 && P::chunk >= 1, "items_per_thread, chunk: at least 1");

  static int64_t splits(const layout& L) { return max64(1, ceil_div(L.extent, P::chunk)); }

  static int workspace_bytes(const kb_args* a, const config& c, uint64_t* bytes) {
    operands o;
    if (!operands_of(a, c, &o)) {
      return -1;
    }
    *bytes = static_cast<uint64_t>(rows::count(o.L) * splits(o.L)) * sizeof(double);
    return 0;
  }

  static int launch(const kb_args* a, const config& c) {
    operands o;
    uint64_t need = 0;
    if (!operands_of(a, c, &o) || workspace_bytes(a, c, &need) != 0 || a->workspace_bytes < need ||
        a->workspace == nullptr) {
      return -1;
    }
    return dispatch_op(c, [&](auto op) {
      constexpr int K = decltype(op)::value;
      return dispatch_storage(o.x->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Acc = typename std::conditional<P::compensated != 0, double, float>::type;
        const int64_t nsplit = splits(o.L);
        const unsigned grid = capped_grid(rows::count(o.L) * nsplit);
        double* totals = static_cast<double*>(a->workspace);
        const T* x = static_cast<const T*>(o.x->data);
        chunk_totals_kernel<K, P::block, T><<<grid, P::block, 0, stream_of(a)>>>(
            x, o.mask, o.mask_type, o.L, c.reverse, int64_t{P::chunk}, nsplit, totals);
        chunk_scan_kernel<Op, K, P::block, P::items_per_thread, Acc, T>
            <<<grid, P::block, 0, stream_of(a)>>>(x, o.mask, o.mask_type, static_cast<T*>(o.y), o.L,
                                                  c.reverse, c.exclusive, scalars_of(a),
                                                  int64_t{P::chunk}, nsplit, totals);
        return static_cast<int>(cudaGetLastError());
      });
    });
  }
};

template <template <class> class Op, class P> struct columns {
  static_assert(P::block % 32 == 0 && P::block <= 1024, "block: a multiple of 32, at most 1024");
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
        using Acc = typename std::conditional<P::compensated != 0, double, float>::type;
        columns_kernel<Op, K, P::block, P::unroll, Acc, T>
            <<<capped_grid(ceil_div(rows::count(o.L), P::block)), P::block, 0, stream_of(a)>>>(
                static_cast<const T*>(o.x->data), o.mask, o.mask_type, static_cast<T*>(o.y), o.L,
                c.reverse, c.exclusive, scalars_of(a));
        return static_cast<int>(cudaGetLastError());
      });
    });
  }
};

} // namespace kb::strategies::scan
