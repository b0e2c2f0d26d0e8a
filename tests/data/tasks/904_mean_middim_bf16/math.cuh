// Mean over the reduced axes.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A sum;
  };
  static KB_HD state init() { return {A(0)}; }
  static KB_HD state accumulate(state s, A x) { return {s.sum + x}; }
  static KB_HD state combine(state a, state b) { return {a.sum + b.sum}; }
  static KB_HD A finalize(state s, int64_t n, const double*) { return s.sum / A(n); }
};
