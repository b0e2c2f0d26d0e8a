// Leaky-ReLU epilogue (negative slope 0.01), applied after the [matmul] factor.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A epilogue(A acc) { return acc > A(0) ? acc : A(0.01) * acc; }
};
