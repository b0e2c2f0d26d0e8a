#include "graph/fuse.hpp"

#include "graph/pointwise.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace kb::graph {

using nlohmann::json;
using detail::number;
using detail::product_expr;
using detail::centering_sub;
using detail::readers;
using detail::reduced_axes;
using detail::short_name;
using detail::starts_with;
using detail::welford_body;

std::string to_string(fuse_kind k) {
  switch (k) {
  case fuse_kind::anchor:
    return "anchor";
  case fuse_kind::epilogue:
    return "epilogue";
  case fuse_kind::view:
    return "view";
  case fuse_kind::reduce:
    return "reduce";
  case fuse_kind::softmax:
    return "softmax";
  case fuse_kind::norm:
    return "norm";
  case fuse_kind::pool:
    return "pool";
  case fuse_kind::expand:
    return "expand";
  }
  return "anchor";
}

std::string to_string(fuse_edge e) {
  return e == fuse_edge::fused ? "fused" : "split";
}

std::string to_string(fuse_reason r) {
  switch (r) {
  case fuse_reason::anchor:
    return "anchor";
  case fuse_reason::pointwise_in_tile:
    return "pointwise_in_tile";
  case fuse_reason::view_only:
    return "view_only";
  case fuse_reason::reduction_spans_tiles:
    return "reduction_spans_tiles";
  case fuse_reason::softmax_spans_tiles:
    return "softmax_spans_tiles";
  case fuse_reason::norm_needs_statistics:
    return "norm_needs_statistics";
  case fuse_reason::pool_windows:
    return "pool_windows";
  case fuse_reason::product_reads_rows:
    return "product_reads_rows";
  case fuse_reason::pointwise_at_index:
    return "pointwise_at_index";
  case fuse_reason::broadcast_grows:
    return "broadcast_grows";
  }
  return "anchor";
}

std::string to_string(plan_issue i) {
  switch (i) {
  case plan_issue::invalid_graph:
    return "invalid_graph";
  case plan_issue::no_anchor:
    return "no_anchor";
  case plan_issue::before_anchor:
    return "before_anchor";
  case plan_issue::unknown_op:
    return "unknown_op";
  case plan_issue::branch:
    return "branch";
  case plan_issue::operand_not_broadcast:
    return "operand_not_broadcast";
  case plan_issue::several_outputs:
    return "several_outputs";
  }
  return "invalid_graph";
}

std::string fusion_plan::coverage() const {
  if (!ok()) {
    return "none";
  }
  return kernels == 1 ? "fused" : "split";
}

namespace {

// The ops the pointwise expressions (pointwise.hpp) generate.
bool is_pointwise(const node& n) {
  static const std::set<std::string> ops{
      "torch.sigmoid", "torch.tanh", "torch.relu", "torch.abs", "torch.exp", "torch.log",
      "torch.sqrt", "torch.erf", "torch.log1p", "torch.expm1", "torch.sin", "torch.cos",
      "torch.floor", "torch.ceil", "torch.nn.functional.selu", "torch.nn.functional.silu",
      "torch.nn.functional.mish", "torch.nn.functional.hardswish",
      "torch.nn.functional.hardsigmoid", "torch.nn.functional.relu6",
      "torch.nn.functional.softsign", "torch.nn.functional.logsigmoid", "torch.contiguous",
      "torch.nn.functional.dropout", "torch.neg", "torch.rsqrt", "torch.reciprocal",
      "torch.square", "torch.nn.functional.gelu", "torch.nn.functional.elu",
      "torch.nn.functional.celu", "torch.nn.functional.leaky_relu",
      "torch.nn.functional.hardtanh", "torch.nn.functional.softplus",
      "torch.nn.functional.threshold", "torch.pow", "torch.clamp", "torch.add", "torch.sub",
      "torch.mul", "torch.div", "torch.maximum", "torch.minimum"};
  // A BatchNorm is no per-channel affine map: it normalizes by the batch's statistics, as
  // KernelBench's training-mode forward does (scripts/pytorch_oracle.py, batch_statistics).
  return ops.count(n.op) != 0;
}

bool is_view(const std::string& op) {
  return op == "torch.reshape" || op == "torch.flatten" || op == "torch.squeeze" ||
         op == "torch.unsqueeze";
}

// An anchor the matmul family's epilogue takes: nn.Linear and the 2-D (or batched) products.
bool product_anchor(const std::string& op) {
  return op == "nn.Linear" || op == "torch.matmul" || op == "torch.mm";
}

std::optional<std::string> anchor_rule(const std::string& op) {
  if (op == "nn.Linear") {
    return "anchor:linear";
  }
  if (op == "torch.matmul" || op == "torch.mm") {
    return "anchor:matmul";
  }
  if (op == "torch.bmm") {
    return "anchor:bmm";
  }
  for (const char* d : {"1d", "2d", "3d"}) {
    if (op == std::string("nn.Conv") + d) {
      return std::string("anchor:conv") + d;
    }
    if (op == std::string("nn.ConvTranspose") + d) {
      return std::string("anchor:conv_transpose") + d;
    }
  }
  return std::nullopt;
}

// The step a node that is neither pointwise nor a view starts: its kind, rule and reason.
struct split_kind {
  fuse_kind kind;
  std::string rule;
  fuse_reason why;
};

std::optional<split_kind> split_of(const node& n) {
  // A second product or convolution: each of its outputs reads a whole row (a window) of the
  // chain's value, across the producer's output tiles.
  if (const auto rule = anchor_rule(n.op)) {
    return split_kind{fuse_kind::anchor, *rule, fuse_reason::product_reads_rows};
  }
  static const std::map<std::string, std::string> reductions{
      {"torch.sum", "sum"},   {"torch.mean", "mean"}, {"torch.amax", "max"},
      {"torch.max", "max"},   {"torch.amin", "min"},  {"torch.min", "min"},
      {"torch.prod", "prod"}, {"torch.norm", "norm"}, {"torch.logsumexp", "logsumexp"}};
  if (const auto it = reductions.find(n.op); it != reductions.end()) {
    return split_kind{fuse_kind::reduce, "reduce:" + it->second, fuse_reason::reduction_spans_tiles};
  }
  if (n.op == "torch.softmax" || n.op == "torch.log_softmax") {
    return split_kind{fuse_kind::softmax, n.op == "torch.softmax" ? "softmax:softmax" : "softmax:log_softmax",
                      fuse_reason::softmax_spans_tiles};
  }
  const std::string module = starts_with(n.op, "nn.") ? n.op.substr(3) : "";
  if (module == "GroupNorm") {
    return split_kind{fuse_kind::norm, "norm:group_norm", fuse_reason::norm_needs_statistics};
  }
  if (module == "LayerNorm" || n.op == "torch.nn.functional.layer_norm") {
    return split_kind{fuse_kind::norm, "norm:layer_norm", fuse_reason::norm_needs_statistics};
  }
  if (starts_with(module, "InstanceNorm")) {
    return split_kind{fuse_kind::norm, "norm:instance_norm", fuse_reason::norm_needs_statistics};
  }
  if (starts_with(module, "BatchNorm")) { // the batch's statistics, as in training mode
    return split_kind{fuse_kind::norm, "norm:batch_norm", fuse_reason::norm_needs_statistics};
  }
  for (const auto& [prefix, name] : std::vector<std::pair<std::string, std::string>>{
           {"MaxPool", "max"}, {"AvgPool", "avg"}, {"AdaptiveAvgPool", "adaptive_avg"},
           {"AdaptiveMaxPool", "adaptive_max"}}) {
    if (starts_with(module, prefix) && module.size() == prefix.size() + 2) {
      return split_kind{fuse_kind::pool, "pool:" + name + module.substr(prefix.size()),
                        fuse_reason::pool_windows};
    }
  }
  return std::nullopt;
}

const state_tensor* state_of(const graph& g, const std::string& value) {
  for (const auto& s : g.state) {
    if (s.value == value) {
      return &s;
    }
  }
  return nullptr;
}

// The 2-D module state a product's second operand transposes (`x @ self.weight.T`: torch.t, or
// torch.transpose of its two dims), read by nothing else; nullptr when there is none.
const state_tensor* transposed_state(const graph& g, const std::string& value) {
  const auto source = detail::transpose_source(g, value);
  const state_tensor* s = source ? state_of(g, *source) : nullptr;
  return s != nullptr && s->shape.size() == 2 ? s : nullptr;
}

// A value that is not computed from the chain: module state, a forward input other than the
// anchor's, or a view of one. Its base (the state or input it reads) and its shape as used.
struct leaf_info {
  std::string base;
  std::vector<std::string> shape;
  task::dtype type = task::dtype::float32;
};

std::optional<leaf_info> leaf_of(const graph& g, const std::string& value,
                                 const std::string& chain_input) {
  if (const state_tensor* s = state_of(g, value)) {
    return leaf_info{s->value, s->shape, s->type};
  }
  for (const auto& in : g.inputs) {
    if (in.value == value && !in.scalar && in.value != chain_input) {
      return leaf_info{in.value, in.shape, in.type};
    }
  }
  const node* n = g.producer(value);
  if (n != nullptr && is_view(n->op) && !n->inputs.empty() && n->inputs[0].is_tensor() &&
      n->outputs.size() == 1) {
    if (auto base = leaf_of(g, n->inputs[0].value, chain_input)) {
      base->shape = n->outputs[0].shape;
      return base;
    }
  }
  return std::nullopt;
}

// How a leaf of shape `leaf` broadcasts over the chain's value of shape `main`: over axis 1 only
// (a channel, or a GEMM's column), one value, element by element (full: the chain's shape), or
// neither (nullopt).
enum class broadcast { channel, one, full };

std::optional<broadcast> broadcast_of(const std::vector<std::string>& leaf,
                                      const std::vector<std::string>& main) {
  if (leaf.size() > main.size()) {
    return std::nullopt;
  }
  bool channel = false;
  const size_t off = main.size() - leaf.size();
  for (size_t i = 0; i < leaf.size(); ++i) {
    if (leaf[i] == "1") {
      continue;
    }
    if (off + i != 1 || leaf[i] != main[off + i]) {
      return std::nullopt;
    }
    channel = true;
  }
  return channel ? broadcast::channel : broadcast::one;
}

// Whether two shapes are the same: dim by dim, the same expression or two the graph takes as
// equal (graph::equal_dims: equal at the import's dims, checked at every shape of the task), as
// `D * stride` and the transposed convolution's `(D - 1) * 2 - 2 + 2 + 1 + 1` at stride 2.
bool same_shape(const graph& g, const std::vector<std::string>& a,
                const std::vector<std::string>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) {
      continue;
    }
    const bool assumed = std::any_of(g.equal_dims.begin(), g.equal_dims.end(), [&](const auto& e) {
      return e.dims.size() == 2 && ((e.dims[0] == a[i] && e.dims[1] == b[i]) ||
                                    (e.dims[0] == b[i] && e.dims[1] == a[i]));
    });
    if (!assumed) {
      return false;
    }
  }
  return true;
}

// Whether the chain's value of shape `main` broadcasts to the larger `out`: aligned to out's last
// dims, each of main's is 1 or out's; not the same shape.
bool grows_to(const graph& g, const std::vector<std::string>& main,
              const std::vector<std::string>& out) {
  if (main.size() > out.size() || out.size() > 8 || same_shape(g, main, out)) {
    return false;
  }
  const size_t off = out.size() - main.size();
  for (size_t i = 0; i < main.size(); ++i) {
    if (main[i] != "1" && !same_shape(g, {main[i]}, {out[off + i]})) {
      return false;
    }
  }
  return true;
}

// How a leaf read by node `reader` broadcasts: a BatchNorm's state is per channel (axis 1) by
// definition, whatever its own rank; other operands broadcast as PyTorch aligns them (right).
std::optional<broadcast> broadcast_for(const graph& g, const node& reader,
                                       const std::vector<std::string>& leaf,
                                       const std::vector<std::string>& main) {
  if (starts_with(reader.op, "nn.BatchNorm") && main.size() >= 2) {
    if (leaf.empty()) {
      return broadcast::one;
    }
    return leaf.size() == 1 && leaf[0] == main[1] ? std::optional<broadcast>(broadcast::channel)
                                                  : std::nullopt;
  }
  if (const auto b = broadcast_of(leaf, main)) {
    return b;
  }
  return !leaf.empty() && same_shape(g, leaf, main) ? std::optional<broadcast>(broadcast::full)
                                                    : std::nullopt;
}

// The step of a centering: the mean (node i) and the subtraction (node sub) in one kernel.
fuse_step centering_step(const graph& g, size_t i, size_t sub, int kernel) {
  fuse_step s;
  s.kind = fuse_kind::norm;
  s.rule = "norm:center";
  s.ops = {g.nodes[i].op, g.nodes[sub].op};
  s.value = g.nodes[sub].outputs.at(0).value;
  s.edge = fuse_edge::split;
  s.why = fuse_reason::norm_needs_statistics;
  s.kernel = kernel;
  return s;
}

