// Tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A map(A x) {
    const A inner = A(0.79788456080286535588) * (x + A(0.044715) * x * x * x);
    return A(0.5) * x * (A(1) + kb::fn::tanh(inner));
  }
};
