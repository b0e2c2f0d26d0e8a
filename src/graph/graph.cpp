#include "graph/graph.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace kb::graph {

using nlohmann::json;

namespace {

const std::vector<std::pair<reason, const char*>>& reason_names() {
  static const std::vector<std::pair<reason, const char*>> names{
      {reason::unknown_op, "unknown_op"},   {reason::dynamic_shape, "dynamic_shape"},
      {reason::inplace, "inplace"},         {reason::mixed_dtype, "mixed_dtype"},
      {reason::construct, "construct"},     {reason::malformed, "malformed"},
      {reason::no_lowering, "no_lowering"}};
  return names;
}

const std::set<std::string>& known_ops() {
  static const std::set<std::string> ops{
    "nn.AdaptiveAvgPool1d", "nn.AdaptiveAvgPool2d", "nn.AdaptiveAvgPool3d",
    "nn.AdaptiveMaxPool1d", "nn.AdaptiveMaxPool2d", "nn.AdaptiveMaxPool3d",
    "nn.AvgPool1d", "nn.AvgPool2d", "nn.AvgPool3d", "nn.BatchNorm1d", "nn.BatchNorm2d",
    "nn.BatchNorm3d", "nn.Conv1d", "nn.Conv2d", "nn.Conv3d", "nn.ConvTranspose1d",
    "nn.ConvTranspose2d", "nn.ConvTranspose3d", "nn.GroupNorm", "nn.InstanceNorm1d",
    "nn.InstanceNorm2d", "nn.InstanceNorm3d", "nn.LayerNorm", "nn.Linear", "nn.MaxPool1d",
    "nn.MaxPool2d", "nn.MaxPool3d", "nn.RMSNorm", "torch.abs", "torch.add", "torch.amax",
    "torch.amin", "torch.argmax", "torch.argmin", "torch.bmm", "torch.cat", "torch.ceil", "torch.clamp",
    "torch.contiguous", "torch.cos", "torch.cumprod", "torch.cumsum", "torch.diag", "torch.div",
    "torch.einsum", "torch.erf", "torch.erfc", "torch.exp", "torch.exp2", "torch.expm1",
    "torch.flip", "torch.floor", "torch.log", "torch.log1p", "torch.log2", "torch.log_softmax",
    "torch.logsumexp", "torch.matmul", "torch.max", "torch.maximum", "torch.mean", "torch.min",
    "torch.minimum", "torch.mm", "torch.mul", "torch.narrow", "torch.neg", "torch.nn.functional.celu",
    "torch.nn.functional.cosine_similarity", "torch.nn.functional.cross_entropy",
    "torch.nn.functional.dropout", "torch.nn.functional.elu", "torch.nn.functional.gelu",
    "torch.nn.functional.hardsigmoid", "torch.nn.functional.hardswish",
    "torch.nn.functional.hardtanh", "torch.nn.functional.hinge_embedding_loss",
    "torch.nn.functional.huber_loss", "torch.nn.functional.kl_div", "torch.nn.functional.l1_loss",
    "torch.nn.functional.layer_norm", "torch.nn.functional.leaky_relu",
    "torch.nn.functional.logsigmoid", "torch.nn.functional.mish", "torch.nn.functional.mse_loss",
    "torch.nn.functional.normalize", "torch.nn.functional.relu6",
    "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.selu",
    "torch.nn.functional.silu", "torch.nn.functional.smooth_l1_loss",
    "torch.nn.functional.softplus", "torch.nn.functional.softsign",
    "torch.nn.functional.tanhshrink", "torch.nn.functional.threshold",
    "torch.nn.functional.triplet_margin_loss", "torch.norm", "torch.ones_like", "torch.permute",
    "torch.pow", "torch.prod", "torch.reciprocal", "torch.relu", "torch.reshape", "torch.round", "torch.select",
    "torch.rsqrt", "torch.selu", "torch.sigmoid", "torch.sign", "torch.sin", "torch.softmax",
    "torch.sqrt", "torch.square", "torch.std", "torch.sub", "torch.sum", "torch.t", "torch.tanh",
    "torch.transpose", "torch.tril", "torch.triu", "torch.trunc", "torch.var", "torch.where",
    "torch.zeros_like",
  };
  return ops;
}

// Thrown inside from_json only, turned into a `malformed` issue at its edge.
struct malformed_error {
  std::string detail;
};

[[noreturn]] void bad(std::string detail) {
  throw malformed_error{std::move(detail)};
}

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    bad(fmt::format("{}: no field '{}'", where, key));
  }
  return j.at(key);
}

