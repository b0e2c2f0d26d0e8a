// Sum of squares over the reduced axes.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A sum_sq;
  };
  static KB_HD state init() { return {A(0)}; }
  static KB_HD state accumulate(state s, A x) { return {kb::fn::fma(x, x, s.sum_sq)}; }
  static KB_HD state combine(state a, state b) { return {a.sum_sq + b.sum_sq}; }
  static KB_HD A finalize(state s, int64_t, const double*) { return s.sum_sq; }
};
