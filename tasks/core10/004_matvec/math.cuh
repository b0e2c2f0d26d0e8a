// Matrix product with no epilogue.
#pragma once
#include <kblaster/device/core.cuh>

template <class A> struct kb_op {
  static KB_HD A epilogue(A acc) { return acc; }
};
