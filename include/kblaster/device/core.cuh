// Device and host building blocks shared by task math, oracles, baselines, generated candidates
// and the harness: one definition of dtype conversion, math functions, the counter-based input
// generator and the error metrics, compiled for the GPU and the CPU alike.
#pragma once

#include "kblaster/candidate.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#if defined(__CUDACC__)
#define KB_HD __host__ __device__ __forceinline__
#define KB_DEVICE __device__ __forceinline__
#else
#define KB_HD inline
#define KB_DEVICE inline
#endif

namespace kb {

// ---- dtype conversion -------------------------------------------------------------------------

template <class To, class From> struct convert;
template <class T> struct convert<T, T> {
  static KB_HD T run(T v) { return v; }
};
template <> struct convert<float, double> {
  static KB_HD float run(double v) { return static_cast<float>(v); }
};
template <> struct convert<double, float> {
  static KB_HD double run(float v) { return static_cast<double>(v); }
};
template <> struct convert<float, __half> {
  static KB_HD float run(__half v) { return __half2float(v); }
};
template <> struct convert<double, __half> {
  static KB_HD double run(__half v) { return static_cast<double>(__half2float(v)); }
};
template <> struct convert<__half, float> {
  static KB_HD __half run(float v) { return __float2half_rn(v); }
};
template <> struct convert<__half, double> {
  static KB_HD __half run(double v) { return __double2half(v); }
};
template <> struct convert<float, __nv_bfloat16> {
  static KB_HD float run(__nv_bfloat16 v) { return __bfloat162float(v); }
};
template <> struct convert<double, __nv_bfloat16> {
  static KB_HD double run(__nv_bfloat16 v) { return static_cast<double>(__bfloat162float(v)); }
};
template <> struct convert<__nv_bfloat16, float> {
  static KB_HD __nv_bfloat16 run(float v) { return __float2bfloat16_rn(v); }
};
template <> struct convert<__nv_bfloat16, double> {
  static KB_HD __nv_bfloat16 run(double v) { return __double2bfloat16(v); }
};
template <> struct convert<double, int64_t> {
  static KB_HD double run(int64_t v) { return static_cast<double>(v); }
};
template <> struct convert<float, int64_t> {
  static KB_HD float run(int64_t v) { return static_cast<float>(v); }
};

template <class To, class From> KB_HD To cvt(From v) {
  return convert<To, From>::run(v);
}

// ---- math functions with float and double overloads, for use in task math -----------------------
// Task math calls these (never the float-suffixed C functions) so that one template serves the
// double oracle and the float kernels.
namespace fn {
KB_HD float exp(float x) {
  return ::expf(x);
}
KB_HD double exp(double x) {
  return ::exp(x);
}
KB_HD float log(float x) {
  return ::logf(x);
}
KB_HD double log(double x) {
  return ::log(x);
}
KB_HD float sqrt(float x) {
  return ::sqrtf(x);
}
KB_HD double sqrt(double x) {
  return ::sqrt(x);
}
KB_HD float erf(float x) {
  return ::erff(x);
}
KB_HD double erf(double x) {
  return ::erf(x);
}
KB_HD float tanh(float x) {
  return ::tanhf(x);
}
KB_HD double tanh(double x) {
  return ::tanh(x);
}
KB_HD float fabs(float x) {
  return ::fabsf(x);
}
KB_HD double fabs(double x) {
  return ::fabs(x);
}
KB_HD float max(float a, float b) {
  return ::fmaxf(a, b);
}
KB_HD double max(double a, double b) {
  return ::fmax(a, b);
}
KB_HD float min(float a, float b) {
  return ::fminf(a, b);
}
KB_HD double min(double a, double b) {
  return ::fmin(a, b);
}
KB_HD float fma(float a, float b, float c) {
  return ::fmaf(a, b, c);
}
KB_HD double fma(double a, double b, double c) {
  return ::fma(a, b, c);
}
} // namespace fn

// ---- dtype dispatch ----------------------------------------------------------------------------

template <class T> struct type_tag { using type = T; };

// The dtypes a source is compiled for. kblaster compiles a task's candidates with KB_TASK_DTYPES,
// the mask of 1 << kb_dtype over the task's inputs and outputs: the dispatches below then
// instantiate kernels for those dtypes only, and refuse the others at run time, as they refuse an
// unsupported one. Each dtype left out is a set of kernels nvcc does not compile. Without the
// macro (a source compiled by hand) every dtype is compiled.
#ifndef KB_TASK_DTYPES
#define KB_TASK_DTYPES 0xffffffffu
#endif
constexpr bool compiled_for(kb_dtype d) {
  return ((static_cast<unsigned>(KB_TASK_DTYPES) >> static_cast<unsigned>(d)) & 1u) != 0;
}

// f(type_tag<T>{}) where the source is compiled for dtype D (compiled_for), else -1.
template <kb_dtype D, class T, class F> int call_if_compiled(F&& f) {
  if constexpr (compiled_for(D)) {
    return f(type_tag<T>{});
  } else {
    return -1;
  }
}

// Calls f(type_tag<T>{}) for the floating-point storage type of `d`; returns -1 when unsupported.
template <class F> int dispatch_float(kb_dtype d, F&& f) {
  switch (d) {
  case KB_FLOAT32:
    return call_if_compiled<KB_FLOAT32, float>(f);
  case KB_FLOAT16:
    return call_if_compiled<KB_FLOAT16, __half>(f);
  case KB_BFLOAT16:
    return call_if_compiled<KB_BFLOAT16, __nv_bfloat16>(f);
  case KB_FLOAT64:
    return call_if_compiled<KB_FLOAT64, double>(f);
  default:
    return -1;
  }
}

template <class T> constexpr kb_dtype dtype_of();
template <> constexpr kb_dtype dtype_of<float>() {
  return KB_FLOAT32;
}
template <> constexpr kb_dtype dtype_of<__half>() {
  return KB_FLOAT16;
}
template <> constexpr kb_dtype dtype_of<__nv_bfloat16>() {
  return KB_BFLOAT16;
}
template <> constexpr kb_dtype dtype_of<double>() {
  return KB_FLOAT64;
}
template <> constexpr kb_dtype dtype_of<int64_t>() {
  return KB_INT64;
}
template <> constexpr kb_dtype dtype_of<int32_t>() {
  return KB_INT32;
}

// ---- tensors -----------------------------------------------------------------------------------

KB_HD int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    n *= t.shape[i];
  }
  return n;
}