std::string text_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) {
    bad(fmt::format("{}.{}: expected a string", where, key));
  }
  return v.get<std::string>();
}

task::dtype dtype_field(const json& j, const std::string& where) {
  const std::string s = text_field(j, "dtype", where);
  const auto d = task::dtype_from_string(s);
  if (!d) {
    bad(fmt::format("{}.dtype: '{}' is not a dtype", where, s));
  }
  return *d;
}

// A shape: a list of dim expressions; null (the reader could not tell) is a dynamic shape.
std::optional<std::vector<std::string>> shape_field(const json& j, const std::string& where) {
  const json& v = field(j, "shape", where);
  if (v.is_null()) {
    return std::nullopt;
  }
  if (!v.is_array()) {
    bad(where + ".shape: expected a list of dim expressions");
  }
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (e.is_string()) {
      out.push_back(e.get<std::string>());
    } else if (e.is_number_integer()) {
      out.push_back(std::to_string(e.get<int64_t>()));
    } else if (e.is_null()) {
      return std::nullopt;
    } else {
      bad(where + ".shape: expected dim expressions, got " + e.dump());
    }
  }
  return out;
}

attr_value attr_from(const json& j) {
  attr_value a;
  if (j.is_boolean()) {
    a.v = j.get<bool>();
  } else if (j.is_number_integer()) {
    a.v = j.get<int64_t>();
  } else if (j.is_number()) {
    a.v = j.get<double>();
  } else if (j.is_string()) {
    a.v = j.get<std::string>();
  } else if (j.is_array()) {
    attr_value::list l;
    for (const auto& e : j) {
      l.push_back(attr_from(e));
    }
    a.v = std::move(l);
  } else if (j.is_object()) {
    // {"input": i}: the attribute is the node's i-th tensor operand.
    a.v = fmt::format("input:{}", j.value("input", -1));
  }
  return a;
}

json attr_to(const attr_value& a) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, attr_value::list>) {
          json l = json::array();
          for (const auto& e : x) {
            l.push_back(attr_to(e));
          }
          return l;
        } else {
          return x;
        }
      },
      a.v);
}

// An operand; `dynamic` collects the values whose shape the reader could not tell.
operand operand_from(const json& j, const std::string& where, std::vector<std::string>& dynamic) {
  operand o;
  if (j.is_object() && j.contains("const")) {
    const json& c = j.at("const");
    if (!c.is_number()) {
      bad(where + ".const: expected a number, got " + c.dump());
    }
    o.constant = c.get<double>();
    return o;
  }
  o.value = text_field(j, "value", where);
  o.type = dtype_field(j, where);
  auto s = shape_field(j, where);
  if (s) {
    o.shape = *s;
  } else {
    dynamic.push_back(o.value);
  }
  return o;
}

json operand_to(const operand& o) {
  if (!o.is_tensor()) {
    return {{"const", o.constant.value_or(0.0)}};
  }
  return {{"value", o.value}, {"shape", o.shape}, {"dtype", task::to_string(o.type)}};
}