// The operands an elementwise op of the chain reads (its floating-point leaves, into *operands),
// or why one of them cannot be fused: it does not broadcast over the chain's value, or it is of
// the chain's shape in a later product's kernel (whose epilogue has no element index), or the
// op's result is not of the chain's shape. One of the chain's shape in the first anchor's kernel
// sets *at_index: that kernel's epilogue runs as a map pass with the element's index.
std::optional<std::string> pointwise_operands(const graph& g, const node& n,
                                              const std::vector<leaf_info>& leaves,
                                              const std::vector<std::string>& main_shape,
                                              bool anchor_kernel, bool first_kernel,
                                              bool* at_index, std::vector<std::string>* operands) {
  for (const auto& l : leaves) {
    const auto b = broadcast_for(g, n, l.shape, main_shape);
    if (!b) {
      return fmt::format("{} of shape [{}] over the chain's [{}]: neither per channel nor one "
                         "value nor of the chain's shape",
                         l.base, fmt::join(l.shape, ", "), fmt::join(main_shape, ", "));
    }
    if (*b == broadcast::full && anchor_kernel && first_kernel) {
      *at_index = true;
    } else if (*b == broadcast::full && anchor_kernel) {
      return fmt::format("{} of the chain's shape [{}] in a later product's kernel: its "
                         "epilogue has no element index (a full-size operand is read in the first "
                         "anchor's map pass or in the elementwise pass after a later kernel)",
                         l.base, fmt::join(main_shape, ", "));
    }
    if (task::is_floating(l.type)) {
      operands->push_back(l.base);
    }
  }
  if (n.outputs.size() != 1 || !same_shape(g, n.outputs[0].shape, main_shape)) {
    return std::string("an elementwise op whose result is not of the chain's shape");
  }
  return std::nullopt;
}

} // namespace

namespace {
constexpr const char* attention_op = "torch.nn.functional.scaled_dot_product_attention";
}

graph expand_attention(const graph& g) {
  graph out = g;
  out.nodes.clear();
  for (const auto& n : g.nodes) {
    const bool plain = n.op == attention_op && n.inputs.size() == 3 && n.outputs.size() == 1 &&
                       n.attr("attn_mask").is_none() && !n.attr("is_causal").boolean().value_or(false) &&
                       n.attr("dropout_p").number().value_or(0.0) == 0.0 &&
                       !n.attr("enable_gqa").boolean().value_or(false) &&
                       (n.attr("scale").is_none() || n.attr("scale").number().has_value()) &&
                       std::all_of(n.inputs.begin(), n.inputs.end(), [](const operand& o) {
                         return o.is_tensor() && o.shape.size() >= 2;
                       });
    if (!plain) {
      out.nodes.push_back(n);
      continue;
    }
    const operand& q = n.inputs[0];
    const operand& k = n.inputs[1];
    const operand& result = n.outputs[0];
    operand scores = result;
    scores.value = result.value + "__scores";
    scores.shape = q.shape;
    scores.shape.back() = k.shape[k.shape.size() - 2];
    operand weights = scores;
    weights.value = result.value + "__weights";
    node product{"torch.matmul", {q, k}, {scores}, {}, n.module};
    product.attrs["transpose_b"] = attr_value{true};
    product.attrs["scale"] = n.attr("scale");
    product.attrs["attention"] = attr_value{true};
    node softmax{"torch.softmax", {scores}, {weights}, {}, n.module};
    softmax.attrs["dim"] = attr_value{int64_t{-1}};
    node values{"torch.matmul", {weights, n.inputs[2]}, {result}, {}, n.module};
    out.nodes.push_back(std::move(product));
    out.nodes.push_back(std::move(softmax));
    out.nodes.push_back(std::move(values));
  }
  return out;
}

namespace {

// What stops any plan of a graph before its anchor is looked for: the graph's own issues, more
// than one output, an attention of a form that is not expanded.
std::optional<plan_problem> graph_problem(const graph& g) {
  for (const auto& i : validate(g)) {
    if (i.why == reason::unknown_op) {
      return plan_problem{plan_issue::unknown_op, i.op, "not an op the graph knows"};
    }
    return plan_problem{plan_issue::invalid_graph, i.op, describe(i)};
  }
  if (g.outputs.size() != 1 || !g.outputs[0].is_tensor()) {
    return plan_problem{plan_issue::several_outputs, "graph",
                        fmt::format("the forward returns {} values; a plan ends in one tensor",
                                    g.outputs.size())};
  }
  for (const auto& n : g.nodes) {
    if (n.op == attention_op) {
      return plan_problem{plan_issue::unknown_op, n.op,
                          "attention with a mask, causal masking, dropout or grouped heads is "
                          "not planned (the plain form is two products and a softmax)"};
    }
  }
  return std::nullopt;
}

} // namespace

namespace {

// What a node of the chain reads: values of the kernel it is in, leaves (module state, forward
// inputs), values earlier kernels left (`left`, when it may read them: a pointwise op after a
// split step) of the chain's shape, or anything else (`other`).
struct reads {
  std::vector<std::string> chain;
  std::vector<leaf_info> leaves;
  std::vector<std::string> residuals;
  bool other = false;
};

reads reads_of(const graph& g, const node& n, const std::set<std::string>& region,
               const std::string& chain_input,
               const std::map<std::string, std::vector<std::string>>* left,
               const std::vector<std::string>& main_shape) {
  reads r;
  for (const auto& o : n.inputs) {
    if (!o.is_tensor()) {
      continue;
    }
    if (region.count(o.value) != 0) {
      r.chain.push_back(o.value);
    } else if (const auto l = leaf_of(g, o.value, chain_input)) {
      r.leaves.push_back(*l);
    } else if (left != nullptr && left->count(o.value) != 0 && left->at(o.value) == main_shape) {
      r.residuals.push_back(o.value);
    } else {
      r.other = true;
    }
  }
  return r;
}

} // namespace

namespace {

// An elementwise op of the chain's shape into the epilogue of the current kernel (`kernel`,
// after `steps`' last step: begun when that is no epilogue), or why its operands cannot be fused.
std::optional<plan_problem> epilogue_step(const graph& g, const node& n, const reads& r,
                                          const std::vector<std::string>& main_shape,
                                          bool anchor_kernel, int kernel,
                                          std::vector<fuse_step>* steps) {
  std::vector<std::string> operands;
  bool at_index = false;
  if (const auto bad = pointwise_operands(g, n, r.leaves, main_shape, anchor_kernel, kernel == 0,
                                          &at_index, &operands)) {
    return plan_problem{plan_issue::operand_not_broadcast, n.op, *bad};
  }
  if (steps->back().kind != fuse_kind::epilogue) {
    fuse_step s;
    s.kind = fuse_kind::epilogue;
    s.rule = "epilogue:pointwise";
    s.edge = fuse_edge::fused;
    s.why = fuse_reason::pointwise_in_tile;
    s.kernel = kernel;
    steps->push_back(s);
  }
  fuse_step& s = steps->back();
  if (at_index) {
    s.why = fuse_reason::pointwise_at_index; // the whole epilogue: one map pass
  }
  s.ops.push_back(n.op);
  for (const auto& v : r.residuals) {
    if (std::find(s.residuals.begin(), s.residuals.end(), v) == s.residuals.end()) {
      s.residuals.push_back(v);
    }
  }
  for (const auto& o : operands) {
    if (std::find(s.operands.begin(), s.operands.end(), o) == s.operands.end()) {
      s.operands.push_back(o);
    }
  }
  s.value = n.outputs[0].value;
  return std::nullopt;
}

// The step of an elementwise op whose result is larger than the chain's value `main` (kernel
// `kernel`), appended to `steps`; or why it cannot be placed: it reads another value of the
// chain, or an operand that does not broadcast over its result.
std::optional<plan_problem> expand_step(const graph& g, const node& n, const reads& r,
                                        const std::string& main, int kernel,
                                        std::vector<fuse_step>* steps) {
  if (std::any_of(r.chain.begin(), r.chain.end(), [&](const std::string& v) { return v != main; })) {
    return plan_problem{plan_issue::branch, n.op, "reads a value of the chain other than its latest"};
  }
  fuse_step s;
  s.kind = fuse_kind::expand;
  s.rule = "expand:broadcast";
  s.ops = {n.op};
  s.edge = fuse_edge::split;
  s.why = fuse_reason::broadcast_grows;
  s.kernel = kernel;
  s.residuals = r.residuals;
  s.value = n.outputs[0].value;
  bool at_index = false;
  if (const auto bad = pointwise_operands(g, n, r.leaves, n.outputs[0].shape, false, false,
                                          &at_index, &s.operands)) {
    return plan_problem{plan_issue::operand_not_broadcast, n.op, *bad};
  }
  steps->push_back(s);
  return std::nullopt;
}

// Where the chain begins: its input (the forward's), the kernel it is in and its latest value,
// and the first node the planner's loop places.
struct chain_start {
  std::string chain_input;
  int kernel = -1;
  bool anchor_kernel = false;
  std::string main;
  std::vector<std::string> main_shape;
  size_t start = 0;
};

// The chain's start: the anchor (kernel 0, its step pushed onto `p`) when it reads the forward's
// input, or, before it, a pass over that input (a pooling, a reduction, a softmax or a norm:
// `conv(avg_pool(x))`) that the loop places as kernel 0, the anchor then a later kernel reading
// its value. Sets `p.anchor`; the problem when ops before the anchor are neither.
std::optional<plan_problem> begin_chain(const graph& g, fusion_plan& p, chain_start& c) {
  size_t a = 0;
  while (a < g.nodes.size() && !anchor_rule(g.nodes[a].op)) {
    ++a;
  }
  if (a == g.nodes.size()) {
    return plan_problem{plan_issue::no_anchor, "graph",
                        "no nn.Linear, matmul or convolution begins the chain"};
  }
  const node& anchor = g.nodes[a];
  // Before a product, only the transpose of its second operand, module state (`self.weight.T`).
  const bool product = anchor.op == "torch.matmul" || anchor.op == "torch.mm";
  const bool prologue = a == 0 || (a == 1 && product && anchor.inputs.size() > 1 &&
                                   anchor.inputs[1].is_tensor() &&
                                   anchor.inputs[1].value == g.nodes[0].outputs.at(0).value &&
                                   transposed_state(g, anchor.inputs[1].value) != nullptr);
  const node& first_node = g.nodes[0];
  const auto first_split = split_of(first_node);
  const input* pass_input = !prologue && first_split && first_split->kind != fuse_kind::anchor &&
                                    !first_node.inputs.empty() && first_node.inputs[0].is_tensor()
                                ? detail::graph_input(g, first_node.inputs[0].value)
                                : nullptr;
  if (pass_input == nullptr && (!prologue || anchor.inputs.empty() || !anchor.inputs[0].is_tensor() ||
                                g.producer(anchor.inputs[0].value) != nullptr)) {
    return plan_problem{plan_issue::before_anchor, a != 0 ? g.nodes[0].op : anchor.op,
                        "the anchor must read the forward's input as it is, or a pass over it "
                        "(pooling, a reduction, a softmax or a norm) that starts the chain "
                        "(before a product, only the transpose of a 2-D parameter it multiplies "
                        "by)"};
  }
  p.anchor = anchor.op;
  if (pass_input != nullptr) {
    c.chain_input = c.main = pass_input->value;
    c.main_shape = pass_input->shape;
    return std::nullopt;
  }
  fuse_step first;
  first.kind = fuse_kind::anchor;
  first.rule = *anchor_rule(anchor.op);
  first.ops = {anchor.op};
  first.value = anchor.outputs.at(0).value;
  p.steps.push_back(first);
  c.chain_input = anchor.inputs[0].value;
  c.kernel = 0;
  c.anchor_kernel = true;
  c.main = first.value;
  c.main_shape = anchor.outputs[0].shape;
  c.start = a + 1;
  return std::nullopt;
}

// The plan of a graph whose attention is expanded already.
fusion_plan plan_expanded(const graph& g) {
  fusion_plan p;
  const auto problem = [&](plan_issue why, const std::string& op, const std::string& detail) {
    p.problems.push_back({why, op.empty() ? "graph" : op, detail});
    p.steps.clear();
    p.kernels = 0;
    return p;
  };
  if (const auto bad = graph_problem(g)) {
    return problem(bad->why, bad->op, bad->detail);
  }
  chain_start c0;
  if (const auto bad = begin_chain(g, p, c0)) {
    return problem(bad->why, bad->op, bad->detail);
  }
  const std::string chain_input = c0.chain_input;
  int kernel = c0.kernel; // the kernel the chain is in; -1 before its first (begin_chain's pass)
  bool anchor_kernel = c0.anchor_kernel; // the kernel the chain is in begins with a product or conv
  // The values earlier kernels left in the workspace, with their shapes: a later epilogue reads
  // them at the element's index.
  std::map<std::string, std::vector<std::string>> left;
  std::set<std::string> region{c0.main}; // the chain's values since the last kernel began
  std::string main = c0.main;            // the chain's latest value
  std::vector<std::string> main_shape = c0.main_shape;

  // A value of the region other than `keep` read by a node after index i: a branch.
  const auto escapes = [&](size_t i, const std::string& keep) -> std::optional<std::string> {
    for (const auto& v : region) {
      if (v == keep) {
        continue;
      }
      for (const size_t r : readers(g, v)) {
        if (r > i) {
          return g.nodes[r].op;
        }
      }
    }
    return std::nullopt;
  };

  // The forward's input, read again after the anchor's kernel (`mean(gemm(x)) + x`), is read
  // from the call's input as a residual is from the workspace.
  if (const input* in = detail::graph_input(g, chain_input)) {
    left[chain_input] = in->shape;
  }

  for (size_t i = c0.start; i < g.nodes.size(); ++i) {
    const node& n = g.nodes[i];
    // An elementwise op whose result is larger than the chain's value starts a kernel of its own.
    const bool grows = is_pointwise(n) && n.outputs.size() == 1 &&
                       grows_to(g, main_shape, n.outputs[0].shape);
    const reads r = reads_of(g, n, region, chain_input,
                             (anchor_kernel && !grows) || !is_pointwise(n) ? nullptr : &left,
                             grows ? n.outputs[0].shape : main_shape);
    const auto& [chain_reads, leaves, residuals, other] = r;
    if (chain_reads.empty() && !residuals.empty()) {
      return problem(plan_issue::branch, n.op,
                     "reads a value an earlier kernel left without the chain's latest value");
    }
    if (chain_reads.empty() && !other) {
      // An op over module state or constants only (a view of a parameter): part of an operand.
      if (is_view(n.op) || is_pointwise(n)) {
        continue;
      }
      return problem(plan_issue::unknown_op, n.op, "an op over module state the planner does not place");
    }
    if (other) {
      return problem(plan_issue::branch, n.op,
                     "reads a value of the chain that no earlier kernel leaves whole in the "
                     "workspace (a value inside a kernel, one of another shape, or in the "
                     "anchor's own kernel) or of another path");
    }
    if (grows) {
      if (const auto bad = expand_step(g, n, r, main, ++kernel, &p.steps)) {
        return problem(bad->why, bad->op, bad->detail);
      }
      if (const auto later = escapes(i, main)) {
        return problem(plan_issue::branch, n.op,
                       "an earlier value of the chain is read again by " + *later + " after it");
      }
      left[main] = main_shape;
      anchor_kernel = false;
      main = n.outputs[0].value;
      main_shape = n.outputs[0].shape;
      region = {main};
      continue;
    }
    if (is_pointwise(n)) {
      if (const auto bad = epilogue_step(g, n, r, main_shape, anchor_kernel, kernel, &p.steps)) {
        return problem(bad->why, bad->op, bad->detail);
      }
      main = n.outputs[0].value;
      region.insert(main);
      continue;
    }
    // A centering, x - mean(x over dims, keepdim): one normalize launch (statistics, then each
    // value less its row's mean) that covers both ops.
    if (const size_t sub = centering_sub(g, i, main); sub != 0) {
      if (const auto later = escapes(i, main)) {
        return problem(plan_issue::branch, n.op,
                       "an earlier value of the chain is read again by " + *later + " after it");
      }
      left[main] = main_shape;
      p.steps.push_back(centering_step(g, i, sub, ++kernel));
      anchor_kernel = false;
      region = {p.steps.back().value};
      main = p.steps.back().value;
      i = sub;
      continue;
    }
    // A view or a kernel of its own: it reads the chain's latest value, and nothing else of the
    // region is read later.
    const bool view = is_view(n.op);
    const auto split = view ? std::nullopt : split_of(n);
    if (!view && !split) {
      return problem(plan_issue::unknown_op, n.op, "not an op the fusion planner places");
    }
    if (n.inputs.empty() || n.inputs[0].value != main || chain_reads.size() != 1) {
      return problem(plan_issue::branch, n.op, "does not read the chain's latest value");
    }
    if (const auto later = escapes(i, main)) {
      return problem(plan_issue::branch, n.op,
                     "an earlier value of the chain is read again by " + *later + " after it");
    }
    // Its result: the one output read later (torch.max over a dim gives values and indices).
    const std::vector<std::string> main_shape_before = main_shape;
    std::string out;
    for (const auto& o : n.outputs) {
      if (!readers(g, o.value).empty() || o.value == g.outputs[0].value) {
        if (!out.empty()) {
          return problem(plan_issue::branch, n.op, "more than one of its outputs is read");
        }
        out = o.value;
        main_shape = o.shape;
      }
    }
    if (out.empty()) {
      return problem(plan_issue::branch, n.op, "its result is not read");
    }
    if (n.outputs.size() > 1 && out != n.outputs[0].value) {
      return problem(plan_issue::unknown_op, n.op, "the indices of a max/min are not placed");
    }
    fuse_step s;
    s.ops = {n.op};
    s.value = out;
    if (view) {
      s.kind = fuse_kind::view;
      s.rule = "view:" + detail::short_name(n.op);
      s.edge = fuse_edge::fused;
      s.why = fuse_reason::view_only;
      s.kernel = kernel;
    } else {
      s.kind = split->kind;
      s.rule = split->rule;
      s.edge = fuse_edge::split;
      s.why = split->why;
      left[main] = main_shape_before;
      s.kernel = ++kernel;
      anchor_kernel = split->kind == fuse_kind::anchor;
    }
    p.steps.push_back(s);
    region = {out};
    main = out;
  }
  if (g.outputs[0].value != main) {
    return problem(plan_issue::branch, "graph", "the forward returns a value other than the chain's last");
  }
  p.kernels = kernel + 1;
  return p;
}

} // namespace

