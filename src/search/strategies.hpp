// The built-in proposer's strategy library: generic, parameterized kernels per op family
// (include/kblaster/device/strategies/*.cuh), each described here with the shape features it is
// for, its parameter space and its default point, and a generator that turns (task, strategy,
// parameter values) into a complete candidate source. The generated source binds the task's math
// (KB_TASK_MATH) and its family configuration to the strategy's template; shapes, strides and
// dtypes still arrive at run time, so one candidate serves every shape of the task.
#pragma once

#include "profile/profile.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kb::search {

// What a strategy's applicability and defaults look at: a task at one shape.
struct shape_features {
  task::family fam = task::family::elementwise;
  task::dtype storage = task::dtype::float32; // of x (of a for matmul)
  bool supported_dtypes = false;              // every tensor in a dtype the strategies instantiate
  int64_t elements = 0;                       // of x (of the output for matmul)
  // normalize, reduce, loss: x viewed as [outer, extent, inner]; a row is one (outer, inner) pair.
  int64_t outer = 0;
  int64_t extent = 0;
  int64_t inner = 0;
  // normalize with channel rows (a batch norm): [outer, extent, inner] with the kept axes in the
  // middle; a row is one position of the extent, reduced over every (outer, inner) pair.
  bool channel_rows = false;
  bool has_weight = false;
  bool has_bias = false;
  bool pointwise = false; // loss: the target is a floating-point tensor of x's shape
  // pool: x viewed as [outer planes, extent = the pooled dims' elements]; the spatial rank, the
  // elements of a window and whether neighbouring windows overlap (a stride below the kernel's
  // extent along some dim, so a shared-memory tile reuses inputs).
  int pool_rank = 0;
  int64_t window = 0;
  bool overlapping = false;
  // matmul: C (m x n) = A (m x k) @ B (k x n). conv: the implicit GEMM of one group
  // (m = batch x output positions, n = output channels per group, k = input channels per group x
  // kernel volume). The matmul forms: per batch (a batched A times an unbatched B folds its
  // batches into m, task::matmul_shape_of); diag: diag(a) @ B, a row scaling (m = k).
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  bool diag = false;
  int64_t groups = 0;      // conv; normalize: channel groups, rows of one group (a group norm)
  bool transposed = false; // conv

  int64_t rows() const { return outer * inner; }
  int64_t row_bytes() const { return extent * static_cast<int64_t>(task::dtype_size(storage)); }
};

shape_features features_of(const task::contract& c, const task::shape_case& s);

// Whether the task is a lowered chain of kernels (the fusion planner's plans of several kernels,
// rule "<family>:[<pass>>...]<anchor>[+ops]|<step>[+ops]|...", passes over the forward's input
// before the anchor each followed by '>'): the strategy runs the anchor, the task's math
// (kb_chain) the kernels around it. Features are then the anchor's (its output, not the task's).
bool chained(const task::contract& c);
// Whether a chained task runs a later product or convolution with the anchor's strategy (a step
// after the first named linear, matmul, mm, conv<n>d or conv_transpose<n>d). The anchor's features
// do not describe that product: a conv chain with one is offered every conv strategy that takes
// the anchor's dtypes, and the search times them.
bool later_products(const task::contract& c);

// One tunable parameter: its discrete values (integers, or names of an enumeration).
struct param_axis {
  std::string name;
  std::vector<nlohmann::json> values;
  std::string description;
  std::string cpp_enum; // for named values: the C++ enumeration they belong to
};

struct strategy {
  std::string name; // "<family>.<idea>", e.g. "normalize.block_row"
  task::family fam = task::family::elementwise;
  std::string description; // what the kernel does, one sentence
  std::string applies_to;  // the shape features it is for, in words
  std::string rationale;   // what it changes against the baseline and why it should help
  std::function<bool(const shape_features&)> fits; // the shape test behind applies_to
  std::vector<param_axis> space;
  nlohmann::json defaults; // a point of the space (every axis named)
  std::string header;      // include path of the template
  std::string entry;       // the class template, instantiated as entry<kb_op, params>
  bool has_workspace = false;

  const param_axis& axis(const std::string& name) const;
  uint64_t space_size() const;
};

// Every strategy of the library, in a stable order.
const std::vector<strategy>& all_strategies();

// By name; kb::input_error naming the known strategies when there is none.
const strategy& find_strategy(const std::string& name);

// Whether the strategy is offered for the task at the shape (family, dtypes and shape features;
// for a conv chain with later convolutions, family and dtypes).
bool applies(const strategy& st, const task::contract& c, const task::shape_case& s);

// The strategies offered for the task at its official shape, in library order.
std::vector<const strategy*> strategies_for(const task::contract& c);

// The full parameter point: `params` (an object of axis name to value, possibly partial) completed
// with the defaults. kb::input_error for an unknown axis or a value outside the axis.
nlohmann::json resolve_params(const strategy& st, const nlohmann::json& params);

// "normalize.block_row block=512 vector_bytes=16 cache=registers items_per_thread=16"
std::string candidate_info(const strategy& st, const nlohmann::json& params);

// The complete candidate source: includes KB_TASK_MATH and the strategy's header, defines the
// task's kb_family_config and the parameter struct, and exports kb_launch, kb_workspace_bytes and
// kb_candidate_info. Throws kb::input_error when the strategy belongs to another family or the
// parameters are invalid.
std::string generate(const task::contract& c, const strategy& st, const nlohmann::json& params);

// Points for covering the space cheaply: the default, every axis at its first and last value with
// the others at their defaults, and all axes at their first and at their last values
// (deduplicated).
std::vector<nlohmann::json> corner_points(const strategy& st);

// The bottleneck states a strategy addresses: what its change against the baseline relieves
// (metadata beside the library, by strategy name; a strategy not listed addresses `unknown`
// only). The search ranks strategies that address the current state first among equals.
std::vector<profile::state> addressed_states(const strategy& st);
bool addresses(const strategy& st, profile::state s);

} // namespace kb::search
