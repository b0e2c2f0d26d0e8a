// The running (max, sum of exp) pair of a softmax over a row, combinable in any grouping.
// Shared by softmax and cross-entropy math (the core10 tasks 023 and 095, and the math the
// lowering of imported PyTorch tasks generates).
#pragma once

#include <kblaster/device/core.cuh>

template <class A> struct kb_online_softmax {
  struct state {
    A max;
    A sum; // sum of exp(x - max)
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
};
