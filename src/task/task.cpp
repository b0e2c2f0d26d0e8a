#include "task/task.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"

#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>
#include <string_view>

namespace kb::task {

std::string to_string(dtype d) {
  switch (d) {
  case dtype::float32:
    return "float32";
  case dtype::float16:
    return "float16";
  case dtype::bfloat16:
    return "bfloat16";
  case dtype::float64:
    return "float64";
  case dtype::int64:
    return "int64";
  case dtype::int32:
    return "int32";
  }
  return "?";
}

std::optional<dtype> dtype_from_string(const std::string& s) {
  for (dtype d : {dtype::float32, dtype::float16, dtype::bfloat16, dtype::float64, dtype::int64,
                  dtype::int32}) {
    if (to_string(d) == s) {
      return d;
    }
  }
  return std::nullopt;
}

size_t dtype_size(dtype d) {
  switch (d) {
  case dtype::float16:
  case dtype::bfloat16:
    return 2;
  case dtype::float32:
  case dtype::int32:
    return 4;
  case dtype::float64:
  case dtype::int64:
    return 8;
  }
  return 0;
}

bool is_floating(dtype d) {
  return d != dtype::int64 && d != dtype::int32;
}

int abi_dtype(dtype d) {
  switch (d) {
  case dtype::float32:
    return 0;
  case dtype::float16:
    return 1;
  case dtype::bfloat16:
    return 2;
  case dtype::float64:
    return 3;
  case dtype::int64:
    return 4;
  case dtype::int32:
    return 5;
  }
  return -1;
}

std::string to_string(family f) {
  switch (f) {
  case family::elementwise:
    return "elementwise";
  case family::normalize:
    return "normalize";
  case family::reduce:
    return "reduce";
  case family::loss:
    return "loss";
  case family::matmul:
    return "matmul";
  }
  return "?";
}

std::optional<family> family_from_string(const std::string& s) {
  for (family f :
       {family::elementwise, family::normalize, family::reduce, family::loss, family::matmul}) {
    if (to_string(f) == s) {
      return f;
    }
  }
  return std::nullopt;
}

std::string to_string(task_kind k) {
  return k == task_kind::pytorch ? "pytorch" : "native";
}

std::string to_string(const distribution& d) {
  return d.label;
}

int64_t concrete_tensor::numel() const {
  int64_t n = 1;
  for (int64_t e : shape) {
    n *= e;
  }
  return n;
}

uint64_t concrete_tensor::bytes() const {
  return static_cast<uint64_t>(numel()) * dtype_size(type);
}

// ---------------------------------------------------------------------------------------------
// Shape expressions: integers, dim names, + - * / and parentheses; 64-bit, overflow is an error.

namespace {

class expr_parser {
public:
  expr_parser(const std::string& text, const std::map<std::string, int64_t>& dims)
      : m_text(text), m_dims(dims) {}

  int64_t parse() {
    const int64_t v = sum();
    skip();
    if (m_pos != m_text.size()) {
      error("unexpected '" + std::string(1, m_text[m_pos]) + "'");
    }
    return v;
  }

private:
  [[noreturn]] void error(const std::string& what) const {
    fail_input("expression \"{}\": {} at column {}", m_text, what, m_pos + 1);
  }
  void skip() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) {
      ++m_pos;
    }
  }
  int64_t sum() {
    int64_t v = product();
    while (true) {
      skip();
      if (m_pos < m_text.size() && (m_text[m_pos] == '+' || m_text[m_pos] == '-')) {
        const char op = m_text[m_pos++];
        const int64_t r = product();
        if (op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v)) {
          error("overflow");
        }
      } else {
        return v;
      }
    }
  }
  int64_t product() {
    int64_t v = atom();
    while (true) {
      skip();
      if (m_pos < m_text.size() && (m_text[m_pos] == '*' || m_text[m_pos] == '/')) {
        const char op = m_text[m_pos++];
        const int64_t r = atom();
        if (op == '*') {
          if (__builtin_mul_overflow(v, r, &v)) {
            error("overflow");
          }
        } else {
          if (r == 0) {
            error("division by zero");
          }
          v /= r;
        }
      } else {
        return v;
      }
    }
  }
  int64_t atom() {
    skip();
    if (m_pos >= m_text.size()) {
      error("unexpected end");
    }
    const char c = m_text[m_pos];
    if (c == '(') {
      ++m_pos;
      const int64_t v = sum();
      skip();
      if (m_pos >= m_text.size() || m_text[m_pos] != ')') {
        error("expected ')'");
      }
      ++m_pos;
      return v;
    }
    if (c == '-') {
      ++m_pos;
      return -atom();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos]))) {
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, m_text[m_pos] - '0', &v)) {
          error("overflow");
        }
        ++m_pos;
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = m_pos;
      while (m_pos < m_text.size() &&
             (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '_')) {
        ++m_pos;
      }
      const std::string name = m_text.substr(start, m_pos - start);
      const auto it = m_dims.find(name);
      if (it == m_dims.end()) {
        m_pos = start;
        error("unknown dim '" + name + "'");
      }
      return it->second;
    }
    error("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& m_text;
  const std::map<std::string, int64_t>& m_dims;
  size_t m_pos = 0;
};

} // namespace

int64_t eval_expr(const std::string& expr, const std::map<std::string, int64_t>& dims) {
  return expr_parser(expr, dims).parse();
}

// ---------------------------------------------------------------------------------------------
// Parsing. Every error names the file, the field and what was expected.

namespace {

class reader {
public:
  explicit reader(fs::path file) : m_file(std::move(file)) {}

  [[noreturn]] void error(const std::string& field, const std::string& expected,
                          const toml::node* node = nullptr) const {
    std::string where = m_file.string();
    if (node != nullptr && node->source().begin.line > 0) {
      where += ":" + std::to_string(node->source().begin.line);
    }
    fail_input("{}: field '{}': expected {}", where, field, expected);
  }

  std::string str(const toml::table& t, const std::string& key, const std::string& path,
                  std::optional<std::string> fallback = {}) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (fallback) {
        return *fallback;
      }
      error(path + key, "a string (required)");
    }
    if (!n->is_string()) {
      error(path + key, "a string", n);
    }
    return std::string(*n->as_string());
  }

  double number(const toml::table& t, const std::string& key, const std::string& path,
                std::optional<double> fallback = {}) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (fallback) {
        return *fallback;
      }
      error(path + key, "a number (required)");
    }
    if (n->is_floating_point()) {
      return n->as_floating_point()->get();
    }
    if (n->is_integer()) {
      return static_cast<double>(n->as_integer()->get());
    }
    error(path + key, "a number", n);
  }

  bool boolean(const toml::table& t, const std::string& key, const std::string& path,
               bool fallback) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      return fallback;
    }
    if (!n->is_boolean()) {
      error(path + key, "true or false", n);
    }
    return n->as_boolean()->get();
  }

  const toml::table& table(const toml::table& t, const std::string& key,
                           const std::string& path) const {
    const toml::node* n = t.get(key);
    if (n == nullptr || !n->is_table()) {
      error(path + key, "a table", n);
    }
    return *n->as_table();
  }

  const toml::array& array(const toml::table& t, const std::string& key, const std::string& path,
                           bool required = true) const {
    static const toml::array empty;
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (!required) {
        return empty;
      }
      error(path + key, "an array (required)");
    }
    if (!n->is_array()) {
      error(path + key, "an array", n);
    }
    return *n->as_array();
  }

  const fs::path& file() const { return m_file; }

