// Cross-entropy of one row: logsumexp(x) - x[target]; the loss is the mean over rows.
#pragma once
#include "../../common/online_softmax.cuh"

template <class A> struct kb_op {
  using state = typename kb_online_softmax<A>::state;
  static KB_HD state init() { return kb_online_softmax<A>::init(); }
  static KB_HD state accumulate(state s, A x) { return kb_online_softmax<A>::accumulate(s, x); }
  static KB_HD state combine(state a, state b) { return kb_online_softmax<A>::combine(a, b); }
  static KB_HD A row_loss(state s, A x_target, int64_t, const double*) {
    return kb::fn::log(s.sum) + s.max - x_target;
  }
  static KB_HD A finalize_rows(A sum, int64_t rows) { return sum / A(rows); }
};
