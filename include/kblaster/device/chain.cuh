// A chain of kernels in one candidate: the fusion planner's plans of several kernels
// (src/graph/fuse.cpp). The anchor (a matmul or conv strategy, its fused epilogue in the output
// tile) writes its output into the workspace; each following kernel of the plan is a launch of an
// existing family's driver (reduce, normalize: softmax, log_softmax, layer, group and instance
// norms; pool) or a later product (convolution) with the anchor's strategy (the candidate's anchor
// family, with the product's own epilogue) over the intermediate before it, into the next
// intermediate or the task's output, and an elementwise pass with the output element's channel and
// flat index applies what the family's math cannot index (a norm's per-channel affine, operands per
// channel or of the output's shape); an elementwise op whose result is larger than the chain's
// value (the value broadcast against an operand) is a pass of its own (broadcast_map). The
// generated math of such a task (<task>/lowered/math.cuh) defines `kb_chain`, which the strategy
// library's candidate calls:
//   kb_chain::workspace_bytes(args, kb_family_config, family, &bytes)
//   kb_chain::launch(args, kb_family_config, family)
// where `family` runs the anchor's strategy, at the candidate's point, over an op and a config:
// family.template launch<Op>(args, config) and family.template workspace<Op>(args, config, &bytes)
// (the anchor itself is kb_op under kb_family_config; a later product its kb_op<k>).
// Intermediates are contiguous float32; the workspace holds them (each 256-byte aligned) and then
// the anchor strategy's own workspace (the largest any of the chain's products needs).
#pragma once

#include "kblaster/device/epilogue.cuh"
#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/normalize.cuh"
#include "kblaster/device/families/pool.cuh"
#include "kblaster/device/families/reduce.cuh"

namespace kb::chain {

constexpr uint64_t alignment = 256;

inline uint64_t round_up(uint64_t bytes) {
  return (bytes + alignment - 1) / alignment * alignment;
}

inline int64_t count(const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    n *= shape[i];
  }
  return n;
}

// A contiguous float32 tensor of `rank` dims at `data`.
inline kb_tensor dense(void* data, const int64_t* shape, int rank) {
  kb_tensor t{};
  t.data = data;
  t.dtype = KB_FLOAT32;
  t.ndim = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

// Whether `t` is a contiguous float32 tensor.
inline bool dense_float(const kb_tensor& t) {
  if (t.dtype != KB_FLOAT32) {
    return false;
  }
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) {
      return false;
    }
    expected *= t.shape[d];
  }
  return true;
}

// The arguments of one step: `base`'s stream and scalars, the given inputs and one output, no
// workspace.
inline kb_args step_args(const kb_args* base, const kb_tensor* inputs, int num_inputs,
                         const kb_tensor* output) {
  kb_args a = *base;
  a.num_inputs = num_inputs;
  a.inputs = inputs;
  a.num_outputs = 1;
  a.outputs = output;
  a.workspace = nullptr;
  a.workspace_bytes = 0;
  return a;
}

// A later product or convolution of the chain: its arguments (the chain's value x as input 0, the
// call's operands base->inputs[epi[j]] as inputs 1 + j, the output y, the anchor's workspace
// region) with the storage they point into, so it is neither copied nor moved.
struct product_call {
  kb_tensor in[1 + epi::max_operands];
  int epi[epi::max_operands]; // the operands' indices in `in`
  kb_args args;

  product_call(const kb_args* base, const kb_tensor& x, const int (&call_epi)[epi::max_operands],
               const kb_tensor* y, void* workspace, uint64_t workspace_bytes) {
    in[0] = x;
    int n = 1;
    for (int j = 0; j < epi::max_operands; ++j) {
      epi[j] = -1;
      in[1 + j] = kb_tensor{};
      if (call_epi[j] >= 0 && call_epi[j] < base->num_inputs) {
        in[1 + j] = base->inputs[call_epi[j]];
        epi[j] = 1 + j;
        n = 2 + j;
      }
    }
    args = step_args(base, in, n, y);
    args.workspace = workspace;
    args.workspace_bytes = workspace_bytes;
  }
  product_call(const product_call&) = delete;
  product_call& operator=(const product_call&) = delete;

  // The product's config from the anchor's (a matmul config): the chain's value as a, the call's
  // operand `b` (input 1 + b) as b, transposed or not, the operands moved with it; no factor, mask
  // or diagonal.
  template <class C> C config(const C& anchor, int b, int trans_b) const {
    C c = anchor;
    c.a = 0;
    c.b = 1 + b;
    c.trans_a = 0;
    c.trans_b = trans_b;
    c.alpha = 1.0;
    c.mask = 0;
    c.diag_a = 0;
    for (int j = 0; j < epi::max_operands; ++j) {
      c.epi[j] = epi[j];
    }
    return c;
  }

  // A later convolution's config from the anchor's (a conv config): the chain's value as x, the
  // call's operand `weight` (input 1 + weight) as the weight, the operands moved with it, no bias
  // or scale (its epilogue adds a bias); the caller sets the convolution's hyperparameters.
  template <class C> C conv_config(const C& anchor, int weight) const {
    C c = anchor;
    c.x = 0;
    c.weight = 1 + weight;
    c.bias = -1;
    c.scale = -1;
    for (int j = 0; j < epi::max_operands; ++j) {
      c.epi[j] = epi[j];
    }
    return c;
  }
};

