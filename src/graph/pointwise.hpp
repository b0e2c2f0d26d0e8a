// Pointwise expressions over the op graph (graph.hpp) as C++ over the kernels' number type A:
// the generated math of the elementwise family, of the matmul and conv epilogues and of the
// fusion planner's epilogues (fuse.hpp). A value is a leaf (a name the caller gives: the
// accumulator, a per-channel operand), one of the forward's numbers, or a pointwise node over such
// values; anything else fails with the reason (why()). Leaves may broadcast against the
// expression's shape: the caller checks how (the planner admits constants and per-channel
// operands only). Internal to src/graph.
#pragma once

#include "graph/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::graph::detail {

inline std::string short_name(const std::string& op) {
  const auto dot = op.rfind('.');
  return dot == std::string::npos ? op : op.substr(dot + 1);
}

inline std::string number(double v) {
  return fmt::format("A({:.17g})", v);
}

// The product of a shape's extents (expressions of the task's dimensions), "1" for a scalar.
inline std::string product_expr(const std::vector<std::string>& shape) {
  std::string out;
  for (const auto& e : shape) {
    out += (out.empty() ? "" : "*") + ("(" + e + ")");
  }
  return out.empty() ? "1" : out;
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

inline const input* graph_input(const graph& g, const std::string& value) {
  for (const auto& in : g.inputs) {
    if (in.value == value) {
      return &in;
    }
  }
  return nullptr;
}

// The tensor that `value` transposes, when `value` is read once and is torch.t of a matrix or
// torch.transpose of its last two dims (a product's operand written `.T`); nullopt otherwise.
inline std::optional<std::string> transpose_source(const graph& g, const std::string& value) {
  const node* n = g.producer(value);
  if (n == nullptr || n->inputs.empty() || !n->inputs[0].is_tensor() || n->outputs.size() != 1 ||
      g.uses(value) != 1) {
    return std::nullopt;
  }
  const auto rank = static_cast<int64_t>(n->outputs[0].shape.size());
  if (n->op == "torch.t" && rank == 2) {
    return n->inputs[0].value;
  }
  if (n->op == "torch.transpose" && rank >= 2) {
    const auto d0 = n->attr("dim0").integer();
    const auto d1 = n->attr("dim1").integer();
    if (!d0 || !d1) {
      return std::nullopt;
    }
    const int64_t a = *d0 < 0 ? *d0 + rank : *d0;
    const int64_t b = *d1 < 0 ? *d1 + rank : *d1;
    if (std::min(a, b) == rank - 2 && std::max(a, b) == rank - 1) {
      return n->inputs[0].value;
    }
  }
  return std::nullopt;
}

// The reduced axes of a node's `dim` attribute over a tensor of rank `rank`: all of them when
// none; nullopt when they are not one consecutive span.
inline std::optional<std::vector<int>> reduced_axes(const node& n, size_t rank) {
  std::vector<int> dims;
  const attr_value& d = n.attr("dim");
  if (d.is_none()) {
    for (size_t i = 0; i < rank; ++i) {
      dims.push_back(static_cast<int>(i));
    }
  } else if (const auto list = d.integers()) {
    for (const auto v : *list) {
      dims.push_back(static_cast<int>(v < 0 ? v + static_cast<int64_t>(rank) : v));
    }
  } else {
    return std::nullopt;
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[i - 1] + 1) {
      return std::nullopt;
    }
  }
  if (dims.empty() || dims.back() >= static_cast<int>(rank) || dims.front() < 0) {
    return std::nullopt;
  }
  return dims;
}

