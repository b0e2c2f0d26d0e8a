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
  case family::pool:
    return "pool";
  case family::scan:
    return "scan";
  case family::argreduce:
    return "argreduce";
  case family::conv:
    return "conv";
  }
  return "?";
}

std::optional<family> family_from_string(const std::string& s) {
  for (family f : {family::elementwise, family::normalize, family::reduce, family::loss,
                   family::matmul, family::pool, family::scan, family::argreduce, family::conv}) {
    if (to_string(f) == s) {
      return f;
    }
  }
  return std::nullopt;
}

std::string to_string(pool_kind k) {
  return k == pool_kind::max ? "max" : "avg";
}
std::string to_string(scan_op o) {
  return o == scan_op::sum ? "sum" : "prod";
}
std::string to_string(argreduce_op o) {
  return o == argreduce_op::argmax ? "argmax" : "argmin";
}

int64_t pool_output_size(int64_t in, int kernel, int stride, int padding, int dilation,
                         bool ceil_mode) {
  // PyTorch's div_rtn: division rounding toward negative infinity.
  const int64_t num = in + 2 * int64_t{padding} - int64_t{dilation} * (kernel - 1) - 1 +
                      (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + padding) {
    --out;
  }
  return out;
}

std::vector<int64_t> pool_output_shape(const pool_params& p, const std::vector<int64_t>& x) {
  std::vector<int64_t> out = x;
  const size_t first = x.size() >= static_cast<size_t>(p.rank) ? x.size() - p.rank : 0;
  for (size_t i = first; i < x.size(); ++i) {
    const size_t k = i - first;
    out[i] = pool_output_size(x[i], p.kernel.at(k), p.stride.at(k), p.padding.at(k),
                              p.dilation.at(k), p.ceil_mode);
  }
  return out;
}

std::string default_family_math_source(family f) {
  return fmt::format("// Math of a {} task: the family's parameters describe the operation; the "
                     "epilogue (applied\n// to each pool and scan output value) is the identity.\n"
                     "#pragma once\n#include <kblaster/device/core.cuh>\n\n"
                     "template <class A> struct kb_op {{\n"
                     "  static KB_HD A epilogue(A v, const double* kb_params) {{\n"
                     "    (void)kb_params;\n    return v;\n  }}\n}};\n",
                     to_string(f));
}

std::string to_string(matmul_mask m) {
  switch (m) {
  case matmul_mask::none:
    return "none";
  case matmul_mask::lower:
    return "lower";
  case matmul_mask::upper:
    return "upper";
  }
  return "?";
}

std::optional<matmul_mask> matmul_mask_from_string(const std::string& s) {
  for (matmul_mask m : {matmul_mask::none, matmul_mask::lower, matmul_mask::upper}) {
    if (to_string(m) == s) {
      return m;
    }
  }
  return std::nullopt;
}