fusion_plan plan_fusion(const graph& g) {
  return plan_expanded(expand_attention(g));
}

json to_json(const fusion_plan& p) {
  json j{{"anchor", p.anchor}, {"coverage", p.coverage()}, {"kernels", p.kernels}};
  j["steps"] = json::array();
  for (const auto& s : p.steps) {
    json step{{"kind", to_string(s.kind)}, {"rule", s.rule},           {"ops", s.ops},
              {"edge", to_string(s.edge)}, {"reason", to_string(s.why)}, {"kernel", s.kernel}};
    if (!s.operands.empty()) {
      step["operands"] = s.operands;
    }
    if (!s.residuals.empty()) {
      step["residuals"] = s.residuals;
    }
    j["steps"].push_back(step);
  }
  j["problems"] = json::array();
  for (const auto& i : p.problems) {
    j["problems"].push_back({{"reason", to_string(i.why)}, {"op", i.op}, {"detail", i.detail}});
  }
  return j;
}

// ---- the lowering of a one-kernel plan ---------------------------------------------------------

namespace {

std::string fused_header(const std::string& rule, const std::string& what) {
  return fmt::format("// Generated by kblaster's lowering from the task's graph.json: rule {}.\n"
                     "// {}\n"
                     "#pragma once\n#include <kblaster/device/core.cuh>\n"
                     "#include <kblaster/device/epilogue.cuh>\n"
                     "#include <kblaster/device/lowered.cuh>\n",
                     rule, what);
}

} // namespace

namespace {

// A kernel of a plan: its main step (the anchor or the split step that starts it), the fused
// epilogue after it and the views after them (a view may only end a kernel).
struct kernel_steps {
  const fuse_step* main = nullptr;
  const fuse_step* epilogue = nullptr;
  std::string value; // the value the kernel leaves, after its views
  std::string epilogue_input; // the value the epilogue reads (the main step's, or a view's of it)
};

// A shape expression as C++ over the dims bound as kb_d_<name>; nullopt for a character other
// than digits, names, + - * / % ( ) and spaces. The names it reads go into `names`.
std::optional<std::string> dim_expr(const std::string& e, std::set<std::string>* names) {
  std::string out;
  for (size_t i = 0; i < e.size();) {
    const unsigned char c = static_cast<unsigned char>(e[i]);
    if (std::isalpha(c) != 0 || c == '_') {
      size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) != 0 || e[j] == '_')) {
        ++j;
      }
      const std::string name = e.substr(i, j - i);
      names->insert(name);
      out += "kb_d_" + name;
      i = j;
    } else if (std::isdigit(c) != 0) {
      size_t j = i;
      while (j < e.size() && std::isdigit(static_cast<unsigned char>(e[j])) != 0) {
        ++j;
      }
      out += "int64_t{" + e.substr(i, j - i) + "}";
      i = j;
    } else if (std::string("+-*/%() ").find(static_cast<char>(c)) != std::string::npos) {
      out += static_cast<char>(c);
      ++i;
    } else {
      return std::nullopt;
    }
  }
  return out.empty() ? std::nullopt : std::optional<std::string>(out);
}

