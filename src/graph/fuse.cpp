#include "graph/fuse.hpp"

#include "graph/pointwise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace kb::graph {

using nlohmann::json;

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

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

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
  if (starts_with(n.op, "nn.BatchNorm")) {
    // Eval mode with running statistics: a per-channel affine map.
    return n.attr("track_running_stats").boolean().value_or(true);
  }
  return ops.count(n.op) != 0;
}

bool is_view(const std::string& op) {
  return op == "torch.reshape" || op == "torch.flatten" || op == "torch.squeeze" ||
         op == "torch.unsqueeze";
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
  if (module == "LayerNorm") {
    return split_kind{fuse_kind::norm, "norm:layer_norm", fuse_reason::norm_needs_statistics};
  }
  if (starts_with(module, "InstanceNorm")) {
    return split_kind{fuse_kind::norm, "norm:instance_norm", fuse_reason::norm_needs_statistics};
  }
  if (starts_with(module, "BatchNorm")) { // without running statistics: batch statistics
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
// (a channel, or a GEMM's column), one value, or neither (nullopt).
enum class broadcast { channel, one };

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

// How a leaf read by node `reader` broadcasts: a BatchNorm's state is per channel (axis 1) by
// definition, whatever its own rank; other operands broadcast as PyTorch aligns them (right).
std::optional<broadcast> broadcast_for(const node& reader, const std::vector<std::string>& leaf,
                                       const std::vector<std::string>& main) {
  if (starts_with(reader.op, "nn.BatchNorm") && main.size() >= 2) {
    if (leaf.empty()) {
      return broadcast::one;
    }
    return leaf.size() == 1 && leaf[0] == main[1] ? std::optional<broadcast>(broadcast::channel)
                                                  : std::nullopt;
  }
  return broadcast_of(leaf, main);
}

// Nodes that read `value`, by index.
std::vector<size_t> readers(const graph& g, const std::string& value) {
  std::vector<size_t> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].inputs) {
      if (o.is_tensor() && o.value == value) {
        out.push_back(i);
        break;
      }
    }
  }
  return out;
}

} // namespace

