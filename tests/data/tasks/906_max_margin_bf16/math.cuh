// Multi-class hinge loss of one row: max(0, margin + max_j x_j - x[target]); params[0] = margin.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A max;
  };
  static KB_HD state init() { return {A(-INFINITY)}; }
  static KB_HD state accumulate(state s, A x) { return {kb::fn::max(s.max, x)}; }
  static KB_HD state combine(state a, state b) { return {kb::fn::max(a.max, b.max)}; }
  static KB_HD A row_loss(state s, A x_target, int64_t, const double* params) {
    return kb::fn::max(A(0), A(params[0]) + s.max - x_target);
  }
  static KB_HD A finalize_rows(A sum, int64_t rows) { return sum / A(rows); }
};