private:
  fs::path m_file;
};

distribution parse_distribution(const reader& r, const toml::node& n, const std::string& path) {
  distribution d;
  if (n.is_string()) {
    const std::string s(*n.as_string());
    d.label = s;
    if (s == "uniform01") {
      d = {distribution::kind::uniform, 0, 1, "", s};
    } else if (s == "normal") {
      d = {distribution::kind::normal, 0, 1, "", s};
    } else if (s == "heavy_tailed") {
      d = {distribution::kind::student_t, 3, 1, "", s};
    } else if (s == "ones") {
      d = {distribution::kind::constant, 1, 0, "", s};
    } else if (s == "zeros") {
      d = {distribution::kind::constant, 0, 0, "", s};
    } else {
      r.error(path,
              "\"uniform01\", \"normal\", \"heavy_tailed\", \"ones\", \"zeros\" or a table {kind = "
              "...}",
              &n);
    }
    return d;
  }
  if (!n.is_table()) {
    r.error(path, "a distribution name or table", &n);
  }
  const auto& t = *n.as_table();
  const std::string kind = r.str(t, "kind", path + ".");
  if (kind == "uniform") {
    d.k = distribution::kind::uniform;
    d.a = r.number(t, "low", path + ".");
    d.b = r.number(t, "high", path + ".");
    if (!(d.b > d.a)) {
      r.error(path + ".high", "a value above low", &n);
    }
  } else if (kind == "normal") {
    d.k = distribution::kind::normal;
    d.a = r.number(t, "mean", path + ".", 0.0);
    d.b = r.number(t, "std", path + ".", 1.0);
    if (!(d.b > 0)) {
      r.error(path + ".std", "a positive number", &n);
    }
  } else if (kind == "student_t") {
    d.k = distribution::kind::student_t;
    d.a = r.number(t, "nu", path + ".", 3.0);
    d.b = r.number(t, "scale", path + ".", 1.0);
    if (!(d.a >= 1)) {
      r.error(path + ".nu", "a number >= 1", &n);
    }
  } else if (kind == "constant") {
    d.k = distribution::kind::constant;
    d.a = r.number(t, "value", path + ".");
  } else if (kind == "randint") {
    d.k = distribution::kind::randint;
    d.a = r.number(t, "low", path + ".", 0.0);
    const toml::node* high = t.get("high");
    if (high != nullptr && high->is_string()) {
      d.b_expr = std::string(*high->as_string());
    } else {
      d.b = r.number(t, "high", path + ".");
    }
  } else {
    r.error(path + ".kind", "one of uniform, normal, student_t, constant, randint", &n);
  }
  std::ostringstream label;
  label << kind;
  d.label = label.str() + "(" + [&] {
    std::ostringstream o;
    switch (d.k) {
    case distribution::kind::uniform:
      o << d.a << "," << d.b;
      break;
    case distribution::kind::normal:
      o << d.a << "," << d.b;
      break;
    case distribution::kind::student_t:
      o << "nu=" << d.a << ",scale=" << d.b;
      break;
    case distribution::kind::constant:
      o << d.a;
      break;
    case distribution::kind::randint:
      o << d.a << "," << (d.b_expr.empty() ? std::to_string(static_cast<int64_t>(d.b)) : d.b_expr);
      break;
    }
    return o.str();
  }() + ")";
  return d;
}

tensor_spec parse_tensor(const reader& r, const toml::table& t, const std::string& path,
                         bool is_input) {
  tensor_spec s;
  s.name = r.str(t, "name", path);
  s.role = r.str(t, "role", path, s.name);
  const std::string dt = r.str(t, "dtype", path);
  const auto d = dtype_from_string(dt);
  if (!d) {
    r.error(path + "dtype",
            "one of float32, float16, bfloat16, float64, int64, int32 (got \"" + dt + "\")",
            t.get("dtype"));
  }
  s.type = *d;
  s.layout = r.str(t, "layout", path, std::string("contiguous"));
  if (s.layout != "contiguous") {
    r.error(path + "layout", "\"contiguous\" (the only layout the harness generates)",
            t.get("layout"));
  }
  const auto& shape = r.array(t, "shape", path);
  if (shape.size() > 8) {
    r.error(path + "shape", "at most 8 dims", &shape);
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto& e = shape[i];
    if (e.is_string()) {
      s.shape.emplace_back(*e.as_string());
    } else if (e.is_integer()) {
      s.shape.push_back(std::to_string(e.as_integer()->get()));
    } else {
      r.error(path + "shape[" + std::to_string(i) + "]", "a dim name, an expression or an integer",
              &e);
    }
  }
  if (is_input) {
    const auto& dists = r.array(t, "distributions", path);
    if (dists.empty()) {
      r.error(path + "distributions", "at least one distribution (the official one first)", &dists);
    }
    for (size_t i = 0; i < dists.size(); ++i) {
      s.distributions.push_back(
          parse_distribution(r, dists[i], path + "distributions[" + std::to_string(i) + "]"));
    }
    const bool integer = !is_floating(s.type);
    for (size_t i = 0; i < s.distributions.size(); ++i) {
      const bool randint = s.distributions[i].k == distribution::kind::randint;
      if (integer != randint) {
        r.error(path + "distributions[" + std::to_string(i) + "]",
                integer ? "randint for an integer input"
                        : "a floating-point distribution for a floating-point input",
                &dists[i]);
      }
    }
  }
  return s;
}

// A literal of the contract (a module's init arg) as JSON: numbers, booleans, strings, arrays.
nlohmann::json literal_json(const reader& r, const toml::node& n, const std::string& path) {
  if (n.is_integer()) {
    return n.as_integer()->get();
  }
  if (n.is_floating_point()) {
    return n.as_floating_point()->get();
  }
  if (n.is_boolean()) {
    return n.as_boolean()->get();
  }
  if (n.is_string()) {
    return std::string(*n.as_string());
  }
  if (n.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < n.as_array()->size(); ++i) {
      out.push_back(literal_json(r, (*n.as_array())[i], path + "[" + std::to_string(i) + "]"));
    }
    return out;
  }
  r.error(path, "a number, a boolean, a string or an array of them", &n);
}

