// The op graph and the lowering (src/graph): problem files written for these tests
// (tests/data/kernelbench/lowering: every family the lowering covers, the ops it does not, and
// bad graphs) imported with `kblaster tasks import`, their graph.json lowered onto families with
// the expected rule, reduced axes, roles and generated math (golden headers in
// tests/data/lowering), the strategies offered for the lowered contracts, and bad graphs ending
// with a typed reason while the batch goes on.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "graph/graph.hpp"
#include "graph/lower.hpp"
#include "host_program_support.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <map>

namespace kb::graph {
namespace {

using nlohmann::json;

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path problems = root / "tests" / "data" / "kernelbench" / "lowering" / "level1";
const fs::path golden = root / "tests" / "data" / "lowering";

process_result kblaster(std::vector<std::string> args) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(300);
  return run_process(spec);
}

struct expected_lowering {
  std::string rule;
  task::family fam;
  std::vector<int> reduce_dims;
  std::map<std::string, std::string> roles;
  bool channel_rows = false;
  int groups = 0;
};

struct expected_issue {
  reason why;
  std::string op;
};

class lowered_imports : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    out = std::make_unique<temp_dir>("kb-lower");
    std::vector<std::string> args{"tasks", "import", "--suite", "lowtest", "--out",
                                  out->path().string()};
    for (const auto& e : fs::directory_iterator(problems)) {
      if (e.path().extension() == ".py") {
        args.push_back(e.path().string());
      }
    }
    import = kblaster(args);
  }
  static void TearDownTestSuite() { out.reset(); }

  static fs::path folder(const std::string& id) {
    for (const auto& e : fs::directory_iterator(out->path())) {
      if (e.path().filename().string().rfind(id + "_", 0) == 0) {
        return e.path();
      }
    }
    return {};
  }
  static task::contract contract(const std::string& id) {
    return task::load_contract(folder(id) / "task.toml");
  }

  static inline std::unique_ptr<temp_dir> out;
  static inline process_result import;
};

TEST_F(lowered_imports, every_problem_file_is_imported_with_its_graph) {
  ASSERT_EQ(import.exit_code, 0) << import.output;
  int files = 0;
  for (const auto& e : fs::directory_iterator(problems)) {
    files += e.path().extension() == ".py" ? 1 : 0;
  }
  EXPECT_GE(files, 30);
  int graphs = 0;
  for (const auto& e : fs::directory_iterator(out->path())) {
    graphs += fs::is_regular_file(e.path() / "graph.json") ? 1 : 0;
  }
  EXPECT_EQ(graphs, files);
  // The graph names its ops canonically, with shapes over the task's dims and explicit defaults.
  const auto ld = load(folder("L1_102") / "graph.json");
  ASSERT_TRUE(ld.ok()) << (ld.issues.empty() ? "" : describe(ld.issues[0]));
  ASSERT_EQ(ld.g->nodes.size(), 1u);
  const node& n = ld.g->nodes[0];
  EXPECT_EQ(n.op, "torch.nn.functional.leaky_relu");
  EXPECT_EQ(n.module, "act");
  EXPECT_EQ(n.attr("negative_slope").number(), 0.2);
  EXPECT_EQ(n.attr("inplace").boolean(), false);
  EXPECT_EQ(n.outputs[0].shape, (std::vector<std::string>{"batch_size", "dim"}));
  const auto mx = load(folder("L1_110") / "graph.json");
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(mx.g->nodes[0].attr("keepdim").boolean(), false); // made explicit
  ASSERT_EQ(mx.g->nodes[0].outputs.size(), 2u);                // values, indices
  EXPECT_EQ(mx.g->nodes[0].outputs[1].type, task::dtype::int64);
}

