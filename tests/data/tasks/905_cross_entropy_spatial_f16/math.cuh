// Cross-entropy of one row: logsumexp(x) - x[target], from an online (max, sum of exp) state.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A max;
    A sum;
  };
  static KB_HD state init() { return {A(-INFINITY), A(0)}; }
  static KB_HD state accumulate(state s, A x) {
    if (x > s.max) {
      s.sum = s.sum * kb::fn::exp(s.max - x) + A(1);
      s.max = x;
    } else {
      s.sum += kb::fn::exp(x - s.max);
    }
    return s;
  }
  static KB_HD state combine(state a, state b) {
    if (a.max == A(-INFINITY)) {
      return b;
    }
    if (b.max == A(-INFINITY)) {
      return a;
    }
    const A m = kb::fn::max(a.max, b.max);
    return {m, a.sum * kb::fn::exp(a.max - m) + b.sum * kb::fn::exp(b.max - m)};
  }
  static KB_HD A row_loss(state s, A x_target, int64_t, const double*) { return kb::fn::log(s.sum) + s.max - x_target; }
  static KB_HD A finalize_rows(A sum, int64_t rows) { return sum / A(rows); }
};
