// Family `conv`: forward and transposed convolutions of spatial rank 1 to 3 over contiguous
// NC(D)HW tensors, with groups (depthwise and pointwise are cases of it), stride, padding,
// dilation, output padding, an optional bias and an epilogue from the task's math. The layouts,
// the output-size formulas and the implicit-GEMM view are in conv_index.h.
//
// Inputs (by role; kb::conv::config holds their indices): x [N, Cin, in...]; weight
// [Cout, Cin/groups, k...] (forward) or [Cin, Cout/groups, k...] (transposed), as PyTorch stores
// them; optionally bias [Cout] and scale [Cout]. One output y [N, Cout, out...].
//
// The epilogue hook: every conv kernel (oracle, baseline, strategies) finishes an output value
// the same way,
//   y[b, co, o] = kb_op<A>::epilogue((acc + bias[co]) * scale[co], co),
// acc the sum of products, bias and scale applied when the task has them. A task's math file
// defines
//   template <class A> struct kb_op {
//     static KB_HD A epilogue(A v, int64_t channel);   // `return v;` for a plain convolution
//   };
// so a chain that follows the convolution elementwise (an activation, a per-channel affine map,
// a clamp) runs on the output tile while it is in registers (kb::conv::epilogue below). A fused
// chain that reads per-channel operands (the config's `epi` input indices,
// kblaster/device/epilogue.cuh) defines the indexed form instead:
//     static KB_HD A epilogue(A v, int64_t channel, const kb::epi::operands& ops);
#pragma once

#include "kblaster/device/epilogue.cuh"
#include "kblaster/device/families/common.cuh"
#include "kblaster/device/families/conv_index.h"

