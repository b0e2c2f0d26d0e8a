// The operands of a generated epilogue: the tensors a fused chain reads besides the accumulator,
// per output channel (a bias, a scale, a BatchNorm's running statistics) or one value for the
// whole output. The fusion planner's lowering (src/graph/fuse.cpp) gives them the input roles
// "epilogue0" ... "epilogue7"; the family config holds their input indices (-1: none), and the
// matmul and conv kernels pass the pointers to the task's epilogue with the output element's
// position:
//   matmul: static KB_HD A epilogue(A acc, int64_t m, int64_t n, const kb::epi::operands& ops);
//   conv:   static KB_HD A epilogue(A v, int64_t channel, const kb::epi::operands& ops);
// A task whose math defines only the plain forms (epilogue(acc), epilogue(v, channel)) gets them
// as before: the kernels pick the form the math has (kb::epi::matmul_indexed, conv_indexed).
// Operands are float32 and contiguous; a call whose operand is not is refused by the family's
// layout check.
#pragma once

#include "kblaster/device/core.cuh"

#include <type_traits>
#include <utility>

namespace kb::epi {

constexpr int max_operands = 8;

struct operands {
  const float* p[max_operands];
};

// Operand i at flat index `index` (a channel, a column, or 0 for a one-value operand).
template <class A> KB_HD A at(const operands& o, int i, int64_t index) {
  return A(o.p[i][index]);
}

template <class Op, class A, class = void> struct matmul_indexed : std::false_type {};
template <class Op, class A>
struct matmul_indexed<Op, A,
                      decltype(void(Op::epilogue(std::declval<A>(), int64_t{}, int64_t{},
                                                 std::declval<const operands&>())))>
    : std::true_type {};

template <class Op, class A, class = void> struct conv_indexed : std::false_type {};
template <class Op, class A>
struct conv_indexed<Op, A,
                    decltype(void(Op::epilogue(std::declval<A>(), int64_t{},
                                               std::declval<const operands&>())))>
    : std::true_type {};

// The operands of a call from the config's input indices: false when an index is out of range
// or its tensor is not contiguous float32.
inline bool operands_of(const kb_args* a, const int (&index)[max_operands], operands* out) {
  for (int i = 0; i < max_operands; ++i) {
    out->p[i] = nullptr;
    const int k = index[i];
    if (k < 0) {
      continue;
    }
    if (k >= a->num_inputs || a->inputs[k].dtype != KB_FLOAT32) {
      return false;
    }
    const kb_tensor& t = a->inputs[k];
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expected) {
        return false;
      }
      expected *= t.shape[d];
    }
    out->p[i] = static_cast<const float*>(t.data);
  }
  return true;
}

} // namespace kb::epi
