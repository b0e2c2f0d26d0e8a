// The forward of an imported PyTorch module as a typed op graph (`<task>/graph.json`, written by
// `kblaster tasks import` from scripts/kernelbench_parse.py's reading of the problem file). Each
// node names its op canonically (torch.sigmoid, torch.nn.functional.leaky_relu, nn.LayerNorm,
// torch.matmul...), its input and output values with their shapes (expressions over the task's
// dims) and dtypes, and its attributes with PyTorch's defaults made explicit. This header holds
// the typed graph, its one JSON mapping and its validation: a graph that cannot be lowered says
// why with a typed reason (an unknown op, a shape that depends on values, an in-place update,
// mixed floating-point dtypes, a malformed file). The lowering (lower.hpp) reads only this.
#pragma once

#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kb::graph {

namespace fs = std::filesystem;

// Why a graph (or a node of it) cannot be lowered. Stable names (to_string) go into records.
enum class reason {
  unknown_op,    // an op, method or module the graph does not know
  dynamic_shape, // a shape that is not an expression over the task's dims
  inplace,       // an in-place update (x.relu_(), inplace=True, x += ...)
  mixed_dtype,   // one op over floating-point tensors of different dtypes
  construct,     // a statement that is not a straight line of calls (if, for, ...)
  malformed,     // not a graph of this version: missing fields, undefined values
  no_lowering,   // a valid graph no lowering rule covers (a convolution, a pooling ...)
};
std::string to_string(reason r);
std::optional<reason> reason_from_string(const std::string& s);

struct issue {
  reason why = reason::malformed;
  std::string op; // the op it concerns ("nn.Conv2d"), or "" for the graph as a whole
  std::string detail;
};
std::string describe(const issue& i); // "nn.Conv2d: no_lowering (a convolution ...)"

// An attribute's value: none, a boolean, an integer, a number, a string or a list of them.
struct attr_value {
  using list = std::vector<attr_value>;
  std::variant<std::monostate, bool, int64_t, double, std::string, list> v;

  bool is_none() const { return std::holds_alternative<std::monostate>(v); }
  // Numbers (integers and floating point) as double; nullopt for anything else.
  std::optional<double> number() const;
  std::optional<int64_t> integer() const;
  std::optional<std::string> text() const;
  std::optional<bool> boolean() const;
  // An integer or a list of integers as a list; nullopt otherwise.
  std::optional<std::vector<int64_t>> integers() const;
};

// One operand of a node: a value (a graph input, module state or an earlier node's output) with
// its shape and dtype, or a number.
struct operand {
  std::string value;               // empty for a constant
  std::optional<double> constant;  // a number written in the forward
  std::vector<std::string> shape;  // dim expressions; [] for a 0-d tensor
  task::dtype type = task::dtype::float32;
  bool is_tensor() const { return !value.empty(); }
};

struct node {
  std::string op; // canonical name
  std::vector<operand> inputs;
  std::vector<operand> outputs;
  std::map<std::string, attr_value> attrs;
  std::string module; // self.<module> that ran it, when one did

  const attr_value& attr(const std::string& name) const; // none when absent
};

struct input {
  std::string value; // the forward's argument name
  bool scalar = false;
  double scalar_value = 0;        // scalar inputs
  std::vector<std::string> shape; // tensor inputs
  task::dtype type = task::dtype::float32;
};

// A tensor of the module's state (a parameter or buffer), named as the task's state inputs are
// (state_<module>_<name>; docs/task-format.md).
struct state_tensor {
  std::string value;
  std::string module;
  std::string name;
  std::vector<std::string> shape;
  task::dtype type = task::dtype::float32;
};

// Dims that broadcasting took as equal: two different expressions whose values were equal at the
// import's dims (PyTorch aligns trailing axes: targets [N] against predictions [N, M] need
// M == N), or one that was 1 there (`dims` = {expr, "1"}). validate() checks each at a shape.
struct dim_equality {
  std::string op;                // the op that broadcast them
  std::vector<std::string> dims; // two dim expressions
  std::string detail;            // "torch.mul: broadcasting [N, M] against [N]"
};

struct graph {
  int version = 1;
  std::vector<input> inputs;
  std::vector<state_tensor> state;
  std::vector<node> nodes;
  std::vector<operand> outputs;
  std::vector<issue> unsupported; // what the reader could not follow (recorded, not fatal here)
  std::vector<dim_equality> equal_dims; // JSON key "equal_dims", absent when empty

  // The node whose outputs include `value`, or nullptr (inputs and state).
  const node* producer(const std::string& value) const;
  // How many node inputs and graph outputs read `value`.
  int uses(const std::string& value) const;
  // The canonical op names of the nodes, in order.
  std::vector<std::string> ops() const;
};

// The canonical ops a graph may name (the reader's table in scripts/kernelbench_parse.py).
bool known_op(const std::string& op);

// The one JSON mapping. from_json never throws: a document that is not a graph of this version
// gives issues with reason `malformed`.
nlohmann::json to_json(const graph& g);

struct loaded {
  std::optional<graph> g;    // absent only when the document is malformed
  std::vector<issue> issues; // empty: the graph may be lowered
  bool ok() const { return g.has_value() && issues.empty(); }
};
loaded from_json(const nlohmann::json& j);
// Reads and validates FILE (reason `malformed` for a file that is missing or not JSON).
loaded load(const fs::path& file);

// Checks a parsed graph: the reader's recorded issues, unknown ops, in-place updates, values used
// before they are defined, floating-point operands of different dtypes and shapes that are not
// expressions over `dims` (when given: the dims of one of the task's shapes), and with `dims`,
// broadcast dims (equal_dims) whose values differ there (reason dynamic_shape).
std::vector<issue> validate(const graph& g, const std::map<std::string, int64_t>* dims = nullptr);

} // namespace kb::graph