KB_HD bool is_contiguous(const kb_tensor& t) {
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) {
      return false;
    }
    expected *= t.shape[i];
  }
  return true;
}

KB_HD int64_t product(const kb_tensor& t, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end && i < t.ndim; ++i) {
    n *= t.shape[i];
  }
  return n;
}

// n / d for n < 2^31 by a multiply and a shift (Granlund-Montgomery): d's magic number is
// computed once on the host, so a kernel that needs a division per element pays three
// instructions instead of a 64-bit division.
struct divider {
  uint32_t d = 1;
  uint32_t m = 1;
  uint32_t s = 0;

  divider() = default;
  KB_HD explicit divider(uint32_t by) : d(by < 1 ? 1 : by) {
    while ((uint64_t{1} << s) < d) {
      ++s;
    }
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
  }
  KB_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, m);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(hi) + n) >> s);
  }
};

// ---- counter-based input generation (identical on CPU and GPU) ---------------------------------

KB_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) for (seed, counter).
KB_HD double uniform01(uint64_t seed, uint64_t counter) {
  const uint64_t bits = splitmix64(seed ^ splitmix64(counter));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

KB_HD double standard_normal(uint64_t seed, uint64_t counter) {
  // Box-Muller from two independent uniforms; u1 in (0, 1].
  const double u1 = 1.0 - uniform01(seed, 2 * counter);
  const double u2 = uniform01(seed, 2 * counter + 1);
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
}

enum kb_dist_kind {
  KB_DIST_UNIFORM = 0,
  KB_DIST_NORMAL = 1,
  KB_DIST_STUDENT_T = 2,
  KB_DIST_CONSTANT = 3,
  KB_DIST_RANDINT = 4
};

struct distribution {
  int kind; // kb_dist_kind
  double a; // uniform low, normal mean, student_t nu, constant value, randint low
  double b; // uniform high, normal std, student_t scale, randint high (exclusive)
};

// Student-t values are clipped to this magnitude so that 16-bit dtypes stay finite.
constexpr double heavy_tail_clip = 1.0e4;

KB_HD double sample(const distribution& d, uint64_t seed, uint64_t i) {
  switch (d.kind) {
  case KB_DIST_UNIFORM:
    return d.a + (d.b - d.a) * uniform01(seed, i);
  case KB_DIST_NORMAL:
    return d.a + d.b * standard_normal(seed, i);
  case KB_DIST_STUDENT_T: {
    const int nu = d.a < 1 ? 1 : (d.a > 16 ? 16 : static_cast<int>(d.a));
    const uint64_t base = i * 17;
    const double z = standard_normal(seed, base);
    double chi2 = 0;
    for (int k = 1; k <= nu; ++k) {
      const double g = standard_normal(seed, base + k);
      chi2 += g * g;
    }
    double t = d.b * z / ::sqrt(chi2 / nu + 1e-300);
    return t > heavy_tail_clip ? heavy_tail_clip : (t < -heavy_tail_clip ? -heavy_tail_clip : t);
  }
  case KB_DIST_CONSTANT:
    return d.a;
  case KB_DIST_RANDINT: {
    const double span = d.b - d.a;
    double v = d.a + ::floor(span * uniform01(seed, i));
    return v >= d.b ? d.b - 1 : v;
  }
  default:
    return 0;
  }
}

// The seed of input tensor `index` in input set `seed`.
KB_HD uint64_t tensor_seed(uint64_t seed, int index) {
  return splitmix64(seed * 0x100000001B3ull + static_cast<uint64_t>(index) + 1);
}

// ---- poison and hashing ------------------------------------------------------------------------
// Before every call the harness fills the outputs with a poison pattern that it draws per
// evaluation and keeps to itself: a quiet NaN with a random nonzero payload for the floating-point
// dtypes (so that an element never written is still non-finite), a random value for the integer
// dtypes. An element still holding it afterwards was never written. The values are unspecified:
// a kernel cannot know them, only that an unwritten floating-point element is a NaN.
struct poison_pattern {
  uint64_t f64; // the bits of one element of each dtype
  uint64_t i64;
  uint32_t f32;
  uint32_t i32;
  uint16_t f16;
  uint16_t bf16;
};

// The bits of one poison element of dtype `d`, in the low dtype_bytes(d) bytes.
KB_HD uint64_t poison_bits(const poison_pattern& p, kb_dtype d) {
  switch (d) {
  case KB_FLOAT32:
    return p.f32;
  case KB_FLOAT64:
    return p.f64;
  case KB_FLOAT16:
    return p.f16;
  case KB_BFLOAT16:
    return p.bf16;
  case KB_INT64:
    return p.i64;
  case KB_INT32:
    return p.i32;
  }
  return 0;
}

KB_HD void write_poison(void* data, kb_dtype d, int64_t i, const poison_pattern& p) {
  switch (d) {
  case KB_FLOAT32:
    static_cast<uint32_t*>(data)[i] = p.f32;
    break;
  case KB_FLOAT64:
    static_cast<uint64_t*>(data)[i] = p.f64;
    break;
  case KB_FLOAT16:
    static_cast<uint16_t*>(data)[i] = p.f16;
    break;
  case KB_BFLOAT16:
    static_cast<uint16_t*>(data)[i] = p.bf16;
    break;
  case KB_INT64:
    static_cast<uint64_t*>(data)[i] = p.i64;
    break;
  case KB_INT32:
    static_cast<uint32_t*>(data)[i] = p.i32;
    break;
  }
}

// An order-independent 64-bit digest of a word stream: sum over i of mix(word_i, i). Parallel
// reductions compute it in any order; any changed or moved word changes it with high probability.
KB_HD uint64_t hash_word(uint64_t word, uint64_t index) {
  return splitmix64(word ^ splitmix64(index + 0x51ED270B27A3D4ull));
}

// ---- error metrics (one element at a time, the same on CPU and GPU) ----------------------------

constexpr int error_histogram_bins =
    64; // bin k: |err| / scale in [2^-(k+1), 2^-k); bin 63 and below: smaller

struct tolerance_spec {
  double atol;  // times scale
  double rtol;  // times |ref|
  double scale; // RMS of the reference output
};

struct error_metrics {
  double sum_sq_err;
  double sum_sq_ref;
  double max_abs_err;
  double max_rel_err; // |err| / max(|ref|, scale * 1e-12)
  double max_excess;  // max of |err| / (atol*scale + rtol*|ref|); > 1 means a violation
  uint64_t count;
  uint64_t violations;  // elements outside the elementwise bound
  uint64_t nonfinite;   // NaN or Inf where the reference is finite
  uint64_t unwritten;   // elements still holding the poison
  uint64_t worst_index; // index of the element with the largest excess
  uint64_t histogram[error_histogram_bins];
};

KB_HD void reset(error_metrics& m) {
  m.sum_sq_err = 0;
  m.sum_sq_ref = 0;
  m.max_abs_err = 0;
  m.max_rel_err = 0;
  m.max_excess = 0;
  m.count = 0;
  m.violations = 0;
  m.nonfinite = 0;
  m.unwritten = 0;
  m.worst_index = 0;
  for (int i = 0; i < error_histogram_bins; ++i) {
    m.histogram[i] = 0;
  }
}

KB_HD bool is_finite(double v) {
  return v == v && v - v == 0.0;
}

KB_HD int error_bin(double err, double scale) {
  if (!(err > 0) || !(scale > 0)) {
    return error_histogram_bins - 1;
  }
  int e = 0;
  ::frexp(err / scale, &e); // err/scale in [2^(e-1), 2^e)
  const int bin = -e;       // e=0 -> bin 0: [0.5, 1)
  return bin < 0 ? 0 : (bin >= error_histogram_bins ? error_histogram_bins - 1 : bin);
}

// Adds one element to the metrics; returns the histogram bin to count it in, or -1 when the
// element has no finite error (the caller owns the histogram, so a GPU block can keep it in
// shared memory).
// `M` is error_metrics or any struct with its scalar fields (a GPU thread keeps only those).
template <class M>
KB_HD int accumulate(M& m, double y, double ref, bool poison, const tolerance_spec& t,
                     uint64_t index) {
  m.count += 1;
  m.sum_sq_ref += ref * ref;
  if (poison) {
    m.unwritten += 1;
    m.violations += 1;
    if (m.max_excess != INFINITY) {
      m.max_excess = INFINITY;
      m.worst_index = index;
    }
    return -1;
  }
  if (!is_finite(y)) {
    // Non-finite output is acceptable only where the reference has the same non-finite value.
    const bool same = (y != y && ref != ref) || (y == ref);
    if (!same) {
      m.nonfinite += 1;
      m.violations += 1;
      if (m.max_excess != INFINITY) {
        m.max_excess = INFINITY;
        m.worst_index = index;
      }
    }
    return -1;
  }
  if (!is_finite(ref)) {
    m.nonfinite += 1; // a finite value where the reference is not
    m.violations += 1;
    if (m.max_excess != INFINITY) {
      m.max_excess = INFINITY;
      m.worst_index = index;
    }
    return -1;
  }
  const double err = ::fabs(y - ref);
  const double aref = ::fabs(ref);
  const double bound = t.atol * t.scale + t.rtol * aref;
  m.sum_sq_err += err * err;
  if (err > m.max_abs_err) {
    m.max_abs_err = err;
  }
  const double floor_ref = t.scale > 0 ? t.scale * 1e-12 : 1e-300;
  const double rel = err / (aref > floor_ref ? aref : floor_ref);
  if (rel > m.max_rel_err) {
    m.max_rel_err = rel;
  }
  const double excess = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0);
  if (excess > m.max_excess) {
    m.max_excess = excess;
    m.worst_index = index;
  }
  if (err > bound) {
    m.violations += 1;
  }
  return error_bin(err, t.scale);
}