// The call with input `slot` replaced by x: the anchor of a chain whose first kernels are passes
// over the forward's input (a pooling before the convolution) reads the last pass's value as that
// input. `ok` is false for a slot out of range or a call of more than max_inputs inputs.
struct input_swap {
  static constexpr int max_inputs = 32;
  kb_tensor in[max_inputs];
  kb_args args;
  bool ok = false;

  input_swap(const kb_args* base, int slot, const kb_tensor& x) : args(*base) {
    if (slot < 0 || slot >= base->num_inputs || base->num_inputs > max_inputs) {
      return;
    }
    for (int j = 0; j < base->num_inputs; ++j) {
      in[j] = base->inputs[j];
    }
    in[slot] = x;
    args.inputs = in;
    ok = true;
  }
  input_swap(const input_swap&) = delete;
  input_swap& operator=(const input_swap&) = delete;
};

// An elementwise result y larger than the chain's value x (x's dims aligned to y's last ones,
// each 1 or y's): y's dims and, for each, x's stride along it (0 where x has size 1 or no such
// dim), so element i of y reads x at source(i).
struct broadcast_view {
  int rank;
  int64_t shape[KB_MAX_DIMS];
  int64_t x_stride[KB_MAX_DIMS];

  KB_HD int64_t source(int64_t i) const {
    int64_t at = 0;
    for (int d = rank - 1; d >= 0; --d) {
      at += (i % shape[d]) * x_stride[d];
      i /= shape[d];
    }
    return at;
  }
};

// x broadcast to y as a view; false when it does not broadcast.
inline bool broadcast_view_of(const kb_tensor& x, const kb_tensor& y, broadcast_view* v) {
  if (x.ndim > y.ndim || y.ndim > KB_MAX_DIMS) {
    return false;
  }
  v->rank = y.ndim;
  const int off = y.ndim - x.ndim;
  for (int d = 0; d < y.ndim; ++d) {
    v->shape[d] = y.shape[d];
    const int xd = d - off;
    if (xd >= 0 && x.shape[xd] != 1 && x.shape[xd] != y.shape[d]) {
      return false;
    }
    v->x_stride[d] = xd < 0 || x.shape[xd] == 1 ? 0 : x.strides[xd];
  }
  return true;
}

// The channel (axis 1; rank < 2: channel 0) of a contiguous tensor's element at flat index i.
struct channel_index {
  int64_t channels;
  int64_t inner;
  KB_HD int64_t of(int64_t i) const { return channels > 0 ? (i / inner) % channels : 0; }
};
inline channel_index channel_index_of(const kb_tensor& y) {
  return {y.ndim >= 2 ? y.shape[1] : 0, y.ndim >= 2 ? product(y, 2, y.ndim) : 1};
}

#if defined(__CUDACC__)
// y[i] = Op<float>::map(y[i], channel of i, i, ops) over a contiguous tensor whose axis 1 is the
// channel (rank < 2: channel 0); i, the flat index, reads operands of y's shape.
template <template <class> class Op>
__global__ void map_kernel(float* __restrict__ y, int64_t n, channel_index ch, epi::operands ops) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = Op<float>::map(y[i], ch.of(i), i, ops);
  }
}

template <template <class> class Op>
int map_in_place(const kb_args* base, const kb_tensor& y, const epi::operands& ops) {
  const int64_t n = numel(y);
  if (n == 0) {
    return 0;
  }
  constexpr unsigned block = 256;
  map_kernel<Op><<<grid_for(n, block), block, 0, stream_of(base)>>>(static_cast<float*>(y.data), n,
                                                                    channel_index_of(y), ops);
  return static_cast<int>(cudaGetLastError());
}

// y[i] = Op<float>::map(x at i's broadcast position, channel of i, i, ops) over a contiguous y
// whose axis 1 is the channel (rank < 2: channel 0).
template <template <class> class Op>
__global__ void broadcast_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                 broadcast_view v, channel_index ch, epi::operands ops) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = Op<float>::map(x[v.source(i)], ch.of(i), i, ops);
  }
}

// The chain's value x broadcast to the larger y, each element mapped by Op;
// cudaErrorInvalidValue when x does not broadcast to y.
template <template <class> class Op>
int broadcast_map(const kb_args* base, const kb_tensor& x, const kb_tensor& y,
                  const epi::operands& ops) {
  broadcast_view v{};
  if (!broadcast_view_of(x, y, &v)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const int64_t n = numel(y);
  if (n == 0) {
    return 0;
  }
  constexpr unsigned block = 256;
  broadcast_kernel<Op><<<grid_for(n, block), block, 0, stream_of(base)>>>(
      static_cast<const float*>(x.data), static_cast<float*>(y.data), n, v, channel_index_of(y),
      ops);
  return static_cast<int>(cudaGetLastError());
}

#endif

} // namespace kb::chain
