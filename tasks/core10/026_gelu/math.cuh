// Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))).
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A map(A x) {
    return A(0.5) * x * (A(1) + kb::fn::erf(x * A(0.70710678118654752440)));
  }
};
