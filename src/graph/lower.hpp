// The lowering: an imported PyTorch task (kind = "pytorch") whose forward is a typed op graph
// (graph.hpp) gets a lowered view of its contract, the family, reduced axes, input roles and
// generated math a native task.toml of that family would give, so that the search's strategies
// (src/search/strategies.cpp) apply to it unchanged. The reference and the baseline stay
// PyTorch's (the module in float64, eager in the task's dtype); only the candidates come from the
// family. Each lowering is a rule: a pattern over the graph with a stable name
// ("elementwise:sigmoid", "normalize:layernorm", "matmul:mm") recorded in contract::lowering,
// and the math it generates is written under the task folder (<task>/lowered/math.cuh) and
// covered by the lowered contract's digest. A graph no rule covers says which ops and why.
#pragma once

#include "graph/graph.hpp"
#include "task/task.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::graph {

// What a rule produces: the family's fields of the contract and the math header's text.
struct lowering {
  std::string rule; // stable name, "<family>:<pattern>"
  task::family fam = task::family::elementwise;
  std::vector<int> reduce_dims;
  bool channel_rows = false; // normalize: rows of the kept axes (a batch norm), contract::channel_rows
  int groups = 0; // normalize: channel groups (a group norm, an affine instance norm), contract::groups
  std::map<std::string, std::string> roles; // contract input name -> family role
  std::string math;                         // the generated header (kb_op)
  std::string flops;                        // FLOP count expression over the dims ("" unknown)
  // Sets the family's typed parameters on the lowered contract (contract::pool, ::scan,
  // ::argreduce, ::matmul for the families that have them); empty for families that need none.
  std::function<void(task::contract&)> params;
};

// The result of lowering one task: a lowering, or the issues that stop it (each naming its op).
struct outcome {
  std::optional<lowering> low;
  std::vector<issue> issues;
  bool ok() const { return low.has_value(); }
  // The ops the issues name, deduplicated in order ("nn.Conv2d"); "graph" for whole-graph ones.
  std::vector<std::string> unsupported_ops() const;
  // One line: "nn.Conv2d: no_lowering (a convolution ...); ...".
  std::string message() const;
};

// A lowering rule: nullopt when its pattern does not match the graph; a lowering when it does; a
// rule that recognises the pattern but cannot lower it (a norm other than p = 1, 2, "fro") adds an
// issue saying why and returns nullopt.
struct rule_context {
  const graph& g;
  const task::contract& c;
  std::vector<issue>& why_not;
};
struct rule {
  std::string name; // the family and pattern it covers, for listings
  std::function<std::optional<lowering>(const rule_context&)> match;
};
// Every rule, in the order they are tried (the first match wins).
const std::vector<rule>& rules();
// The rules onto pool, scan, argreduce, conv and the matmul forms (lower_families.cpp), which
// set the contract's family parameters; rules() tries them first.
std::vector<rule> family_rules();
// The conv family's lowering of one nn.ConvNd / nn.ConvTransposeNd node of the graph (its [conv]
// table, roles x, weight and bias, an identity epilogue): conv_rule's for a one-node graph, the
// fusion planner's anchor (fuse.hpp) for a chain. `x_input`, when given, is the forward input
// that takes role x where the node reads a value a pass over that input computes (a chain that
// pools its input before the convolution); the [conv] table and the flops are the node's own.
std::optional<lowering> conv_lowering(const rule_context& ctx, const node& conv,
                                      const std::string& x_input = "");

// The [conv] table's hyperparameters of an nn.ConvNd / nn.ConvTransposeNd node: rank,
// transposed, stride, padding, dilation, output padding and groups (channels and kernel sizes are
// the caller's, from the tensors); nullopt with the reason in `why_not` for a form the conv family
// does not take (padding_mode other than zeros, padding='same', sizes that are not ints).
std::optional<task::conv_params> conv_params_of(const node& n, std::string* why_not);

// The [pool] table of an nn.MaxPoolNd / nn.AvgPoolNd node of spatial rank `rank` (1-3): kernel,
// stride, padding, dilation, ceil_mode, count_include_pad, divisor_override; nullopt with the
// reason in `why_not` for a form the pool family does not take (return_indices, bad sizes).
std::optional<task::pool_params> pool_params_of(const node& n, int rank, std::string* why_not);

// Picks the rule for a validated graph of contract `c` (pure: writes nothing).
outcome lower(const graph& g, const task::contract& c);

// The lowered contract: `c` with the lowering's family fields, the outputs and module state the
// graph gives where the task is not described yet, its math written to <task>/lowered/math.cuh,
// the roofline recomputed from its tensors and a digest that covers the math and the rule.
task::contract apply(const task::contract& c, const graph& g, const lowering& l);

// The whole step for one task: reads <task>/graph.json, validates it against the task's shapes,
// lowers and applies. A task that is not a pytorch task, or has no graph.json, is returned as it
// is (has_graph false). A task that cannot be lowered comes back unlowered with
// contract::not_lowered naming the unsupported ops. Writes <task>/lowered/lowering.json (the
// rule or the issues) either way.
struct lowered_task {
  task::contract c;
  bool has_graph = false;
  outcome result;
};
lowered_task lower_task(const task::contract& c);

} // namespace kb::graph