fusion_plan plan_fusion(const graph& g) {
  fusion_plan p;
  const auto problem = [&](plan_issue why, const std::string& op, const std::string& detail) {
    p.problems.push_back({why, op.empty() ? "graph" : op, detail});
    p.steps.clear();
    p.kernels = 0;
    return p;
  };
  for (const auto& i : validate(g)) {
    if (i.why == reason::unknown_op) {
      return problem(plan_issue::unknown_op, i.op, "not an op the graph knows");
    }
    return problem(plan_issue::invalid_graph, i.op, describe(i));
  }
  if (g.outputs.size() != 1 || !g.outputs[0].is_tensor()) {
    return problem(plan_issue::several_outputs, "graph",
                   fmt::format("the forward returns {} values; a plan ends in one tensor",
                               g.outputs.size()));
  }
  size_t a = 0;
  while (a < g.nodes.size() && !anchor_rule(g.nodes[a].op)) {
    ++a;
  }
  if (a == g.nodes.size()) {
    return problem(plan_issue::no_anchor, "graph",
                   "no nn.Linear, matmul or convolution begins the chain");
  }
  const node& anchor = g.nodes[a];
  if (a != 0 || anchor.inputs.empty() || !anchor.inputs[0].is_tensor() ||
      g.producer(anchor.inputs[0].value) != nullptr) {
    return problem(plan_issue::before_anchor, a != 0 ? g.nodes[0].op : anchor.op,
                   "the anchor must read the forward's input as it is");
  }
  const std::string chain_input = anchor.inputs[0].value;
  p.anchor = anchor.op;
  fuse_step first;
  first.kind = fuse_kind::anchor;
  first.rule = *anchor_rule(anchor.op);
  first.ops = {anchor.op};
  first.value = anchor.outputs.at(0).value;
  p.steps.push_back(first);
  int kernel = 0;
  std::set<std::string> region{first.value}; // the chain's values since the last kernel began
  std::string main = first.value;            // the chain's latest value
  std::vector<std::string> main_shape = anchor.outputs[0].shape;

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

  for (size_t i = a + 1; i < g.nodes.size(); ++i) {
    const node& n = g.nodes[i];
    std::vector<std::string> chain_reads;
    std::vector<leaf_info> leaves;
    bool other = false;
    for (const auto& o : n.inputs) {
      if (!o.is_tensor()) {
        continue;
      }
      if (region.count(o.value) != 0) {
        chain_reads.push_back(o.value);
      } else if (const auto l = leaf_of(g, o.value, chain_input)) {
        leaves.push_back(*l);
      } else {
        other = true;
      }
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
                     "reads a value of the chain from before its kernel (a residual across a "
                     "kernel boundary) or of another path");
    }
    if (is_pointwise(n)) {
      std::vector<std::string> operands;
      for (const auto& l : leaves) {
        if (!broadcast_for(n, l.shape, main_shape)) {
          return problem(plan_issue::operand_not_broadcast, n.op,
                         fmt::format("{} of shape [{}] over the chain's [{}]: neither per channel "
                                     "nor one value",
                                     l.base, fmt::join(l.shape, ", "), fmt::join(main_shape, ", ")));
        }
        if (task::is_floating(l.type)) {
          operands.push_back(l.base);
        }
      }
      if (n.outputs.size() != 1 || n.outputs[0].shape != main_shape) {
        return problem(plan_issue::operand_not_broadcast, n.op,
                       "an elementwise op whose result is not of the chain's shape");
      }
      if (p.steps.back().kind != fuse_kind::epilogue) {
        fuse_step s;
        s.kind = fuse_kind::epilogue;
        s.rule = "epilogue:pointwise";
        s.edge = fuse_edge::fused;
        s.why = fuse_reason::pointwise_in_tile;
        s.kernel = kernel;
        p.steps.push_back(s);
      }
      fuse_step& s = p.steps.back();
      s.ops.push_back(n.op);
      for (const auto& o : operands) {
        if (std::find(s.operands.begin(), s.operands.end(), o) == s.operands.end()) {
          s.operands.push_back(o);
        }
      }
      s.value = n.outputs[0].value;
      region.insert(s.value);
      main = s.value;
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
      s.kernel = ++kernel;
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

json to_json(const fusion_plan& p) {
  json j{{"anchor", p.anchor}, {"coverage", p.coverage()}, {"kernels", p.kernels}};
  j["steps"] = json::array();
  for (const auto& s : p.steps) {
    json step{{"kind", to_string(s.kind)}, {"rule", s.rule},           {"ops", s.ops},
              {"edge", to_string(s.edge)}, {"reason", to_string(s.why)}, {"kernel", s.kernel}};
    if (!s.operands.empty()) {
      step["operands"] = s.operands;
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

std::string product_expr(const std::vector<std::string>& shape) {
  std::string out;
  for (const auto& e : shape) {
    out += (out.empty() ? "" : "*") + ("(" + e + ")");
  }
  return out.empty() ? "1" : out;
}

std::string fused_header(const std::string& rule, const std::string& what) {
  return fmt::format("// Generated by kblaster's lowering from the task's graph.json: rule {}.\n"
                     "// {}\n"
                     "#pragma once\n#include <kblaster/device/core.cuh>\n"
                     "#include <kblaster/device/epilogue.cuh>\n"
                     "#include <kblaster/device/lowered.cuh>\n",
                     rule, what);
}

} // namespace

std::optional<lowering> fused_lowering(const rule_context& ctx) {
  const graph& g = ctx.g;
  const fusion_plan p = plan_fusion(g);
  if (p.anchor.empty()) {
    return std::nullopt; // no anchor: the other rules say why
  }
  const auto why = [&](const std::string& op, const std::string& w) {
    ctx.why_not.push_back({reason::no_lowering, op, w});
    return std::nullopt;
  };
  if (!p.ok()) {
    const auto& i = p.problems.front();
    return why(i.op, "fusion plan: " + to_string(i.why) + " (" + i.detail + ")");
  }
  if (p.kernels > 1) {
    const auto second = std::find_if(p.steps.begin(), p.steps.end(),
                                     [](const fuse_step& s) { return s.kernel == 1; });
    std::string chain;
    for (const auto& s : p.steps) {
      chain += (chain.empty() ? "" : s.edge == fuse_edge::fused ? " + " : " | ") + s.rule;
    }
    return why(second->ops.front(),
               fmt::format("fusion plan of {} kernels [{}]: {} starts kernel 2 ({}); a lowered "
                           "task is one kernel",
                           p.kernels, chain, second->rule, to_string(second->why)));
  }
  const node* anchor = g.producer(p.steps.front().value);
  for (const auto& s : p.steps) {
    if (s.kind == fuse_kind::view) {
      return why(s.ops.front(), "a view inside the fused chain (the epilogue indexes the anchor's "
                                "output)");
    }
  }
  const bool gemm = p.anchor == "nn.Linear" || p.anchor == "torch.matmul" || p.anchor == "torch.mm";
  const bool conv = starts_with(p.anchor, "nn.Conv");
  if (!gemm && !conv) {
    return why(p.anchor, "a fused chain on " + p.anchor + ": the matmul family's epilogue takes "
                         "Linear and 2-D products, conv's the convolutions");
  }
  // The epilogue's operands and leaves.
  std::vector<std::string> operands;
  if (p.anchor == "nn.Linear" && anchor->inputs.size() > 2 && anchor->inputs[2].is_tensor()) {
    operands.push_back(anchor->inputs[2].value); // the Linear's bias: operand 0
  }
  if (p.steps.size() > 1) {
    for (const auto& o : p.steps[1].operands) {
      if (std::find(operands.begin(), operands.end(), o) == operands.end()) {
        operands.push_back(o);
      }
    }
  }
  if (operands.size() > 8) {
    return why(p.anchor, fmt::format("{} epilogue operands (at most 8)", operands.size()));
  }
  const std::string index = gemm ? "n" : "channel";
  const std::string acc = gemm ? "acc" : "v";
  const std::vector<std::string>& out_shape = anchor->outputs[0].shape;
  std::map<std::string, std::string> leaves;
  std::string body;
  std::string main_leaf = acc;
  if (p.anchor == "nn.Linear" && !operands.empty() && operands[0] == anchor->inputs[2].value &&
      anchor->inputs.size() > 2) {
    body += "    const A kb_acc = acc + kb::epi::at<A>(ops, 0, n);\n";
    main_leaf = "kb_acc";
  }
  leaves[anchor->outputs[0].value] = main_leaf;
  const std::string chain_input = anchor->inputs[0].value;
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
        leaves[o.value] = "A(0)"; // a BatchNorm's num_batches_tracked: not read in eval mode
        continue;
      }
      const auto k = std::find(operands.begin(), operands.end(), l->base) - operands.begin();
      const auto b = broadcast_for(n, l->shape, out_shape);
      if (static_cast<size_t>(k) == operands.size() || !b) {
        continue;
      }
      if (state_of(g, l->base) == nullptr) {
        return why(n.op, "an epilogue operand that is a forward input (" + l->base +
                             "): operands are module state");
      }
      leaves[o.value] = fmt::format("kb::epi::at<A>(ops, {}, {})", k,
                                    *b == broadcast::channel ? index : "0");
    }
  }
  detail::pointwise pw(g, leaves, out_shape);
  const auto e = pw.of(g.outputs[0].value);
  if (!e) {
    return why(p.steps.size() > 1 ? p.steps[1].ops.front() : p.anchor,
               "the fused epilogue is not a pointwise expression (" + pw.why() + ")");
  }
  std::optional<lowering> base;
  if (conv) {
    base = conv_lowering(ctx, *anchor);
    if (!base) {
      return std::nullopt; // conv_lowering said why
    }
  } else {
    // The product: x [M, K] (a forward input) times the weight transposed (Linear) or b.
    const auto rank2 = [&](const std::string& v) {
      for (const auto& in : g.inputs) {
        if (in.value == v && !in.scalar) {
          return in.shape.size() == 2 && task::is_floating(in.type);
        }
      }
      const state_tensor* s = state_of(g, v);
      return s != nullptr && s->shape.size() == 2 && task::is_floating(s->type);
    };
    if (anchor->inputs.size() < 2 || !anchor->inputs[1].is_tensor() ||
        !rank2(anchor->inputs[0].value) || !rank2(anchor->inputs[1].value)) {
      return why(p.anchor, "operands that are not 2-D floating-point inputs or module state (the "
                           "fused product takes x [M, K] times a matrix)");
    }
    lowering l;
    l.fam = task::family::matmul;
    l.roles[anchor->inputs[0].value] = "a";
    l.roles[anchor->inputs[1].value] = "b";
    task::matmul_params mp;
    mp.trans_b = p.anchor == "nn.Linear"; // the weight is [out, in]
    l.params = [mp](task::contract& c) { c.matmul = mp; };
    const auto& xs = anchor->inputs[0].shape;
    l.flops = fmt::format("2*{}*({})", product_expr(out_shape), xs.back());
    base = l;
  }
  lowering l = *base;
  const std::string anchor_name = p.steps.front().rule.substr(std::string("anchor:").size());
  const std::string ops = pw.ops();
  l.rule = fmt::format("{}:{}{}", gemm ? "matmul" : "conv", anchor_name,
                       ops == "identity" ? "" : "+" + ops);
  for (size_t k = 0; k < operands.size(); ++k) {
    l.roles[operands[k]] = fmt::format("epilogue{}", k);
  }
  const std::string sig = gemm ? "A acc, int64_t m, int64_t n, const kb::epi::operands& ops"
                               : "A v, int64_t channel, const kb::epi::operands& ops";
  const std::string unused = gemm ? "    (void)m;\n    (void)n;\n    (void)ops;\n"
                                  : "    (void)channel;\n    (void)ops;\n";
  l.math = fused_header(l.rule, fmt::format("The fused chain after the {} in its output tile's "
                                            "epilogue; operands by input role epilogue<k>.",
                                            p.anchor)) +
           "\ntemplate <class A> struct kb_op {\n  static KB_HD A epilogue(" + sig + ") {\n" +
           unused + body + "    return " + *e + ";\n  }\n};\n";
  return l;
}

} // namespace kb::graph