bool is_name(const std::string& e) {
  if (e.empty() || !(std::isalpha(static_cast<unsigned char>(e[0])) != 0 || e[0] == '_')) {
    return false;
  }
  return std::all_of(e.begin(), e.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

std::string pool_config(const task::pool_params& p) {
  const auto slots = [&](const std::vector<int>& v, int identity) {
    std::vector<int> out(3, identity);
    for (int i = 0; i < p.rank; ++i) {
      out[static_cast<size_t>(3 - p.rank + i)] = v.at(static_cast<size_t>(i));
    }
    return fmt::format("{{{}}}", fmt::join(out, ", "));
  };
  return fmt::format("kb::pool::config{{{}, {}, {}, {}, {}, {}, {}, {}, {}, 0}}",
                     p.kind == task::pool_kind::max ? "kb::pool::max" : "kb::pool::avg", p.rank,
                     slots(p.kernel, 1), slots(p.stride, 1), slots(p.padding, 0),
                     slots(p.dilation, 1), p.ceil_mode ? 1 : 0, p.count_include_pad ? 1 : 0,
                     p.divisor_override);
}

std::string reduce_op(const std::string& name, const std::string& op, const std::string& post) {
  std::string init = "A(0)", acc = "s.v + x", comb = "a.v + b.v", fin = "s.v";
  std::string state = "  struct state {\n    A v;\n  };\n";
  if (op == "mean") {
    fin = "s.v / A(n)";
  } else if (op == "prod") {
    init = "A(1)";
    acc = "s.v * x";
    comb = "a.v * b.v";
  } else if (op == "max") {
    init = "A(-INFINITY)";
    acc = "(x != x || x > s.v) ? x : s.v";
    comb = "(b.v != b.v || b.v > a.v) ? b.v : a.v";
  } else if (op == "min") {
    init = "A(INFINITY)";
    acc = "(x != x || x < s.v) ? x : s.v";
    comb = "(b.v != b.v || b.v < a.v) ? b.v : a.v";
  }
  if (op == "logsumexp") {
    return fmt::format(
        "template <class A> struct {} {{\n"
        "  using state = typename kb_online_softmax<A>::state;\n"
        "  static KB_HD state init() {{ return kb_online_softmax<A>::init(); }}\n"
        "  static KB_HD state accumulate(state s, A x) {{ return kb_online_softmax<A>::accumulate(s, x); }}\n"
        "  static KB_HD state combine(state a, state b) {{ return kb_online_softmax<A>::combine(a, b); }}\n"
        "  static KB_HD A finalize(state s, int64_t n, const double*) {{\n"
        "    (void)n;\n"
        "    const A v = s.max == A(-INFINITY) ? s.max : s.max + kb::fn::log(s.sum);\n"
        "    return {};\n  }}\n}};\n",
        name, post);
  }
  return fmt::format("template <class A> struct {} {{\n{}"
                     "  static KB_HD state init() {{ return {{{}}}; }}\n"
                     "  static KB_HD state accumulate(state s, A x) {{ return {{{}}}; }}\n"
                     "  static KB_HD state combine(state a, state b) {{ return {{{}}}; }}\n"
                     "  static KB_HD A finalize(state s, int64_t n, const double*) {{\n"
                     "    (void)n;\n    const A v = {};\n    return {};\n  }}\n}};\n",
                     name, state, init, acc, comb, fin, post);
}

} // namespace

namespace {

// Records why the fused rule does not lower a graph (rule_context::why_not); std::nullopt, for
// `return why(...)`.
struct refusal {
  const rule_context& ctx;
  std::nullopt_t operator()(const std::string& op, const std::string& w) const {
    ctx.why_not.push_back({reason::no_lowering, op, w});
    return std::nullopt;
  }
};

// The kernels of a plan: a main step, an epilogue, views at the end.
std::optional<std::vector<kernel_steps>> kernels_of(const fusion_plan& p, const refusal& why) {
  std::vector<kernel_steps> kernels(static_cast<size_t>(p.kernels));
  for (const auto& s : p.steps) {
    kernel_steps& k = kernels.at(static_cast<size_t>(s.kernel));
    if (k.main == nullptr) {
      k.main = &s;
    } else if (s.kind == fuse_kind::epilogue) {
      // A view before the epilogue: only in a later kernel, whose elementwise pass reads
      // operands at the element's flat index or one value (per-channel operands are refused
      // when the epilogue's leaves are made); the anchor's epilogue indexes the anchor's output.
      if (k.value != k.main->value && k.main->kind == fuse_kind::anchor) {
        return why(s.ops.front(), "a view inside a kernel's fused chain (the epilogue indexes the "
                                  "output of the kernel's first step)");
      }
      k.epilogue = &s;
      k.epilogue_input = k.value;
    } else if (s.kind == fuse_kind::view && p.kernels == 1) {
      return why(s.ops.front(), "a view inside the fused chain (the epilogue indexes the anchor's "
                                "output)");
    }
    k.value = s.value;
  }
  return kernels;
}

// The operand slots of an epilogue (kb::epi::max_operands on the device).
constexpr size_t kb_max_operands = 8;

// The leaves of an epilogue: value -> C++; `error` when an operand is a forward input.
struct epilogue_leaves {
  std::map<std::string, std::string> leaves;
  std::string error;
};

// What the fused rule's stages share: the graph, its plan and kernels, the anchor, and the
// operands found so far.
struct fused_frame {
  const graph& g;
  const fusion_plan& p;
  refusal why;
  std::vector<kernel_steps> kernels;
  const node* anchor = nullptr;
  bool gemm = false;       // the anchor is a product (else a convolution)
  std::string chain_input; // the forward input the chain reads (the anchor's, or the first pass's)
  // The operands of every kernel's epilogue and of the norms' affine maps, in one list (input
  // roles epilogue<k>).
  std::vector<std::string> operands;
  // The values earlier kernels left that later epilogues read (fuse_step::residuals): operand
  // slots from the last down, pointed at their buffers at run time.
  std::vector<std::string> residuals;
  // The anchor's kernel: 0, or after the passes over the forward's input that come before it.
  size_t first = 0;

  int residual_slot(const std::string& value) {
    auto it = std::find(residuals.begin(), residuals.end(), value);
    if (it == residuals.end()) {
      residuals.push_back(value);
      it = residuals.end() - 1;
    }
    return static_cast<int>(kb_max_operands) - 1 - static_cast<int>(it - residuals.begin());
  }

  // An earlier kernel's value (or the forward's input) read at the element's index i.
  std::string residual_leaf(const std::string& value) {
    return fmt::format("kb::epi::at<A>(ops, {}, i)", residual_slot(value));
  }

  int operand(const std::string& base) {
    const auto it = std::find(operands.begin(), operands.end(), base);
    if (it != operands.end()) {
      return static_cast<int>(it - operands.begin());
    }
    operands.push_back(base);
    return static_cast<int>(operands.size()) - 1;
  }

  // Input `i` of `n` as an operand when it is floating-point module state.
  std::optional<int> state_operand(const node& n, size_t i) {
    if (n.inputs.size() <= i || !n.inputs[i].is_tensor()) {
      return std::nullopt;
    }
    const auto lf = leaf_of(g, n.inputs[i].value, chain_input);
    if (!lf || state_of(g, lf->base) == nullptr || !task::is_floating(lf->type)) {
      return std::nullopt;
    }
    return operand(lf->base);
  }

  // The leaves of an epilogue over a kernel's output of shape `shape`: `main` for the kernel's
  // first value, the operands at `index` (a channel) or 0, or, where the epilogue has the
  // element's flat index (`element`, an elementwise pass), an operand of shape `full_shape` at it.
  epilogue_leaves leaves_for(const std::string& value, const std::string& main,
                             const std::vector<std::string>& shape, const std::string& index,
                             const std::string& element = "",
                             const std::vector<std::string>& full_shape = {}) const {
    epilogue_leaves out;
    std::map<std::string, std::string>& leaves = out.leaves;
    leaves[value] = main;
    for (const auto& n : g.nodes) {
      for (const auto& o : n.inputs) {
        if (!o.is_tensor() || leaves.count(o.value) != 0) {
          continue;
        }
        const auto l = leaf_of(g, o.value, chain_input);
        if (!l) {
          continue;
        }
        if (!task::is_floating(l->type)) {
          leaves[o.value] = "A(0)"; // integer state (a counter): no operand of the math
          continue;
        }
        const auto k = std::find(operands.begin(), operands.end(), l->base) - operands.begin();
        auto b = broadcast_for(g, n, l->shape, shape);
        if ((!b || *b == broadcast::full) && !element.empty() && same_shape(g, l->shape, full_shape)) {
          b = broadcast::full;
        }
        if (static_cast<size_t>(k) == operands.size() || !b) {
          continue;
        }
        if (*b == broadcast::full) {
          if (element.empty()) {
            continue; // not this epilogue's (the planner keeps such operands out of the anchor's)
          }
          leaves[o.value] = fmt::format("kb::epi::at<A>(ops, {}, {})", k, element);
          continue;
        }
        if (state_of(g, l->base) == nullptr) {
          out.error = n.op + ": an epilogue operand that is a forward input (" + l->base +
                      "): operands are module state, or forward inputs of the output's shape";
          continue;
        }
        if (*b == broadcast::channel && index.empty()) {
          // After a view of the kernel's output the channel is not the output's: no leaf, so an
          // epilogue that reads one is refused as not a pointwise expression of its leaves.
          continue;
        }
        leaves[o.value] = fmt::format("kb::epi::at<A>(ops, {}, {})", k,
                                      *b == broadcast::channel ? index : "0");
      }
    }
    return out;
  }
};

// The product: x [M, K] (a forward input) times the weight transposed (Linear) or b.
std::optional<lowering> product_lowering(const fused_frame& f,
                                         const std::vector<std::string>& out_shape) {
  const graph& g = f.g;
  const node* anchor = f.anchor;
  // nn.Linear and torch.mm take 2-D operands; torch.matmul batched ones too (the matmul family's
  // batched forms), and an attention's scores Q @ K^T over its heads.
  const bool batched = f.p.anchor == "torch.matmul";
  const auto rank2 = [&](const std::string& v) {
    const auto fits = [&](size_t rank) { return batched ? rank >= 2 : rank == 2; };
    for (const auto& in : g.inputs) {
      if (in.value == v && !in.scalar) {
        return fits(in.shape.size()) && task::is_floating(in.type);
      }
    }
    const state_tensor* s = state_of(g, v);
    return s != nullptr && fits(s->shape.size()) && task::is_floating(s->type);
  };
  // `x @ self.weight.T`: the weight as it is stored, transposed by the product.
  const state_tensor* tb = anchor->inputs.size() < 2 || !anchor->inputs[1].is_tensor()
                               ? nullptr
                               : transposed_state(g, anchor->inputs[1].value);
  if (anchor->inputs.size() < 2 || !anchor->inputs[1].is_tensor() ||
      !rank2(anchor->inputs[0].value) ||
      !rank2(tb != nullptr ? tb->value : anchor->inputs[1].value)) {
    return f.why(f.p.anchor, "operands that are not 2-D floating-point inputs or module state (the "
                             "fused product takes x [M, K] times a matrix)");
  }
  lowering l;
  l.fam = task::family::matmul;
  l.roles[anchor->inputs[0].value] = "a";
  l.roles[tb != nullptr ? tb->value : anchor->inputs[1].value] = "b";
  task::matmul_params mp;
  // The weight is [out, in]; an attention's scores multiply by K transposed.
  mp.trans_b = f.p.anchor == "nn.Linear" || tb != nullptr ||
               anchor->attr("transpose_b").boolean().value_or(false);
  if (const auto scale = anchor->attr("scale").number()) {
    mp.alpha = *scale;
  }
  mp.batch = anchor->inputs[0].shape.size() > 2 || anchor->inputs[1].shape.size() > 2;
  l.params = [mp](task::contract& c) { c.matmul = mp; };
  const auto& xs = anchor->inputs[0].shape;
  l.flops = fmt::format("2*{}*({})", product_expr(out_shape), xs.back());
  return l;
}

// A product's (`gemm`) or convolution's indexed epilogue as the op `name`: `body`'s lines, then
// the value `expr`.
std::string epilogue_struct(const std::string& name, bool gemm, const std::string& body,
                            const std::string& expr) {
  const std::string sig = gemm ? "A acc, int64_t m, int64_t n, const kb::epi::operands& ops"
                               : "A v, int64_t channel, const kb::epi::operands& ops";
  const std::string unused = gemm ? "    (void)m;\n    (void)n;\n    (void)ops;\n"
                                  : "    (void)channel;\n    (void)ops;\n";
  return "\ntemplate <class A> struct " + name + " {\n  static KB_HD A epilogue(" + sig + ") {\n" +
         unused + body + "    return " + expr + ";\n  }\n};\n";
}

// A map pass's op (kb::chain::map_in_place): each element v, with its channel (axis 1) and flat
// index i, to `expr`, which may read `kb_v = affine` when `affine` is given.
std::string map_struct(const std::string& name, const std::string& affine, const std::string& expr) {
  return "\ntemplate <class A> struct " + name +
         " {\n"
         "  static KB_HD A map(A v, int64_t channel, int64_t i, const kb::epi::operands& ops) {\n"
         "    (void)channel;\n    (void)i;\n    (void)ops;\n" +
         (affine.empty() ? std::string() : "    const A kb_v = " + affine + ";\n") +
         "    return " + expr + ";\n  }\n};\n";
}

// The map pass `name` over buffer `buf` (of the chain's shape `shape`) in place, in
// kb_chain::launch: with the call's operands, or with `rops` after `residual_ops` defines them
// (an earlier kernel's values at the index).
std::string map_call(const std::string& name, size_t buf, size_t shape,
                     const std::string& residual_ops) {
  return fmt::format(
      "{}      rc = kb::chain::map_in_place<{}>(a, kb::chain::dense(buf[{}], s[{}], rank[{}]), "
      "{});\n      if (rc != 0) {{\n        return rc;\n      }}\n",
      residual_ops, name, buf, shape, shape, residual_ops.empty() ? "ops" : "rops");
}

// The anchor's kernel: its lowering (matmul or conv) named by the fused rule, and its epilogue in
// the output tile (kb_op).
struct anchor_part {
  lowering l;
  std::string math;
  // The epilogue as a map pass (kb_map0, pointwise_at_index): its ops, and its block of
  // kb_chain::launch after the anchor; empty when it runs in the tile.
  std::string map_ops;
  std::string map_launch;
};

std::optional<anchor_part> lower_anchor(const rule_context& ctx, const fused_frame& f) {
  const graph& g = f.g;
  const fusion_plan& p = f.p;
  const node* anchor = f.anchor;
  const bool gemm = f.gemm;
  // A product's epilogue indexes its output's columns: a per-channel operand is one per column
  // of a 2-D output only.
  const std::string index = !gemm ? "channel" : anchor->outputs[0].shape.size() == 2 ? "n" : "";
  const std::string acc = gemm ? "acc" : "v";
  const std::vector<std::string>& out_shape = anchor->outputs[0].shape;
  std::string body;
  std::string main_leaf = acc;
  if (p.anchor == "nn.Linear" && !f.operands.empty() && anchor->inputs.size() > 2 &&
      f.operands[0] == anchor->inputs[2].value) {
    body += "    const A kb_acc = acc + kb::epi::at<A>(ops, 0, n);\n";
    main_leaf = "kb_acc";
  }
  const std::string anchor_out = anchor->outputs[0].value;
  const fuse_step* epi0 = f.kernels[f.first].epilogue;
  const std::string kernel0_value = epi0 != nullptr ? epi0->value : anchor_out;
  // An epilogue that reads a tensor of the output's shape runs after the anchor as a map pass
  // with each element's flat index (and its channel, axis 1: a 2-D product's column).
  const bool at_index = epi0 != nullptr && epi0->why == fuse_reason::pointwise_at_index;
  if (at_index && gemm && out_shape.size() != 2) {
    return f.why(epi0->ops.front(), "a tensor of the output's shape in the epilogue of a product "
                                    "whose output is not 2-D (the map pass's channel is axis 1)");
  }
  epilogue_leaves leaves =
      at_index ? f.leaves_for(anchor_out, "v", out_shape, "channel", "i", out_shape)
               : f.leaves_for(anchor_out, main_leaf, out_shape, index);
  detail::pointwise pw(g, std::move(leaves.leaves), out_shape);
  if (!leaves.error.empty()) {
    return f.why(p.anchor, leaves.error);
  }
  const auto e = pw.of(kernel0_value);
  if (!e) {
    return f.why(p.steps.size() > 1 ? p.steps[1].ops.front() : p.anchor,
                 "the fused epilogue is not a pointwise expression (" + pw.why() + ")");
  }
  const std::optional<lowering> base =
      gemm ? product_lowering(f, out_shape) : conv_lowering(ctx, *anchor, f.chain_input);
  if (!base) {
    return std::nullopt; // product_lowering or conv_lowering said why
  }
  anchor_part a{*base, "", "", ""};
  lowering& l = a.l;
  const std::string anchor_name =
      f.kernels[f.first].main->rule.substr(std::string("anchor:").size());
  const std::string ops = pw.ops();
  l.rule = fmt::format("{}:{}{}", gemm ? "matmul" : "conv", anchor_name,
                       ops == "identity" || at_index ? "" : "+" + ops);
  if (!at_index) {
    a.math = epilogue_struct("kb_op", gemm, body, *e);
    return a;
  }
  const std::string map = fmt::format("kb_map{}", f.first);
  a.math = epilogue_struct("kb_op", gemm, body, main_leaf) + map_struct(map, "", *e);
  a.map_ops = "map+" + ops;
  a.map_launch = fmt::format("    {{ // kernel {}'s epilogue at each element's index, in place\n",
                             f.first) +
                 map_call(map, f.first, 2 * f.first, "") + "    }\n";
  return a;
}

// The operands' input roles (epilogue<k>) into `l`; false, with why, beyond 8 of them.
bool assign_operand_roles(const fused_frame& f, lowering& l) {
  if (f.operands.size() + f.residuals.size() > kb_max_operands) {
    f.why(f.p.anchor, fmt::format("{} epilogue operands and {} values of earlier kernels (at most "
                                  "{} in all)",
                                  f.operands.size(), f.residuals.size(), kb_max_operands));
    return false;
  }
  for (size_t k = 0; k < f.operands.size(); ++k) {
    l.roles[f.operands[k]] = fmt::format("epilogue{}", k);
  }
  return true;
}

// ---- the kernels after the anchor: the chain (kblaster/device/chain.cuh) ----------------------

// A kernel of the chain other than the anchor's: its main step and that step's node. Kernel 0
// (before the anchor) reads the forward's input, kernel k >= 1 the value of kernel k-1.
struct chain_step {
  size_t k = 0;
  const kernel_steps& ks;
  const node& n;
  std::string op;   // the op refusals name
  std::string rule; // the step's rule without its kind ("layer_norm")
  size_t rank = 0;  // of the step's input
  int si = 0;       // the shape index of its input (2k-1; its output's is 2k); -1 for kernel 0
};

// The family op of a chain step: its launch over x (the step's input) into y.
enum class step_fam { reduce, normalize, pool };
struct step_family {
  step_fam f = step_fam::reduce;
  std::string config;
  std::string raw;       // the step's value from the family's state (reduce) or stats (normalize)
  std::string norm_body; // normalize: the state, stats, finalize
  std::string views;     // code that reshapes x and y before the launch
  std::string weight_in = "-1";
  std::string bias_in = "-1";
  std::string extra_inputs;
  std::string reduce_name;
  std::string affine; // what the map pass applies first: a norm's per-channel affine
};

std::pair<int, int> span_of(const std::vector<int>& dims) {
  return {dims.front(), dims.back() + 1};
}

std::vector<int> spatial_axes(size_t rank) {
  std::vector<int> d;
  for (size_t i = 2; i < rank; ++i) {
    d.push_back(static_cast<int>(i));
  }
  return d;
}

std::optional<step_family> reduce_family(const fused_frame& f, const chain_step& s) {
  const node& n = s.n;
  step_family out;
  out.reduce_name = short_name(n.op);
  out.reduce_name = out.reduce_name == "amax"   ? "max"
                    : out.reduce_name == "amin" ? "min"
                                                : out.reduce_name;
  if (out.reduce_name == "norm") {
    return f.why(s.op, "a norm reduction after the anchor (its p is not lowered)");
  }
  if (!n.attr("dtype").is_none()) {
    return f.why(s.op, "a reduction with a dtype");
  }
  const auto dims = reduced_axes(n, s.rank);
  if (!dims) {
    return f.why(s.op, "the reduced axes are not one consecutive span (the reduce family reduces "
                       "[outer, extent, inner])");
  }
  const auto [b, e2] = span_of(*dims);
  out.config = fmt::format("kb::reduce::config{{{}, {}, 0}}", b, e2);
  return out;
}

std::optional<step_family> softmax_family(const fused_frame& f, const chain_step& s) {
  const node& n = s.n;
  step_family out;
  out.f = step_fam::normalize;
  const auto dims = reduced_axes(n, s.rank);
  if (!dims || dims->size() != 1 || !n.attr("dtype").is_none()) {
    return f.why(s.op, "a softmax over other than one dim");
  }
  const auto [b, e2] = span_of(*dims);
  out.config = fmt::format("kb::normalize::config{{{}, {}, 0, -1, -1}}", b, e2);
  out.norm_body = "  using state = typename kb_online_softmax<A>::state;\n"
                  "  struct stats {\n    A max;\n    A s;\n  };\n"
                  "  static KB_HD state init() { return kb_online_softmax<A>::init(); }\n"
                  "  static KB_HD state accumulate(state s, A x) { return "
                  "kb_online_softmax<A>::accumulate(s, x); }\n"
                  "  static KB_HD state combine(state a, state b) { return "
                  "kb_online_softmax<A>::combine(a, b); }\n";
  if (s.rule == "log_softmax") {
    out.norm_body += "  static KB_HD stats finalize(state s, int64_t, const double*) { return "
                     "{s.max, kb::fn::log(s.sum)}; }\n";
    out.raw = "x - st.max - st.s";
  } else {
    out.norm_body += "  static KB_HD stats finalize(state s, int64_t, const double*) { return "
                     "{s.max, A(1) / s.sum}; }\n";
    out.raw = "kb::fn::exp(x - st.max) * st.s";
  }
  return out;
}

// A norm's own weight and bias (inputs 1 and 2 of its node, module state) as the normalize
// launch's inputs, applied after the normalization; false when one it has is not module state.
bool launch_affine(fused_frame& f, const node& n, step_family& out) {
  const auto w = f.state_operand(n, 1);
  const auto bi = f.state_operand(n, 2);
  if ((n.inputs.size() > 1 && !w) || (n.inputs.size() > 2 && !bi)) {
    return false;
  }
  if (w) {
    out.weight_in = "1";
    out.extra_inputs += fmt::format("a->inputs[cfg.epi[{}]]", *w);
    out.raw = "(x - st.mean) * st.rstd * weight";
  }
  if (bi) {
    out.bias_in = w ? "2" : "1";
    out.extra_inputs += fmt::format("{}a->inputs[cfg.epi[{}]]", w ? ", " : "", *bi);
    out.raw += " + bias";
  }
  return true;
}

// LayerNorm over its normalized_shape, with its weight and bias (module state) as the family's
// inputs.
std::optional<step_family> layer_norm_family(fused_frame& f, const chain_step& s, step_family out) {
  const node& n = s.n;
  const auto ns = detail::normalized_rank(n);
  if (!ns || *ns == 0 || *ns > s.rank) {
    return f.why(s.op, "a LayerNorm without its normalized_shape");
  }
  if (!launch_affine(f, n, out)) {
    return f.why(s.op, "a LayerNorm weight or bias that is not module state");
  }
  out.config = fmt::format("kb::normalize::config{{{}, {}, 0, {}, {}}}", s.rank - *ns, s.rank,
                           out.weight_in, out.bias_in);
  return out;
}

// GroupNorm (rows of one group of channels) or InstanceNorm (rows of one channel): the normalize
// family's groups over axes [1, rank), its weight and bias (module state) one value per channel
// applied in the family's output pass. An instance norm without an affine reduces the spatial
// axes alone.
std::optional<step_family> channel_norm_family(fused_frame& f, const chain_step& s,
                                               step_family out) {
  const node& n = s.n;
  const bool group = s.rule == "group_norm";
  if (s.rank < (group ? 2u : 3u)) {
    return f.why(s.op, "a group norm of a tensor without channels, or an instance norm of one "
                       "without spatial dims");
  }
  // Running statistics are never read: the module normalizes by its input's statistics, as in
  // training mode (scripts/pytorch_oracle.py, batch_statistics).
  const bool aff = n.attr("affine").boolean().value_or(group);
  const auto groups = n.attr(group ? "num_groups" : "num_features").integer();
  if (group && (!groups || *groups < 1)) {
    return f.why(s.op, "a GroupNorm without num_groups");
  }
  if (!group && !aff) {
    const auto [b, e2] = span_of(spatial_axes(s.rank));
    out.config = fmt::format("kb::normalize::config{{{}, {}, 0, -1, -1}}", b, e2);
    return out;
  }
  if (!groups || *groups < 1) {
    return f.why(s.op, "an affine InstanceNorm without num_features");
  }
  if (aff && (!f.state_operand(n, 1) || !f.state_operand(n, 2) || !launch_affine(f, n, out))) {
    return f.why(s.op, "an affine norm whose weight and bias are not module state");
  }
  out.config = fmt::format("kb::normalize::config{{1, {}, 0, {}, {}, 0, {}}}", s.rank,
                           out.weight_in, out.bias_in, *groups);
  return out;
}

// BatchNorm: statistics per channel (axis 1) over the batch and spatial axes, the normalize
// family's channel rows; its weight and bias (module state) are one value per row.
std::optional<step_family> batch_norm_family(fused_frame& f, const chain_step& s,
                                             step_family out) {
  const node& n = s.n;
  if (s.rank < 2) {
    return f.why(s.op, "a batch norm of a tensor without channels");
  }
  if (!launch_affine(f, n, out)) {
    return f.why(s.op, "a batch norm weight or bias that is not module state");
  }
  out.config = fmt::format("kb::normalize::config{{1, 2, 0, {}, {}, 1}}", out.weight_in,
                           out.bias_in);
  return out;
}

// A centering (the step's node is the subtraction; its second operand the mean): a normalize
// launch over the mean's axes whose output is each value less its row's mean.
std::optional<step_family> center_family(fused_frame& f, const chain_step& s, step_family out) {
  const node* mean = s.n.inputs.size() == 2 ? f.g.producer(s.n.inputs[1].value) : nullptr;
  const auto dims = mean != nullptr ? reduced_axes(*mean, s.rank) : std::nullopt;
  if (!dims) {
    return f.why(s.op, "a centering over axes that are not one consecutive span");
  }
  const auto [b, e2] = span_of(*dims);
  out.raw = "x - st.mean";
  out.config = fmt::format("kb::normalize::config{{{}, {}, 0, -1, -1}}", b, e2);
  return out;
}

std::optional<step_family> norm_family(fused_frame& f, const chain_step& s) {
  step_family out;
  out.f = step_fam::normalize;
  const double eps = s.n.attr("eps").number().value_or(1e-5);
  out.norm_body = std::string(welford_body) +
                  fmt::format("  static KB_HD stats finalize(state s, int64_t, const double*) {{\n"
                              "    return {{s.mean, A(1) / kb::fn::sqrt(s.m2 / s.count + {})}};\n"
                              "  }}\n",
                              number(eps));
  out.raw = "(x - st.mean) * st.rstd";
  if (s.rule == "layer_norm") {
    return layer_norm_family(f, s, std::move(out));
  }
  if (s.rule == "group_norm" || s.rule == "instance_norm") {
    return channel_norm_family(f, s, std::move(out));
  }
  if (s.rule == "batch_norm") {
    return batch_norm_family(f, s, std::move(out));
  }
  if (s.rule == "center") {
    return center_family(f, s, std::move(out));
  }
  return f.why(s.op, "a norm the chain does not lower");
}

std::optional<step_family> pool_family(const fused_frame& f, const chain_step& s) {
  const node& n = s.n;
  step_family out;
  const std::string module = n.op.substr(3);
  const bool adaptive = starts_with(module, "Adaptive");
  if (adaptive) {
    const auto size = n.attr("output_size").integers();
    if (!size || std::any_of(size->begin(), size->end(), [](int64_t v) { return v != 1; })) {
      return f.why(s.op, "an adaptive pooling to other than one value per channel");
    }
    out.reduce_name = starts_with(module, "AdaptiveMax") ? "max" : "mean";
    const auto [b, e2] = span_of(spatial_axes(s.rank));
    out.config = fmt::format("kb::reduce::config{{{}, {}, 0}}", b, e2);
    return out;
  }
  out.f = step_fam::pool;
  const int prank = static_cast<int>(module.back() == 'd' ? module[module.size() - 2] - '0' : 0);
  if (prank < 1 || prank > 3 || s.rank != static_cast<size_t>(prank) + 2) {
    return f.why(s.op, "a pooling of another rank than the tensor's spatial dims");
  }
  std::string bad;
  const auto pp = pool_params_of(n, prank, &bad);
  if (!pp) {
    return f.why(s.op, bad);
  }
  out.config = pool_config(*pp);
  return out;
}

// The epilogue after a step, over its value v (`post`), and the ops it applies (`post_ops`).
struct step_epilogue {
  std::string post = "v";
  std::string post_ops;
};

// The epilogue after the step: folded into the family op when it reads no operand and no
// affine comes first, else an elementwise map pass with the channel.
std::optional<step_epilogue> epilogue_of_step(fused_frame& f, const chain_step& s,
                                              const std::vector<std::string>& out,
                                              const std::string& affine) {
  const kernel_steps& ks = s.ks;
  const std::string kernel_value = ks.epilogue != nullptr ? ks.epilogue->value : ks.main->value;
  step_epilogue e;
  if (ks.epilogue == nullptr && affine.empty()) {
    return e;
  }
  const bool viewed = ks.epilogue != nullptr && ks.epilogue_input != ks.main->value;
  if (viewed && !affine.empty()) {
    return f.why(s.op, "a view between a norm's affine and its epilogue");
  }
  // Operands of the epilogue input's shape are read at the element's flat index (a view between
  // the step and its epilogue moves no data).
  std::vector<std::string> full = out;
  if (viewed) {
    if (const node* v = f.g.producer(ks.epilogue_input)) {
      for (const auto& o : v->outputs) {
        if (o.value == ks.epilogue_input) {
          full = o.shape;
        }
      }
    }
  }
  // A view that keeps the batch and channel dims ([b, c, d, h, w] as [b, c, d*h*w]) keeps each
  // element's channel: operands per channel of the viewed shape are read at it.
  const bool keeps_channel = viewed && full.size() >= 2 && out.size() >= 2 &&
                             same_shape(f.g, {full[0], full[1]}, {out[0], out[1]});
  const std::vector<std::string>& shape = keeps_channel ? full : out;
  epilogue_leaves leaves = f.leaves_for(viewed ? ks.epilogue_input : ks.main->value,
                                        affine.empty() ? "v" : "kb_v", shape,
                                        viewed && !keeps_channel ? "" : "channel", "i", full);
  if (ks.epilogue != nullptr) {
    for (const auto& r : ks.epilogue->residuals) { // an earlier kernel's value, at the index
      leaves.leaves[r] = f.residual_leaf(r);
    }
  }
  detail::pointwise tail(f.g, std::move(leaves.leaves),
                         viewed && !keeps_channel ? std::nullopt
                                                  : std::optional<std::vector<std::string>>(shape));
  if (!leaves.error.empty()) {
    return f.why(s.op, leaves.error);
  }
  const auto te = tail.of(kernel_value);
  if (!te) {
    return f.why(ks.epilogue != nullptr ? ks.epilogue->ops.front() : s.op,
                 "the epilogue after " + ks.main->rule + " is not a pointwise expression (" +
                     tail.why() + ")");
  }
  e.post = *te;
  e.post_ops = ks.epilogue != nullptr ? tail.ops() : "";
  return e;
}

// The step's family op (kb_step<k>) and, when `mapped`, its map pass (kb_map<k>).
std::string step_ops_math(const chain_step& s, const step_family& fam, const step_epilogue& e,
                          bool mapped) {
  const std::string step = fmt::format("kb_step{}", s.k);
  const std::string map = fmt::format("kb_map{}", s.k);
  const std::string folded = mapped ? "v" : e.post;
  std::string ops_math;
  if (fam.f == step_fam::reduce) {
    ops_math += "\n" + reduce_op(step, fam.reduce_name, folded);
  } else if (fam.f == step_fam::normalize) {
    ops_math += "\ntemplate <class A> struct " + step + " {\n" + fam.norm_body +
                "  static KB_HD A apply(A x, const stats& st, A weight, A bias) {\n"
                "    (void)weight;\n    (void)bias;\n    const A v = " +
                fam.raw + ";\n    return " + folded + ";\n  }\n};\n";
  } else {
    ops_math += "\ntemplate <class A> struct " + step +
                " {\n"
                "  static KB_HD A epilogue(A v, const double*) { return " +
                folded + "; }\n};\n";
  }
  if (mapped) {
    ops_math += map_struct(map, fam.affine, e.post);
  }
  return ops_math;
}

// The step's input in kb_chain::launch: buffer k-1 at shape si, or for kernel 0 the call's input
// (`xi`, checked float32 before; the family checks that it is contiguous).
std::string step_input(const chain_step& s, const std::string& xi) {
  return s.k == 0 ? fmt::format("a->inputs[{}]", xi)
                  : fmt::format("kb::chain::dense(buf[{}], s[{}], rank[{}])", s.k - 1, s.si, s.si);
}

// The step's block of kb_chain::launch: the family op from its input into buffer k, then the
// map pass in place when `mapped`.
std::string step_launch(const chain_step& s, const step_family& fam, bool mapped,
                        const std::string& residual_ops, const std::string& xi) {
  const size_t k = s.k;
  const int so = s.si + 1;
  const std::string family = fam.f == step_fam::reduce      ? "reduce"
                             : fam.f == step_fam::normalize ? "normalize"
                                                            : "pool";
  std::string launch =
      fmt::format("    {{ // kernel {0}: {1}\n"
                  "      kb_tensor x = {2};\n"
                  "      kb_tensor y = kb::chain::dense(buf[{0}], s[{4}], rank[{4}]);\n"
                  "{5}"
                  "      const kb_tensor in[] = {{x{6}}};\n"
                  "      const kb_args sa = kb::chain::step_args(a, in, {7}, &y);\n"
                  "      rc = kb::{8}::launch_naive<{9}, float, true>(&sa, {10});\n"
                  "      if (rc != 0) {{\n        return rc;\n      }}\n",
                  k, s.ks.main->rule, step_input(s, xi), s.si, so, fam.views,
                  fam.extra_inputs.empty() ? "" : ", " + fam.extra_inputs,
                  1 + (fam.weight_in != "-1" ? 1 : 0) + (fam.bias_in != "-1" ? 1 : 0), family,
                  fmt::format("kb_step{}", k), fam.config);
  if (mapped) {
    launch += map_call(fmt::format("kb_map{}", k), k, so, residual_ops);
  }
  launch += "    }\n";
  return launch;
}

// A chain step's part of the lowering: its input and output shapes, its ops, its launch block
// and its name in the rule.
struct chain_step_code {
  std::vector<std::string> in_shape;
  std::vector<std::string> out_shape;
  std::string ops_math;
  std::string launch;
  std::string workspace; // a product step: its workspace need, in kb_chain::prepare
  std::string rule;
};

// The launch and workspace blocks of a later product or convolution (kernel k) from buffer k-1
// (shape si) into buffer k (shape si + 1) with the anchor's strategy at its point (the candidate's
// anchor family, kb_chain's `family`), its own epilogue kb_op<k> and the anchor's workspace
// region; `config` is C++ that defines its config `c` from the call `p` and the anchor's `cfg`.
void later_anchor_blocks(chain_step_code& code, size_t k, const std::string& rule, int si,
                         const std::string& config) {
  const int so = si + 1;
  code.launch = fmt::format(
      "    {{ // kernel {0}: {1}, the anchor's strategy\n"
      "      const kb_tensor y = kb::chain::dense(buf[{0}], s[{4}], rank[{4}]);\n"
      "      const kb::chain::product_call p(a, kb::chain::dense(buf[{2}], s[{3}], rank[{3}]), cfg.epi, "
      "&y, base + offsets[kernels - 1], anchor_bytes);\n"
      "{5}      rc = family.template launch<kb_op{0}>(&p.args, c);\n"
      "      if (rc != 0) {{\n        return rc;\n      }}\n    }}\n",
      k, rule, k - 1, si, so, config);
  code.workspace = fmt::format(
      "    {{ // kernel {0}'s workspace in the anchor's region\n"
      "      const kb_tensor y = kb::chain::dense(nullptr, s[{2}], rank[{2}]);\n"
      "      const kb::chain::product_call p(a, kb::chain::dense(nullptr, s[{1}], rank[{1}]), cfg.epi, "
      "&y, nullptr, 0);\n"
      "{3}      uint64_t bytes = 0;\n"
      "      rc = family.template workspace<kb_op{0}>(&p.args, c, &bytes);\n"
      "      if (rc != 0) {{\n        return rc;\n      }}\n"
      "      *anchor_bytes = bytes > *anchor_bytes ? bytes : *anchor_bytes;\n    }}\n",
      k, si, so, config);
}

// A later product's or convolution's epilogue (kb_op<k>): `body`'s lines (a bias), then the
// kernel's pointwise chain from `main_leaf`, its operands at `index`; the step's rule into `code`.
bool later_anchor_epilogue(fused_frame& f, const chain_step& s, chain_step_code& code, bool gemm,
                           const std::string& body, const std::string& main_leaf,
                           const std::string& index) {
  const kernel_steps& ks = s.ks;
  const std::string value = ks.epilogue != nullptr ? ks.epilogue->value : ks.main->value;
  epilogue_leaves leaves = f.leaves_for(ks.main->value, main_leaf, code.out_shape, index);
  if (!leaves.error.empty()) {
    f.why(s.op, leaves.error);
    return false;
  }
  detail::pointwise pw(f.g, std::move(leaves.leaves), code.out_shape);
  const auto e = pw.of(value);
  if (!e) {
    f.why(ks.epilogue != nullptr ? ks.epilogue->ops.front() : s.op,
          "the epilogue after " + ks.main->rule + " is not a pointwise expression (" + pw.why() +
              ")");
    return false;
  }
  code.ops_math = epilogue_struct(fmt::format("kb_op{}", s.k), gemm, body, *e);
  const std::string name = ks.main->rule.substr(ks.main->rule.find(':') + 1);
  const std::string ops = pw.ops();
  code.rule = name + (ops == "identity" ? "" : "+" + ops);
  return true;
}

const std::vector<std::string> no_residuals;

// The operand slots of the values that kernel s.k's map pass reads from earlier kernels (and of
// the forward's input, read again): C++ that defines `rops`, the call's operands with those slots
// pointed at their buffers; empty when it reads none.
std::optional<std::string> residual_operands(fused_frame& f, const chain_step& s,
                                             const std::vector<std::string>& residuals) {
  if (residuals.empty()) {
    return std::string();
  }
  std::string out = "      kb::epi::operands rops = ops;\n";
  for (const auto& r : residuals) {
    if (r == f.chain_input) {
      const input* in = detail::graph_input(f.g, r);
      if (in == nullptr || in->type != task::dtype::float32) {
        return f.why(s.op, "reads the forward's input " + r + " again, not in float32");
      }
      const std::string xi = f.gemm ? "cfg.a" : "cfg.x";
      out += fmt::format("      if (!kb::chain::dense_float(a->inputs[{0}])) {{\n"
                         "        return -1;\n      }}\n"
                         "      rops.p[{1}] = static_cast<const float*>(a->inputs[{0}].data);\n",
                         xi, f.residual_slot(r));
      continue;
    }
    size_t j = 0;
    while (j < s.k && f.kernels[j].value != r) {
      ++j;
    }
    if (j == s.k) {
      return f.why(s.op, "reads " + r + ", which no earlier kernel leaves");
    }
    out += fmt::format("      rops.p[{}] = static_cast<const float*>(buf[{}]);\n",
                       f.residual_slot(r), j);
  }
  return out;
}

// An elementwise op whose result is larger than the chain's value (kernel k, fuse_kind::expand)
// and the epilogue after it: one pass over the result, each element reading the value at its
// broadcast position (kb::chain::broadcast_map), the operands at its channel or index.
std::optional<chain_step_code> expand_code(fused_frame& f, const chain_step& s,
                                           chain_step_code code) {
  const kernel_steps& ks = s.ks;
  const std::string& before = f.kernels[s.k - 1].value;
  epilogue_leaves leaves =
      f.leaves_for(before, "v", code.out_shape, "channel", "i", code.out_shape);
  std::vector<std::string> residuals = ks.main->residuals;
  if (ks.epilogue != nullptr) {
    for (const auto& r : ks.epilogue->residuals) {
      if (std::find(residuals.begin(), residuals.end(), r) == residuals.end()) {
        residuals.push_back(r);
      }
    }
  }
  for (const auto& r : residuals) { // an earlier kernel's value, at the index
    leaves.leaves[r] = f.residual_leaf(r);
  }
  if (!leaves.error.empty()) {
    return f.why(s.op, leaves.error);
  }
  detail::pointwise pw(f.g, std::move(leaves.leaves), code.out_shape);
  const auto e = pw.of(ks.epilogue != nullptr ? ks.epilogue->value : ks.main->value);
  if (!e) {
    return f.why(s.op, "the broadcast pass is not a pointwise expression (" + pw.why() + ")");
  }
  const auto residual_ops = residual_operands(f, s, residuals);
  if (!residual_ops) {
    return std::nullopt;
  }
  const std::string map = fmt::format("kb_map{}", s.k);
  const int so = s.si + 1;
  code.ops_math = map_struct(map, "", *e);
  code.launch = fmt::format(
      "    {{ // kernel {0}: the chain's value broadcast to the larger result\n{1}"
      "      rc = kb::chain::broadcast_map<{2}>(a, kb::chain::dense(buf[{3}], s[{4}], rank[{4}]), "
      "kb::chain::dense(buf[{0}], s[{5}], rank[{5}]), {6});\n"
      "      if (rc != 0) {{\n        return rc;\n      }}\n    }}\n",
      s.k, *residual_ops, map, s.k - 1, s.si, so, residual_ops->empty() ? "ops" : "rops");
  code.rule = "broadcast+" + pw.ops();
  return code;
}

// A second convolution of a chain that a convolution begins (kernel k): the chain's value
// convolved with the module's weight (an operand of the call) under the node's hyperparameters,
// a bias in its epilogue.
std::optional<chain_step_code> conv_step(fused_frame& f, const chain_step& s,
                                         chain_step_code code) {
  const graph& g = f.g;
  const node& n = s.n;
  std::string bad;
  const auto p = conv_params_of(n, &bad);
  if (!p) {
    return f.why(s.op, bad);
  }
  const size_t nd = static_cast<size_t>(p->rank) + 2;
  const state_tensor* w =
      n.inputs.size() > 1 && n.inputs[1].is_tensor() ? state_of(g, n.inputs[1].value) : nullptr;
  if (w == nullptr || w->shape.size() != nd || !task::is_floating(w->type)) {
    return f.why(s.op, fmt::format("a weight that is not floating-point module state of rank {}",
                                   nd));
  }
  if (code.in_shape.size() != nd || code.out_shape.size() != nd) {
    return f.why(s.op, fmt::format("an input of rank {} for a {}-D convolution (batched inputs "
                                   "only)",
                                   code.in_shape.size(), p->rank));
  }
  const int wi = f.operand(w->value);
  std::string body;
  std::string main_leaf = "v";
  const bool has_bias = n.inputs.size() > 2 && n.inputs[2].is_tensor();
  if (has_bias != n.attr("bias").boolean().value_or(false)) {
    return f.why(s.op, "bias=True without the module's bias tensor in the graph");
  }
  if (has_bias) {
    const auto bias = f.state_operand(n, 2);
    if (!bias) {
      return f.why(s.op, "a bias that is not floating-point module state");
    }
    body = fmt::format("    const A kb_v = v + kb::epi::at<A>(ops, {}, channel);\n", *bias);
    main_leaf = "kb_v";
  }
  if (!later_anchor_epilogue(f, s, code, false, body, main_leaf, "channel")) {
    return std::nullopt;
  }
  std::string config = fmt::format("      auto c = p.conv_config(cfg, {});\n"
                                   "      c.rank = {};\n      c.transposed = {};\n",
                                   wi, p->rank, p->transposed ? 1 : 0);
  for (int d = 0; d < p->rank; ++d) {
    const auto at = static_cast<size_t>(d);
    config += fmt::format("      c.stride[{0}] = {1};\n      c.padding[{0}] = {2};\n"
                          "      c.dilation[{0}] = {3};\n      c.output_padding[{0}] = {4};\n",
                          d, p->stride.at(at), p->padding.at(at), p->dilation.at(at),
                          p->transposed ? p->output_padding.at(at) : 0);
  }
  later_anchor_blocks(code, s.k, s.ks.main->rule, s.si, config);
  return code;
}

// A second product of the chain (kernel k): the chain's value times the product's second operand
// (an operand of the call, epilogue<j>), a Linear's bias in its epilogue.
std::optional<chain_step_code> product_step(fused_frame& f, const chain_step& s,
                                            chain_step_code code) {
  const graph& g = f.g;
  const node& n = s.n;
  if (n.inputs.size() < 2 || !n.inputs[1].is_tensor()) {
    return f.why(s.op, "a product without a tensor second operand");
  }
  const state_tensor* tb = transposed_state(g, n.inputs[1].value);
  const std::string bvalue = tb != nullptr ? tb->value : n.inputs[1].value;
  const auto leaf = leaf_of(g, bvalue, f.chain_input);
  if (!leaf || leaf->base != bvalue || !task::is_floating(leaf->type) ||
      (n.op != "torch.matmul" && leaf->shape.size() != 2)) {
    return f.why(s.op, "a second operand that is not a floating-point input or module state (2-D "
                       "for nn.Linear and torch.mm)");
  }
  const bool trans_b = n.op == "nn.Linear" || tb != nullptr;
  const int b = f.operand(bvalue);
  const std::string index = code.out_shape.size() == 2 ? "n" : "";
  std::string body;
  std::string main_leaf = "acc";
  if (n.op == "nn.Linear" && n.inputs.size() > 2 && n.inputs[2].is_tensor()) {
    const auto bias = f.state_operand(n, 2);
    if (!bias || index.empty()) {
      return f.why(s.op, "a Linear's bias that is not module state over a 2-D output");
    }
    body = fmt::format("    const A kb_acc = acc + kb::epi::at<A>(ops, {}, n);\n", *bias);
    main_leaf = "kb_acc";
  }
  if (!later_anchor_epilogue(f, s, code, true, body, main_leaf, index)) {
    return std::nullopt;
  }
  later_anchor_blocks(code, s.k, s.ks.main->rule, s.si,
                      fmt::format("      const auto c = p.config(cfg, {}, {});\n", b,
                                  trans_b ? 1 : 0));
  return code;
}

std::optional<chain_step_code> lower_chain_step(fused_frame& f, size_t k) {
  const kernel_steps& ks = f.kernels[k];
  const node* n = f.g.producer(ks.main->value);
  const std::string op = ks.main->ops.front();
  if (n == nullptr || n->inputs.empty()) {
    return f.why(op, "a step without its node");
  }
  chain_step_code code;
  code.in_shape = n->inputs[0].shape;
  const std::string& before = k == 0 ? f.chain_input : f.kernels[k - 1].value;
  for (const auto& i : n->inputs) { // the chain's value (an elementwise op may read it second)
    if (i.is_tensor() && i.value == before) {
      code.in_shape = i.shape;
      break;
    }
  }
  for (const auto& o : n->outputs) {
    if (o.value == ks.main->value) {
      code.out_shape = o.shape;
    }
  }
  const chain_step s{k,
                     ks,
                     *n,
                     op,
                     ks.main->rule.substr(ks.main->rule.find(':') + 1),
                     code.in_shape.size(),
                     static_cast<int>(2 * k) - 1};
  if (ks.main->kind == fuse_kind::expand) {
    return expand_code(f, s, std::move(code));
  }
  if (ks.main->kind == fuse_kind::anchor) { // a later product or convolution
    const bool product = product_anchor(n->op);
    if (f.gemm && product) {
      return product_step(f, s, std::move(code));
    }
    if (!f.gemm && starts_with(n->op, "nn.Conv")) {
      return conv_step(f, s, std::move(code));
    }
    return f.why(op, "a " + std::string(product ? "product" : "convolution") + " after a " +
                         f.p.anchor +
                         ": a chain runs a later anchor with the first one's strategy, a "
                         "product after a product and a convolution after a convolution");
  }
  std::optional<step_family> fam;
  if (ks.main->kind == fuse_kind::reduce) {
    fam = reduce_family(f, s);
  } else if (ks.main->kind == fuse_kind::softmax) {
    fam = softmax_family(f, s);
  } else if (ks.main->kind == fuse_kind::norm) {
    fam = norm_family(f, s);
  } else if (ks.main->kind == fuse_kind::pool) {
    fam = pool_family(f, s);
  } else {
    return f.why(op, "a step the chain does not lower");
  }
  if (!fam) {
    return std::nullopt;
  }
  const auto e = epilogue_of_step(f, s, code.out_shape, fam->affine);
  if (!e) {
    return std::nullopt;
  }
  const bool mapped = !fam->affine.empty() || e->post.find("kb::epi::at") != std::string::npos;
  code.ops_math = step_ops_math(s, *fam, *e, mapped);
  const auto residual_ops =
      residual_operands(f, s, ks.epilogue != nullptr ? ks.epilogue->residuals : no_residuals);
  if (!residual_ops) {
    return std::nullopt;
  }
  code.launch = step_launch(s, *fam, mapped, *residual_ops, f.gemm ? "cfg.a" : "cfg.x");
  std::string name = s.rule;
  if (fam->reduce_name == "mean" && ks.main->kind == fuse_kind::pool) {
    name += "(mean)";
  }
  code.rule = name + (e->post_ops.empty() || e->post_ops == "identity" ? "" : "+" + e->post_ops);
  return code;
}

// A tensor of the call the chain's dims are read from.
struct shape_source {
  std::string tensor; // C++ for the kb_tensor
  std::string index;  // C++ for its input index, "" for the output
  std::vector<std::string> shape;
};

// The chain's input (the anchor's, or the first pass's) and the anchor's weight (or b), the
// operands and the output.
std::vector<shape_source> shape_sources(const fused_frame& f, const std::string& xi,
                                        const std::string& wi) {
  const graph& g = f.g;
  const auto shape_of_value = [&](const std::string& v) -> std::vector<std::string> {
    if (const state_tensor* st = state_of(g, v)) {
      return st->shape;
    }
    for (const auto& i : g.inputs) {
      if (i.value == v) {
        return i.shape;
      }
    }
    return {};
  };
  std::vector<shape_source> sources;
  sources.push_back({"a->inputs[" + xi + "]", xi, shape_of_value(f.chain_input)});
  const state_tensor* tb = transposed_state(g, f.anchor->inputs[1].value);
  sources.push_back({"a->inputs[" + wi + "]", wi,
                     shape_of_value(tb != nullptr ? tb->value : f.anchor->inputs[1].value)});
  for (size_t k = 0; k < f.operands.size(); ++k) {
    const std::string idx = fmt::format("cfg.epi[{}]", k);
    sources.push_back({"a->inputs[" + idx + "]", idx, shape_of_value(f.operands[k])});
  }
  sources.push_back({"a->outputs[0]", "", g.outputs[0].shape});
  return sources;
}

// kb_chain::shapes' body: `bind` reads the dims the shapes need from the tensors of the call,
// `fill` computes every shape; `ranks` are the shapes' ranks.
struct shape_binding {
  std::string bind;
  std::string fill;
  std::vector<std::string> ranks;
};

std::optional<shape_binding> bind_shapes(const fused_frame& f,
                                         const std::vector<std::vector<std::string>>& shapes,
                                         const std::vector<shape_source>& sources) {
  std::set<std::string> needed;
  std::vector<std::vector<std::string>> exprs;
  for (const auto& sh : shapes) {
    std::vector<std::string> row;
    for (const auto& d : sh) {
      const auto ce = dim_expr(d, &needed);
      if (!ce) {
        return f.why(f.p.anchor, "a shape expression the chain cannot evaluate: " + d);
      }
      row.push_back(*ce);
    }
    if (row.empty() || row.size() > 8) {
      return f.why(f.p.anchor, "an intermediate of rank 0 or above 8");
    }
    exprs.push_back(row);
  }
  shape_binding out;
  std::set<std::string> bound;
  for (const auto& src : sources) {
    std::string lines;
    for (size_t d = 0; d < src.shape.size(); ++d) {
      const std::string& name = src.shape[d];
      if (is_name(name) && needed.count(name) != 0 && bound.insert(name).second) {
        lines += fmt::format("    const int64_t kb_d_{} = {}.shape[{}];\n", name, src.tensor, d);
      }
    }
    if (lines.empty()) {
      continue;
    }
    const std::string valid =
        src.index.empty() ? "a->num_outputs >= 1"
                          : fmt::format("{0} >= 0 && {0} < a->num_inputs", src.index);
    out.bind += fmt::format("    if (!({}) || {}.ndim != {}) {{\n      return -1;\n    }}\n{}",
                            valid, src.tensor, src.shape.size(), lines);
  }
  for (const auto& name : needed) {
    if (bound.count(name) == 0) {
      return f.why(f.p.anchor, "the dim " + name +
                                   " of an intermediate is not read from a tensor "
                                   "of the call");
    }
  }
  for (size_t i = 0; i < exprs.size(); ++i) {
    out.ranks.push_back(std::to_string(exprs[i].size()));
    for (size_t d = 0; d < exprs[i].size(); ++d) {
      out.fill += fmt::format("    s[{}][{}] = {};\n", i, d, exprs[i][d]);
    }
  }
  return out;
}

// The anchor's call in kb_chain (`aa`), its lines indented by `pad`: the call itself, or, when
// passes over the forward's input come before it (kernel P > 0), the call with input `xi`
// replaced by the tensor at `data` of shape 2P-1 (buffer P-1).
std::string anchor_args(size_t P, const std::string& xi, const std::string& data,
                        const std::string& pad) {
  if (P == 0) {
    return pad + "kb_args aa = *a;\n";
  }
  return fmt::format("{3}const kb::chain::input_swap in(a, {0}, kb::chain::dense({1}, s[{2}], "
                     "rank[{2}]));\n"
                     "{3}if (!in.ok) {{\n{3}  return -1;\n{3}}}\n"
                     "{3}kb_args aa = in.args;\n",
                     xi, data, 2 * P - 1, pad);
}

// The chain's code (kb_chain) over `count` shapes bound by `b`: the passes over the input
// (`pre_launches`, kernels before P), the anchor (kernel P) into buffer P, then the steps'
// `launches`.
std::string chain_code(size_t K, size_t P, size_t count, const shape_binding& b,
                       const std::string& xi, const std::string& pre_launches,
                       const std::string& launches, const std::string& workspaces,
                       const std::string& anchor_call) {
  return fmt::format(
      R"(
#if defined(__CUDACC__)
#include <kblaster/device/chain.cuh>

// The plan's kernels in order: kernel 0 from the call's input into buffer 0, kernel k from
// buffer k-1 into buffer k, the last into the output; the anchor is kernel {P}. Buffers 0..{K1}
// are in the workspace, then the anchor's own.
struct kb_chain {{
  static constexpr int kernels = {K};
  static constexpr int count = {S};
  static constexpr int rank[count] = {{{ranks}}};

  // The shapes: 0 kernel 0's output; for kernel k >= 1, 2k-1 its input, 2k its output.
  template <class C> static int shapes(const kb_args* a, const C& cfg, int64_t (*s)[KB_MAX_DIMS]) {{
{bind}{fill}    for (int i = 0; i < count; ++i) {{
      for (int d = 0; d < rank[i]; ++d) {{
        if (s[i][d] <= 0) {{
          return -1;
        }}
      }}
    }}
    for (int k = 1; k < kernels; ++k) {{ // a view between kernels moves no data
      if (kb::chain::count(s[2 * k - 2], rank[2 * k - 2]) != kb::chain::count(s[2 * k - 1], rank[2 * k - 1])) {{
        return -1;
      }}
    }}
    return kb::chain::count(s[count - 1], rank[count - 1]) == kb::numel(a->outputs[0]) ? 0 : -1;
  }}

  template <class C, class F>
  static int prepare(const kb_args* a, const C& cfg, F family, int64_t (*s)[KB_MAX_DIMS],
                     uint64_t* offsets, uint64_t* anchor_bytes, uint64_t* total) {{
    if (a->num_outputs < 1) {{
      return -1;
    }}
    int rc = shapes(a, cfg, s);
    if (rc != 0) {{
      return rc;
    }}
    uint64_t at = 0;
    for (int k = 0; k + 1 < kernels; ++k) {{
      offsets[k] = at;
      at += kb::chain::round_up(static_cast<uint64_t>(kb::chain::count(s[2 * k], rank[2 * k])) * sizeof(float));
    }}
    kb_tensor y0 = kb::chain::dense(nullptr, s[{SO}], rank[{SO}]);
{prepare_args}    aa.num_outputs = 1;
    aa.outputs = &y0;
    aa.workspace = nullptr;
    aa.workspace_bytes = 0;
    *anchor_bytes = 0;
    rc = family.template workspace<kb_op>(&aa, cfg, anchor_bytes);
    if (rc != 0) {{
      return rc;
    }}
{workspaces}    offsets[kernels - 1] = at;
    *total = at + *anchor_bytes;
    return 0;
  }}

  template <class C, class F>
  static int workspace_bytes(const kb_args* a, const C& cfg, F family, uint64_t* bytes) {{
    int64_t s[count][KB_MAX_DIMS];
    uint64_t offsets[kernels];
    uint64_t anchor_bytes = 0;
    return prepare(a, cfg, family, s, offsets, &anchor_bytes, bytes);
  }}

  template <class C, class F>
  static int launch(const kb_args* a, const C& cfg, F family) {{
    int64_t s[count][KB_MAX_DIMS];
    uint64_t offsets[kernels];
    uint64_t anchor_bytes = 0;
    uint64_t total = 0;
    int rc = prepare(a, cfg, family, s, offsets, &anchor_bytes, &total);
    if (rc != 0) {{
      return rc;
    }}
    if ({xi} < 0 || {xi} >= a->num_inputs || a->inputs[{xi}].dtype != KB_FLOAT32 ||
        !kb::chain::dense_float(a->outputs[0]) || (total > 0 && (a->workspace == nullptr || a->workspace_bytes < total))) {{
      return -1;
    }}
    kb::epi::operands ops;
    if (!kb::epi::operands_of(a, cfg.epi, &ops)) {{
      return -1;
    }}
    char* base = static_cast<char*>(a->workspace);
    void* buf[kernels];
    for (int k = 0; k + 1 < kernels; ++k) {{
      buf[k] = base + offsets[k];
    }}
    buf[kernels - 1] = a->outputs[0].data;
{pre_launches}    {{ // kernel {P}: the anchor and its epilogue in the output tile
      kb_tensor y = kb::chain::dense(buf[{P}], s[{SO}], rank[{SO}]);
{launch_args}      aa.num_outputs = 1;
      aa.outputs = &y;
      aa.workspace = anchor_bytes > 0 ? base + offsets[kernels - 1] : nullptr;
      aa.workspace_bytes = anchor_bytes;
{anchor_call}      if (rc != 0) {{
        return rc;
      }}
    }}
{launches}    return 0;
  }}
}};
#endif
)",
      fmt::arg("K1", K - 2), fmt::arg("K", K), fmt::arg("S", count), fmt::arg("P", P),
      fmt::arg("SO", 2 * P), fmt::arg("prepare_args", anchor_args(P, xi, "nullptr", "    ")),
      fmt::arg("launch_args",
               anchor_args(P, xi, P > 0 ? fmt::format("buf[{}]", P - 1) : "", "      ")),
      fmt::arg("pre_launches", pre_launches),
      fmt::arg("ranks", fmt::join(b.ranks, ", ")), fmt::arg("bind", b.bind),
      fmt::arg("fill", b.fill), fmt::arg("xi", xi), fmt::arg("launches", launches),
      fmt::arg("workspaces", workspaces), fmt::arg("anchor_call", anchor_call));
}

} // namespace

