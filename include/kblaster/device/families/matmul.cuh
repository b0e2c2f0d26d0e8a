// Family `matmul`: c[z, m, n] = mask(epilogue(alpha * sum over k of A[z, m, k] * B[z, k, n])),
// row-major, contiguous tensors; matrix-vector products are the case N = 1.
//
// The forms (kb::matmul::config, from the contract's [matmul] table; docs/task-format.md):
//   - plain: a (M x K) and b (K x N);
//   - batched: leading dims of a and/or b are batch dims (their product is the batch count; an
//     operand without them, or with a batch count of 1, is shared by every batch). When only a
//     is batched and not transposed, and there is no mask, its batches fold into M (a 3D/4D
//     tensor times a matrix is one product with more rows);
//   - trans_a: a holds A transposed, its last two dims (K, M); trans_b: b holds B transposed, (N,
//   K);
//   - alpha: a factor on the sum, applied before the epilogue;
//   - mask: lower keeps c[z, m, n] with n <= m (tril), upper keeps n >= m (triu); the other
//     elements are 0 (not epilogue(0));
//   - diag_a: a is the diagonal of A, a vector of K values (M = K): c[m, n] = epilogue(alpha *
//     a[m] * B[m, n]), a row scaling.
//
// A task's math file defines
//   template <class A> struct kb_op {
//     static KB_HD A epilogue(A acc);   // identity for a plain product
//   };
// or, for a fused chain that reads per-column operands (a Linear's bias, a scale; the config's
// `epi` input indices, kblaster/device/epilogue.cuh), the indexed form
//     static KB_HD A epilogue(A acc, int64_t m, int64_t n, const kb::epi::operands& ops);
// with (m, n) the element's row and column in its matrix.
#pragma once

#include "kblaster/device/epilogue.cuh"
#include "kblaster/device/families/common.cuh"

