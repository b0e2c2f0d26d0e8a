// LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, from a Welford
// (count, mean, M2) state combined with Chan's rule. params[0] = eps.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A count;
    A mean;
    A m2;
  };
  struct stats {
    A mean;
    A rstd;
  };
  static KB_HD state init() { return {A(0), A(0), A(0)}; }
  static KB_HD state accumulate(state s, A x) {
    s.count += A(1);
    const A d = x - s.mean;
    s.mean += d / s.count;
    s.m2 += d * (x - s.mean);
    return s;
  }
  static KB_HD state combine(state a, state b) {
    const A n = a.count + b.count;
    if (n == A(0)) {
      return a;
    }
    const A d = b.mean - a.mean;
    return {n, a.mean + d * (b.count / n), a.m2 + b.m2 + d * d * (a.count * b.count / n)};
  }
  static KB_HD stats finalize(state s, int64_t, const double* params) {
    return {s.mean, A(1) / kb::fn::sqrt(s.m2 / s.count + A(params[0]))};
  }
  static KB_HD A apply(A x, const stats& st, A weight, A bias) {
    return (x - st.mean) * st.rstd * weight + bias;
  }
};