int64_t conv_output_size(int64_t in, int64_t kernel, int stride, int padding, int dilation,
                         int output_padding, bool transposed) {
  if (transposed) {
    return (in - 1) * stride - 2 * static_cast<int64_t>(padding) +
           static_cast<int64_t>(dilation) * (kernel - 1) + output_padding + 1;
  }
  const int64_t span =
      in + 2 * static_cast<int64_t>(padding) - static_cast<int64_t>(dilation) * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
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

// The first input with role `role`, or nullptr.
const tensor_spec* input_with_role(const contract& c, const std::string& role) {
  const auto it = std::find_if(c.inputs.begin(), c.inputs.end(),
                               [&](const tensor_spec& t) { return t.role == role; });
  return it == c.inputs.end() ? nullptr : &*it;
}

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

// A [conv] entry that is one integer per spatial dim: an array of `rank` integers, or one integer
// for all of them.
std::vector<int> conv_ints(const reader& r, const toml::table& t, const std::string& key, int rank,
                           int fallback, int minimum) {
  const std::string field = "conv." + key;
  const toml::node* n = t.get(key);
  std::vector<int> out;
  const auto one = [&](const toml::node& e) {
    if (!e.is_integer() || e.as_integer()->get() < minimum || e.as_integer()->get() > (1 << 20)) {
      r.error(field, fmt::format("an integer >= {} or an array of {} of them", minimum, rank), &e);
    }
    return static_cast<int>(e.as_integer()->get());
  };
  if (n == nullptr) {
    out.assign(static_cast<size_t>(rank), fallback);
  } else if (n->is_array()) {
    const auto& a = *n->as_array();
    if (static_cast<int>(a.size()) != rank) {
      r.error(
          field,
          fmt::format("{} entries, one per spatial dim (rank {}), got {}", rank, rank, a.size()),
          n);
    }
    for (const auto& e : a) {
      out.push_back(one(e));
    }
  } else {
    out.assign(static_cast<size_t>(rank), one(*n));
  }
  return out;
}

// A [conv] size: an integer or an expression over the shape's dims (checked per shape later).
std::string conv_expr(const reader& r, const toml::node* n, const std::string& field) {
  if (n != nullptr && n->is_integer() && n->as_integer()->get() > 0) {
    return std::to_string(n->as_integer()->get());
  }
  if (n != nullptr && n->is_string() && !n->as_string()->get().empty()) {
    return std::string(*n->as_string());
  }
  r.error(field, "a positive integer or an expression over the shape's dims", n);
}

conv_params parse_conv(const reader& r, const toml::table& t) {
  conv_params p;
  p.transposed = r.boolean(t, "transposed", "conv.", false);
  const toml::node* kernel = t.get("kernel");
  if (kernel == nullptr) {
    r.error("conv.kernel", "the kernel size: an array of one to three sizes (one per spatial "
                           "dim) (required)");
  }
  if (const toml::node* rank = t.get("rank"); rank != nullptr) {
    if (!rank->is_integer() || rank->as_integer()->get() < 1 || rank->as_integer()->get() > 3) {
      r.error("conv.rank", "1, 2 or 3 (the spatial dims: Conv1d, Conv2d, Conv3d)", rank);
    }
    p.rank = static_cast<int>(rank->as_integer()->get());
  } else if (kernel->is_array()) {
    p.rank = static_cast<int>(kernel->as_array()->size());
  } else {
    r.error("conv.rank", "1, 2 or 3 (required when conv.kernel is one size for every dim)");
  }
  if (p.rank < 1 || p.rank > 3) {
    r.error("conv.kernel", "one to three sizes (one per spatial dim)", kernel);
  }
  if (kernel->is_array()) {
    const auto& a = *kernel->as_array();
    if (static_cast<int>(a.size()) != p.rank) {
      r.error("conv.kernel", fmt::format("{} sizes, one per spatial dim (rank {})", p.rank, p.rank),
              kernel);
    }
    for (size_t i = 0; i < a.size(); ++i) {
      p.kernel.push_back(conv_expr(r, &a[i], "conv.kernel[" + std::to_string(i) + "]"));
    }
  } else {
    p.kernel.assign(static_cast<size_t>(p.rank), conv_expr(r, kernel, "conv.kernel"));
  }
  p.in_channels = conv_expr(r, t.get("in_channels"), "conv.in_channels");
  p.out_channels = conv_expr(r, t.get("out_channels"), "conv.out_channels");
  p.stride = conv_ints(r, t, "stride", p.rank, 1, 1);
  p.padding = conv_ints(r, t, "padding", p.rank, 0, 0);
  p.dilation = conv_ints(r, t, "dilation", p.rank, 1, 1);
  p.output_padding = conv_ints(r, t, "output_padding", p.rank, 0, 0);
  for (int d = 0; d < p.rank; ++d) {
    if (p.output_padding[d] != 0 && !p.transposed) {
      r.error("conv.output_padding",
              "0 for a forward convolution (output padding is a "
              "transposed convolution's)",
              t.get("output_padding"));
    }
    if (p.output_padding[d] >= p.stride[d] && p.output_padding[d] >= p.dilation[d]) {
      r.error("conv.output_padding",
              fmt::format("each entry below its stride or its dilation (dim {}: {} with stride "
                          "{} and dilation {})",
                          d, p.output_padding[d], p.stride[d], p.dilation[d]),
              t.get("output_padding"));
    }
  }
  if (t.get("groups") != nullptr) {
    p.groups = conv_expr(r, t.get("groups"), "conv.groups");
  }
  p.bias = r.boolean(t, "bias", "conv.", false);
  for (const auto& [key, node] : t) {
    static const std::set<std::string> known{
        "rank",    "transposed",     "in_channels", "out_channels", "kernel", "stride",
        "padding", "output_padding", "dilation",    "groups",       "bias"};
    if (!known.count(std::string(key.str()))) {
      r.error("conv." + std::string(key.str()),
              "no such field (known: rank, transposed, in_channels, out_channels, kernel, stride, "
              "padding, output_padding, dilation, groups, bias)",
              &node);
    }
  }
  return p;
}

// The inputs and the output of a conv task against its [conv] table at every shape: roles,
// ranks, PyTorch's weight layout, channels divisible by groups, the output's sizes.
void check_conv(const reader& r, const contract& c) {
  const conv_params& p = *c.conv;
  const auto find = [&](const std::string& role) -> const tensor_spec* {
    for (const auto& t : c.inputs) {
      if (t.role == role) {
        return &t;
      }
    }
    return nullptr;
  };
  const tensor_spec* x = find("x");
  const tensor_spec* w = find("weight");
  const tensor_spec* b = find("bias");
  const tensor_spec* sc = find("scale");
  const size_t nd = static_cast<size_t>(p.rank) + 2;
  if (x == nullptr || w == nullptr) {
    r.error("inputs", "an input with role = \"x\" and one with role = \"weight\" (family conv)");
  }
  if (x->shape.size() != nd || w->shape.size() != nd) {
    r.error("inputs", fmt::format("x and weight of {} dims (batch, channels and {} spatial dims)",
                                  nd, p.rank));
  }
  if (!is_floating(x->type) || w->type != x->type) {
    r.error("inputs", "x and weight of the same floating-point dtype");
  }
  if (p.bias != (b != nullptr)) {
    r.error("conv.bias", p.bias ? "an input with role = \"bias\" (conv.bias = true)"
                                : "true (the task has an input with role = \"bias\")");
  }
  for (const tensor_spec* v : {b, sc}) {
    if (v != nullptr && (v->shape.size() != 1 || v->type != x->type)) {
      r.error(v->name + ".shape", "[out_channels] of x's dtype (role " + v->role + ")");
    }
  }
  if (c.outputs.size() != 1 || c.outputs[0].shape.size() != nd) {
    r.error("outputs", fmt::format("one output of {} dims (batch, channels, spatial)", nd));
  }
  for (const auto& s : c.shapes) {
    const auto eval = [&](const std::string& field, const std::string& e) {
      try {
        return eval_expr(e, s.dims);
      } catch (const input_error& err) {
        r.error(field + " at shape '" + s.name + "'",
                "an expression over the shape's dims (" + std::string(err.what()) + ")");
      }
    };
    const auto dims_of = [&](const tensor_spec& t) {
      std::vector<int64_t> v;
      for (size_t i = 0; i < t.shape.size(); ++i) {
        v.push_back(eval(t.name + ".shape[" + std::to_string(i) + "]", t.shape[i]));
      }
      return v;
    };
    const int64_t cin = eval("conv.in_channels", p.in_channels);
    const int64_t cout = eval("conv.out_channels", p.out_channels);
    const int64_t groups = eval("conv.groups", p.groups);
    const std::string at = " at shape '" + s.name + "'";
    if (groups < 1 || cin % groups != 0 || cout % groups != 0) {
      r.error("conv.groups",
              fmt::format("a divisor of in_channels ({}) and out_channels ({}){}", cin, cout, at));
    }
    const auto xs = dims_of(*x);
    const auto ws = dims_of(*w);
    const auto ys = dims_of(c.outputs[0]);
    if (xs[1] != cin) {
      r.error(x->name + ".shape[1]", fmt::format("in_channels ({}){}, got {}", cin, at, xs[1]));
    }
    const int64_t w0 = p.transposed ? cin : cout;
    const int64_t w1 = (p.transposed ? cout : cin) / groups;
    if (ws[0] != w0 || ws[1] != w1) {
      r.error(w->name + ".shape",
              fmt::format("[{}, {}, kernel...]{} ({}: [{}, {} / groups, k...]), got [{}, {}, ...]",
                          w0, w1, at, p.transposed ? "transposed" : "forward",
                          p.transposed ? "in_channels" : "out_channels",
                          p.transposed ? "out_channels" : "in_channels", ws[0], ws[1]));
    }
    if (ys[0] != xs[0] || ys[1] != cout) {
      r.error(c.outputs[0].name + ".shape",
              fmt::format("[{}, {}, ...] (batch and out_channels){}", xs[0], cout, at));
    }
    for (const tensor_spec* v : {b, sc}) {
      if (v != nullptr && dims_of(*v)[0] != cout) {
        r.error(v->name + ".shape", fmt::format("[{}] (out_channels){}", cout, at));
      }
    }
    for (int d = 0; d < p.rank; ++d) {
      const int64_t k = eval("conv.kernel[" + std::to_string(d) + "]", p.kernel[d]);
      if (ws[2 + d] != k) {
        r.error(w->name + ".shape[" + std::to_string(2 + d) + "]",
                fmt::format("the kernel size {}{}, got {}", k, at, ws[2 + d]));
      }
      const int64_t o = conv_output_size(xs[2 + d], k, p.stride[d], p.padding[d], p.dilation[d],
                                         p.output_padding[d], p.transposed);
      if (o < 1) {
        r.error("conv", fmt::format("an input large enough for the kernel (spatial dim {} of size "
                                    "{} gives no output{})",
                                    d, xs[2 + d], at));
      }
      if (ys[2 + d] != o) {
        r.error(c.outputs[0].name + ".shape[" + std::to_string(2 + d) + "]",
                fmt::format("{} (the convolution's output size{}), got {}", o, at, ys[2 + d]));
      }
    }
  }
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

// An integer field of a family table, when present (anything but an integer is an error).
std::optional<int64_t> table_int(const reader& r, const toml::table& t, const std::string& key,
                                 const std::string& path) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    return std::nullopt;
  }
  if (!n->is_integer()) {
    r.error(path + key, "an integer", n);
  }
  return n->as_integer()->get();
}

// A family table's axis: an integer in [-rank, rank), returned non-negative.
int table_dim(const reader& r, const toml::table& t, const std::string& path, int rank) {
  const auto d = table_int(r, t, "dim", path);
  if (!d) {
    r.error(path + "dim", "the axis of x (an integer, required)");
  }
  if (*d < -rank || *d >= rank) {
    r.error(path + "dim",
            fmt::format("an axis of x, which has {} dims (-{} to {}; got {})", rank, rank, rank - 1,
                        *d),
            t.get("dim"));
  }
  return static_cast<int>(*d < 0 ? *d + rank : *d);
}