namespace kb::matmul {

enum mask_kind : int { mask_none = 0, mask_lower = 1, mask_upper = 2 };

struct config {
  int a;
  int b;
  int trans_a = 0;
  int trans_b = 0;
  double alpha = 1.0;
  int mask = mask_none;
  int diag_a = 0;
  int epi[kb::epi::max_operands] = {-1, -1, -1, -1, -1, -1, -1, -1}; // epilogue operands' inputs
};

// A product the kernels compute: per batch z, C_z (m x n) = A_z (m x k) @ B_z (k x n) with A_z at
// a + z * sa, B_z at b + z * sb and C_z at c + z * sc (a stride of 0: shared by every batch).
struct dims {
  int64_t m;
  int64_t n;
  int64_t k;
  int64_t batch = 1;
  int64_t sa = 0;
  int64_t sb = 0;
  int64_t sc = 0;
  double alpha = 1.0;
  int mask = mask_none;
  kb::epi::operands ops{}; // the epilogue's operands (indexed form only)
};

// Whether the output element (m, n) of a matrix is zeroed by the mask.
KB_HD bool masked(int mask, int64_t m, int64_t n) {
  return (mask == mask_lower && n > m) || (mask == mask_upper && n < m);
}

// Whether the whole tile rows [m0, m0 + bm) x columns [n0, n0 + bn) is zeroed by the mask.
KB_HD bool tile_masked(int mask, int64_t m0, int64_t n0, int64_t bm, int64_t bn) {
  return (mask == mask_lower && n0 > m0 + bm - 1) || (mask == mask_upper && n0 + bn - 1 < m0);
}

// The epilogue over the scaled sum of element (m, n) of its matrix.
template <template <class> class Op, class A>
KB_HD A finish(A acc, const dims& d, int64_t m, int64_t n) {
  if constexpr (kb::epi::matmul_indexed<Op<A>, A>::value) {
    return Op<A>::epilogue(A(d.alpha) * acc, m, n, d.ops);
  } else {
    (void)m;
    (void)n;
    return Op<A>::epilogue(A(d.alpha) * acc);
  }
}

// The product a call describes under a config: the dims, with sa and sb the batch strides of the
// operands as stored (a transposed operand's batch holds the same M * K or K * N values).
struct layout {
  dims d;
  bool trans_a = false;
  bool trans_b = false;
  bool diag = false;
};

KB_HD int64_t leading(const kb_tensor& t, int inner) {
  return product(t, 0, t.ndim - inner);
}

inline bool layout_of(const kb_args* a, const config& c, layout* out) {
  if (a->num_outputs < 1 || c.a < 0 || c.a >= a->num_inputs || c.b < 0 || c.b >= a->num_inputs) {
    return false;
  }
  const kb_tensor& at = a->inputs[c.a];
  const kb_tensor& bt = a->inputs[c.b];
  const kb_tensor& ct = a->outputs[0];
  if (!is_contiguous(at) || !is_contiguous(bt) || !is_contiguous(ct) || at.dtype != bt.dtype ||
      (c.mask != mask_none && c.mask != mask_lower && c.mask != mask_upper)) {
    return false;
  }
  layout L{};
  if (!kb::epi::operands_of(a, c.epi, &L.d.ops)) {
    return false;
  }
  L.trans_a = c.trans_a != 0;
  L.trans_b = c.trans_b != 0;
  L.diag = c.diag_a != 0;
  dims& d = L.d;
  d.alpha = c.alpha;
  d.mask = c.mask;
  if (L.diag) {
    if (at.ndim != 1 || bt.ndim != 2 || L.trans_a) {
      return false;
    }
    d.m = d.k = at.shape[0];
    d.n = L.trans_b ? bt.shape[0] : bt.shape[1];
    if ((L.trans_b ? bt.shape[1] : bt.shape[0]) != d.k) {
      return false;
    }
  } else {
    if (at.ndim < 2 || bt.ndim < 1 || (bt.ndim == 1 && L.trans_b)) {
      return false;
    }
    const int64_t a0 = at.shape[at.ndim - 2];
    const int64_t a1 = at.shape[at.ndim - 1];
    d.m = L.trans_a ? a1 : a0;
    d.k = L.trans_a ? a0 : a1;
    int64_t bk = 0;
    if (bt.ndim == 1) {
      bk = bt.shape[0];
      d.n = 1;
    } else {
      const int64_t b0 = bt.shape[bt.ndim - 2];
      const int64_t b1 = bt.shape[bt.ndim - 1];
      bk = L.trans_b ? b1 : b0;
      d.n = L.trans_b ? b0 : b1;
    }
    if (bk != d.k) {
      return false;
    }
    const int64_t batch_a = leading(at, 2);
    const int64_t batch_b = bt.ndim > 2 ? leading(bt, 2) : 1;
    if (batch_a > 1 && batch_b > 1 && batch_a != batch_b) {
      return false;
    }
    if (batch_a > 1 && batch_b == 1 && !L.trans_a && d.mask == mask_none) {
      d.m *= batch_a; // a's batches are more rows of one product
    } else {
      d.batch = batch_a > batch_b ? batch_a : batch_b;
      d.sa = batch_a > 1 ? d.m * d.k : 0;
      d.sb = batch_b > 1 ? d.k * d.n : 0;
    }
  }
  d.sc = d.batch > 1 ? d.m * d.n : 0;
  if (numel(ct) != d.batch * d.m * d.n) {
    return false;
  }
  *out = L;
  return true;
}

// The plain product (no batch, transpose, factor, mask or diagonal): what the hand-written
// kernels that predate the forms accept.
inline bool dims_of(const kb_args* a, const config& c, dims* d) {
  layout L{};
  if (c.trans_a != 0 || c.trans_b != 0 || c.alpha != 1.0 || c.mask != mask_none || c.diag_a != 0 ||
      !layout_of(a, c, &L) || L.d.batch != 1 || a->inputs[c.a].ndim != 2 ||
      a->inputs[c.b].ndim != 2) {
    return false;
  }
  *d = L.d;
  return true;
}

// Where A[z][m][k] and B[z][k][n] sit in the stored operands.
KB_HD int64_t a_index(const layout& L, int64_t z, int64_t m, int64_t k) {
  return z * L.d.sa + (L.trans_a ? k * L.d.m + m : m * L.d.k + k);
}
KB_HD int64_t b_index(const layout& L, int64_t z, int64_t k, int64_t n) {
  return z * L.d.sb + (L.trans_b ? n * L.d.k + k : k * L.d.n + n);
}

// One block per output element, reducing over k: right when N is small (matrix-vector).
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void block_per_output(const Tin* __restrict__ a, const Tin* __restrict__ b,
                                 Tout* __restrict__ c, layout L) {
  const dims& d = L.d;
  const int64_t outputs = d.batch * d.m * d.n;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t z = o / (d.m * d.n);
    const int64_t m = o / d.n % d.m;
    const int64_t n = o % d.n;
    A acc = A(0);
    for (int64_t k = threadIdx.x; k < d.k; k += blockDim.x) {
      acc = fn::fma(cvt<A>(a[a_index(L, z, m, k)]), cvt<A>(b[b_index(L, z, k, n)]), acc);
    }
    acc = block_reduce(acc, [](A u, A v) { return u + v; });
    if (threadIdx.x == 0) {
      c[o] = masked(d.mask, m, n) ? cvt<Tout>(A(0)) : cvt<Tout>(finish<Op>(acc, d, m, n));
    }
  }
}

// diag(a) @ B: a thread per output.
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void diag_rows(const Tin* __restrict__ a, const Tin* __restrict__ b,
                          Tout* __restrict__ c, layout L) {
  const dims& d = L.d;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < d.m * d.n;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = o / d.n;
    const int64_t n = o % d.n;
    const A acc = cvt<A>(a[m]) * cvt<A>(b[b_index(L, 0, m, n)]);
    c[o] = masked(d.mask, m, n) ? cvt<Tout>(A(0)) : cvt<Tout>(finish<Op>(acc, d, m, n));
  }
}