TEST_F(lowered_imports, each_family_is_lowered_by_its_rule) {
  using F = task::family;
  const std::map<std::string, expected_lowering> expected{
      {"L1_101", {"elementwise:sigmoid", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_102", {"elementwise:leaky_relu", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_103", {"elementwise:sigmoid+mul", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_104", {"elementwise:hardtanh", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_105", {"elementwise:mul+pow+add+tanh", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_106", {"elementwise:mul", F::elementwise, {}, {{"A", "x"}}}},
      {"L1_107", {"elementwise:elu", F::elementwise, {}, {{"x", "x"}}}},
      {"L1_108", {"reduce:sum", F::reduce, {1}, {{"x", "x"}}}},
      {"L1_109", {"reduce:mean", F::reduce, {2}, {{"x", "x"}}}},
      {"L1_110", {"reduce:max", F::reduce, {1}, {{"x", "x"}}}},
      {"L1_111", {"normalize:softmax", F::normalize, {1}, {{"x", "x"}}}},
      {"L1_112", {"normalize:log_softmax", F::normalize, {1}, {{"x", "x"}}}},
      {"L1_113",
       {"normalize:layernorm",
        F::normalize,
        {2, 3},
        {{"x", "x"}, {"state_ln_weight", "weight"}, {"state_ln_bias", "bias"}}}},
      {"L1_114", {"normalize:rmsnorm", F::normalize, {1}, {{"x", "x"}}}},
      {"L1_115", {"normalize:l2", F::normalize, {1}, {{"x", "x"}}}},
      {"L1_116", {"normalize:frobenius", F::normalize, {0, 1, 2, 3}, {{"x", "x"}}}},
      {"L1_117", {"normalize:instancenorm", F::normalize, {2, 3}, {{"x", "x"}}}},
      {"L1_118",
       {"loss:mean(sub+pow)", F::loss, {1}, {{"predictions", "x"}, {"targets", "target"}}}},
      {"L1_119",
       {"loss:smooth_l1_loss", F::loss, {1}, {{"predictions", "x"}, {"targets", "target"}}}},
      {"L1_120", {"loss:kl_div", F::loss, {1}, {{"predictions", "x"}, {"targets", "target"}}}},
      {"L1_121",
       {"loss:cross_entropy", F::loss, {1}, {{"predictions", "x"}, {"targets", "target"}}}},
      {"L1_122", {"matmul:mm", F::matmul, {}, {{"A", "a"}, {"B", "b"}}}},
      {"L1_123", {"matmul:matvec", F::matmul, {}, {{"A", "a"}, {"B", "b"}}}},
      {"L1_124", {"matmul:mm+mul", F::matmul, {}, {{"A", "a"}, {"B", "b"}}}},
      {"L1_125", {"normalize:l1_mean", F::normalize, {1}, {{"x", "x"}}}},
      // Training mode: the batch's statistics per channel, over the batch and spatial axes
      // (channel rows), the weight and bias per channel.
      {"L1_128",
       {"normalize:batchnorm",
        F::normalize,
        {0, 2, 3},
        {{"x", "x"}, {"state_bn_weight", "weight"}, {"state_bn_bias", "bias"}},
        true}},
      // Statistics per sample and group of channels: axis 1 cut into num_groups, the weight and
      // bias per channel (the normalize family's groups).
      {"L1_127",
       {"normalize:groupnorm",
        F::normalize,
        {1, 2, 3},
        {{"x", "x"}, {"state_gn_weight", "weight"}, {"state_gn_bias", "bias"}},
        false,
        4}},
      // A norm followed by elementwise ops over its value: the tail folds into apply.
      {"L1_171",
       {"normalize:groupnorm+sigmoid+mul",
        F::normalize,
        {1, 2, 3},
        {{"x", "x"}, {"state_gn_weight", "weight"}, {"state_gn_bias", "bias"}},
        false,
        3}},
      // x - mean(x over the last two dims), then tanh; F.layer_norm whose normalized_shape is
      // x.shape[-1] (its length alone says which axes).
      {"L1_172", {"normalize:center+tanh", F::normalize, {2, 3}, {{"x", "x"}}}},
      {"L1_173", {"normalize:layernorm", F::normalize, {1}, {{"x", "x"}}}},
      // An affine instance norm: one group per channel.
      {"L1_170",
       {"normalize:instancenorm",
        F::normalize,
        {1, 2, 3},
        {{"x", "x"}, {"state_inorm_weight", "weight"}, {"state_inorm_bias", "bias"}},
        false,
        8}},
      // Targets [batch_size] broadcast along the last axis (input_shape_0 == batch_size).
      {"L1_167",
       {"loss:mean(mul+sub+clamp)", F::loss, {1}, {{"predictions", "x"}, {"targets", "target"}}}},
  };
  for (const auto& [id, want] : expected) {
    SCOPED_TRACE(id);
    const auto c = contract(id);
    const auto r = lower_task(c);
    ASSERT_TRUE(r.has_graph);
    ASSERT_TRUE(r.result.ok()) << r.result.message();
    EXPECT_EQ(r.c.lowering, want.rule);
    EXPECT_EQ(r.c.fam, want.fam);
    EXPECT_EQ(r.c.reduce_dims, want.reduce_dims);
    EXPECT_EQ(r.c.channel_rows, want.channel_rows);
    EXPECT_EQ(r.c.groups, want.groups);
    EXPECT_TRUE(r.c.has_family());
    for (const auto& [name, role] : want.roles) {
      const auto it = std::find_if(r.c.inputs.begin(), r.c.inputs.end(),
                                   [&](const task::tensor_spec& t) { return t.name == name; });
      ASSERT_NE(it, r.c.inputs.end()) << name;
      EXPECT_EQ(it->role, role) << name;
    }
    // The math is written under the task folder, and the lowered contract's digest covers it.
    EXPECT_EQ(r.c.math, folder(id) / "lowered" / "math.cuh");
    EXPECT_TRUE(fs::is_regular_file(r.c.math));
    EXPECT_NE(r.c.digest, c.digest);
    // Not described yet (no PyTorch here): the outputs come from the graph.
    ASSERT_FALSE(r.c.outputs.empty());
    const auto& official = r.c.official();
    EXPECT_GT(task::roofline_bytes(r.c, official), 0);
    // Products may run on tensor cores (split operands keep fp32 accuracy): their physical
    // limit is at the tensor-core rate, or an honest tensor-core candidate would be rejected.
    EXPECT_EQ(r.c.roof.tensor_cores, want.fam == F::matmul);
    task::ceilings ceil;
    ceil.fp32_flops = ceil.peak_fp32_flops = 60e12;
    ceil.tensor_flops = ceil.peak_tensor_flops = 900e12;
    EXPECT_EQ(task::flop_ceiling(r.c, ceil, true), want.fam == F::matmul ? 900e12 : 60e12);
  }
}

TEST_F(lowered_imports, golden_lowered_math) {
  // The generated headers, byte for byte (regenerate with the test's output when a rule
  // deliberately changes).
  for (const auto& [id, file] : std::map<std::string, std::string>{
           {"L1_101", "sigmoid.cuh"},
           {"L1_105", "tanh_gelu.cuh"},
           {"L1_106", "scale_by_scalar.cuh"},
           {"L1_108", "sum_keepdim.cuh"},
           {"L1_111", "softmax.cuh"},
           {"L1_113", "layernorm.cuh"},
           {"L1_114", "rmsnorm.cuh"},
           {"L1_118", "mse.cuh"},
           {"L1_121", "cross_entropy.cuh"},
           {"L1_124", "matmul_scaled.cuh"},
           {"L1_167", "hinge.cuh"},
           {"L1_171", "groupnorm_swish.cuh"}}) {
    SCOPED_TRACE(id);
    const auto r = lower_task(contract(id));
    ASSERT_TRUE(r.result.ok()) << r.result.message();
    EXPECT_EQ(read_file(r.c.math), read_file(golden / file)) << r.c.math.string();
  }
  // The scalar the forward takes is baked into the map; eps into the statistics.
  EXPECT_NE(read_file(golden / "scale_by_scalar.cuh").find("A(3.5)"), std::string::npos);
  EXPECT_NE(read_file(golden / "rmsnorm.cuh").find("A(1.0000000000000001e-05)"),
            std::string::npos);
}

#ifndef KBLASTER_CUDA_INCLUDE
#define KBLASTER_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

TEST_F(lowered_imports, lowered_math_computes_what_pytorch_does) {
  // A host program over the generated headers (each in a namespace of its own), evaluated in
  // double against PyTorch's definitions written out by hand.
  const std::map<std::string, std::string> ns{
      {"L1_101", "sigmoid"}, {"L1_102", "leaky"},    {"L1_103", "swish"},  {"L1_104", "hardtanh"},
      {"L1_105", "gelu"},    {"L1_106", "scale"},    {"L1_107", "elu"},    {"L1_108", "sum"},
      {"L1_109", "mean"},    {"L1_110", "max"},      {"L1_111", "softmax"}, {"L1_112", "logsoftmax"},
      {"L1_113", "ln"},      {"L1_114", "rms"},      {"L1_115", "l2"},     {"L1_116", "fro"},
      {"L1_117", "inorm"},   {"L1_118", "mse"},      {"L1_119", "sl1"},    {"L1_120", "kl"},
      {"L1_121", "ce"},      {"L1_124", "mmscaled"}, {"L1_125", "l1mean"}, {"L1_167", "hinge"},
      {"L1_127", "gnorm"},   {"L1_171", "gswish"},   {"L1_172", "center"}, {"L1_173", "fln"}};
  std::string prog = "#include <kblaster/device/core.cuh>\n#include <kblaster/device/lowered.cuh>\n"
                     "#include <kblaster/device/online_softmax.cuh>\n#include <cmath>\n#include <cstdio>\n";
  for (const auto& [id, name] : ns) {
    const auto r = lower_task(contract(id));
    ASSERT_TRUE(r.result.ok()) << id;
    prog += "namespace " + name + " {\n#include \"" + r.c.math.string() + "\"\n}\n";
  }
  prog += R"(
static int failures = 0;
static void expect(const char* what, double got, double want) {
  if (!(std::fabs(got - want) <= 1e-12 * (1 + std::fabs(want)))) {
    std::printf("%s: got %.17g, want %.17g\n", what, got, want);
    ++failures;
  }
}
// A row statistic's state over values (the family's accumulate and combine).
template <class Op> typename Op::state over(std::initializer_list<double> xs) {
  typename Op::state a = Op::init(), b = Op::init();
  int i = 0;
  for (double x : xs) {
    if (i++ % 2 == 0) a = Op::accumulate(a, x); else b = Op::accumulate(b, x);
  }
  return Op::combine(a, b);
}
int main() {
  expect("sigmoid", sigmoid::kb_op<double>::map(0.3), 1 / (1 + std::exp(-0.3)));
  expect("leaky_relu", leaky::kb_op<double>::map(-1.5), -0.3);
  expect("swish", swish::kb_op<double>::map(0.7), 0.7 / (1 + std::exp(-0.7)));
  expect("hardtanh hi", hardtanh::kb_op<double>::map(3), 2);
  expect("hardtanh lo", hardtanh::kb_op<double>::map(-3), -2);
  const double x = 0.8;
  expect("tanh gelu", gelu::kb_op<double>::map(x),
         0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
  expect("scale", scale::kb_op<double>::map(2.0), 7.0);
  expect("elu", elu::kb_op<double>::map(-1.0), 0.5 * (std::exp(-1.0) - 1));
  expect("elu positive", elu::kb_op<double>::map(2.0), 2.0);
  using S = sum::kb_op<double>;
  expect("sum", S::finalize(over<S>({1, 2, 4}), 3, nullptr), 7);
  using M = mean::kb_op<double>;
  expect("mean", M::finalize(over<M>({1, 2, 6}), 3, nullptr), 3);
  using X = max::kb_op<double>;
  expect("max", X::finalize(over<X>({1, -2, 6, 3}), 4, nullptr), 6);
  using SM = softmax::kb_op<double>;
  const auto sm = SM::finalize(over<SM>({1, 2, 3}), 3, nullptr);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect("softmax", SM::apply(2, sm, 1, 0), std::exp(2.0) / z);
  using LS = logsoftmax::kb_op<double>;
  expect("log_softmax", LS::apply(2, LS::finalize(over<LS>({1, 2, 3}), 3, nullptr), 1, 0),
         2 - std::log(z));
  using LN = ln::kb_op<double>;
  expect("layernorm", LN::apply(3, LN::finalize(over<LN>({1, 2, 3}), 3, nullptr), 2, 1),
         (3 - 2) / std::sqrt(2.0 / 3 + 1e-5) * 2 + 1);
  // GroupNorm's apply gets its channel's weight and bias from the family; then 2 * v * sigmoid(v).
  using GN = gnorm::kb_op<double>;
  const auto gs = GN::finalize(over<GN>({1, 3}), 2, nullptr);
  expect("groupnorm", GN::apply(3, gs, 2, 0.5), 1 / std::sqrt(1 + 1e-5) * 2 + 0.5);
  using GS = gswish::kb_op<double>;
  const double gv = 1 / std::sqrt(1 + 1e-5) * 2 + 0.5;
  expect("groupnorm + swish tail", GS::apply(3, GS::finalize(over<GS>({1, 3}), 2, nullptr), 2, 0.5),
         2 * gv / (1 + std::exp(-gv)));
  using CT = center::kb_op<double>;
  expect("center + tanh", CT::apply(3, CT::finalize(over<CT>({1, 2, 6}), 3, nullptr), 1, 0),
         std::tanh(0.0));
  expect("center + tanh, off the mean", CT::apply(6, CT::finalize(over<CT>({1, 2, 6}), 3, nullptr),
                                                   1, 0),
         std::tanh(3.0));
  using FL = fln::kb_op<double>;
  expect("F.layer_norm eps 1e-6", FL::apply(3, FL::finalize(over<FL>({1, 3}), 2, nullptr), 1, 0),
         1 / std::sqrt(1 + 1e-6));
  using IN = inorm::kb_op<double>;
  expect("instancenorm", IN::apply(1, IN::finalize(over<IN>({1, 3}), 2, nullptr), 1, 0),
         -1 / std::sqrt(1 + 1e-5));
  using R = rms::kb_op<double>;
  expect("rmsnorm", R::apply(1, R::finalize(over<R>({1, 2}), 2, nullptr), 1, 0),
         1 / std::sqrt(2.5 + 1e-5));
  using L2 = l2::kb_op<double>;
  expect("l2", L2::apply(3, L2::finalize(over<L2>({3, 4}), 2, nullptr), 1, 0), 0.6);
  using FR = fro::kb_op<double>;
  expect("frobenius", FR::apply(4, FR::finalize(over<FR>({3, -4}), 2, nullptr), 1, 0), 0.8);
  using L1 = l1mean::kb_op<double>;
  expect("l1 mean", L1::apply(3, L1::finalize(over<L1>({-1, 3}), 2, nullptr), 1, 0), 1.5);
  expect("mse elem", mse::kb_op<double>::elem(3, 1, nullptr), 4);
  expect("mse finalize", mse::kb_op<double>::finalize(8, 4, 2), 2);
  expect("smooth l1 small", sl1::kb_op<double>::elem(0.5, 0, nullptr), 0.125);
  expect("smooth l1 large", sl1::kb_op<double>::elem(3, 0, nullptr), 2.5);
  expect("kl elem", kl::kb_op<double>::elem(0.2, 0.5, nullptr), 0.5 * std::log(0.5 / 0.2));
  expect("kl zero target", kl::kb_op<double>::elem(0.2, 0, nullptr), 0);
  expect("kl batchmean", kl::kb_op<double>::finalize(6, 12, 3), 2);
  using CE = ce::kb_op<double>;
  expect("cross entropy row", CE::row_loss(over<CE>({1, 2, 3}), 2, 3, nullptr), std::log(z) - 2);
  expect("cross entropy mean", CE::finalize_rows(6, 3), 2);
  expect("matmul epilogue", mmscaled::kb_op<double>::epilogue(4), 2);
  expect("hinge margin", hinge::kb_op<double>::elem(0.25, -1, nullptr), 1.25);
  expect("hinge clamped", hinge::kb_op<double>::elem(2, 1, nullptr), 0);
  expect("hinge mean", hinge::kb_op<double>::finalize(6, 4, 2), 1.5);
  return failures == 0 ? 0 : 1;
}
)";
  temp_dir t("kb-lowered-math");
  write_file_atomic(t.path() / "check.cpp", prog);
  EXPECT_TRUE(host_program::builds_and_passes({"c++", "-std=c++20", "-I", (root / "include").string(),
                                          "-I", KBLASTER_CUDA_INCLUDE,
                                          (t.path() / "check.cpp").string()},
                                         t.path() / "check"));
}

TEST_F(lowered_imports, ops_no_rule_covers_and_bad_graphs_end_with_their_reason) {
  const std::map<std::string, expected_issue> expected{
      {"L1_163", {reason::no_lowering, "nn.Conv2d"}},
      {"L1_130", {reason::unknown_op, "torch.special.bessel_j0"}},
      {"L1_131", {reason::inplace, "torch.relu"}},
      {"L1_132", {reason::dynamic_shape, "torch.reshape"}},
      {"L1_133", {reason::mixed_dtype, "torch.add"}},
      {"L1_134", {reason::construct, "If"}},
      {"L1_135", {reason::no_lowering, "graph"}},
      {"L1_169", {reason::dynamic_shape, "torch.mul"}},
  };
  for (const auto& [id, want] : expected) {
    SCOPED_TRACE(id);
    const auto c = contract(id);
    const auto r = lower_task(c);
    ASSERT_TRUE(r.has_graph);
    ASSERT_FALSE(r.result.ok());
    ASSERT_FALSE(r.result.issues.empty());
    EXPECT_EQ(r.result.issues[0].why, want.why) << r.result.message();
    EXPECT_EQ(r.result.issues[0].op, want.op) << r.result.message();
    EXPECT_EQ(r.result.unsupported_ops().front(), want.op);
    // The contract comes back unlowered, saying why; no strategy is offered and generating one
    // names the op.
    EXPECT_TRUE(r.c.lowering.empty());
    EXPECT_FALSE(r.c.has_family());
    ASSERT_FALSE(r.c.not_lowered.empty());
    EXPECT_NE(r.c.not_lowered[0].find(want.op), std::string::npos) << r.c.not_lowered[0];
    EXPECT_TRUE(search::strategies_for(r.c).empty());
    try {
      search::generate(r.c, search::all_strategies().front(), json::object());
      ADD_FAILURE() << "generate accepted a task that is not lowered";
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(want.op), std::string::npos) << e.what();
    }
    const auto record = json::parse(read_file(folder(id) / "lowered" / "lowering.json"));
    EXPECT_EQ(record.at("unsupported_ops").at(0), want.op);
  }
  // Broadcasting dims equal at the official shape (dim sizes the module, batch_size the input):
  // the import keeps them equal at every check shape, where the module itself needs them equal,
  // so the equality holds and the graph is refused for its chain only, not for its shapes.
  const auto equal = contract("L1_168");
  for (const auto& sc : equal.shapes) {
    EXPECT_EQ(sc.dims.at("dim"), sc.dims.at("batch_size")) << sc.name;
  }
  const auto chain = lower_task(equal);
  ASSERT_FALSE(chain.result.issues.empty());
  EXPECT_NE(chain.result.issues[0].why, reason::dynamic_shape) << chain.result.message();
  const auto unequal = lower_task(contract("L1_169")).result.message();
  EXPECT_NE(unequal.find("needs dim == batch_size"), std::string::npos) << unequal;
}

TEST_F(lowered_imports, strategies_are_offered_and_generated_for_lowered_tasks) {
  const std::map<std::string, std::string> offered{{"L1_101", "elementwise.vectorized"},
                                                   {"L1_111", "normalize.block_row"},
                                                   {"L1_108", "reduce."},
                                                   {"L1_113", "normalize."},
                                                   {"L1_118", "loss."},
                                                   {"L1_121", "loss."},
                                                   {"L1_122", "matmul."}};
  for (const auto& [id, prefix] : offered) {
    SCOPED_TRACE(id);
    const auto r = lower_task(contract(id));
    const auto list = search::strategies_for(r.c);
    ASSERT_FALSE(list.empty());
    EXPECT_TRUE(std::any_of(list.begin(), list.end(), [&](const search::strategy* s) {
      return s->name.rfind(prefix, 0) == 0;
    }));
    const std::string src = search::generate(r.c, *list.front(), json::object());
    EXPECT_NE(src.find("#include KB_TASK_MATH"), std::string::npos);
    if (r.c.fam != task::family::elementwise) {
      EXPECT_NE(src.find("kb_family_config"), std::string::npos);
    }
  }
  // The family config indexes the inputs by role: LayerNorm's weight and bias are the module's
  // state, after the forward's input.
  EXPECT_NE(task::family_config_source(lower_task(contract("L1_113")).c).find("{2, 4, 0, 1, 2, 0, 0}"),
            std::string::npos)
      << task::family_config_source(lower_task(contract("L1_113")).c);
  // GroupNorm's config names its groups; the strategies for plain rows are offered, the strided
  // columns (which refuse groups) are not.
  const auto gn = lower_task(contract("L1_127")).c;
  EXPECT_NE(task::family_config_source(gn).find("{1, 4, 0, 1, 2, 0, 4}"), std::string::npos)
      << task::family_config_source(gn);
  const auto gn_offered = search::strategies_for(gn);
  EXPECT_FALSE(gn_offered.empty());
  for (const auto* s : gn_offered) {
    EXPECT_NE(s->name, "normalize.strided_columns");
    EXPECT_NE(s->name, "normalize.channel_split");
  }
}

TEST_F(lowered_imports, the_cli_lowers_a_batch_and_goes_on_past_bad_tasks) {
  const fs::path report = out->path() / "lower.json";
  const auto r = kblaster({"--tasks", out->path().string(), "tasks", "lower", "--suite", "lowtest",
                           "--json", report.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json::parse(read_file(report));
  std::map<std::string, std::string> status;
  for (const auto& t : j) {
    status[t.at("task").get<std::string>()] = t.at("status").get<std::string>();
  }
  EXPECT_EQ(status.at("L1_101"), "lowered");
  EXPECT_EQ(status.at("L1_126"), "lowered");
  EXPECT_EQ(status.at("L1_163"), "not_lowered");
  EXPECT_EQ(status.at("L1_130"), "not_lowered");
  EXPECT_EQ(status.at("L1_135"), "not_lowered");
  EXPECT_GE(std::count_if(status.begin(), status.end(),
                          [](const auto& s) { return s.second == "lowered"; }),
            25);
  EXPECT_NE(r.output.find("nn.Conv2d: no_lowering"), std::string::npos) << r.output;
  // `strategies list` sees the lowered task.
  const auto s = kblaster({"--tasks", out->path().string(), "strategies", "list", "--task",
                           "L1_101"});
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("elementwise.vectorized"), std::string::npos) << s.output;
}

TEST(graph_json, malformed_documents_give_reasons_not_exceptions) {
  const json good = json::parse(R"({
    "version": 1,
    "inputs": [{"value": "x", "kind": "tensor", "shape": ["N"], "dtype": "float32"}],
    "state": [],
    "nodes": [{"op": "torch.relu", "inputs": [{"value": "x", "shape": ["N"], "dtype": "float32"}],
               "outputs": [{"value": "v0", "shape": ["N"], "dtype": "float32"}], "attrs": {}}],
    "outputs": [{"value": "v0", "shape": ["N"], "dtype": "float32"}],
    "unsupported": []})");
  const auto ok = from_json(good);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(to_json(*ok.g), good); // one mapping, both ways
  const auto first_reason = [](const json& j) {
    const auto l = from_json(j);
    return l.issues.empty() ? std::string("none") : to_string(l.issues.front().why);
  };
  EXPECT_EQ(first_reason(json::array()), "malformed");
  EXPECT_EQ(first_reason(json{{"version", 2}}), "malformed");
  json j = good;
  j.erase("nodes");
  EXPECT_EQ(first_reason(j), "malformed");
  j = good;
  j["nodes"][0]["inputs"][0]["value"] = "y"; // read before it is defined
  EXPECT_EQ(first_reason(j), "malformed");
  j = good;
  j["nodes"][0]["op"] = "torch.frobnicate";
  EXPECT_EQ(first_reason(j), "unknown_op");
  j = good;
  j["nodes"][0]["attrs"]["inplace"] = true;
  EXPECT_EQ(first_reason(j), "inplace");
  j = good;
  j["inputs"][0]["shape"] = nullptr;
  EXPECT_EQ(first_reason(j), "dynamic_shape");
  j = good;
  j["nodes"][0]["op"] = "torch.add";
  j["nodes"][0]["inputs"].push_back({{"value", "x"}, {"shape", {"N"}}, {"dtype", "float16"}});
  EXPECT_EQ(first_reason(j), "mixed_dtype");
  j = good;
  j["nodes"][0]["outputs"][0]["dtype"] = "complex64";
  EXPECT_EQ(first_reason(j), "malformed");
  // A shape that is not over the task's dims is a dynamic shape once the dims are known.
  const std::map<std::string, int64_t> dims{{"M", 4}};
  const auto issues = validate(*ok.g, &dims);
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues.front().why, reason::dynamic_shape);
  // Dims broadcasting took as equal round-trip and are checked at each shape's dims.
  j = good;
  j["equal_dims"] = json::array(
      {{{"op", "torch.mul"}, {"dims", {"N", "M"}}, {"detail", "torch.mul: broadcasting"}}});
  const auto eq = from_json(j);
  ASSERT_TRUE(eq.ok());
  EXPECT_EQ(to_json(*eq.g), j);
  const std::map<std::string, int64_t> same{{"N", 8}, {"M", 8}};
  EXPECT_TRUE(validate(*eq.g, &same).empty());
  const std::map<std::string, int64_t> differ{{"N", 8}, {"M", 9}};
  const auto bad = validate(*eq.g, &differ);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].why, reason::dynamic_shape);
  EXPECT_EQ(bad[0].detail, "torch.mul: broadcasting needs N == M (here 8 and 9)");
  j["equal_dims"][0]["dims"] = {"N"};
  EXPECT_EQ(first_reason(j), "malformed");
  // A missing file and a file that is not JSON.
  temp_dir t("kb-graph");
  EXPECT_EQ(to_string(load(t.path() / "graph.json").issues.at(0).why), "malformed");
  write_file_atomic(t.path() / "graph.json", "{ not json");
  EXPECT_EQ(to_string(load(t.path() / "graph.json").issues.at(0).why), "malformed");
}

TEST(graph_rules, every_rule_has_a_family_prefix) {
  ASSERT_GE(rules().size(), 8u);
  for (const auto& r : rules()) {
    const std::string fam = r.name.substr(0, r.name.find(':'));
    EXPECT_TRUE(task::family_from_string(fam).has_value()) << r.name;
  }
}

} // namespace
} // namespace kb::graph