// A loss expression of the contract's [loss] table as C++ over the kernels' type A: names are
// x, t (elem) or sum, n, rows (finalize) and the task's params; numbers become A(...); the
// functions exp, log, sqrt, abs, fabs, max, min, tanh, erf map to kb::fn. Anything else is an
// error that names the field.
std::string loss_expression(const reader& r, const std::string& field, const std::string& text,
                            const std::set<std::string>& names) {
  static const std::map<std::string, std::string> functions{
      {"exp", "exp"}, {"log", "log"}, {"sqrt", "sqrt"}, {"abs", "fabs"}, {"fabs", "fabs"},
      {"max", "max"}, {"min", "min"}, {"tanh", "tanh"}, {"erf", "erf"}};
  std::string out;
  size_t i = 0;
  int depth = 0;
  while (i < text.size()) {
    const char ch = text[i];
    if (std::isspace(static_cast<unsigned char>(ch))) {
      out += ' ';
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) {
        ++j;
      }
      const std::string name = text.substr(i, j - i);
      size_t k = j;
      while (k < text.size() && text[k] == ' ') {
        ++k;
      }
      if (k < text.size() && text[k] == '(' && functions.count(name)) {
        out += "kb::fn::" + functions.at(name);
      } else if (names.count(name)) {
        out += name;
      } else {
        r.error(field, "an expression over " + fmt::format("{}", fmt::join(names, ", ")) +
                           " and exp, log, sqrt, abs, max, min, tanh, erf (unknown name '" + name +
                           "' in \"" + text + "\")");
      }
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.') {
      size_t j = i;
      while (j < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' ||
              ((text[j] == 'e' || text[j] == 'E') && j > i) ||
              ((text[j] == '-' || text[j] == '+') && (text[j - 1] == 'e' || text[j - 1] == 'E')))) {
        ++j;
      }
      out += "A(" + text.substr(i, j - i) + ")";
      i = j;
    } else if (std::string_view("+-*/(),<>=!?:&|").find(ch) != std::string_view::npos) {
      depth += ch == '(' ? 1 : (ch == ')' ? -1 : 0);
      if (depth < 0) {
        r.error(field, "balanced parentheses (in \"" + text + "\")");
      }
      out += ch;
      ++i;
    } else {
      r.error(field,
              std::string("an expression; '") + ch + "' is not allowed (in \"" + text + "\")");
    }
  }
  if (depth != 0 || out.find_first_not_of(' ') == std::string::npos) {
    r.error(field, "a non-empty expression with balanced parentheses (got \"" + text + "\")");
  }
  return out;
}