// The textbook shared-memory tiled product, one output per thread; the batch is blockIdx.z.
constexpr int tile = 16;

template <template <class> class Op, class A, class Tin, class Tout>
__global__ void tiled(const Tin* __restrict__ a, const Tin* __restrict__ b, Tout* __restrict__ c,
                      layout L) {
  __shared__ A as[tile][tile];
  __shared__ A bs[tile][tile + 1];
  const dims& d = L.d;
  const int64_t z = blockIdx.z;
  const int64_t row = blockIdx.y * static_cast<int64_t>(tile) + threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(tile) + threadIdx.x;
  A acc = A(0);
  for (int64_t k0 = 0; k0 < d.k; k0 += tile) {
    const int64_t ka = k0 + threadIdx.x;
    const int64_t kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        (row < d.m && ka < d.k) ? cvt<A>(a[a_index(L, z, row, ka)]) : A(0);
    bs[threadIdx.y][threadIdx.x] =
        (kb < d.k && col < d.n) ? cvt<A>(b[b_index(L, z, kb, col)]) : A(0);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < tile; ++k) {
      acc = fn::fma(as[threadIdx.y][k], bs[k][threadIdx.x], acc);
    }
    __syncthreads();
  }
  if (row < d.m && col < d.n) {
    c[z * d.m * d.n + row * d.n + col] =
        masked(d.mask, row, col) ? cvt<Tout>(A(0)) : cvt<Tout>(finish<Op>(acc, d, row, col));
  }
}

template <template <class> class Op, class A, bool OutputIsInputType>
int launch_naive(const kb_args* a, const config& c) {
  layout L{};
  if (!layout_of(a, c, &L)) {
    return -1;
  }
  const dims& d = L.d;
  return dispatch_float(a->inputs[c.a].dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const Tin* A_ = static_cast<const Tin*>(a->inputs[c.a].data);
    const Tin* B_ = static_cast<const Tin*>(a->inputs[c.b].data);
    Tout* C_ = static_cast<Tout*>(a->outputs[0].data);
    if (L.diag) {
      diag_rows<Op, A, Tin, Tout>
          <<<grid_for(d.m * d.n, 256), 256, 0, stream_of(a)>>>(A_, B_, C_, L);
    } else if (d.n < tile || d.batch > 65535 || (d.m + tile - 1) / tile > 65535) {
      const int64_t outputs = d.batch * d.m * d.n;
      const unsigned grid = static_cast<unsigned>(outputs < 65535 * 32 ? outputs : 65535 * 32);
      block_per_output<Op, A, Tin, Tout><<<grid, 256, 0, stream_of(a)>>>(A_, B_, C_, L);
    } else {
      const dim3 grid(static_cast<unsigned>((d.n + tile - 1) / tile),
                      static_cast<unsigned>((d.m + tile - 1) / tile),
                      static_cast<unsigned>(d.batch));
      tiled<Op, A, Tin, Tout><<<grid, dim3(tile, tile), 0, stream_of(a)>>>(A_, B_, C_, L);
    }
    return static_cast<int>(cudaGetLastError());
  });
}

// The float64 reference on the host, straight from the definition above.
template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  layout L{};
  if (!layout_of(a, c, &L)) {
    return -1;
  }
  const dims& d = L.d;
  const kb_tensor& at = a->inputs[c.a];
  const kb_tensor& bt = a->inputs[c.b];
  double* y = static_cast<double*>(a->outputs[0].data);
  for (int64_t z = 0; z < d.batch; ++z) {
    for (int64_t m = 0; m < d.m; ++m) {
      for (int64_t n = 0; n < d.n; ++n) {
        double acc = 0;
        if (L.diag) {
          acc = read_as_double(at.data, at.dtype, m) *
                read_as_double(bt.data, bt.dtype, b_index(L, 0, m, n));
        } else {
          for (int64_t k = 0; k < d.k; ++k) {
            acc += read_as_double(at.data, at.dtype, a_index(L, z, m, k)) *
                   read_as_double(bt.data, bt.dtype, b_index(L, z, k, n));
          }
        }
        y[(z * d.m + m) * d.n + n] = masked(d.mask, m, n) ? 0.0 : finish<Op>(acc, d, m, n);
      }
    }
  }
  return 0;
}

} // namespace kb::matmul

#define KB_MATMUL_ORACLE(OP, CONFIG)                                                               \
  KB_ORACLE_EXPORTS("matmul", (kb::matmul::launch_naive<OP, double, false>(args, CONFIG)),         \
                    (kb::matmul::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_MATMUL_BASELINE(OP, CONFIG)                                                             \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::matmul::launch_naive<OP, float, true>(args, CONFIG);                                \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: matmul, shared-memory 16x16 tiles (one block per output when N < 16)";       \
  }
