// The index math of the `conv` family, shared by the float64 oracle, the baseline, the strategies
// (include/kblaster/device/strategies/conv.cuh) and the CPU tests: output sizes, the implicit-GEMM
// view of a (grouped, possibly transposed) convolution and the positions a kernel tap reads.
// Plain C++ over integers (host and device), so the tests include it without CUDA.
//
// A convolution of spatial rank r (1 to 3) is held as rank 3: the spatial dims are the last r of
// (d, h, w) and the leading ones have size 1, kernel 1, stride 1, padding 0, dilation 1.
//
// Forward (PyTorch Conv1d/2d/3d): x [N, Cin, in...], weight [Cout, Cin/groups, k...],
//   out = (in + 2 pad - dil (k - 1) - 1) / stride + 1,
//   y[b, co, o] = sum over c < Cin/groups, taps t of x[b, g Cin/groups + c, o stride - pad + t dil]
//                 * weight[co, c, t], with g = co / (Cout/groups) and positions outside x read 0.
// Transposed (ConvTranspose1d/2d/3d, the gradient of the forward convolution with respect to its
// input): x [N, Cin, in...], weight [Cin, Cout/groups, k...],
//   out = (in - 1) stride - 2 pad + dil (k - 1) + output_padding + 1,
//   y[b, co, o] = sum over c < Cin/groups, taps t with (o + pad - t dil) % stride == 0 and
//                 i = (o + pad - t dil) / stride in [0, in) of
//                 x[b, g Cin/groups + c, i] * weight[g Cin/groups + c, co % (Cout/groups), t].
//
// The implicit GEMM, per group g: C[m, n] = sum over k of A[m, k] B[k, n] with
//   m = (b, od, oh, ow) in output order (M = N x out volume), n = co - g Cout/groups
//   (Ngemm = Cout/groups), k = ((c KD + kd) KH + kh) KW + kw (K = Cin/groups x kernel volume):
//   A[m, k] is the input value tap k reads for output m (0 where it reads nothing), B[k, n] the
//   weight that multiplies it.
#pragma once

#include <stdint.h>

#ifndef KB_HD
#if defined(__CUDACC__)
#define KB_HD __host__ __device__ __forceinline__
#else
#define KB_HD inline
#endif
#endif

namespace kb::conv {

// One spatial dim's output size; 0 or less when no output position exists.
KB_HD int64_t output_size(int64_t in, int64_t k, int stride, int pad, int dil, int out_pad,
                          bool transposed) {
  if (transposed) {
    return (in - 1) * stride - 2 * static_cast<int64_t>(pad) + static_cast<int64_t>(dil) * (k - 1) +
           out_pad + 1;
  }
  const int64_t span = in + 2 * static_cast<int64_t>(pad) - static_cast<int64_t>(dil) * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1; // no window fits: none (division truncates toward 0)
}

// A convolution's sizes at one call, as rank 3.
struct geometry {
  int transposed;
  int groups;
  int64_t n;    // batch
  int64_t cin;  // input channels (all groups)
  int64_t cout; // output channels (all groups)
  int64_t in[3];
  int64_t out[3];
  int64_t k[3];
  int stride[3];
  int pad[3];
  int dil[3];

