// Maximum over the reduced axes.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  struct state {
    A max;
  };
  static KB_HD state init() { return {A(-INFINITY)}; }
  static KB_HD state accumulate(state s, A x) { return {kb::fn::max(s.max, x)}; }
  static KB_HD state combine(state a, state b) { return {kb::fn::max(a.max, b.max)}; }
  static KB_HD A finalize(state s, int64_t, const double*) { return s.max; }
};