// The scalar fields of `m` into `into` (both error_metrics, or structs with its scalar fields).
template <class Into, class From> KB_HD void merge_scalars(Into& into, const From& m) {
  into.sum_sq_err += m.sum_sq_err;
  into.sum_sq_ref += m.sum_sq_ref;
  into.max_abs_err = into.max_abs_err > m.max_abs_err ? into.max_abs_err : m.max_abs_err;
  into.max_rel_err = into.max_rel_err > m.max_rel_err ? into.max_rel_err : m.max_rel_err;
  if (m.max_excess > into.max_excess) {
    into.max_excess = m.max_excess;
    into.worst_index = m.worst_index;
  }
  into.count += m.count;
  into.violations += m.violations;
  into.nonfinite += m.nonfinite;
  into.unwritten += m.unwritten;
}

KB_HD void merge(error_metrics& into, const error_metrics& m) {
  merge_scalars(into, m);
  for (int i = 0; i < error_histogram_bins; ++i) {
    into.histogram[i] += m.histogram[i];
  }
}

// Reads element i of a floating-point or integer buffer as double.
KB_HD double read_as_double(const void* data, kb_dtype d, int64_t i) {
  switch (d) {
  case KB_FLOAT32:
    return static_cast<const float*>(data)[i];
  case KB_FLOAT64:
    return static_cast<const double*>(data)[i];
  case KB_FLOAT16:
    return cvt<double>(static_cast<const __half*>(data)[i]);
  case KB_BFLOAT16:
    return cvt<double>(static_cast<const __nv_bfloat16*>(data)[i]);
  case KB_INT64:
    return static_cast<double>(static_cast<const int64_t*>(data)[i]);
  case KB_INT32:
    return static_cast<double>(static_cast<const int32_t*>(data)[i]);
  }
  return 0;
}