// A pytorch task's resolution (DIR/resolved.json, written by `pytorch_oracle.py describe` from
// the module it runs): the module's state becomes inputs after the forward's, and its outputs
// the contract's outputs, each sized by dims of its own in every shape. A resolution of another
// task.toml or model.py (its digest differs) is ignored: the task is unresolved until described
// again.
void apply_resolution(contract& c) {
  const fs::path file = c.dir / "resolved.json";
  if (!fs::is_regular_file(file) || !c.outputs.empty()) {
    return;
  }
  const std::string expected = sha256_hex(read_file(c.file) + read_file(c.module->source));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: not a resolution written by pytorch_oracle.py describe ({})", file.string(),
               e.what());
  }
  if (j.value("version", 0) != 1 || j.value("digest", std::string()) != expected) {
    return;
  }
  const auto& shapes = j.at("shapes");
  const auto& dists = j.at("state_distributions");
  const auto type_of = [&](const nlohmann::json& t) {
    const auto d = dtype_from_string(t.at("dtype").get<std::string>());
    if (!d) {
      fail_input("{}: dtype {} is not one a kernel can take", file.string(), t.at("dtype").dump());
    }
    return *d;
  };
  try {
    const auto& first = shapes.at(c.official().name);
    const auto& state = first.at("state");
    for (size_t i = 0; i < state.size(); ++i) {
      tensor_spec t;
      t.name = state[i].at("input").get<std::string>();
      t.role = "state";
      t.type = type_of(state[i]);
      for (size_t k = 0; k < state[i].at("shape").size(); ++k) {
        t.shape.push_back(fmt::format("{}_{}", t.name, k));
      }
      const auto& d = dists.at(i);
      distribution dist;
      if (d.at("kind") == "constant") {
        dist.k = distribution::kind::constant;
        dist.a = d.at("value").get<double>();
        dist.b = 0;
      } else {
        dist.a = d.at("low").get<double>();
        dist.b = d.at("high").get<double>();
      }
      dist.label = fmt::format("pytorch_init({})", state[i].at("name").get<std::string>());
      t.distributions = {dist};
      c.inputs.push_back(std::move(t));
    }
    for (size_t i = 0; i < first.at("outputs").size(); ++i) {
      tensor_spec t;
      t.name = fmt::format("out{}", i);
      t.role = "y";
      t.type = type_of(first.at("outputs")[i]);
      for (size_t k = 0; k < first.at("outputs")[i].at("shape").size(); ++k) {
        t.shape.push_back(fmt::format("{}_{}", t.name, k));
      }
      c.outputs.push_back(std::move(t));
    }
    for (auto& s : c.shapes) {
      const auto& r = shapes.at(s.name);
      for (const auto& [key, prefix] : {std::pair{"state", "input"}, std::pair{"outputs", ""}}) {
        for (size_t i = 0; i < r.at(key).size(); ++i) {
          const auto& e = r.at(key)[i];
          const std::string name =
              *prefix ? e.at(prefix).get<std::string>() : fmt::format("out{}", i);
          for (size_t k = 0; k < e.at("shape").size(); ++k) {
            s.dims[fmt::format("{}_{}", name, k)] = e.at("shape")[k].get<int64_t>();
          }
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: not a resolution of this task's shapes ({})", file.string(), e.what());
  }
  c.resolved = true;
}

} // namespace

contract load_contract(const fs::path& task_toml) {
  const reader r(task_toml);
  toml::table root;
  try {
    root = toml::parse_file(task_toml.string());
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}:{}: TOML syntax error: {}", task_toml.string(), e.source().begin.line,
               e.source().begin.column, std::string(e.description()));
  }
  contract c;
  c.file = fs::absolute(task_toml);
  c.dir = c.file.parent_path();
  c.id = r.str(root, "id", "");
  if (c.id.empty() || !std::all_of(c.id.begin(), c.id.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
      })) {
    r.error("id", "a non-empty identifier of letters, digits and '_'", root.get("id"));
  }
  c.name = r.str(root, "name", "");
  c.suite = r.str(root, "suite", "");
  c.title = r.str(root, "title", "", c.name);
  const std::string kind = r.str(root, "kind", "", std::string("native"));
  if (kind == "pytorch") {
    c.kind = task_kind::pytorch;
  } else if (kind != "native") {
    r.error("kind", "native or pytorch (got \"" + kind + "\")", root.get("kind"));
  }
  const std::string fam = c.kind == task_kind::native ? r.str(root, "family", "") : "";
  if (c.kind == task_kind::native) {
    const auto f = family_from_string(fam);
    if (!f) {
      r.error("family", "one of elementwise, normalize, reduce, loss, matmul (got \"" + fam + "\")",
              root.get("family"));
    }
    c.fam = *f;
  }
  c.pytorch = r.str(root, "pytorch", "", std::string());
  if (c.kind == task_kind::native && c.pytorch.empty()) {
    r.error("pytorch", "the PyTorch expression the task mirrors (required)", root.get("pytorch"));
  }
  c.kernelbench = r.str(root, "kernelbench", "", std::string());
  const auto& degenerate = r.array(root, "degenerate", "", false);
  for (size_t i = 0; i < degenerate.size(); ++i) {
    if (!degenerate[i].is_string()) {
      r.error("degenerate[" + std::to_string(i) + "]",
              "a string (why the official inputs are "
              "degenerate)",
              &degenerate[i]);
    }
    c.degenerate.emplace_back(*degenerate[i].as_string());
  }
  const toml::node* loss_table = root.get("loss");
  if (c.kind == task_kind::native && loss_table == nullptr) {
    c.math = c.dir / r.str(root, "math", "", std::string("math.cuh"));
    c.baseline = c.dir / r.str(root, "baseline", "", std::string("baseline.cu"));
    for (const auto& [field, path] :
         {std::pair{"math", c.math}, std::pair{"baseline", c.baseline}}) {
      if (!fs::is_regular_file(path)) {
        r.error(field, "the path of an existing file (" + path.string() + " does not exist)",
                root.get(field));
      }
    }
    c.math = fs::weakly_canonical(c.math);
    c.baseline = fs::weakly_canonical(c.baseline);
  } else if (c.kind == task_kind::native) {
    // Resolved after the inputs and params are read (below): the math and the baseline are
    // generated from the [loss] expressions.
  } else {
    const auto& m = r.table(root, "module", "");
    module_spec spec;
    spec.source = c.dir / r.str(m, "source", "module.", std::string("model.py"));
    if (!fs::is_regular_file(spec.source)) {
      r.error("module.source",
              "the path of an existing file (" + spec.source.string() + " does not exist)",
              m.get("source"));
    }
    spec.source = fs::weakly_canonical(spec.source);
    spec.class_name = r.str(m, "class", "module.", std::string("Model"));
    spec.level = static_cast<int>(r.number(m, "level", "module.", 0.0));
    const auto& args = r.array(m, "init_args", "module.", false);
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string path = "module.init_args[" + std::to_string(i) + "]";
      if (!args[i].is_table()) {
        r.error(path,
                "a table { dim = \"expression\" }, { dims = [\"expression\", ...] } or { value = "
                "literal }",
                &args[i]);
      }
      const auto& t = *args[i].as_table();
      if (t.contains("dim")) {
        spec.init_args.push_back({{"dim", r.str(t, "dim", path + ".")}});
      } else if (t.contains("dims")) {
        const auto& list = r.array(t, "dims", path + ".");
        nlohmann::json exprs = nlohmann::json::array();
        for (size_t k = 0; k < list.size(); ++k) {
          if (!list[k].is_string()) {
            r.error(path + ".dims[" + std::to_string(k) + "]", "a dim expression", &list[k]);
          }
          exprs.push_back(list[k].as_string()->get());
        }
        spec.init_args.push_back({{"dims", exprs}});
      } else if (const toml::node* v = t.get("value"); v != nullptr) {
        spec.init_args.push_back({{"value", literal_json(r, *v, path + ".value")}});
      } else {
        r.error(path, "a table { dim = \"expression\" } or { value = literal }", &args[i]);
      }
    }
    const auto& fwd = r.array(m, "forward", "module.", false);
    for (size_t i = 0; i < fwd.size(); ++i) {
      if (!fwd[i].is_string()) {
        r.error("module.forward[" + std::to_string(i) + "]", "an input's or a param's name",
                &fwd[i]);
      }
      spec.forward.push_back(fwd[i].as_string()->get());
    }
    c.module = std::move(spec);
    // The checker self-test's findings (scripts/pytorch_oracle.py selftest) join the contract's.
    if (const fs::path st = c.dir / "selftest.json"; fs::is_regular_file(st)) {
      try {
        const auto j = nlohmann::json::parse(read_file(st));
        for (const auto& d : j.value("degenerate", nlohmann::json::array())) {
          c.degenerate.push_back(d.get<std::string>());
        }
      } catch (const nlohmann::json::exception& e) {
        fail_input("{}: not a self-test result ({})", st.string(), e.what());
      }
    }
  }

  for (const auto& [i, node] : [&] {
         std::vector<std::pair<size_t, const toml::node*>> v;
         const auto& a = r.array(root, "reduce_dims", "", false);
         for (size_t k = 0; k < a.size(); ++k) {
           v.emplace_back(k, &a[k]);
         }
         return v;
       }()) {
    if (!node->is_integer() || node->as_integer()->get() < 0) {
      r.error("reduce_dims[" + std::to_string(i) + "]", "a non-negative axis index", node);
    }
    c.reduce_dims.push_back(static_cast<int>(node->as_integer()->get()));
  }
  if (c.fam == family::normalize || c.fam == family::reduce || c.fam == family::loss) {
    if (c.reduce_dims.empty()) {
      r.error("reduce_dims", "the reduced axes of input x (required for family " + fam + ")",
              root.get("reduce_dims"));
    }
    for (size_t i = 1; i < c.reduce_dims.size(); ++i) {
      if (c.reduce_dims[i] != c.reduce_dims[i - 1] + 1) {
        r.error("reduce_dims", "consecutive axes in increasing order", root.get("reduce_dims"));
      }
    }
  }

  const auto& params = r.array(root, "params", "", false);
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string path = "params[" + std::to_string(i) + "].";
    if (!params[i].is_table()) {
      r.error("params[" + std::to_string(i) + "]", "a table {name, value}", &params[i]);
    }
    const auto& t = *params[i].as_table();
    c.params.push_back({r.str(t, "name", path), r.number(t, "value", path)});
  }
  for (const auto& [key, list, is_input] :
       {std::tuple{"inputs", &c.inputs, true}, std::tuple{"outputs", &c.outputs, false}}) {
    const bool optional = !is_input && c.kind == task_kind::pytorch; // found by running the module
    const auto& arr = r.array(root, key, "", !optional);
    if (arr.empty() && !optional) {
      r.error(key, "at least one tensor", &arr);
    }
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string path = std::string(key) + "[" + std::to_string(i) + "].";
      if (!arr[i].is_table()) {
        r.error(std::string(key) + "[" + std::to_string(i) + "]", "a table", &arr[i]);
      }
      list->push_back(parse_tensor(r, *arr[i].as_table(), path, is_input));
    }
  }
  std::set<std::string> names;
  for (const auto* list : {&c.inputs, &c.outputs}) {
    for (const auto& t : *list) {
      if (!names.insert(t.name).second) {
        r.error("inputs/outputs", "unique tensor names ('" + t.name + "' appears twice)");
      }
    }
  }
  if (c.module && !c.module->forward.empty()) {
    // Every forward input once, params where the forward takes numbers, nothing else.
    std::multiset<std::string> given(c.module->forward.begin(), c.module->forward.end());
    for (const auto& in : c.inputs) {
      if (in.role != "state" && given.count(in.name) != 1) {
        r.error("module.forward", "every input once ('" + in.name + "' appears " +
                                      std::to_string(given.count(in.name)) + " times)");
      }
    }
    for (const auto& n : c.module->forward) {
      const bool input =
          std::any_of(c.inputs.begin(), c.inputs.end(), [&](const auto& t) { return t.name == n; });
      const bool param =
          std::any_of(c.params.begin(), c.params.end(), [&](const auto& p) { return p.name == n; });
      if (!input && !param) {
        r.error("module.forward", "names of inputs or params ('" + n + "' is neither)");
      }
    }
  }

  if (c.kind == task_kind::native && loss_table != nullptr) {
    if (!loss_table->is_table()) {
      r.error("loss", "a table { elem = \"...\", finalize = \"...\" }", loss_table);
    }
    if (c.fam != family::loss) {
      r.error("loss", "family = \"loss\" (the [loss] expressions define a pointwise loss)",
              loss_table);
    }
    if (root.get("math") != nullptr) {
      r.error("math", "no math file: [loss] generates the math", root.get("math"));
    }
    const auto& lt = *loss_table->as_table();
    const tensor_spec* x = nullptr;
    const tensor_spec* t = nullptr;
    for (const auto& in : c.inputs) {
      if (in.role == "x") {
        x = &in;
      } else if (in.role == "target") {
        t = &in;
      }
    }
    if (x == nullptr || t == nullptr || !is_floating(x->type) || t->type != x->type ||
        t->shape != x->shape) {
      r.error("inputs", "an input with role = \"x\" and one with role = \"target\" of the same "
                        "floating-point dtype and shape (a pointwise loss)");
    }
    if (c.outputs.size() != 1 || !c.outputs[0].shape.empty()) {
      r.error("outputs", "one scalar output (shape = [])");
    }
    std::set<std::string> elem_names{"x", "t"};
    std::string param_lines;
    for (size_t i = 0; i < c.params.size(); ++i) {
      if (elem_names.count(c.params[i].name) || c.params[i].name == "A") {
        r.error("params", "names other than x, t and A ('" + c.params[i].name + "')");
      }
      elem_names.insert(c.params[i].name);
      param_lines += fmt::format("    const A {0} = A(kb_params[{1}]);\n    (void){0};\n",
                                 c.params[i].name, i);
    }
    const std::string elem_text = r.str(lt, "elem", "loss.");
    const std::string fin_text = r.str(lt, "finalize", "loss.", std::string("sum / n"));
    const std::string elem = loss_expression(r, "loss.elem", elem_text, elem_names);
    const std::string fin = loss_expression(r, "loss.finalize", fin_text, {"sum", "n", "rows"});
    const std::string math = fmt::format(
        "// Generated by kblaster from {} [loss]:\n//   elem = {}\n//   finalize = {}\n"
        "#pragma once\n#include <kblaster/device/core.cuh>\n\n"
        "template <class A> struct kb_op {{\n"
        "  static KB_HD A elem(A x, A t, const double* kb_params) {{\n    (void)kb_params;\n{}"
        "    return {};\n  }}\n"
        "  static KB_HD A finalize(A sum, int64_t kb_n, int64_t kb_rows) {{\n"
        "    const A n = A(kb_n);\n    const A rows = A(kb_rows);\n    (void)n;\n    (void)rows;\n"
        "    return {};\n  }}\n}};\n",
        c.file.filename().string(), elem_text, fin_text, param_lines, elem, fin);
    int begin = c.reduce_dims.empty() ? 0 : c.reduce_dims.front();
    int end = c.reduce_dims.empty() ? 0 : c.reduce_dims.back() + 1;
    const std::string baseline = fmt::format(
        "// Baseline generated by kblaster: the plain pointwise-loss driver over the task's math.\n"
        "#include <kblaster/device/families/loss.cuh>\n#include KB_TASK_MATH\n\n"
        "static constexpr kb::loss::pointwise_config kb_baseline_config{{{}, {}, {}, {}}};\n"
        "KB_POINTWISE_LOSS_BASELINE(kb_op, kb_baseline_config)\n",
        begin, end, x - c.inputs.data(), t - c.inputs.data());
    // Content-addressed under the compile cache: the same contract gives the same files.
    const fs::path gen =
        default_cache_dir() / "generated" / sha256_builder().field(math).field(baseline).hex();
    fs::create_directories(gen);
    c.math = gen / "math.cuh";
    write_file_if_changed(c.math, math);
    if (const toml::node* b = root.get("baseline"); b != nullptr) {
      c.baseline = fs::weakly_canonical(c.dir / r.str(root, "baseline", ""));
      if (!fs::is_regular_file(c.baseline)) {
        r.error("baseline", "the path of an existing file", b);
      }
    } else {
      c.baseline = gen / "baseline.cu";
      write_file_if_changed(c.baseline, baseline);
    }
  }

  const auto& shapes = r.array(root, "shapes", "");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string path = "shapes[" + std::to_string(i) + "].";
    if (!shapes[i].is_table()) {
      r.error("shapes[" + std::to_string(i) + "]", "a table {role, dims}", &shapes[i]);
    }
    const auto& t = *shapes[i].as_table();
    shape_case s;
    s.role = r.str(t, "role", path);
    if (s.role != "official" && s.role != "bench" && s.role != "check") {
      r.error(path + "role", "official, bench or check", t.get("role"));
    }
    s.name =
        r.str(t, "name", path,
              s.role == "official" ? std::string("official") : s.role + "-" + std::to_string(i));
    const auto& dims = r.table(t, "dims", path);
    for (const auto& [k, v] : dims) {
      if (!v.is_integer() || v.as_integer()->get() <= 0) {
        r.error(path + "dims." + std::string(k.str()), "a positive integer", &v);
      }
      s.dims[std::string(k.str())] = v.as_integer()->get();
    }
    c.shapes.push_back(std::move(s));
  }
  if (c.kind == task_kind::pytorch) {
    apply_resolution(c);
  }
  const auto count = [&](const std::string& role) {
    return std::count_if(c.shapes.begin(), c.shapes.end(),
                         [&](const shape_case& s) { return s.role == role; });
  };
  if (count("official") != 1) {
    r.error("shapes", "exactly one shape with role = \"official\"", &shapes);
  }
  if (count("check") < 1) {
    r.error("shapes",
            "at least one shape with role = \"check\" (a small correctness shape besides the "
            "official one)",
            &shapes);
  }
  std::set<std::string> shape_names;
  for (const auto& s : c.shapes) {
    if (!shape_names.insert(s.name).second) {
      r.error("shapes", "unique shape names ('" + s.name + "' appears twice)");
    }
    for (const auto* list : {&c.inputs, &c.outputs}) {
      for (const auto& t : *list) {
        for (size_t k = 0; k < t.shape.size(); ++k) {
          try {
            if (eval_expr(t.shape[k], s.dims) <= 0) {
              fail_input("not positive");
            }
          } catch (const input_error& e) {
            r.error(t.name + ".shape[" + std::to_string(k) + "] at shape '" + s.name + "'",
                    "a positive size from the shape's dims (" + std::string(e.what()) + ")");
          }
        }
      }
    }
  }

  if (const toml::node* tol = root.get("tolerance"); tol != nullptr) {
    if (!tol->is_table()) {
      r.error("tolerance", "a table", tol);
    }
    const auto& t = *tol->as_table();
    c.tol.atol = r.number(t, "atol", "tolerance.", c.tol.atol);
    c.tol.rtol = r.number(t, "rtol", "tolerance.", c.tol.rtol);
    c.tol.rel_l2 = r.number(t, "rel_l2", "tolerance.", c.tol.rel_l2);
    c.tol.deterministic = r.boolean(t, "deterministic", "tolerance.", true);
    for (const auto& [name, v] : {std::pair{"atol", c.tol.atol}, std::pair{"rtol", c.tol.rtol},
                                  std::pair{"rel_l2", c.tol.rel_l2}}) {
      if (!(v >= 0 && v < 1)) {
        r.error(std::string("tolerance.") + name, "a number in [0, 1)", t.get(name));
      }
    }
  } else {
    r.error("tolerance", "a table {atol, rtol, rel_l2, deterministic} (required)");
  }
  const auto& roof = r.table(root, "roofline", "");
  c.roof.bytes_expr = r.str(roof, "bytes", "roofline.");
  c.roof.flops_expr = r.str(roof, "flops", "roofline.");
  c.roof.tensor_cores = r.boolean(roof, "tensor_cores", "roofline.", c.fam == family::matmul);
  if (c.resolved) {
    // The import knew only the forward's inputs; the module's state is read once too and its
    // outputs written once.
    const auto add_bytes = [&c](const tensor_spec& t) {
      c.roof.bytes_expr += fmt::format(" + {}", dtype_size(t.type));
      for (const auto& d : t.shape) {
        c.roof.bytes_expr += "*" + d;
      }
    };
    for (const auto& t : c.inputs) {
      if (t.role == "state") {
        add_bytes(t);
      }
    }
    for (const auto& t : c.outputs) {
      add_bytes(t);
    }
  }
  for (const auto& s : c.shapes) {
    for (const auto& [field, e] : {std::pair{"roofline.bytes", c.roof.bytes_expr},
                                   std::pair{"roofline.flops", c.roof.flops_expr}}) {
      try {
        eval_expr(e, s.dims);
      } catch (const input_error& err) {
        r.error(field, "an expression over the shape's dims (" + std::string(err.what()) + ")",
                roof.get(field == std::string("roofline.bytes") ? "bytes" : "flops"));
      }
    }
  }
  if (c.module) {
    for (const auto& a : c.module->init_args) {
      std::vector<std::string> exprs;
      if (a.contains("dim")) {
        exprs.push_back(a.at("dim").get<std::string>());
      } else if (a.contains("dims")) {
        exprs = a.at("dims").get<std::vector<std::string>>();
      }
      for (const auto& e : exprs) {
        for (const auto& s : c.shapes) {
          try {
            eval_expr(e, s.dims);
          } catch (const input_error& err) {
            r.error("module.init_args",
                    "dim expressions over the shape's dims (" + std::string(err.what()) + ")");
          }
        }
      }
    }
  }
  for (const auto& in : c.inputs) {
    for (const auto& d : in.distributions) {
      if (!d.b_expr.empty()) {
        for (const auto& s : c.shapes) {
          try {
            eval_expr(d.b_expr, s.dims);
          } catch (const input_error& err) {
            r.error(in.name + ".distributions.high",
                    "an expression over the shape's dims (" + std::string(err.what()) + ")");
          }
        }
      }
    }
  }

  if (!c.degenerate.empty()) {
    std::set<std::string> labels;
    for (const auto& in : c.inputs) {
      for (const auto& d : in.distributions) {
        labels.insert(d.label);
      }
    }
    if (labels.size() < 2) {
      r.error("inputs.distributions", "a second distribution besides the official one (the "
                                      "official inputs are degenerate: " +
                                          c.degenerate.front() + ")");
    }
  }
  c.digest = c.kind == task_kind::native
                 ? sha256_builder()
                       .field(read_file(c.file))
                       .field(read_file(c.math))
                       .field(read_file(c.baseline))
                       .hex()
                 : sha256_builder()
                       .field(read_file(c.file))
                       .field(read_file(c.module->source))
                       .field(c.resolved ? read_file(c.dir / "resolved.json") : std::string())
                       .hex();
  return c;
}

