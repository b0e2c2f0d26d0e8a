// ReLU: max(x, 0).
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A map(A x) { return x > A(0) ? x : A(0); }
};