std::optional<lowering> fused_lowering(const rule_context& ctx) {
  const graph expanded = expand_attention(ctx.g); // the plan's values are the expanded graph's
  const graph& g = expanded;
  const fusion_plan p = plan_expanded(g);
  if (p.anchor.empty()) {
    return std::nullopt; // no anchor: the other rules say why
  }
  const refusal why{ctx};
  if (!p.ok()) {
    const auto& i = p.problems.front();
    return why(i.op, "fusion plan: " + to_string(i.why) + " (" + i.detail + ")");
  }
  auto kernels = kernels_of(p, why);
  if (!kernels) {
    return std::nullopt;
  }
  // The anchor: the first product or convolution, kernel P (after the passes over the forward's
  // input that come before it).
  const auto anchor_step = std::find_if(p.steps.begin(), p.steps.end(),
                                        [](const fuse_step& s) { return s.kind == fuse_kind::anchor; });
  const node* anchor = g.producer(anchor_step->value);
  const size_t P = static_cast<size_t>(anchor_step->kernel);
  const bool gemm = product_anchor(p.anchor);
  const bool conv = starts_with(p.anchor, "nn.Conv");
  if (!gemm && !conv) {
    return why(p.anchor, "a fused chain on " + p.anchor +
                             ": the matmul family's epilogue takes "
                             "Linear and 2-D products, conv's the convolutions");
  }
  if (P > 0 && gemm) {
    return why(p.anchor, "a product after a pass over the forward's input (the matmul family "
                         "reads its operands as the call gives them)");
  }
  const node* first_pass = P > 0 ? g.producer((*kernels)[0].main->value) : nullptr;
  const std::string chain_input =
      first_pass != nullptr ? first_pass->inputs.at(0).value : anchor->inputs[0].value;
  fused_frame f{g, p, why, std::move(*kernels), anchor, gemm, chain_input, {}};
  f.first = P;
  if (p.anchor == "nn.Linear" && anchor->inputs.size() > 2 && anchor->inputs[2].is_tensor()) {
    f.operand(anchor->inputs[2].value); // the Linear's bias: operand 0
  }
  for (const auto& k : f.kernels) {
    for (const fuse_step* st : {k.main, k.epilogue}) { // an expand step reads operands too
      if (st != nullptr) {
        for (const auto& o : st->operands) {
          f.operand(o);
        }
      }
    }
  }
  auto anchor_code = lower_anchor(ctx, f);
  if (!anchor_code) {
    return std::nullopt;
  }
  lowering l = std::move(anchor_code->l);
  const std::string& anchor_math = anchor_code->math;
  // A map pass after the anchor makes a chain of one kernel.
  const bool chained = p.kernels > 1 || !anchor_code->map_launch.empty();
  if (!chained) {
    if (!assign_operand_roles(f, l)) {
      return std::nullopt;
    }
    l.math = fused_header(l.rule, fmt::format("The fused chain after the {} in its output tile's "
                                              "epilogue; operands by input role epilogue<k>.",
                                              p.anchor)) +
             anchor_math;
    return l;
  }

  // The kernels other than the anchor's. Shapes: 0 kernel 0's output; for kernel k >= 1, 2k-1
  // its input and 2k its output.
  std::vector<std::vector<std::string>> shapes;
  std::string ops_math;     // the steps' family ops and the elementwise maps
  std::string pre_launches; // kb_chain::launch's body before the anchor
  std::string launches = anchor_code->map_launch; // kb_chain::launch's body after the anchor
  std::string workspaces; // the later products' workspace needs, in kb_chain::prepare
  std::vector<std::string> pre_rules;
  std::vector<std::string> step_rules;
  if (!anchor_code->map_ops.empty()) {
    step_rules.push_back(anchor_code->map_ops);
  }
  for (size_t k = 0; k < f.kernels.size(); ++k) {
    if (k == P) {
      if (k > 0) {
        shapes.push_back(anchor->inputs[0].shape);
      }
      shapes.push_back(anchor->outputs[0].shape);
      continue;
    }
    const auto step = lower_chain_step(f, k);
    if (!step) {
      return std::nullopt;
    }
    if (k > 0) {
      shapes.push_back(step->in_shape);
    }
    shapes.push_back(step->out_shape);
    ops_math += step->ops_math;
    (k < P ? pre_launches : launches) += step->launch;
    workspaces += step->workspace;
    (k < P ? pre_rules : step_rules).push_back(step->rule);
  }
  if (!assign_operand_roles(f, l)) {
    return std::nullopt;
  }
  // The dims the shapes read, bound from the tensors of the call.
  const std::string xi = gemm ? "cfg.a" : "cfg.x";
  const std::string wi = gemm ? "cfg.b" : "cfg.weight";
  const auto binding = bind_shapes(f, shapes, shape_sources(f, xi, wi));
  if (!binding) {
    return std::nullopt;
  }
  const size_t K = f.kernels.size();
  // An attention's scale, 1 / sqrt of Q's last dim, is the shape's: kernel 0 runs the anchor's
  // strategy with it in the config.
  const bool runtime_scale =
      anchor->attr("attention").boolean().value_or(false) && anchor->attr("scale").is_none();
  const std::string anchor_call =
      runtime_scale ? "      C c0 = cfg;\n"
                      "      c0.alpha = cfg.alpha / ::sqrt(static_cast<double>(a->inputs[cfg.a].shape[a->inputs[cfg.a].ndim - 1]));\n"
                      "      rc = family.template launch<kb_op>(&aa, c0);\n"
                    : "      rc = family.template launch<kb_op>(&aa, cfg);\n";
  const std::string chain_math = chain_code(K, P, shapes.size(), *binding, xi, pre_launches,
                                            launches, workspaces, anchor_call);
  // The passes before the anchor precede its name, each followed by '>': "conv:avg3d>conv3d|...".
  const std::string pre = pre_rules.empty() ? "" : fmt::format("{}>", fmt::join(pre_rules, ">"));
  l.rule.insert(l.rule.find(':') + 1, pre);
  if (!step_rules.empty()) {
    l.rule += "|" + fmt::format("{}", fmt::join(step_rules, "|"));
  }
  const std::string passes =
      pre_rules.empty() ? "" : fmt::format("{} over the call's input, then ", fmt::join(pre_rules, ", "));
  const std::string after = step_rules.empty()
                                ? " into the output"
                                : fmt::format(" into the workspace, then {}", fmt::join(step_rules, ", "));
  l.math = fused_header(l.rule,
                        fmt::format("A chain of {} kernels: {}the {} with its epilogue in the "
                                    "output tile{} (kblaster/device/chain.cuh); "
                                    "operands by input role epilogue<k>.",
                                    K, passes, p.anchor, after)) +
           "#include <kblaster/device/online_softmax.cuh>\n" + anchor_math + ops_math + chain_math;
  return l;
}

} // namespace kb::graph