const shape_case& contract::official() const {
  return shape("official");
}

const shape_case& contract::shape(const std::string& n) const {
  for (const auto& s : shapes) {
    if (s.name == n) {
      return s;
    }
  }
  std::string known;
  for (const auto& s : shapes) {
    known += (known.empty() ? "" : ", ") + s.name;
  }
  fail_input("task {}: no shape named '{}' (known: {})", id, n, known);
}

std::vector<const shape_case*> contract::shapes_with_role(const std::string& role) const {
  std::vector<const shape_case*> out;
  for (const auto& s : shapes) {
    if (s.role == role) {
      out.push_back(&s);
    }
  }
  return out;
}

namespace {

std::vector<concrete_tensor> concretise(const std::vector<tensor_spec>& specs,
                                        const shape_case& s) {
  std::vector<concrete_tensor> out;
  for (const auto& t : specs) {
    concrete_tensor c{t.name, t.type, {}};
    for (const auto& e : t.shape) {
      c.shape.push_back(eval_expr(e, s.dims));
    }
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace

std::vector<concrete_tensor> concrete_inputs(const contract& c, const shape_case& s) {
  return concretise(c.inputs, s);
}
std::vector<concrete_tensor> concrete_outputs(const contract& c, const shape_case& s) {
  return concretise(c.outputs, s);
}

double roofline_bytes(const contract& c, const shape_case& s) {
  return static_cast<double>(eval_expr(c.roof.bytes_expr, s.dims));
}
double roofline_flops(const contract& c, const shape_case& s) {
  return static_cast<double>(eval_expr(c.roof.flops_expr, s.dims));
}

ceilings ceilings::conservative_default() {
  return {};
}

double flop_ceiling(const contract& c, const ceilings& ceil, bool peak) {
  const double fp32 = peak ? ceil.peak_fp32_flops : ceil.fp32_flops;
  const double tensor = peak ? ceil.peak_tensor_flops : ceil.tensor_flops;
  return c.roof.tensor_cores ? std::max(fp32, tensor) : fp32;
}

double floor_seconds(const contract& c, const shape_case& s, const ceilings& ceil) {
  return std::max(roofline_bytes(c, s) / ceil.bandwidth,
                  roofline_flops(c, s) / flop_ceiling(c, ceil));
}

double limit_seconds(const contract& c, const shape_case& s, const ceilings& ceil) {
  return std::max(roofline_bytes(c, s) / ceil.peak_bandwidth,
                  roofline_flops(c, s) / flop_ceiling(c, ceil, true));
}

nlohmann::json to_json(const ceilings& ceil) {
  return {{"bandwidth", ceil.bandwidth},
          {"peak_bandwidth", ceil.peak_bandwidth},
          {"fp32_flops", ceil.fp32_flops},
          {"tensor_flops", ceil.tensor_flops},
          {"peak_fp32_flops", ceil.peak_fp32_flops},
          {"peak_tensor_flops", ceil.peak_tensor_flops},
          {"measured", ceil.measured},
          {"source", ceil.source}};
}

ceilings ceilings_from_json(const nlohmann::json& j) {
  ceilings c;
  c.bandwidth = j.at("bandwidth").get<double>();
  c.peak_bandwidth = j.at("peak_bandwidth").get<double>();
  c.fp32_flops = j.at("fp32_flops").get<double>();
  c.tensor_flops = j.at("tensor_flops").get<double>();
  c.peak_fp32_flops = j.at("peak_fp32_flops").get<double>();
  c.peak_tensor_flops = j.at("peak_tensor_flops").get<double>();
  c.measured = j.at("measured").get<bool>();
  c.source = j.at("source").get<std::string>();
  return c;
}

namespace {

std::vector<fs::path>& extra_dirs_storage() {
  static std::vector<fs::path> dirs;
  return dirs;
}

std::vector<fs::path> task_files(const fs::path& root) {
  std::vector<fs::path> files;
  for (const auto& dir : task_dirs(root)) {
    std::vector<fs::path> here;
    for (const auto& e :
         fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink)) {
      if (e.is_regular_file() && e.path().filename() == "task.toml") {
        here.push_back(e.path());
      }
    }
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

std::string searched(const fs::path& root) {
  std::string out;
  for (const auto& d : task_dirs(root)) {
    out += (out.empty() ? "" : ", ") + d.string();
  }
  return out;
}

} // namespace

void set_extra_task_dirs(std::vector<fs::path> dirs) {
  for (auto& d : dirs) {
    if (!fs::is_directory(d)) {
      fail_input("task folder {}: not a folder (given by --tasks or KBLASTER_TASKS)", d.string());
    }
    d = fs::weakly_canonical(fs::absolute(d));
  }
  extra_dirs_storage() = std::move(dirs);
}

const std::vector<fs::path>& extra_task_dirs() {
  return extra_dirs_storage();
}

std::vector<fs::path> task_dirs(const fs::path& root) {
  const fs::path tasks = root / "tasks";
  if (!fs::is_directory(tasks)) {
    fail_input("{}: no tasks folder", tasks.string());
  }
  std::vector<fs::path> out{fs::weakly_canonical(tasks)};
  for (const auto& d : extra_task_dirs()) {
    if (std::find(out.begin(), out.end(), d) == out.end()) {
      out.push_back(d);
    }
  }
  return out;
}

std::vector<contract> load_all(const fs::path& root) {
  std::vector<contract> out;
  std::map<std::string, fs::path> seen;
  for (const auto& f : task_files(root)) {
    auto c = load_contract(f);
    if (const auto [it, fresh] = seen.emplace(c.id, c.file); !fresh) {
      fail_input("task id '{}' is used by both {} and {}; ids must be unique across {}", c.id,
                 it->second.string(), c.file.string(), searched(root));
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const contract& a, const contract& b) {
    return std::tie(a.suite, a.id) < std::tie(b.suite, b.id);
  });
  return out;
}

std::vector<contract> load_suite(const fs::path& root, const std::string& suite) {
  std::vector<contract> out;
  for (auto& c : load_all(root)) {
    if (c.suite == suite) {
      out.push_back(std::move(c));
    }
  }
  if (out.empty()) {
    fail_input("no tasks in suite '{}' under {}", suite, searched(root));
  }
  return out;
}

contract find_task(const fs::path& root, const std::string& ref) {
  std::string suite;
  std::string key = ref;
  if (const auto slash = ref.find('/'); slash != std::string::npos) {
    suite = ref.substr(0, slash);
    key = ref.substr(slash + 1);
  }
  std::vector<contract> matches;
  for (auto& c : load_all(root)) {
    const std::string folder = c.dir.filename().string();
    const bool named = c.id == key || folder == key || folder.rfind(key + "_", 0) == 0;
    if (named && (suite.empty() || c.suite == suite)) {
      matches.push_back(std::move(c));
    }
  }
  if (matches.empty()) {
    fail_input("no task '{}' under {} (see `kblaster tasks list`)", ref, searched(root));
  }
  if (matches.size() > 1) { // an exact id wins over folder-name prefixes
    std::vector<contract> exact;
    for (auto& c : matches) {
      if (c.id == key) {
        exact.push_back(std::move(c));
      }
    }
    if (exact.size() == 1) {
      return std::move(exact.front());
    }
  }
  if (matches.size() > 1) {
    std::string names;
    for (const auto& c : matches) {
      names +=
          fmt::format("{}{}/{} ({})", names.empty() ? "" : ", ", c.suite, c.id, c.file.string());
    }
    fail_input("task '{}' is ambiguous: {}", ref, names);
  }
  return std::move(matches.front());
}

std::vector<fs::path> portfolio_files(const fs::path& root, const contract& c) {
  std::vector<fs::path> out;
  const fs::path dir = root / "portfolio" / c.suite;
  if (!fs::is_directory(dir)) {
    return out;
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".cu" && e.path().filename().string().rfind(c.id + "_", 0) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json to_json(const contract& c) {
  using nlohmann::json;
  json j;
  j["id"] = c.id;
  j["name"] = c.name;
  j["suite"] = c.suite;
  j["title"] = c.title;
  j["kind"] = to_string(c.kind);
  if (c.has_family()) {
    j["family"] = to_string(c.fam);
  }
  if (!c.lowering.empty()) {
    j["lowering"] = c.lowering;
  }
  if (!c.not_lowered.empty()) {
    j["not_lowered"] = c.not_lowered;
  }
  j["reduce_dims"] = c.reduce_dims;
  j["pytorch"] = c.pytorch;
  if (c.module) {
    j["module"] = {{"source", c.module->source.string()},
                   {"class", c.module->class_name},
                   {"init_args", c.module->init_args},
                   {"level", c.module->level},
                   {"forward", c.module->forward}};
  }
  j["degenerate"] = c.degenerate;
  j["kernelbench"] = c.kernelbench;
  j["file"] = c.file.string();
  j["math"] = c.math.string();
  j["baseline"] = c.baseline.string();
  j["digest"] = c.digest;
  for (const auto& p : c.params) {
    j["params"].push_back({{"name", p.name}, {"value", p.value}});
  }
  for (const auto& [key, list] :
       {std::pair{"inputs", &c.inputs}, std::pair{"outputs", &c.outputs}}) {
    for (const auto& t : *list) {
      json tj{{"name", t.name},
              {"role", t.role},
              {"dtype", to_string(t.type)},
              {"layout", t.layout},
              {"shape", t.shape}};
      for (const auto& d : t.distributions) {
        tj["distributions"].push_back(d.label);
      }
      j[key].push_back(tj);
    }
  }
  for (const auto& s : c.shapes) {
    json sj{{"name", s.name}, {"role", s.role}, {"dims", s.dims}};
    sj["roofline_bytes"] = roofline_bytes(c, s);
    sj["roofline_flops"] = roofline_flops(c, s);
    j["shapes"].push_back(sj);
  }
  j["tolerance"] = {{"atol", c.tol.atol},
                    {"rtol", c.tol.rtol},
                    {"rel_l2", c.tol.rel_l2},
                    {"deterministic", c.tol.deterministic}};
  j["roofline"] = {{"bytes", c.roof.bytes_expr},
                   {"flops", c.roof.flops_expr},
                   {"tensor_cores", c.roof.tensor_cores}};
  return j;
}

} // namespace kb::task

namespace kb::task {

namespace {

int input_index(const contract& c, const std::string& role, bool required) {
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].role == role) {
      return static_cast<int>(i);
    }
  }
  if (required) {
    fail_input("{}: family {} needs an input with role = \"{}\"", c.file.string(), to_string(c.fam),
               role);
  }
  return -1;
}

// A `loss` task whose target is a floating-point tensor: loss = finalize(sum of elem(x, t)).
bool is_pointwise_loss(const contract& c) {
  if (!c.has_family() || c.fam != family::loss) {
    return false;
  }
  const int t = input_index(c, "target", false);
  return t >= 0 && is_floating(c.inputs[static_cast<size_t>(t)].type);
}

} // namespace

std::string family_config_source(const contract& c) {
  if (!c.has_family()) {
    fail_input("task {} is a pytorch task that is not lowered: it has no family (its reference "
               "is the PyTorch module {})",
               c.id, c.module ? c.module->source.string() : std::string("?"));
  }
  const int begin = c.reduce_dims.empty() ? 0 : c.reduce_dims.front();
  const int end = c.reduce_dims.empty() ? 0 : c.reduce_dims.back() + 1;
  switch (c.fam) {
  case family::elementwise:
    return "";
  case family::normalize:
    return fmt::format(
        "static constexpr kb::normalize::config kb_family_config{{{}, {}, {}, {}, {}}};\n", begin,
        end, input_index(c, "x", true), input_index(c, "weight", false),
        input_index(c, "bias", false));
  case family::reduce:
    return fmt::format("static constexpr kb::reduce::config kb_family_config{{{}, {}, {}}};\n",
                       begin, end, input_index(c, "x", true));
  case family::loss:
    if (is_pointwise_loss(c)) {
      return fmt::format(
          "static constexpr kb::loss::pointwise_config kb_family_config{{{}, {}, {}, {}}};\n",
          begin, end, input_index(c, "x", true), input_index(c, "target", true));
    }
    return fmt::format("static constexpr kb::loss::config kb_family_config{{{}, {}, {}, {}}};\n",
                       begin, end, input_index(c, "x", true), input_index(c, "target", true));
  case family::matmul:
    return fmt::format("static constexpr kb::matmul::config kb_family_config{{{}, {}}};\n",
                       input_index(c, "a", true), input_index(c, "b", true));
  }
  return "";
}

std::string oracle_module_source(const contract& c) {
  if (c.kind != task_kind::native) {
    if (!c.oracle.empty()) {
      return read_file(c.oracle);
    }
    fail_input("task {} is a pytorch task whose oracle module is not generated yet (the "
               "evaluation generates it where PyTorch is installed)",
               c.id);
  }
  const std::string fam = to_string(c.fam);
  std::string macro;
  switch (c.fam) {
  case family::elementwise:
    macro = "KB_ELEMENTWISE_ORACLE(kb_op)";
    break;
  case family::normalize:
    macro = "KB_NORMALIZE_ORACLE(kb_op, kb_family_config)";
    break;
  case family::reduce:
    macro = "KB_REDUCE_ORACLE(kb_op, kb_family_config)";
    break;
  case family::loss:
    macro = is_pointwise_loss(c) ? "KB_POINTWISE_LOSS_ORACLE(kb_op, kb_family_config)"
                                 : "KB_LOSS_ORACLE(kb_op, kb_family_config)";
    break;
  case family::matmul:
    macro = "KB_MATMUL_ORACLE(kb_op, kb_family_config)";
    break;
  }
  return fmt::format("// Oracle module of task {} ({}), generated from {}.\n"
                     "#include <kblaster/device/families/{}.cuh>\n"
                     "#include KB_TASK_MATH\n\n{}{}\n",
                     c.id, fam, c.file.string(), fam, family_config_source(c), macro);
}

} // namespace kb::task