  KB_HD int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  KB_HD int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  KB_HD int64_t kernel_volume() const { return k[0] * k[1] * k[2]; }
  KB_HD int64_t cin_group() const { return cin / groups; }
  KB_HD int64_t cout_group() const { return cout / groups; }
  // The implicit GEMM's sizes per group.
  KB_HD int64_t gemm_m() const { return n * out_volume(); }
  KB_HD int64_t gemm_n() const { return cout_group(); }
  KB_HD int64_t gemm_k() const { return cin_group() * kernel_volume(); }
};

// Where each conv strategy is offered, on the GEMM view of one group (K = input channels per group
// x kernel volume, N = output channels per group): the library's offer (src/search/strategies.cpp)
// and, in a conv chain, the run-time choice of strategy for each later convolution
// (strategies/conv.cuh) use these two and nothing else.
KB_HD constexpr bool implicit_gemm_fits(int64_t k, int64_t n) {
  return k >= 16 && n >= 8;
}
KB_HD constexpr bool direct_fits(int64_t k, int64_t n) {
  return k < 64 || n < 8;
}

// k -> (c, tap): the channel within the group and the kernel taps (kd, kh, kw).
struct k_index {
  int64_t c;
  int64_t t[3];
};
KB_HD k_index split_k(const geometry& g, int64_t k) {
  k_index r;
  r.t[2] = k % g.k[2];
  k /= g.k[2];
  r.t[1] = k % g.k[1];
  k /= g.k[1];
  r.t[0] = k % g.k[0];
  r.c = k / g.k[0];
  return r;
}

// m -> (b, od, oh, ow).
struct m_index {
  int64_t b;
  int64_t o[3];
};
KB_HD m_index split_m(const geometry& g, int64_t m) {
  m_index r;
  r.o[2] = m % g.out[2];
  m /= g.out[2];
  r.o[1] = m % g.out[1];
  m /= g.out[1];
  r.o[0] = m % g.out[0];
  r.b = m / g.out[0];
  return r;
}

// The input position tap t of output position o reads along dim d, or -1 when it reads nothing
// (padding, or for a transposed convolution a position between strides).
KB_HD int64_t input_position(const geometry& g, int d, int64_t o, int64_t t) {
  if (!g.transposed) {
    const int64_t i = o * g.stride[d] - g.pad[d] + t * g.dil[d];
    return i >= 0 && i < g.in[d] ? i : -1;
  }
  const int64_t q = o + g.pad[d] - t * g.dil[d];
  if (q < 0 || q % g.stride[d] != 0) {
    return -1;
  }
  const int64_t i = q / g.stride[d];
  return i < g.in[d] ? i : -1;
}

// The implicit GEMM's loader walks k in steps with carries instead of dividing: the running
// (c, kd, kh, kw) of a thread's next A element, advanced by `step` (< kernel volume or not).
struct k_state {
  int c, kd, kh, kw;
  KB_HD void advance(int step, const geometry& g) {
    kw += step;
    while (kw >= g.k[2]) {
      kw -= static_cast<int>(g.k[2]);
      ++kh;
    }
    while (kh >= g.k[1]) {
      kh -= static_cast<int>(g.k[1]);
      ++kd;
    }
    while (kd >= g.k[0]) {
      kd -= static_cast<int>(g.k[0]);
      ++c;
    }
  }
};

// input_position with the output position's part precomputed: `base` = o stride - pad (forward)
// or o + pad (transposed), `t` = tap x dilation.
template <bool Transposed> KB_HD int tap_position(int64_t base, int64_t t, int stride, int64_t in) {
  if (!Transposed) {
    const int64_t i = base + t;
    return i >= 0 && i < in ? static_cast<int>(i) : -1;
  } else {
    const int64_t q = base - t;
    if (q < 0) {
      return -1;
    }
    if (stride == 1) { // no division where most transposed convolutions are
      return q < in ? static_cast<int>(q) : -1;
    }
    const int64_t i =
        static_cast<int64_t>(static_cast<uint32_t>(q) / static_cast<uint32_t>(stride));
    return i * stride == q && i < in ? static_cast<int>(i) : -1;
  }
}

// Offset in x of A[m, k] of group `grp`, or -1 for a zero.
KB_HD int64_t a_offset(const geometry& g, int64_t grp, const m_index& mi, const k_index& ki) {
  int64_t pos = 0;
  for (int d = 0; d < 3; ++d) {
    const int64_t i = input_position(g, d, mi.o[d], ki.t[d]);
    if (i < 0) {
      return -1;
    }
    pos = pos * g.in[d] + i;
  }
  return ((mi.b * g.cin + grp * g.cin_group() + ki.c) * g.in_volume()) + pos;
}

// Offset in the weight of B[k, n] of group `grp` (PyTorch's layouts).
KB_HD int64_t b_offset(const geometry& g, int64_t grp, int64_t k, int64_t n) {
  if (!g.transposed) {
    return (grp * g.cout_group() + n) * g.gemm_k() + k; // [Cout, Cin/groups, k...]: k contiguous
  }
  const int64_t kv = g.kernel_volume();
  const int64_t c = k / kv;
  const int64_t tap = k % kv;
  return ((grp * g.cin_group() + c) * g.cout_group() + n) * kv + tap; // [Cin, Cout/groups, k...]
}

// Offset in y of C[m, n] of group `grp`.
KB_HD int64_t c_offset(const geometry& g, int64_t grp, int64_t m, int64_t n) {
  const int64_t ov = g.out_volume();
  const int64_t b = m / ov;
  return (b * g.cout + grp * g.cout_group() + n) * ov + (m % ov);
}

} // namespace kb::conv