// The Welford state of a row (count, mean, M2) and its stats (mean, rstd): the body of a
// normalize op that standardizes (layer, instance and group norms).
inline constexpr const char* welford_body = R"(  struct state {
    A count;
    A mean;
    A m2;
  };
  struct stats {
    A mean;
    A rstd;
  };
  static KB_HD state init() { return {A(0), A(0), A(0)}; }
  static KB_HD state accumulate(state s, A x) {
    s.count += A(1);
    const A d = x - s.mean;
    s.mean += d / s.count;
    s.m2 += d * (x - s.mean);
    return s;
  }
  static KB_HD state combine(state a, state b) {
    const A n = a.count + b.count;
    if (n == A(0)) {
      return a;
    }
    const A d = b.mean - a.mean;
    return {n, a.mean + d * (b.count / n), a.m2 + b.m2 + d * d * (a.count * b.count / n)};
  }
)";

// A pointwise expression of leaf values.
class pointwise {
public:
  pointwise(const graph& g, std::map<std::string, std::string> leaves,
            std::optional<std::vector<std::string>> shape)
      : m_g(g), m_leaves(std::move(leaves)), m_shape(std::move(shape)) {}

  std::optional<std::string> of(const std::string& value) {
    if (const auto it = m_leaves.find(value); it != m_leaves.end()) {
      return it->second;
    }
    if (const input* in = graph_input(m_g, value); in != nullptr) {
      if (in->scalar) {
        return number(in->scalar_value);
      }
      return fail("reads the input " + value + " besides the pointwise one(s)");
    }
    const node* n = m_g.producer(value);
    if (n == nullptr) {
      return fail(value + " is module state");
    }
    if (n->outputs.size() != 1) {
      return fail(n->op + " has several outputs");
    }
    if (m_shape && n->outputs[0].shape != *m_shape) {
      return fail(n->op + " broadcasts to another shape");
    }
    std::vector<std::string> args;
    for (const auto& o : n->inputs) {
      if (!o.is_tensor()) {
        args.push_back(number(o.constant.value_or(0.0)));
        continue;
      }
      if (m_shape && o.shape != *m_shape && !o.shape.empty() && m_leaves.count(o.value) == 0) {
        return fail(n->op + " broadcasts an operand of another shape");
      }
      auto a = of(o.value);
      if (!a) {
        return std::nullopt;
      }
      args.push_back(*a);
    }
    auto e = call(*n, args);
    if (e) {
      m_ops.push_back(short_name(n->op));
    }
    return e;
  }

  // The ops used, each once, in the order their values were first computed (operands before
  // the op that reads them): "sigmoid+mul" for x * sigmoid(x).
  std::string ops() const {
    std::vector<std::string> seen;
    for (const auto& op : m_ops) {
      if (std::find(seen.begin(), seen.end(), op) == seen.end()) {
        seen.push_back(op);
      }
    }
    std::string out;
    for (const auto& s : seen) {
      out += (out.empty() ? "" : "+") + s;
    }
    return out.empty() ? "identity" : out;
  }
  const std::string& why() const { return m_why; }

private:
  std::optional<std::string> fail(std::string why) {
    if (m_why.empty()) {
      m_why = std::move(why);
    }
    return std::nullopt;
  }

  std::optional<double> num(const node& n, const char* name) {
    return n.attr(name).number();
  }

