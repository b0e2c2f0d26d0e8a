// RMSNorm over the reduced axes: y = x / sqrt(mean(x^2) + eps) * weight (weight 1 when absent).
// params[0] = eps. Shared by 036 and the RMSNorm deep case (tasks/llm).
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A sum_sq;
  };
  using stats = A; // 1 / rms
  static KB_HD state init() { return {A(0)}; }
  static KB_HD state accumulate(state s, A x) { return {kb::fn::fma(x, x, s.sum_sq)}; }
  static KB_HD state combine(state a, state b) { return {a.sum_sq + b.sum_sq}; }
  static KB_HD stats finalize(state s, int64_t n, const double* params) {
    return A(1) / kb::fn::sqrt(s.sum_sq / A(n) + A(params[0]));
  }
  static KB_HD A apply(A x, const stats& inv_rms, A weight, A) { return x * inv_rms * weight; }
};
