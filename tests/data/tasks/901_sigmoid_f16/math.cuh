// Logistic sigmoid: 1 / (1 + exp(-x)).
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A map(A x) { return A(1) / (A(1) + kb::fn::exp(-x)); }
};
