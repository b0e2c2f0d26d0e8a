// The fusion planner: a Level-2 forward (an anchor, a GEMM or a convolution, followed by a chain
// of elementwise ops, reductions, norms and pooling) as a typed plan of kernels. Each step of the
// chain after the anchor is fused into the kernel before it or starts a kernel of its own, with a
// stable rule naming what it is ("epilogue:pointwise", "reduce:logsumexp", "norm:group_norm") and
// a stable reason naming why it is fused or split ("pointwise_in_tile", "reduction_spans_tiles").
// Elementwise ops whose other operands are constants, the forward's numbers, or tensors that
// broadcast over the output (per channel, or one value) fuse into the output tile's epilogue of
// the kernel before them; BatchNorm in eval mode (the oracle runs modules as `.eval()`) is a
// per-channel affine map of its running statistics and Dropout is the identity, so both fuse too.
// Reductions, softmax, norms that need statistics and pooling start a kernel. Such a pass may
// also come before the anchor, over the forward's input (`conv(avg_pool(x))`): it is then the
// chain's kernel 0 and the anchor a later kernel that reads its value. The choice at each
// edge is the plan's, fixed (not a search axis): docs/task-format.md, "The fusion planner".
//
// A plan whose chain is one kernel (the anchor and its epilogue) is lowered onto the anchor's
// family with a generated epilogue (lower.cpp's fused rule, fused_lowering below); a plan of
// several kernels is not lowered yet and says which op starts the second kernel. A graph the
// planner cannot follow (no anchor, an op it does not know, a chain with a branch) has no plan
// and says why with a typed reason.
#pragma once

#include "graph/graph.hpp"
#include "graph/lower.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kb::graph {

enum class fuse_kind { anchor, epilogue, view, reduce, softmax, norm, pool, expand };
std::string to_string(fuse_kind k);

// How a step joins the kernel before it.
enum class fuse_edge { fused, split };
std::string to_string(fuse_edge e);

// Why a step is fused or split. Stable names (to_string) go into plans and records.
enum class fuse_reason {
  anchor,                // the chain's first kernel: a GEMM or a convolution
  pointwise_in_tile,     // elementwise over the producer's output values, operands broadcast
  view_only,             // a reshape, flatten, squeeze or unsqueeze: no data moves
  reduction_spans_tiles, // a reduction over an axis the producer's output tile does not hold whole
  softmax_spans_tiles,   // softmax / log_softmax over such an axis
  norm_needs_statistics, // group, instance, layer or batch (batch statistics) norm: a statistics
                         // pass over the group before the normalized values exist
  pool_windows,          // pooling: its windows cross the producer's output tiles
  product_reads_rows,    // a GEMM or convolution over the chain's value (a second one, or the
                         // first after a pass over the forward's input): each output reads a
                         // whole row (a window) of it, across the producer's output tiles
  pointwise_at_index,    // the first anchor's epilogue reads a tensor of its output's shape: the
                         // tile's epilogue has no element index, so the epilogue runs as a map
                         // pass over the anchor's output, in place, with each element's index
  broadcast_grows,       // an elementwise op whose result is larger than the chain's value (the
                         // value broadcast against an operand: `mean(x) + x_in`, `min + bias`):
                         // a pass of its own writes the larger result, reading the value at each
                         // element's broadcast position
};
std::string to_string(fuse_reason r);

// Why a graph has no plan. Stable names.
enum class plan_issue {
  invalid_graph,   // the graph itself is not valid (graph.hpp's issues)
  no_anchor,       // no GEMM or convolution begins the chain
  before_anchor,   // ops run before the anchor that are not a pass over the forward's input
                   // starting the chain (a pooling, reduction, softmax or norm); a product's
                   // second operand may be a transposed 2-D parameter
  unknown_op,      // an op the planner does not place
  branch,          // a value of the chain is read again after a later kernel or by two paths
  operand_not_broadcast, // an elementwise operand that is neither a constant nor a tensor
                         // broadcast over the chain's value (per channel or one value)
  several_outputs, // the forward returns more than one tensor
};
std::string to_string(plan_issue i);

struct fuse_step {
  fuse_kind kind = fuse_kind::anchor;
  std::string rule;             // "anchor:linear", "epilogue:pointwise", "reduce:sum" ...
  std::vector<std::string> ops; // the graph's ops it covers, in order
  fuse_edge edge = fuse_edge::fused;
  fuse_reason why = fuse_reason::anchor;
  int kernel = 0;                    // the kernel that runs it, 0 first
  std::vector<std::string> operands; // tensors an epilogue reads besides the chain (state_bias)
  // Values an earlier kernel left (in the workspace) that an epilogue after a split step reads at
  // the element's index: a residual across a kernel boundary (`x_conv + f(norm(x_conv))`).
  std::vector<std::string> residuals;
  std::string value; // the graph value it produces
};

struct plan_problem {
  plan_issue why = plan_issue::invalid_graph;
  std::string op; // the op it concerns, or "graph"
  std::string detail;
};

struct fusion_plan {
  std::string anchor; // the anchor's op ("nn.Linear"); empty without a plan
  std::vector<fuse_step> steps;
  int kernels = 0;
  std::vector<plan_problem> problems; // non-empty: no plan
  bool ok() const { return problems.empty(); }
  // "fused" (one kernel), "split" (several kernels), "none" (no plan).
  std::string coverage() const;
};

// scaled_dot_product_attention(Q, K, V) in its plain form (no mask, causal masking, dropout or
// grouped heads) as the three ops it is: scores = Q @ K^T * scale (torch.matmul with the
// attributes transpose_b, scale and attention; scale none: 1 / sqrt of Q's last dim), a
// torch.softmax over the last dim into the weights, and weights @ V. The intermediates are named
// <output>__scores and <output>__weights. Other nodes are kept as they are.
graph expand_attention(const graph& g);

// Plans a graph (after expand_attention). Pure: reads the graph only.
fusion_plan plan_fusion(const graph& g);

// The plan as JSON (the golden files of the planner's tests compare this exactly).
nlohmann::json to_json(const fusion_plan& p);

// The lowering of a one-kernel plan onto the anchor's family: nn.Linear and a 2-D product onto
// matmul (Linear: b = the weight transposed, its bias the epilogue's first operand), nn.ConvNd /
// nn.ConvTransposeNd onto conv; the epilogue generated from the chain with the operands as input
// roles "epilogue0".. (kblaster/device/epilogue.cuh). nullopt with issues in `why_not` when the
// plan is not one kernel or the anchor's form is not lowered; nullopt without issues when the
// graph has no plan (other rules may say why).
std::optional<lowering> fused_lowering(const rule_context& ctx);

} // namespace kb::graph