// The same, and `poison` tells whether the element still holds the pattern `p`.
KB_HD double read_as_double(const void* data, kb_dtype d, int64_t i, const poison_pattern& p,
                            bool* poison) {
  switch (d) {
  case KB_FLOAT32: {
    const float v = static_cast<const float*>(data)[i];
    uint32_t bits;
    memcpy(&bits, &v, 4);
    *poison = bits == p.f32;
    return v;
  }
  case KB_FLOAT64: {
    const double v = static_cast<const double*>(data)[i];
    uint64_t bits;
    memcpy(&bits, &v, 8);
    *poison = bits == p.f64;
    return v;
  }
  case KB_FLOAT16: {
    const __half v = static_cast<const __half*>(data)[i];
    uint16_t bits;
    memcpy(&bits, &v, 2);
    *poison = bits == p.f16;
    return cvt<double>(v);
  }
  case KB_BFLOAT16: {
    const __nv_bfloat16 v = static_cast<const __nv_bfloat16*>(data)[i];
    uint16_t bits;
    memcpy(&bits, &v, 2);
    *poison = bits == p.bf16;
    return cvt<double>(v);
  }
  case KB_INT64: {
    const int64_t v = static_cast<const int64_t*>(data)[i];
    *poison = static_cast<uint64_t>(v) == p.i64;
    return static_cast<double>(v);
  }
  case KB_INT32: {
    const int32_t v = static_cast<const int32_t*>(data)[i];
    *poison = static_cast<uint32_t>(v) == p.i32;
    return static_cast<double>(v);
  }
  }
  *poison = false;
  return 0;
}

KB_HD void write_from_double(void* data, kb_dtype d, int64_t i, double v) {
  switch (d) {
  case KB_FLOAT32:
    static_cast<float*>(data)[i] = static_cast<float>(v);
    break;
  case KB_FLOAT64:
    static_cast<double*>(data)[i] = v;
    break;
  case KB_FLOAT16:
    static_cast<__half*>(data)[i] = cvt<__half>(v);
    break;
  case KB_BFLOAT16:
    static_cast<__nv_bfloat16*>(data)[i] = cvt<__nv_bfloat16>(v);
    break;
  case KB_INT64:
    static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v);
    break;
  case KB_INT32:
    static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
    break;
  }
}

KB_HD int dtype_bytes(kb_dtype d) {
  switch (d) {
  case KB_FLOAT16:
  case KB_BFLOAT16:
    return 2;
  case KB_FLOAT32:
  case KB_INT32:
    return 4;
  default:
    return 8;
  }
}

} // namespace kb