graph parse(const json& j, std::vector<issue>& issues) {
  graph g;
  if (!j.is_object()) {
    bad("the graph is not a JSON object");
  }
  const json& version = field(j, "version", "graph");
  if (!version.is_number_integer() || version.get<int>() != 1) {
    bad("graph.version: expected 1, got " + version.dump());
  }
  std::vector<std::string> dynamic;
  for (const auto& key : {"inputs", "state", "nodes", "outputs", "unsupported"}) {
    if (!field(j, key, "graph").is_array()) {
      bad(fmt::format("graph.{}: expected a list", key));
    }
  }
  size_t i = 0;
  for (const auto& e : j.at("inputs")) {
    const std::string where = fmt::format("inputs[{}]", i++);
    input in;
    in.value = text_field(e, "value", where);
    const std::string kind = text_field(e, "kind", where);
    if (kind == "scalar") {
      in.scalar = true;
      const json& v = field(e, "scalar", where);
      if (!v.is_number()) {
        bad(where + ".scalar: expected a number");
      }
      in.scalar_value = v.get<double>();
    } else if (kind == "tensor") {
      in.type = dtype_field(e, where);
      auto s = shape_field(e, where);
      if (!s) {
        dynamic.push_back(in.value);
      } else {
        in.shape = *s;
      }
    } else {
      bad(where + ".kind: expected tensor or scalar, got " + kind);
    }
    g.inputs.push_back(std::move(in));
  }
  i = 0;
  for (const auto& e : j.at("state")) {
    const std::string where = fmt::format("state[{}]", i++);
    state_tensor s;
    s.value = text_field(e, "value", where);
    s.module = text_field(e, "module", where);
    s.name = text_field(e, "name", where);
    s.type = dtype_field(e, where);
    auto shape = shape_field(e, where);
    if (!shape) {
      dynamic.push_back(s.value);
    } else {
      s.shape = *shape;
    }
    g.state.push_back(std::move(s));
  }
  i = 0;
  for (const auto& e : j.at("nodes")) {
    const std::string where = fmt::format("nodes[{}]", i++);
    node n;
    n.op = text_field(e, "op", where);
    for (const auto& [key, list] :
         {std::pair{"inputs", &n.inputs}, std::pair{"outputs", &n.outputs}}) {
      const json& arr = field(e, key, where);
      if (!arr.is_array()) {
        bad(fmt::format("{}.{}: expected a list", where, key));
      }
      for (size_t k = 0; k < arr.size(); ++k) {
        list->push_back(operand_from(arr[k], fmt::format("{}.{}[{}]", where, key, k), dynamic));
      }
    }
    if (e.contains("attrs")) {
      if (!e.at("attrs").is_object()) {
        bad(where + ".attrs: expected an object");
      }
      for (const auto& [k, v] : e.at("attrs").items()) {
        n.attrs[k] = attr_from(v);
      }
    }
    if (e.contains("module") && e.at("module").is_string()) {
      n.module = e.at("module").get<std::string>();
    }
    g.nodes.push_back(std::move(n));
  }
  i = 0;
  for (const auto& e : j.at("outputs")) {
    g.outputs.push_back(operand_from(e, fmt::format("outputs[{}]", i++), dynamic));
  }
  i = 0;
  for (const auto& e : j.at("unsupported")) {
    const std::string where = fmt::format("unsupported[{}]", i++);
    issue is;
    const std::string r = text_field(e, "reason", where);
    const auto why = reason_from_string(r);
    is.why = why.value_or(reason::malformed);
    is.op = e.value("op", std::string());
    is.detail = e.value("detail", std::string());
    if (!why) {
      is.detail = "reason '" + r + "': " + is.detail;
    }
    g.unsupported.push_back(std::move(is));
  }
  if (j.contains("equal_dims")) {
    if (!j.at("equal_dims").is_array()) {
      bad("graph.equal_dims: expected a list");
    }
    i = 0;
    for (const auto& e : j.at("equal_dims")) {
      const std::string where = fmt::format("equal_dims[{}]", i++);
      dim_equality d;
      d.op = text_field(e, "op", where);
      d.detail = e.value("detail", std::string());
      const json& ds = field(e, "dims", where);
      if (!ds.is_array() || ds.size() != 2 || !ds[0].is_string() || !ds[1].is_string()) {
        bad(where + ".dims: expected two dim expressions");
      }
      d.dims = {ds[0].get<std::string>(), ds[1].get<std::string>()};
      g.equal_dims.push_back(std::move(d));
    }
  }
  for (const auto& v : dynamic) {
    issues.push_back({reason::dynamic_shape, "", "the shape of " + v + " is not known statically"});
  }
  return g;
}

} // namespace

std::string to_string(reason r) {
  for (const auto& [k, name] : reason_names()) {
    if (k == r) {
      return name;
    }
  }
  return "malformed";
}

std::optional<reason> reason_from_string(const std::string& s) {
  for (const auto& [k, name] : reason_names()) {
    if (s == name) {
      return k;
    }
  }
  return std::nullopt;
}

std::string describe(const issue& i) {
  std::string out = i.op.empty() ? to_string(i.why) : i.op + ": " + to_string(i.why);
  if (!i.detail.empty()) {
    out += " (" + i.detail + ")";
  }
  return out;
}

std::optional<double> attr_value::number() const {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return static_cast<double>(*i);
  }
  if (const auto* d = std::get_if<double>(&v)) {
    return *d;
  }
  return std::nullopt;
}