// A per-spatial-dim field of [pool]: one integer for every dim, or an array of `rank` integers.
std::vector<int> pool_ints(const reader& r, const toml::table& t, const std::string& key, int rank,
                           std::optional<std::vector<int>> fallback, int64_t min) {
  const toml::node* n = t.get(key);
  const std::string field = "pool." + key;
  const std::string what = fmt::format("an integer >= {} or an array of {} of them", min, rank);
  if (n == nullptr) {
    if (!fallback) {
      r.error(field, what + " (required)");
    }
    return *fallback;
  }
  std::vector<int64_t> values;
  if (n->is_integer()) {
    values.assign(static_cast<size_t>(rank), n->as_integer()->get());
  } else if (n->is_array()) {
    const auto& a = *n->as_array();
    if (a.size() != static_cast<size_t>(rank)) {
      r.error(field, fmt::format("{} (the pool's rank is {}; got {} values)", what, rank, a.size()),
              n);
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_integer()) {
        r.error(field + "[" + std::to_string(i) + "]", "an integer", &a[i]);
      }
      values.push_back(a[i].as_integer()->get());
    }
  } else {
    r.error(field, what, n);
  }
  std::vector<int> out;
  for (const int64_t v : values) {
    if (v < min || v > 1 << 20) {
      r.error(field, fmt::format("{} (got {})", what, v), n);
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

pool_params parse_pool(const reader& r, const toml::table& t, const tensor_spec& x) {
  pool_params p;
  const std::string kind = r.str(t, "kind", "pool.");
  if (kind == "max") {
    p.kind = pool_kind::max;
  } else if (kind == "avg") {
    p.kind = pool_kind::avg;
  } else {
    r.error("pool.kind", "max or avg (got \"" + kind + "\")", t.get("kind"));
  }
  const toml::node* kernel = t.get("kernel");
  if (const auto rank = table_int(r, t, "rank", "pool.")) {
    p.rank = static_cast<int>(*rank);
  } else if (kernel != nullptr && kernel->is_array()) {
    p.rank = static_cast<int>(kernel->as_array()->size());
  } else {
    r.error("pool.rank",
            "the number of pooled dims, 1, 2 or 3 (required unless pool.kernel is an array)");
  }
  if (p.rank < 1 || p.rank > 3) {
    r.error("pool.rank", fmt::format("1, 2 or 3 spatial dims (got {})", p.rank), t.get("rank"));
  }
  const int xr = static_cast<int>(x.shape.size());
  if (xr != p.rank + 1 && xr != p.rank + 2) {
    r.error("pool",
            fmt::format("an input x of {} or {} dims for a {}-d pool ((N,) C and the pooled "
                        "dims; '{}' has {})",
                        p.rank + 1, p.rank + 2, p.rank, x.name, xr));
  }
  p.kernel = pool_ints(r, t, "kernel", p.rank, std::nullopt, 1);
  p.stride = pool_ints(r, t, "stride", p.rank, p.kernel, 1);
  p.padding = pool_ints(r, t, "padding", p.rank, std::vector<int>(p.rank, 0), 0);
  p.dilation = pool_ints(r, t, "dilation", p.rank, std::vector<int>(p.rank, 1), 1);
  p.ceil_mode = r.boolean(t, "ceil_mode", "pool.", false);
  for (int i = 0; i < p.rank; ++i) {
    if (p.padding[i] > p.kernel[i] / 2) {
      r.error("pool.padding",
              fmt::format("at most half the kernel (dim {}: padding {} with kernel {})", i,
                          p.padding[i], p.kernel[i]),
              t.get("padding"));
    }
  }
  if (p.kind == pool_kind::avg) {
    if (std::any_of(p.dilation.begin(), p.dilation.end(), [](int d) { return d != 1; })) {
      r.error("pool.dilation", "1 (average pooling has no dilation)", t.get("dilation"));
    }
    p.count_include_pad = r.boolean(t, "count_include_pad", "pool.", true);
    if (const auto d = table_int(r, t, "divisor_override", "pool.")) {
      if (*d <= 0 || *d > 1 << 30) {
        r.error("pool.divisor_override", "a positive integer", t.get("divisor_override"));
      }
      p.divisor_override = static_cast<int>(*d);
    }
  } else {
    for (const char* key : {"count_include_pad", "divisor_override"}) {
      if (t.get(key) != nullptr) {
        r.error(std::string("pool.") + key, "nothing: max pooling has no " + std::string(key),
                t.get(key));
      }
    }
  }
  for (const auto& [k, v] : t) {
    static const std::set<std::string> known{"kind",
                                             "rank",
                                             "kernel",
                                             "stride",
                                             "padding",
                                             "dilation",
                                             "ceil_mode",
                                             "count_include_pad",
                                             "divisor_override"};
    if (!known.count(std::string(k.str()))) {
      r.error("pool." + std::string(k.str()),
              "one of kind, rank, kernel, stride, padding, dilation, ceil_mode, "
              "count_include_pad, divisor_override (unknown field)",
              &v);
    }
  }
  return p;
}

scan_params parse_scan(const reader& r, const toml::table& t, const tensor_spec& x) {
  scan_params p;
  const std::string op = r.str(t, "op", "scan.");
  if (op == "sum") {
    p.op = scan_op::sum;
  } else if (op == "prod") {
    p.op = scan_op::prod;
  } else {
    r.error("scan.op", "sum or prod (got \"" + op + "\")", t.get("op"));
  }
  p.dim = table_dim(r, t, "scan.", static_cast<int>(x.shape.size()));
  p.reverse = r.boolean(t, "reverse", "scan.", false);
  p.exclusive = r.boolean(t, "exclusive", "scan.", false);
  p.masked = r.boolean(t, "masked", "scan.", false);
  for (const auto& [k, v] : t) {
    static const std::set<std::string> known{"op", "dim", "reverse", "exclusive", "masked"};
    if (!known.count(std::string(k.str()))) {
      r.error("scan." + std::string(k.str()),
              "one of op, dim, reverse, exclusive, masked (unknown field)", &v);
    }
  }
  return p;
}

argreduce_params parse_argreduce(const reader& r, const toml::table& t, const tensor_spec& x) {
  argreduce_params p;
  const std::string op = r.str(t, "op", "argreduce.");
  if (op == "argmax") {
    p.op = argreduce_op::argmax;
  } else if (op == "argmin") {
    p.op = argreduce_op::argmin;
  } else {
    r.error("argreduce.op", "argmax or argmin (got \"" + op + "\")", t.get("op"));
  }
  p.dim = table_dim(r, t, "argreduce.", static_cast<int>(x.shape.size()));
  p.keepdim = r.boolean(t, "keepdim", "argreduce.", false);
  for (const auto& [k, v] : t) {
    static const std::set<std::string> known{"op", "dim", "keepdim"};
    if (!known.count(std::string(k.str()))) {
      r.error("argreduce." + std::string(k.str()), "one of op, dim, keepdim (unknown field)", &v);
    }
  }
  return p;
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
  // Version 2: the running statistics of a BatchNorm or InstanceNorm are no state (the module
  // normalizes by its input's statistics); a resolution of version 1 is described again.
  if (j.value("version", 0) != 2 || j.value("digest", std::string()) != expected) {
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

// The [matmul] table: the family's form (docs/task-format.md, "Matmul forms").
matmul_params parse_matmul(const reader& r, const toml::node& node, const contract& c) {
  if (!node.is_table()) {
    r.error("matmul", "a table { batch, trans_a, trans_b, alpha, mask, diag_a }", &node);
  }
  if (c.kind == task_kind::native && c.fam != family::matmul) {
    r.error("matmul", "family = \"matmul\" (the [matmul] table is the form of a matrix product)",
            &node);
  }
  const auto& t = *node.as_table();
  static const std::set<std::string> known{"batch", "trans_a", "trans_b",
                                           "alpha", "mask",    "diag_a"};
  for (const auto& [k, v] : t) {
    if (!known.count(std::string(k.str()))) {
      r.error("matmul." + std::string(k.str()),
              "one of batch, trans_a, trans_b, alpha, mask, diag_a (unknown key)", &v);
    }
  }
  matmul_params p;
  p.batch = r.boolean(t, "batch", "matmul.", false);
  p.trans_a = r.boolean(t, "trans_a", "matmul.", false);
  p.trans_b = r.boolean(t, "trans_b", "matmul.", false);
  p.alpha = r.number(t, "alpha", "matmul.", 1.0);
  if (!std::isfinite(p.alpha)) {
    r.error("matmul.alpha", "a finite number", t.get("alpha"));
  }
  const std::string mask = r.str(t, "mask", "matmul.", std::string("none"));
  const auto m = matmul_mask_from_string(mask);
  if (!m) {
    r.error("matmul.mask", "none, lower or upper (got \"" + mask + "\")", t.get("mask"));
  }
  p.mask = *m;
  p.diag_a = r.boolean(t, "diag_a", "matmul.", false);
  if (p.diag_a && (p.trans_a || p.batch)) {
    r.error("matmul.diag_a", "no trans_a or batch with diag_a (a is the diagonal's vector)",
            t.get("diag_a"));
  }
  return p;
}

// The task file's TOML, or an input error naming the line and column of a syntax error.
toml::table parse_task_file(const fs::path& task_toml) {
  toml::table root;
  try {
    root = toml::parse_file(task_toml.string());
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}:{}: TOML syntax error: {}", task_toml.string(), e.source().begin.line,
               e.source().begin.column, std::string(e.description()));
  }
  return root;
}

// What the task is: id, name, suite, title, kind, family, the PyTorch expression it mirrors and
// why its official inputs are degenerate. Returns the family as written ("" for a pytorch
// task).
std::string read_identity(const reader& r, const toml::table& root, contract& c) {
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
      r.error("family",
              "one of elementwise, normalize, reduce, loss, matmul, pool, scan, argreduce, conv "
              "(got \"" +
                  fam + "\")",
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
  return fam;
}

// Where a native task's math and baseline come from: files of its own, the [loss] expressions,
// the family's table (pool, scan, argreduce) or, for a matmul task's baseline, the [matmul] form.
struct source_plan {
  const toml::node* loss_table = nullptr;
  const toml::node* matmul_table = nullptr;
  bool table_family = false;
  bool generate_matmul_baseline = false;
};

source_plan plan_sources(const toml::table& root, const contract& c) {
  source_plan p;
  p.loss_table = root.get("loss");
  // pool, scan and argreduce: the family's table describes the operation; the math (an identity
  // epilogue) and the baseline are generated unless the contract names files of its own.
  p.table_family = c.kind == task_kind::native &&
                   (c.fam == family::pool || c.fam == family::scan || c.fam == family::argreduce);
  p.matmul_table = root.get("matmul");
  // A matmul task with a [matmul] table and no baseline file gets the family's plain driver,
  // bound to its form (generated below, once the inputs' roles are known).
  p.generate_matmul_baseline = c.kind == task_kind::native && c.fam == family::matmul &&
                               p.matmul_table != nullptr && root.get("baseline") == nullptr &&
                               !fs::exists(c.dir / "baseline.cu");
  return p;
}

// A pytorch task's [module]: the model's source, class, constructor arguments and forward's
// arguments; the checker self-test's findings join the contract's degenerate inputs.
void read_module(const reader& r, const toml::table& root, contract& c) {
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
      r.error("module.forward[" + std::to_string(i) + "]", "an input's or a param's name", &fwd[i]);
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

// The math and baseline files a native task names (or their defaults), else the module of a
// pytorch task.
void read_sources(const reader& r, const toml::table& root, contract& c, const source_plan& p) {
  if (c.kind == task_kind::native && p.loss_table == nullptr && !p.table_family) {
    c.math = c.dir / r.str(root, "math", "", std::string("math.cuh"));
    c.baseline = c.dir / r.str(root, "baseline", "", std::string("baseline.cu"));
    for (const auto& [field, path] :
         {std::pair{"math", c.math}, std::pair{"baseline", c.baseline}}) {
      if (field == std::string("baseline") && p.generate_matmul_baseline) {
        continue;
      }
      if (!fs::is_regular_file(path)) {
        r.error(field, "the path of an existing file (" + path.string() + " does not exist)",
                root.get(field));
      }
    }
    c.math = fs::weakly_canonical(c.math);
    if (!p.generate_matmul_baseline) {
      c.baseline = fs::weakly_canonical(c.baseline);
    }
  } else if (c.kind == task_kind::native) {
    // Resolved after the inputs and params are read (below): the math and the baseline are
    // generated from the [loss] expressions or the family's table.
  } else {
    read_module(r, root, c);
  }
}

// The reduced axes of input x, consecutive and increasing (normalize, reduce, loss).
void read_reduce_dims(const reader& r, const toml::table& root, contract& c,
                      const std::string& fam) {
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
  c.channel_rows = r.boolean(root, "channel_rows", "", false);
  if (c.channel_rows && c.fam != family::normalize) {
    r.error("channel_rows", "false (rows of kept axes are a normalize task's, a batch norm)",
            root.get("channel_rows"));
  }
  if (const toml::node* g = root.get("groups"); g != nullptr) {
    if (!g->is_integer() || g->as_integer()->get() < 1 || g->as_integer()->get() > (1 << 20) ||
        c.fam != family::normalize || c.channel_rows) {
      r.error("groups",
              "a positive number of channel groups, in a normalize task without channel_rows (a "
              "group norm: the first reduced axis cut into groups, weight and bias per channel)",
              g);
    }
    c.groups = static_cast<int>(g->as_integer()->get());
  }
  if (c.fam == family::normalize || c.fam == family::reduce || c.fam == family::loss) {
    if (c.reduce_dims.empty()) {
      r.error("reduce_dims", "the reduced axes of input x (required for family " + fam + ")",
              root.get("reduce_dims"));
    }
    // With channel_rows, check_channel_rows checks the axes once x's rank is known.
    for (size_t i = 1; i < c.reduce_dims.size() && !c.channel_rows; ++i) {
      if (c.reduce_dims[i] != c.reduce_dims[i - 1] + 1) {
        r.error("reduce_dims",
                "consecutive axes in increasing order (with channel_rows = true, every axis "
                "outside one consecutive span of row axes)",
                root.get("reduce_dims"));
      }
    }
  }
}

// With channel_rows, the kept axes of x (its rank known once the inputs are read) are one span.
void check_channel_rows(const reader& r, const toml::table& root, const contract& c) {
  if (!c.channel_rows) {
    return;
  }
  const tensor_spec* x = input_with_role(c, "x");
  if (x == nullptr || !row_span_of(c.reduce_dims, true, x->shape.size())) {
    r.error("reduce_dims",
            "with channel_rows = true, every axis of input x but one consecutive span of row "
            "axes (a batch norm's [0, 2, 3] of an NCHW x)",
            root.get("reduce_dims"));
  }
}

// With groups, every shape's channels (x's first reduced axis) divide into them, and the weight
// and bias are one value per channel.
void check_groups(const reader& r, const toml::table& root, const contract& c) {
  if (c.groups == 0) {
    return;
  }
  const tensor_spec* x = input_with_role(c, "x");
  const int axis = c.reduce_dims.front();
  if (x == nullptr || static_cast<size_t>(axis) >= x->shape.size()) {
    r.error("reduce_dims", "axes of input x", root.get("reduce_dims"));
  }
  for (const char* role : {"weight", "bias"}) {
    const tensor_spec* p = input_with_role(c, role);
    if (p != nullptr && (p->shape.size() != 1 || p->shape[0] != x->shape[axis])) {
      r.error(p->name + ".shape",
              fmt::format("[{}] (with groups, one value per channel of x's axis {})",
                          x->shape[axis], axis));
    }
  }
  for (const auto& s : c.shapes) {
    int64_t channels = 0;
    try {
      channels = eval_expr(x->shape[axis], s.dims);
    } catch (const input_error& err) {
      r.error(x->name + ".shape at shape '" + s.name + "'", err.what());
    }
    if (channels % c.groups != 0) {
      r.error("groups", fmt::format("a divisor of x's {} channels at shape '{}'", channels, s.name),
              root.get("groups"));
    }
  }
}

// The params, the inputs and outputs (unique names), and a pytorch forward's arguments.
void read_tensors(const reader& r, const toml::table& root, contract& c) {
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
}

// A loss task's [loss] expressions: the math and the plain pointwise-loss baseline generated
// from them, content-addressed under the compile cache.
void generate_loss_sources(const reader& r, const toml::table& root, contract& c,
                           const toml::node* loss_table) {
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
  // The target is x's shape, or a trailing part of it that PyTorch broadcasts over x's leading
  // axes (targets [D] against predictions [B, D]): the family reads t[i % numel(t)].
  const bool trailing = x != nullptr && t != nullptr && !t->shape.empty() &&
                        t->shape.size() <= x->shape.size() &&
                        std::equal(t->shape.rbegin(), t->shape.rend(), x->shape.rbegin());
  if (x == nullptr || t == nullptr || !is_floating(x->type) || t->type != x->type || !trailing) {
    r.error("inputs", "an input with role = \"x\" and one with role = \"target\" of the same "
                      "floating-point dtype, the target of x's shape or of its trailing axes (a "
                      "pointwise loss)");
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
    param_lines +=
        fmt::format("    const A {0} = A(kb_params[{1}]);\n    (void){0};\n", c.params[i].name, i);
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
  const auto [begin, end] = row_span_of(c);
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

// The pool, scan and argreduce tables belong to tasks of that family only.
void check_family_tables(const reader& r, const toml::table& root, contract& c) {
  for (const auto& [key, f] : {std::pair{"pool", family::pool}, std::pair{"scan", family::scan},
                               std::pair{"argreduce", family::argreduce}}) {
    const toml::node* n = root.get(key);
    if (n != nullptr && (c.kind != task_kind::native || c.fam != f)) {
      r.error(key,
              std::string("family = \"") + key + "\" (the table describes that family's operation)",
              n);
    }
  }
}

// A pool, scan or argreduce task's table: the operation, its input and output, and the math and
// baseline generated for it unless the contract names files of its own.
void read_table_family(const reader& r, const toml::table& root, contract& c) {
  const std::string key = to_string(c.fam);
  const toml::node* n = root.get(key);
  if (n == nullptr || !n->is_table()) {
    r.error(key, "a table [" + key + "] describing the operation (required for family " + key + ")",
            n);
  }
  const auto& t = *n->as_table();
  const tensor_spec* x = nullptr;
  const tensor_spec* mask = nullptr;
  for (const auto& in : c.inputs) {
    if (in.role == "x" && x == nullptr) {
      x = &in;
    } else if (in.role == "mask" && mask == nullptr) {
      mask = &in;
    }
  }
  if (x == nullptr || !is_floating(x->type)) {
    r.error("inputs", "an input with role = \"x\" of a floating-point dtype (family " + key + ")");
  }
  if (c.outputs.size() != 1) {
    r.error("outputs", "one output (family " + key + ")");
  }
  const dtype out_type = c.fam == family::argreduce ? dtype::int64 : x->type;
  if (c.outputs[0].type != out_type) {
    r.error("outputs[0].dtype",
            to_string(out_type) + " (family " + key +
                (c.fam == family::argreduce ? " gives indices" : ": x's dtype") + "; got " +
                to_string(c.outputs[0].type) + ")");
  }
  if (c.fam == family::pool) {
    c.pool = parse_pool(r, t, *x);
  } else if (c.fam == family::scan) {
    c.scan = parse_scan(r, t, *x);
    if (c.scan->masked && mask == nullptr) {
      r.error("scan.masked", "an input with role = \"mask\" of x's shape (the scan is masked)",
              t.get("masked"));
    }
    if (!c.scan->masked && mask != nullptr) {
      r.error("scan.masked", "true: input '" + mask->name + "' has role = \"mask\"");
    }
    if (mask != nullptr && mask->type == dtype::float64) {
      r.error("inputs", "a mask of dtype float32, float16, bfloat16, int32 or int64 ('" +
                            mask->name + "' is float64)");
    }
  } else {
    c.argreduce = parse_argreduce(r, t, *x);
  }
  if (c.fam != family::pool) {
    const int dim = c.scan ? c.scan->dim : c.argreduce->dim;
    if (!c.reduce_dims.empty() && c.reduce_dims != std::vector<int>{dim}) {
      r.error("reduce_dims", fmt::format("nothing, or [{}] (the table's dim)", dim),
              root.get("reduce_dims"));
    }
    c.reduce_dims = {dim};
  } else if (!c.reduce_dims.empty()) {
    r.error("reduce_dims", "nothing (family pool pools the last pool.rank dims)",
            root.get("reduce_dims"));
  }
  std::string math = default_family_math_source(c.fam);
  const std::string header = fmt::format("<kblaster/device/families/{}.cuh>", key);
  std::string macro = key;
  std::transform(macro.begin(), macro.end(), macro.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  const std::string baseline =
      fmt::format("// Baseline generated by kblaster: the plain {} driver over the task's math.\n"
                  "#include {}\n#include KB_TASK_MATH\n\n{}KB_{}_BASELINE(kb_op, "
                  "kb_family_config)\n",
                  key, header, family_config_source(c), macro);
  const fs::path gen =
      default_cache_dir() / "generated" / sha256_builder().field(math).field(baseline).hex();
  fs::create_directories(gen);
  if (root.get("math") != nullptr) {
    c.math = fs::weakly_canonical(c.dir / r.str(root, "math", ""));
    if (!fs::is_regular_file(c.math)) {
      r.error("math", "the path of an existing file", root.get("math"));
    }
  } else {
    c.math = gen / "math.cuh";
    write_file_if_changed(c.math, math);
  }
  if (root.get("baseline") != nullptr) {
    c.baseline = fs::weakly_canonical(c.dir / r.str(root, "baseline", ""));
    if (!fs::is_regular_file(c.baseline)) {
      r.error("baseline", "the path of an existing file", root.get("baseline"));
    }
  } else {
    c.baseline = gen / "baseline.cu";
    write_file_if_changed(c.baseline, baseline);
  }
}

// The [matmul] form, and the plain matmul driver bound to it when the task has no baseline file.
void read_matmul_form(const reader& r, contract& c, const source_plan& p) {
  if (p.matmul_table != nullptr) {
    c.matmul = parse_matmul(r, *p.matmul_table, c);
  }
  if (p.generate_matmul_baseline) {
    const std::string baseline =
        fmt::format("// Baseline generated by kblaster: the plain matmul driver over the task's "
                    "math, bound to\n"
                    "// the form of {} [matmul].\n"
                    "#include <kblaster/device/families/matmul.cuh>\n#include KB_TASK_MATH\n\n{}"
                    "KB_MATMUL_BASELINE(kb_op, kb_family_config)\n",
                    c.file.filename().string(), family_config_source(c));
    const fs::path gen = default_cache_dir() / "generated" / sha256_builder().field(baseline).hex();
    fs::create_directories(gen);
    c.baseline = gen / "baseline.cu";
    write_file_if_changed(c.baseline, baseline);
  }
}

// The shape cases (one official, at least one check, unique names), a pytorch task's resolution,
// and every tensor's size positive at every shape.
void read_shapes(const reader& r, const toml::table& root, contract& c) {
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
}

// A pool, scan or argreduce task's output (and mask) shapes are those the operation gives, and a
// pool's windows fit its input, at every shape case.
void check_table_family_shapes(const reader& r, const contract& c) {
  // The output's (and the mask's) shape at every shape case is the one the operation gives.
  const auto concrete = [](const tensor_spec& t, const shape_case& s) {
    std::vector<int64_t> v;
    for (const auto& e : t.shape) {
      v.push_back(eval_expr(e, s.dims));
    }
    return v;
  };
  const auto text = [](const std::vector<int64_t>& v) {
    return fmt::format("[{}]", fmt::join(v, ", "));
  };
  const tensor_spec& x = *std::find_if(c.inputs.begin(), c.inputs.end(),
                                       [](const tensor_spec& t) { return t.role == "x"; });
  for (const auto& s : c.shapes) {
    const auto xs = concrete(x, s);
    if (!c.pool) {
      continue;
    }
    const auto want = pool_output_shape(*c.pool, xs);
    for (int i = 0; i < c.pool->rank; ++i) {
      const size_t d = xs.size() - c.pool->rank + i;
      if (want[d] < 1) {
        r.error("pool", fmt::format("windows that fit the input: at shape '{}' pooled dim {} of "
                                    "size {} gives no output (kernel {}, padding {}, dilation {})",
                                    s.name, i, xs[d], c.pool->kernel[i], c.pool->padding[i],
                                    c.pool->dilation[i]));
      }
    }
  }
  for (const auto& s : c.shapes) {
    const auto xs = concrete(x, s);
    std::vector<int64_t> want = xs;
    if (c.pool) {
      want = pool_output_shape(*c.pool, xs);
    } else if (c.argreduce) {
      if (c.argreduce->keepdim) {
        want[static_cast<size_t>(c.argreduce->dim)] = 1;
      } else {
        want.erase(want.begin() + c.argreduce->dim);
      }
    }
    const auto got = concrete(c.outputs[0], s);
    if (got != want) {
      r.error("outputs[0].shape",
              fmt::format("{} at shape '{}' (what the {} gives for x of shape {}; got {})",
                          text(want), s.name, to_string(c.fam), text(xs), text(got)));
    }
    for (const auto& in : c.inputs) {
      if (in.role == "mask" && concrete(in, s) != xs) {
        r.error(in.name + ".shape", fmt::format("x's shape {} at shape '{}' (a mask; got {})",
                                                text(xs), s.name, text(concrete(in, s))));
      }
    }
  }
}

// A matmul task's operands at every shape, and a conv task's [conv] table.
void check_family_forms(const reader& r, const toml::table& root, contract& c,
                        const toml::node* matmul_table) {
  if (c.kind == task_kind::native && c.fam == family::matmul) {
    for (const auto& s : c.shapes) {
      std::string why;
      if (!matmul_shape_of(c, s, &why)) {
        r.error("inputs/outputs at shape '" + s.name + "'",
                "operands of the task's matrix product (" + why + ")", matmul_table);
      }
    }
  }
  if (const toml::node* conv = root.get("conv"); conv != nullptr) {
    if (!conv->is_table()) {
      r.error("conv", "a table { kernel = [...], stride = ..., ... }", conv);
    }
    if (c.kind != task_kind::native || c.fam != family::conv) {
      r.error("conv", "family = \"conv\" (the [conv] table describes a convolution)", conv);
    }
    c.conv = parse_conv(r, *conv->as_table());
    check_conv(r, c);
  } else if (c.kind == task_kind::native && c.fam == family::conv) {
    r.error("conv", "a table [conv] with the convolution's kernel, stride, padding, dilation, "
                    "groups (required for family conv)");
  }
}

// The [tolerance] table (required).
void read_tolerance(const reader& r, const toml::table& root, contract& c) {
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
}

// The [roofline] expressions (a resolved task's state and outputs added to the bytes), each
// evaluable at every shape.
void read_roofline(const reader& r, const toml::table& root, contract& c) {
  const auto& roof = r.table(root, "roofline", "");
  c.roof.bytes_expr = r.str(roof, "bytes", "roofline.");
  c.roof.flops_expr = r.str(roof, "flops", "roofline.");
  c.roof.tensor_cores = r.boolean(roof, "tensor_cores", "roofline.",
                                  c.fam == family::matmul || c.fam == family::conv);
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
}

// The module's dim arguments and the inputs' distribution bounds evaluate at every shape;
// degenerate official inputs need a second distribution.
void check_expressions(const reader& r, const contract& c) {
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
}

// SHA-256 over task.toml, the math header and the baseline (a native task), or task.toml, the
// model's source and its resolution (a pytorch task).
std::string contract_digest(const contract& c) {
  return c.kind == task_kind::native
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
}

} // namespace

contract load_contract(const fs::path& task_toml) {
  const reader r(task_toml);
  const toml::table root = parse_task_file(task_toml);
  contract c;
  c.file = fs::absolute(task_toml);
  c.dir = c.file.parent_path();
  const std::string fam = read_identity(r, root, c);
  const source_plan plan = plan_sources(root, c);
  read_sources(r, root, c, plan);
  read_reduce_dims(r, root, c, fam);
  read_tensors(r, root, c);
  check_channel_rows(r, root, c);
  if (c.kind == task_kind::native && plan.loss_table != nullptr) {
    generate_loss_sources(r, root, c, plan.loss_table);
  }
  check_family_tables(r, root, c);
  if (plan.table_family) {
    read_table_family(r, root, c);
  }
  read_matmul_form(r, c, plan);
  read_shapes(r, root, c);
  check_groups(r, root, c);
  if (plan.table_family) {
    check_table_family_shapes(r, c);
  }
  check_family_forms(r, root, c, plan.matmul_table);
  read_tolerance(r, root, c);
  read_roofline(r, root, c);
  check_expressions(r, c);
  c.digest = contract_digest(c);
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

std::optional<matmul_shape> matmul_shape_of(const contract& c, const shape_case& s,
                                            std::string* why) {
  const auto fail = [&](std::string text) -> std::optional<matmul_shape> {
    if (why != nullptr) {
      *why = std::move(text);
    }
    return std::nullopt;
  };
  const matmul_params p = c.matmul.value_or(matmul_params{});
  int ai = -1;
  int bi = -1;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].role == "a" && ai < 0) {
      ai = static_cast<int>(i);
    } else if (c.inputs[i].role == "b" && bi < 0) {
      bi = static_cast<int>(i);
    }
  }
  if (ai < 0 || bi < 0 || c.outputs.empty()) {
    return fail("an input with role = \"a\", one with role = \"b\" and an output");
  }
  std::vector<concrete_tensor> inputs;
  std::vector<concrete_tensor> outputs;
  try {
    inputs = concrete_inputs(c, s);
    outputs = concrete_outputs(c, s);
  } catch (const input_error& e) {
    return fail(e.what());
  }
  const auto& a = inputs[static_cast<size_t>(ai)].shape;
  const auto& b = inputs[static_cast<size_t>(bi)].shape;
  const auto shape_text = [](const std::vector<int64_t>& v) {
    return fmt::format("[{}]", fmt::join(v, ", "));
  };
  const auto leading = [](const std::vector<int64_t>& v, size_t inner) {
    int64_t n = 1;
    for (size_t i = 0; i + inner < v.size(); ++i) {
      n *= v[i];
    }
    return n;
  };
  matmul_shape r;
  if (p.diag_a) {
    if (a.size() != 1 || b.size() != 2) {
      return fail(fmt::format("diag_a: a vector a and a matrix b (got a {} and b {})",
                              shape_text(a), shape_text(b)));
    }
    r.m = r.k = a[0];
    r.n = p.trans_b ? b[0] : b[1];
    if ((p.trans_b ? b[1] : b[0]) != r.k) {
      return fail(fmt::format("diag_a: b's {} has {} rows of the diagonal's {}", shape_text(b),
                              p.trans_b ? b[1] : b[0], r.k));
    }
  } else {
    if (a.size() < 2 || b.empty() || (b.size() == 1 && p.trans_b)) {
      return fail(fmt::format("a with at least two dims and b with at least {} (got a {} and b {})",
                              p.trans_b ? 2 : 1, shape_text(a), shape_text(b)));
    }
    const bool batched = a.size() > 2 || b.size() > 2;
    if (batched != p.batch) {
      return fail(
          batched ? fmt::format("batch = true in [matmul] for operands with leading batch "
                                "dims (a {}, b {})",
                                shape_text(a), shape_text(b))
                  : fmt::format("operands with leading batch dims for batch = true (a {}, b {})",
                                shape_text(a), shape_text(b)));
    }
    const int64_t a0 = a[a.size() - 2];
    const int64_t a1 = a[a.size() - 1];
    r.m = p.trans_a ? a1 : a0;
    r.k = p.trans_a ? a0 : a1;
    int64_t bk = b[0];
    r.n = 1;
    if (b.size() >= 2) {
      bk = p.trans_b ? b[b.size() - 1] : b[b.size() - 2];
      r.n = p.trans_b ? b[b.size() - 2] : b[b.size() - 1];
    }
    if (bk != r.k) {
      return fail(fmt::format("a {} gives K = {} but b {} gives K = {}{}", shape_text(a), r.k,
                              shape_text(b), bk,
                              p.trans_a || p.trans_b ? " (with the transposes of [matmul])" : ""));
    }
    const int64_t batch_a = leading(a, 2);
    const int64_t batch_b = b.size() > 2 ? leading(b, 2) : 1;
    if (batch_a > 1 && batch_b > 1 &&
        (batch_a != batch_b || std::vector<int64_t>(a.begin(), a.end() - 2) !=
                                   std::vector<int64_t>(b.begin(), b.end() - 2))) {
      return fail(fmt::format("the same batch dims in a {} and b {} (or none in one of them)",
                              shape_text(a), shape_text(b)));
    }
    if (batch_a > 1 && batch_b == 1 && !p.trans_a && p.mask == matmul_mask::none) {
      r.m *= batch_a;
    } else {
      r.batch = std::max(batch_a, batch_b);
    }
  }
  const auto& y = outputs[0];
  if (y.numel() != r.batch * r.m * r.n || (y.shape.size() >= 2 && y.shape.back() != r.n)) {
    return fail(fmt::format("an output of {} x {} x {} elements, rows of {} (got {})", r.batch, r.m,
                            r.n, r.n, shape_text(y.shape)));
  }
  return r;
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
  if (c.channel_rows) {
    j["channel_rows"] = true;
  }
  if (c.groups > 0) {
    j["groups"] = c.groups;
  }
  if (c.pool) {
    j["pool"] = {{"kind", to_string(c.pool->kind)},
                 {"rank", c.pool->rank},
                 {"kernel", c.pool->kernel},
                 {"stride", c.pool->stride},
                 {"padding", c.pool->padding},
                 {"dilation", c.pool->dilation},
                 {"ceil_mode", c.pool->ceil_mode},
                 {"count_include_pad", c.pool->count_include_pad},
                 {"divisor_override", c.pool->divisor_override}};
  }
  if (c.scan) {
    j["scan"] = {{"op", to_string(c.scan->op)},
                 {"dim", c.scan->dim},
                 {"reverse", c.scan->reverse},
                 {"exclusive", c.scan->exclusive},
                 {"masked", c.scan->masked}};
  }
  if (c.argreduce) {
    j["argreduce"] = {{"op", to_string(c.argreduce->op)},
                      {"dim", c.argreduce->dim},
                      {"keepdim", c.argreduce->keepdim}};
  }
  if (c.matmul) {
    j["matmul"] = {{"batch", c.matmul->batch},          {"trans_a", c.matmul->trans_a},
                   {"trans_b", c.matmul->trans_b},      {"alpha", c.matmul->alpha},
                   {"mask", to_string(c.matmul->mask)}, {"diag_a", c.matmul->diag_a}};
  }
  if (c.conv) {
    const auto& p = *c.conv;
    j["conv"] = {{"rank", p.rank},
                 {"transposed", p.transposed},
                 {"in_channels", p.in_channels},
                 {"out_channels", p.out_channels},
                 {"kernel", p.kernel},
                 {"stride", p.stride},
                 {"padding", p.padding},
                 {"output_padding", p.output_padding},
                 {"dilation", p.dilation},
                 {"groups", p.groups},
                 {"bias", p.bias}};
    if (!p.input.empty()) {
      j["conv"]["input"] = p.input;
    }
  }
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
  if (const tensor_spec* t = input_with_role(c, role)) {
    return static_cast<int>(t - c.inputs.data());
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

// The epilogue operands' input indices (roles "epilogue0" ... "epilogue7", set by the fusion
// planner's lowering; kblaster/device/epilogue.cuh), as a config's `epi` array; "" when the task
// has none, so that its config is written as before.
std::string epilogue_operands(const contract& c) {
  std::vector<int> idx;
  bool any = false;
  for (int i = 0; i < 8; ++i) {
    idx.push_back(input_index(c, fmt::format("epilogue{}", i), false));
    any = any || idx.back() >= 0;
  }
  return any ? fmt::format(", /*epi=*/{{{}}}", fmt::join(idx, ", ")) : "";
}

} // namespace

unsigned abi_dtype_mask(const contract& c) {
  unsigned mask = 0;
  for (const auto* list : {&c.inputs, &c.outputs}) {
    for (const auto& t : *list) {
      mask |= 1u << abi_dtype(t.type);
    }
  }
  return mask;
}

std::optional<row_span> row_span_of(const std::vector<int>& reduce_dims, bool channel_rows,
                                    size_t rank) {
  const int n = static_cast<int>(rank);
  if (reduce_dims.empty() ||
      std::any_of(reduce_dims.begin(), reduce_dims.end(), [&](int d) { return d < 0 || d >= n; }) ||
      !std::is_sorted(reduce_dims.begin(), reduce_dims.end()) ||
      std::adjacent_find(reduce_dims.begin(), reduce_dims.end()) != reduce_dims.end()) {
    return std::nullopt;
  }
  if (!channel_rows) {
    if (reduce_dims.back() - reduce_dims.front() + 1 != static_cast<int>(reduce_dims.size())) {
      return std::nullopt;
    }
    return row_span{reduce_dims.front(), reduce_dims.back() + 1};
  }
  std::vector<int> kept;
  for (int d = 0; d < n; ++d) {
    if (!std::binary_search(reduce_dims.begin(), reduce_dims.end(), d)) {
      kept.push_back(d);
    }
  }
  if (kept.empty() || kept.back() - kept.front() + 1 != static_cast<int>(kept.size())) {
    return std::nullopt;
  }
  return row_span{kept.front(), kept.back() + 1};
}

row_span row_span_of(const contract& c) {
  if (c.reduce_dims.empty()) {
    return {};
  }
  const tensor_spec* x = input_with_role(c, "x");
  const size_t rank =
      x != nullptr ? x->shape.size() : static_cast<size_t>(c.reduce_dims.back()) + 1;
  if (const auto span = row_span_of(c.reduce_dims, c.channel_rows, rank)) {
    return *span;
  }
  // Not a valid span (the loader rejects such a contract): the outer bounds, as before.
  return {c.reduce_dims.front(), c.reduce_dims.back() + 1};
}

std::string family_config_source(const contract& c) {
  if (!c.has_family()) {
    fail_input("task {} is a pytorch task that is not lowered: it has no family (its reference "
               "is the PyTorch module {})",
               c.id, c.module ? c.module->source.string() : std::string("?"));
  }
  const auto [begin, end] = row_span_of(c);
  switch (c.fam) {
  case family::elementwise:
    return "";
  case family::normalize:
    return fmt::format(
        "static constexpr kb::normalize::config kb_family_config{{{}, {}, {}, {}, {}, {}, {}}};\n",
        begin, end, input_index(c, "x", true), input_index(c, "weight", false),
        input_index(c, "bias", false), c.channel_rows ? 1 : 0, c.groups);
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
  case family::matmul: {
    const matmul_params p = c.matmul.value_or(matmul_params{});
    const std::string epi = epilogue_operands(c);
    if (p == matmul_params{} && epi.empty()) {
      return fmt::format("static constexpr kb::matmul::config kb_family_config{{{}, {}}};\n",
                         input_index(c, "a", true), input_index(c, "b", true));
    }
    const char* mask = p.mask == matmul_mask::lower   ? "kb::matmul::mask_lower"
                       : p.mask == matmul_mask::upper ? "kb::matmul::mask_upper"
                                                      : "kb::matmul::mask_none";
    return fmt::format(
        "static constexpr kb::matmul::config kb_family_config{{{}, {}, /*trans_a=*/{}, "
        "/*trans_b=*/{}, /*alpha=*/{:.17g}, {}, /*diag_a=*/{}{}}};\n",
        input_index(c, "a", true), input_index(c, "b", true), p.trans_a ? 1 : 0, p.trans_b ? 1 : 0,
        p.alpha, mask, p.diag_a ? 1 : 0, epi);
  }
  case family::pool: {
    if (!c.pool) {
      fail_input("{}: family pool needs its [pool] table", c.file.string());
    }
    const auto& p = *c.pool;
    // Three spatial slots (D, H, W); a pool of lower rank leaves the outer slots at the identity
    // window (kernel 1, stride 1, no padding).
    const auto slots = [&](const std::vector<int>& v, int identity) {
      std::vector<int> out(3, identity);
      for (int i = 0; i < p.rank; ++i) {
        out[static_cast<size_t>(3 - p.rank + i)] = v.at(static_cast<size_t>(i));
      }
      return fmt::format("{{{}}}", fmt::join(out, ", "));
    };
    return fmt::format(
        "static constexpr kb::pool::config kb_family_config{{{}, {}, {}, {}, {}, {}, "
        "{}, {}, {}, {}}};\n",
        p.kind == pool_kind::max ? "kb::pool::max" : "kb::pool::avg", p.rank, slots(p.kernel, 1),
        slots(p.stride, 1), slots(p.padding, 0), slots(p.dilation, 1), p.ceil_mode ? 1 : 0,
        p.count_include_pad ? 1 : 0, p.divisor_override, input_index(c, "x", true));
  }
  case family::scan: {
    if (!c.scan) {
      fail_input("{}: family scan needs its [scan] table", c.file.string());
    }
    const auto& p = *c.scan;
    return fmt::format(
        "static constexpr kb::scan::config kb_family_config{{{}, {}, {}, {}, {}, {}}};\n", p.dim,
        p.op == scan_op::sum ? "kb::scan::sum" : "kb::scan::prod", p.reverse ? 1 : 0,
        p.exclusive ? 1 : 0, input_index(c, "x", true),
        p.masked ? input_index(c, "mask", true) : -1);
  }
  case family::argreduce: {
    if (!c.argreduce) {
      fail_input("{}: family argreduce needs its [argreduce] table", c.file.string());
    }
    const auto& p = *c.argreduce;
    return fmt::format(
        "static constexpr kb::argreduce::config kb_family_config{{{}, {}, {}}};\n", p.dim,
        p.op == argreduce_op::argmax ? "kb::argreduce::argmax" : "kb::argreduce::argmin",
        input_index(c, "x", true));
  }
  case family::conv: {
    if (!c.conv) {
      fail_input("{}: family conv needs a [conv] table", c.file.string());
    }
    const auto& p = *c.conv;
    const auto three = [&](const std::vector<int>& v, int fill) {
      std::vector<int> out = v;
      out.resize(3, fill);
      return fmt::format("{{{}}}", fmt::join(out, ", "));
    };
    return fmt::format("static constexpr kb::conv::config kb_family_config{{{}, {}, {}, {}, {}, "
                       "{}, {}, {}, {}, {}{}}};\n",
                       input_index(c, "x", true), input_index(c, "weight", true),
                       input_index(c, "bias", false), input_index(c, "scale", false), p.rank,
                       p.transposed ? 1 : 0, three(p.stride, 1), three(p.padding, 0),
                       three(p.dilation, 1), three(p.output_padding, 0), epilogue_operands(c));
  }
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
  case family::pool:
    macro = "KB_POOL_ORACLE(kb_op, kb_family_config)";
    break;
  case family::scan:
    macro = "KB_SCAN_ORACLE(kb_op, kb_family_config)";
    break;
  case family::argreduce:
    macro = "KB_ARGREDUCE_ORACLE(kb_op, kb_family_config)";
    break;
  case family::conv:
    macro = "KB_CONV_ORACLE(kb_op, kb_family_config)";
    break;
  }
  return fmt::format("// Oracle module of task {} ({}), generated from {}.\n"
                     "#include <kblaster/device/families/{}.cuh>\n"
                     "#include KB_TASK_MATH\n\n{}{}\n",
                     c.id, fam, c.file.string(), fam, family_config_source(c), macro);
}

} // namespace kb::task