namespace kb::conv {

// The task's convolution (from its [conv] table): input indices (bias and scale -1 when absent)
// and the hyperparameters of its `rank` spatial dims in order (the first `rank` entries). The
// groups come from the tensors: in_channels / weight.shape[1] (forward), out_channels /
// weight.shape[1] (transposed), so a depthwise task (groups = channels) carries no size.
struct config {
  int x;
  int weight;
  int bias;
  int scale;
  int rank;
  int transposed;
  int stride[3];
  int padding[3];
  int dilation[3];
  int output_padding[3];
  int epi[kb::epi::max_operands] = {-1, -1, -1, -1, -1, -1, -1, -1}; // epilogue operands' inputs
};

// The geometry of a call, after checking everything the kernels rely on: ranks, contiguity, the
// channel counts against groups and the weight's layout, and the output's sizes against the
// formulas. Dtypes are the caller's check. False: refuse (-1).
inline bool geometry_of(const kb_args* a, const config& c, geometry* g) {
  const int need = c.x > c.weight ? c.x : c.weight;
  if (c.rank < 1 || c.rank > 3 || a->num_outputs < 1 || a->num_inputs <= need ||
      a->num_inputs <= c.bias || a->num_inputs <= c.scale) {
    return false;
  }
  const kb_tensor& x = a->inputs[c.x];
  const kb_tensor& w = a->inputs[c.weight];
  const kb_tensor& y = a->outputs[0];
  const int nd = c.rank + 2;
  if (x.ndim != nd || w.ndim != nd || y.ndim != nd || !is_contiguous(x) || !is_contiguous(w) ||
      !is_contiguous(y)) {
    return false;
  }
  g->transposed = c.transposed;
  g->n = x.shape[0];
  g->cin = x.shape[1];
  g->cout = c.transposed ? y.shape[1] : w.shape[0];
  const int64_t per_group = c.transposed ? g->cout : g->cin; // weight.shape[1] x groups
  if (w.shape[1] < 1 || per_group % w.shape[1] != 0 ||
      per_group / w.shape[1] > (int64_t{1} << 30)) {
    return false;
  }
  g->groups = static_cast<int>(per_group / w.shape[1]);
  if (g->cin % g->groups != 0 || g->cout % g->groups != 0 || y.shape[0] != g->n ||
      y.shape[1] != g->cout || (c.transposed && w.shape[0] != g->cin)) {
    return false;
  }
  for (int d = 0; d < 3; ++d) {
    const int s = d - (3 - c.rank); // the task's spatial dim, or < 0 for a leading unit dim
    if (s < 0) {
      g->in[d] = g->out[d] = g->k[d] = 1;
      g->stride[d] = g->dil[d] = 1;
      g->pad[d] = 0;
      continue;
    }
    g->in[d] = x.shape[2 + s];
    g->k[d] = w.shape[2 + s];
    g->out[d] = y.shape[2 + s];
    g->stride[d] = c.stride[s];
    g->pad[d] = c.padding[s];
    g->dil[d] = c.dilation[s];
    if (c.stride[s] < 1 || c.dilation[s] < 1 || c.padding[s] < 0 || g->k[d] < 1 ||
        g->out[d] != output_size(g->in[d], g->k[d], c.stride[s], c.padding[s], c.dilation[s],
                                 c.output_padding[s], c.transposed != 0) ||
        g->out[d] < 1) {
      return false;
    }
  }
  for (const int p : {c.bias, c.scale}) {
    if (p >= 0 && (a->inputs[p].ndim != 1 || a->inputs[p].shape[0] != g->cout ||
                   a->inputs[p].dtype != x.dtype)) {
      return false;
    }
  }
  kb::epi::operands ops{};
  if (!kb::epi::operands_of(a, c.epi, &ops)) {
    return false;
  }
  return x.dtype == w.dtype && g->n >= 1 && g->cin >= 1;
}

// The output tile's epilogue (see the header): bias, per-channel scale, then the task's math.
template <template <class> class Op, class A, class T> struct epilogue {
  const T* bias;  // nullptr: none
  const T* scale; // nullptr: none
  kb::epi::operands ops;
  KB_HD A operator()(A acc, int64_t channel) const {
    if (bias != nullptr) {
      acc = acc + cvt<A>(bias[channel]);
    }
    if (scale != nullptr) {
      acc = acc * cvt<A>(scale[channel]);
    }
    if constexpr (kb::epi::conv_indexed<Op<A>, A>::value) {
      return Op<A>::epilogue(acc, channel, ops);
    } else {
      return Op<A>::epilogue(acc, channel);
    }
  }
};

// The epilogue of a call; its operands stay null when the config's are not float32 tensors (the
// geometry check refuses such a call: epilogue_operands_ok).
template <template <class> class Op, class A, class T>
epilogue<Op, A, T> epilogue_of(const kb_args* a, const config& c) {
  epilogue<Op, A, T> ep{c.bias >= 0 ? static_cast<const T*>(a->inputs[c.bias].data) : nullptr,
                        c.scale >= 0 ? static_cast<const T*>(a->inputs[c.scale].data) : nullptr,
                        {}};
  kb::epi::operands_of(a, c.epi, &ep.ops);
  return ep;
}

// One thread per output value, gathering its taps (conv_index.h): the oracle on the GPU (A =
// double) and the baseline (A = float).
template <template <class> class Op, class A, class Tin, class Tout>
__global__ void direct(const Tin* __restrict__ x, const Tin* __restrict__ w, Tout* __restrict__ y,
                       geometry g, epilogue<Op, A, Tin> ep) {
  const int64_t ov = g.out_volume();
  const int64_t total = g.n * g.cout * ov;
  const int64_t cg = g.cin_group();
  const int64_t kv = g.kernel_volume();
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t co = idx / ov % g.cout;
    const int64_t grp = co / g.cout_group();
    const int64_t n = co % g.cout_group();
    const m_index mi = split_m(g, idx / (g.cout * ov) * ov + idx % ov);
    A acc = A(0);
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t tap = 0; tap < kv; ++tap) {
        const k_index ki = split_k(g, c * kv + tap);
        const int64_t xo = a_offset(g, grp, mi, ki);
        if (xo >= 0) {
          acc = fn::fma(cvt<A>(x[xo]), cvt<A>(w[b_offset(g, grp, c * kv + tap, n)]), acc);
        }
      }
    }
    y[idx] = cvt<Tout>(ep(acc, co));
  }
}

template <template <class> class Op, class A, bool OutputIsInputType>
int launch_direct(const kb_args* a, const config& c) {
  geometry g{};
  if (!geometry_of(a, c, &g)) {
    return -1;
  }
  const kb_dtype out = a->outputs[0].dtype;
  if (OutputIsInputType ? out != a->inputs[c.x].dtype : out != KB_FLOAT64) {
    return -1;
  }
  return dispatch_float(a->inputs[c.x].dtype, [&](auto tag) {
    using Tin = typename decltype(tag)::type;
    using Tout = typename std::conditional<OutputIsInputType, Tin, double>::type;
    const int64_t total = g.n * g.cout * g.out_volume();
    direct<Op, A, Tin, Tout><<<grid_for(total, 256), 256, 0, stream_of(a)>>>(
        static_cast<const Tin*>(a->inputs[c.x].data),
        static_cast<const Tin*>(a->inputs[c.weight].data), static_cast<Tout*>(a->outputs[0].data),
        g, epilogue_of<Op, A, Tin>(a, c));
    return static_cast<int>(cudaGetLastError());
  });
}