std::optional<int64_t> attr_value::integer() const {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return *i;
  }
  return std::nullopt;
}

std::optional<std::string> attr_value::text() const {
  if (const auto* s = std::get_if<std::string>(&v)) {
    return *s;
  }
  return std::nullopt;
}

std::optional<bool> attr_value::boolean() const {
  if (const auto* b = std::get_if<bool>(&v)) {
    return *b;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> attr_value::integers() const {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return std::vector<int64_t>{*i};
  }
  if (const auto* l = std::get_if<list>(&v)) {
    std::vector<int64_t> out;
    for (const auto& e : *l) {
      const auto x = e.integer();
      if (!x) {
        return std::nullopt;
      }
      out.push_back(*x);
    }
    return out;
  }
  return std::nullopt;
}

const attr_value& node::attr(const std::string& name) const {
  static const attr_value none;
  const auto it = attrs.find(name);
  return it == attrs.end() ? none : it->second;
}

const node* graph::producer(const std::string& value) const {
  for (const auto& n : nodes) {
    for (const auto& o : n.outputs) {
      if (o.value == value) {
        return &n;
      }
    }
  }
  return nullptr;
}

int graph::uses(const std::string& value) const {
  int n = 0;
  for (const auto& nd : nodes) {
    for (const auto& i : nd.inputs) {
      n += i.value == value ? 1 : 0;
    }
  }
  for (const auto& o : outputs) {
    n += o.value == value ? 1 : 0;
  }
  return n;
}

std::vector<std::string> graph::ops() const {
  std::vector<std::string> out;
  for (const auto& n : nodes) {
    out.push_back(n.op);
  }
  return out;
}

bool known_op(const std::string& op) {
  return known_ops().count(op) != 0;
}

json to_json(const graph& g) {
  json j{{"version", g.version},
         {"inputs", json::array()},
         {"state", json::array()},
         {"nodes", json::array()},
         {"outputs", json::array()},
         {"unsupported", json::array()}};
  for (const auto& in : g.inputs) {
    if (in.scalar) {
      j["inputs"].push_back({{"value", in.value}, {"kind", "scalar"}, {"scalar", in.scalar_value}});
    } else {
      j["inputs"].push_back({{"value", in.value},
                             {"kind", "tensor"},
                             {"shape", in.shape},
                             {"dtype", task::to_string(in.type)}});
    }
  }
  for (const auto& s : g.state) {
    j["state"].push_back({{"value", s.value},
                          {"module", s.module},
                          {"name", s.name},
                          {"shape", s.shape},
                          {"dtype", task::to_string(s.type)}});
  }
  for (const auto& n : g.nodes) {
    json nj{{"op", n.op}, {"inputs", json::array()}, {"outputs", json::array()}, {"attrs", json::object()}};
    for (const auto& o : n.inputs) {
      nj["inputs"].push_back(operand_to(o));
    }
    for (const auto& o : n.outputs) {
      nj["outputs"].push_back(operand_to(o));
    }
    for (const auto& [k, v] : n.attrs) {
      nj["attrs"][k] = attr_to(v);
    }
    if (!n.module.empty()) {
      nj["module"] = n.module;
    }
    j["nodes"].push_back(nj);
  }
  for (const auto& o : g.outputs) {
    j["outputs"].push_back(operand_to(o));
  }
  for (const auto& u : g.unsupported) {
    j["unsupported"].push_back({{"op", u.op}, {"reason", to_string(u.why)}, {"detail", u.detail}});
  }
  for (const auto& d : g.equal_dims) {
    j["equal_dims"].push_back({{"op", d.op}, {"dims", d.dims}, {"detail", d.detail}});
  }
  return j;
}

loaded from_json(const json& j) {
  loaded out;
  try {
    std::vector<issue> shape_issues;
    out.g = parse(j, shape_issues);
    out.issues = validate(*out.g);
    out.issues.insert(out.issues.end(), shape_issues.begin(), shape_issues.end());
  } catch (const malformed_error& e) {
    out.g.reset();
    out.issues = {{reason::malformed, "", e.detail}};
  } catch (const json::exception& e) {
    out.g.reset();
    out.issues = {{reason::malformed, "", e.what()}};
  }
  return out;
}

loaded load(const fs::path& file) {
  if (!fs::is_regular_file(file)) {
    return {std::nullopt, {{reason::malformed, "", file.string() + " does not exist"}}};
  }
  json j;
  try {
    j = json::parse(read_file(file));
  } catch (const json::exception& e) {
    return {std::nullopt, {{reason::malformed, "", file.string() + " is not JSON: " + e.what()}}};
  }
  auto out = from_json(j);
  for (auto& i : out.issues) {
    if (i.why == reason::malformed && i.op.empty()) {
      i.detail = file.string() + ": " + i.detail;
    }
  }
  return out;
}

std::vector<issue> validate(const graph& g, const std::map<std::string, int64_t>* dims) {
  std::vector<issue> out = g.unsupported;
  std::set<std::string> defined;
  const auto check_shape = [&](const std::vector<std::string>& shape, const std::string& op,
                               const std::string& what) {
    if (dims == nullptr) {
      return;
    }
    for (const auto& e : shape) {
      try {
        task::eval_expr(e, *dims);
      } catch (const input_error& err) {
        out.push_back({reason::dynamic_shape, op,
                       fmt::format("{}: '{}' is not an expression over the task's dims ({})", what,
                                   e, err.what())});
        return;
      }
    }
  };
  for (const auto& in : g.inputs) {
    if (!defined.insert(in.value).second) {
      out.push_back({reason::malformed, "", "input " + in.value + " defined twice"});
    }
    check_shape(in.shape, "", "input " + in.value);
  }
  for (const auto& s : g.state) {
    if (!defined.insert(s.value).second) {
      out.push_back({reason::malformed, "", "state " + s.value + " defined twice"});
    }
  }
  for (const auto& n : g.nodes) {
    if (!known_op(n.op)) {
      out.push_back({reason::unknown_op, n.op, "not an op the graph knows"});
    }
    if (n.attr("inplace").boolean().value_or(false) ||
        (!n.op.empty() && n.op.back() == '_' && n.op.size() > 1 && n.op[n.op.size() - 2] != '_')) {
      out.push_back({reason::inplace, n.op, "an in-place update of its input"});
    }
    std::set<task::dtype> floats;
    for (const auto& i : n.inputs) {
      if (!i.is_tensor()) {
        continue;
      }
      if (!defined.count(i.value)) {
        out.push_back({reason::malformed, n.op, "reads " + i.value + " before it is defined"});
      }
      if (task::is_floating(i.type) && n.op.rfind("nn.", 0) != 0) {
        floats.insert(i.type);
      }
    }
    if (floats.size() > 1) {
      std::string names;
      for (const auto d : floats) {
        names += (names.empty() ? "" : ", ") + task::to_string(d);
      }
      out.push_back({reason::mixed_dtype, n.op, "floating-point operands of " + names});
    }
    if (n.outputs.empty()) {
      out.push_back({reason::malformed, n.op, "a node without outputs"});
    }
    for (const auto& o : n.outputs) {
      if (!defined.insert(o.value).second) {
        out.push_back({reason::malformed, n.op, "defines " + o.value + " twice"});
      }
      check_shape(o.shape, n.op, "output " + o.value);
    }
  }
  for (const auto& d : g.equal_dims) {
    if (dims == nullptr || d.dims.size() != 2) {
      continue;
    }
    int64_t v[2] = {0, 0};
    try {
      v[0] = task::eval_expr(d.dims[0], *dims);
      v[1] = task::eval_expr(d.dims[1], *dims);
    } catch (const input_error& err) {
      out.push_back({reason::dynamic_shape, d.op,
                     fmt::format("{}: '{}' or '{}' is not an expression over the task's dims ({})",
                                 d.detail, d.dims[0], d.dims[1], err.what())});
      continue;
    }
    if (v[0] != v[1]) {
      out.push_back({reason::dynamic_shape, d.op,
                     fmt::format("{} needs {} == {} (here {} and {})", d.detail, d.dims[0],
                                 d.dims[1], v[0], v[1])});
    }
  }
  if (g.outputs.empty() && g.unsupported.empty()) {
    out.push_back({reason::malformed, "", "the graph has no outputs"});
  }
  for (const auto& o : g.outputs) {
    if (o.is_tensor() && !defined.count(o.value)) {
      out.push_back({reason::malformed, "", "output " + o.value + " is not defined"});
    }
  }
  return out;
}

} // namespace kb::graph