  std::optional<std::string> call(const node& n, const std::vector<std::string>& a) {
    static const std::map<std::string, std::string> unary{
        {"torch.sigmoid", "kb::lowered::sigmoid"},
        {"torch.tanh", "kb::fn::tanh"},
        {"torch.relu", "kb::lowered::relu"},
        {"torch.abs", "kb::fn::fabs"},
        {"torch.exp", "kb::fn::exp"},
        {"torch.log", "kb::fn::log"},
        {"torch.sqrt", "kb::fn::sqrt"},
        {"torch.erf", "kb::fn::erf"},
        {"torch.log1p", "kb::lowered::log1p"},
        {"torch.expm1", "kb::lowered::expm1"},
        {"torch.sin", "kb::lowered::sin"},
        {"torch.cos", "kb::lowered::cos"},
        {"torch.floor", "kb::lowered::floor"},
        {"torch.ceil", "kb::lowered::ceil"},
        {"torch.nn.functional.selu", "kb::lowered::selu"},
        {"torch.nn.functional.silu", "kb::lowered::silu"},
        {"torch.nn.functional.mish", "kb::lowered::mish"},
        {"torch.nn.functional.hardswish", "kb::lowered::hardswish"},
        {"torch.nn.functional.hardsigmoid", "kb::lowered::hardsigmoid"},
        {"torch.nn.functional.relu6", "kb::lowered::relu6"},
        {"torch.nn.functional.softsign", "kb::lowered::softsign"},
        {"torch.nn.functional.logsigmoid", "kb::lowered::logsigmoid"}};
    const std::string& op = n.op;
    if (const auto it = unary.find(op); it != unary.end() && a.size() == 1) {
      return it->second + "(" + a[0] + ")";
    }
    if ((op == "torch.contiguous" || op == "torch.nn.functional.dropout") && a.size() == 1) {
      return a[0]; // dropout: the oracle runs the module in eval mode, where it is the identity
    }
    if (op.rfind("nn.BatchNorm", 0) == 0) {
      // Eval mode: the running statistics, a per-channel affine map. Operands: x, [weight, bias,]
      // running_mean, running_var, num_batches_tracked.
      const bool affine = n.attr("affine").boolean().value_or(true);
      if (!n.attr("track_running_stats").boolean().value_or(true) || a.size() != (affine ? 6u : 4u)) {
        return fail(op + " without running statistics (batch statistics are a reduction)");
      }
      const size_t s = affine ? 3 : 1;
      std::string e = "((" + a[0] + " - " + a[s] + ") / kb::fn::sqrt(" + a[s + 1] + " + " +
                      number(n.attr("eps").number().value_or(1e-5)) + "))";
      return affine ? "(" + e + " * " + a[1] + " + " + a[2] + ")" : e;
    }
    if (op == "torch.neg" && a.size() == 1) {
      return "(-" + a[0] + ")";
    }
    if (op == "torch.rsqrt" && a.size() == 1) {
      return "(A(1) / kb::fn::sqrt(" + a[0] + "))";
    }
    if (op == "torch.reciprocal" && a.size() == 1) {
      return "(A(1) / " + a[0] + ")";
    }
    if (op == "torch.square" && a.size() == 1) {
      return "kb::lowered::power(" + a[0] + ", A(2))";
    }
    if (op == "torch.nn.functional.gelu" && a.size() == 1) {
      const auto approx = n.attr("approximate").text().value_or("none");
      if (approx == "none") {
        return "kb::lowered::gelu(" + a[0] + ")";
      }
      if (approx == "tanh") {
        return "kb::lowered::gelu_tanh(" + a[0] + ")";
      }
      return fail("gelu approximate='" + approx + "'");
    }
    const auto with = [&](const char* f, std::initializer_list<const char*> names)
        -> std::optional<std::string> {
      std::string out = std::string(f) + "(" + a[0];
      for (const char* name : names) {
        const auto v = num(n, name);
        if (!v) {
          return fail(op + ": attribute " + name + " is not a number");
        }
        out += ", " + number(*v);
      }
      return out + ")";
    };
    if (a.size() == 1) {
      if (op == "torch.nn.functional.elu") {
        return with("kb::lowered::elu", {"alpha"});
      }
      if (op == "torch.nn.functional.celu") {
        return with("kb::lowered::celu", {"alpha"});
      }
      if (op == "torch.nn.functional.leaky_relu") {
        return with("kb::lowered::leaky_relu", {"negative_slope"});
      }
      if (op == "torch.nn.functional.hardtanh") {
        return with("kb::lowered::hardtanh", {"min_val", "max_val"});
      }
      if (op == "torch.nn.functional.softplus") {
        return with("kb::lowered::softplus", {"beta", "threshold"});
      }
      if (op == "torch.nn.functional.threshold") {
        return with("kb::lowered::threshold", {"threshold", "value"});
      }
      if (op == "torch.pow") {
        return with("kb::lowered::power", {"exponent"});
      }
      if (op == "torch.clamp") {
        const attr_value& lo = n.attr("min");
        const attr_value& hi = n.attr("max");
        if ((!lo.is_none() && !lo.number()) || (!hi.is_none() && !hi.number())) {
          return fail("torch.clamp with tensor bounds");
        }
        return fmt::format("kb::lowered::clamp({}, {}, {}, {}, {})", a[0], lo.number() ? "true" : "false",
                           number(lo.number().value_or(0.0)), hi.number() ? "true" : "false",
                           number(hi.number().value_or(0.0)));
      }
    }
    if (a.size() == 2) {
      const double alpha = num(n, "alpha").value_or(1.0);
      const std::string b = alpha == 1.0 ? a[1] : number(alpha) + " * " + a[1];
      if (op == "torch.add") {
        return "(" + a[0] + " + " + b + ")";
      }
      if (op == "torch.sub") {
        return "(" + a[0] + " - " + b + ")";
      }
      if (op == "torch.mul") {
        return "(" + a[0] + " * " + a[1] + ")";
      }
      if (op == "torch.div" && n.attr("rounding_mode").is_none()) {
        return "(" + a[0] + " / " + a[1] + ")";
      }
      if (op == "torch.maximum") {
        return "kb::lowered::maximum(" + a[0] + ", " + a[1] + ")";
      }
      if (op == "torch.minimum") {
        return "kb::lowered::minimum(" + a[0] + ", " + a[1] + ")";
      }
      if (op == "torch.pow") {
        return "kb::lowered::pow(" + a[0] + ", " + a[1] + ")";
      }
    }
    return fail(op + " is not a pointwise op the lowering knows");
  }