// The CPU oracle: the convolution as defined, written independently of the gather above. The
// forward convolution slides the kernel over the padded input; the transposed one scatters each
// input value times the kernel into the output (o = i stride - pad + t dil), the gradient form.
template <template <class> class Op> int oracle_cpu(const kb_args* a, const config& c) {
  geometry g{};
  if (!geometry_of(a, c, &g) || a->outputs[0].dtype != KB_FLOAT64) {
    return -1;
  }
  const kb_tensor& xt = a->inputs[c.x];
  const kb_tensor& wt = a->inputs[c.weight];
  double* y = static_cast<double*>(a->outputs[0].data);
  const int64_t ov = g.out_volume();
  const int64_t iv = g.in_volume();
  const int64_t cg = g.cin_group();
  const int64_t og = g.cout_group();
  for (int64_t i = 0; i < g.n * g.cout * ov; ++i) {
    y[i] = 0;
  }
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t n = 0; n < og; ++n) {
        const int64_t co = grp * og + n;
        for (int64_t ci = grp * cg; ci < (grp + 1) * cg; ++ci) {
          const int64_t c_local = ci - grp * cg;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t tap = (kd * g.k[1] + kh) * g.k[2] + kw;
                const double wv =
                    read_as_double(wt.data, wt.dtype,
                                   g.transposed ? (ci * og + n) * g.kernel_volume() + tap
                                                : (co * cg + c_local) * g.kernel_volume() + tap);
                if (!g.transposed) {
                  for (int64_t od = 0; od < g.out[0]; ++od) {
                    const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
                    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                      const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                        const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
                        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 ||
                            iw >= g.in[2]) {
                          continue;
                        }
                        y[(b * g.cout + co) * ov + (od * g.out[1] + oh) * g.out[2] + ow] +=
                            read_as_double(xt.data, xt.dtype,
                                           (b * g.cin + ci) * iv + (id * g.in[1] + ih) * g.in[2] +
                                               iw) *
                            wv;
                      }
                    }
                  }
                } else {
                  for (int64_t id = 0; id < g.in[0]; ++id) {
                    const int64_t od = id * g.stride[0] - g.pad[0] + kd * g.dil[0];
                    for (int64_t ih = 0; ih < g.in[1]; ++ih) {
                      const int64_t oh = ih * g.stride[1] - g.pad[1] + kh * g.dil[1];
                      for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                        const int64_t ow = iw * g.stride[2] - g.pad[2] + kw * g.dil[2];
                        if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1] || ow < 0 ||
                            ow >= g.out[2]) {
                          continue;
                        }
                        y[(b * g.cout + co) * ov + (od * g.out[1] + oh) * g.out[2] + ow] +=
                            read_as_double(xt.data, xt.dtype,
                                           (b * g.cin + ci) * iv + (id * g.in[1] + ih) * g.in[2] +
                                               iw) *
                            wv;
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < g.n * g.cout * ov; ++i) {
    const int64_t co = i / ov % g.cout;
    double v = y[i];
    if (c.bias >= 0) {
      v += read_as_double(a->inputs[c.bias].data, a->inputs[c.bias].dtype, co);
    }
    if (c.scale >= 0) {
      v *= read_as_double(a->inputs[c.scale].data, a->inputs[c.scale].dtype, co);
    }
    if constexpr (kb::epi::conv_indexed<Op<double>, double>::value) {
      kb::epi::operands ops{};
      kb::epi::operands_of(a, c.epi, &ops);
      y[i] = Op<double>::epilogue(v, co, ops);
    } else {
      y[i] = Op<double>::epilogue(v, co);
    }
  }
  return 0;
}

} // namespace kb::conv

#define KB_CONV_ORACLE(OP, CONFIG)                                                                 \
  KB_ORACLE_EXPORTS("conv", (kb::conv::launch_direct<OP, double, false>(args, CONFIG)),            \
                    (kb::conv::oracle_cpu<OP>(args, CONFIG)), 0)

#define KB_CONV_BASELINE(OP, CONFIG)                                                               \
  extern "C" KB_EXPORT int kb_launch(const kb_args* args) {                                        \
    return kb::conv::launch_direct<OP, float, true>(args, CONFIG);                                 \
  }                                                                                                \
  extern "C" KB_EXPORT const char* kb_candidate_info(void) {                                       \
    return "baseline: conv, one thread per output gathering its taps (fp32 FMA)";                  \
  }
