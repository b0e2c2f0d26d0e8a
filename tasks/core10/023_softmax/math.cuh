// Softmax over a row: y = exp(x - max) / sum(exp(x - max)), from the online (max, sum) pair.
#pragma once
#include "../../common/online_softmax.cuh"

template <class A> struct kb_op {
  using state = typename kb_online_softmax<A>::state;
  struct stats {
    A max;
    A inv_sum;
  };
  static KB_HD state init() { return kb_online_softmax<A>::init(); }
  static KB_HD state accumulate(state s, A x) { return kb_online_softmax<A>::accumulate(s, x); }
  static KB_HD state combine(state a, state b) { return kb_online_softmax<A>::combine(a, b); }
  static KB_HD stats finalize(state s, int64_t, const double*) { return {s.max, A(1) / s.sum}; }
  static KB_HD A apply(A x, const stats& st, A, A) { return kb::fn::exp(x - st.max) * st.inv_sum; }
};