  const graph& m_g;
  std::map<std::string, std::string> m_leaves;
  std::optional<std::vector<std::string>> m_shape;
  std::vector<std::string> m_ops;
  std::string m_why;
};

// The nodes that read `value`, in order.
inline std::vector<size_t> readers(const graph& g, const std::string& value) {
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

// Whether node i is the mean of a centering `main - mean(main, dims, keepdim=True)`: the mean
// reads the chain's latest value, the very next node subtracts its result from that value, and
// nothing else reads either. The subtraction's index, or 0.
inline size_t centering_sub(const graph& g, size_t i, const std::string& main) {
  const node& n = g.nodes[i];
  if (n.op != "torch.mean" || n.inputs.empty() || n.inputs[0].value != main ||
      n.outputs.size() != 1 || !n.attr("keepdim").boolean().value_or(false) ||
      !n.attr("dtype").is_none() || i + 1 >= g.nodes.size()) {
    return 0;
  }
  const node& sub = g.nodes[i + 1];
  const std::string& mean = n.outputs[0].value;
  if (sub.op != "torch.sub" || sub.inputs.size() != 2 || sub.inputs[0].value != main ||
      sub.inputs[1].value != mean || sub.outputs.size() != 1 ||
      readers(g, mean) != std::vector<size_t>{i + 1} ||
      readers(g, main) != std::vector<size_t>{i, i + 1}) {
    return 0;
  }
  // torch.sub's alpha scales the subtrahend: only the plain difference is a centering.
  if (const auto alpha = sub.attr("alpha").number(); alpha && *alpha != 1.0) {
    return 0;
  }
  return i + 1;
}

// The number of trailing axes a LayerNorm normalizes: the length of its normalized_shape, known
// even where the sizes are not read statically (F.layer_norm(x, (x.shape[-1],))), since they must
// equal x's trailing dims.
inline std::optional<size_t> normalized_rank(const node& n) {
  const attr_value& a = n.attr("normalized_shape");
  if (const auto ns = a.integers()) {
    return ns->size();
  }
  if (const auto* l = std::get_if<attr_value::list>(&a.v)) {
    return l->size();
  }
  return std::nullopt;
}

} // namespace kb::graph::detail
