// The fusion planner (src/graph/fuse.cpp) on Level-2-style problem files written for these tests
// (tests/data/kernelbench_l2/*.py): each file's forward, read by scripts/kernelbench_parse.py, is
// planned and the plan compared exactly with its golden record (<name>.plan.json): the anchor,
// each step's rule, ops, edge (fused or split), reason and kernel, and the epilogue's operands.
// Files 90-93 are bad inputs: an op the graph does not know, a chain with a branch, a forward
// with no anchor, an op the planner does not place; each ends with its typed reason. The
// one-kernel plans are lowered onto matmul or conv with a generated epilogue (rule, roles
// epilogue<k>, the family config's operand indices); a plan of several kernels is not lowered and
// names the op that starts the second kernel.
#include "common/fs.hpp"
#include "common/process.hpp"
#include "graph/fuse.hpp"
#include "graph/graph.hpp"
#include "graph/lower.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

namespace kb::graph {
namespace {

using nlohmann::json;

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path problems = root / "tests" / "data" / "kernelbench_l2";

// Every problem file's graph, read once by the parser.
const std::map<std::string, graph>& graphs() {
  static const std::map<std::string, graph> all = [] {
    std::map<std::string, graph> out;
    const temp_dir tmp("kb-fusion-plan");
    const fs::path result = tmp.path() / "parsed.json";
    process_spec spec;
    spec.argv = {"python3", (root / "scripts" / "kernelbench_parse.py").string(), "--out",
                 result.string()};
    for (const auto& e : fs::directory_iterator(problems)) {
      if (e.path().extension() == ".py") {
        spec.argv.push_back(e.path().string());
      }
    }
    spec.timeout = std::chrono::seconds(120);
    const process_result r = run_process(spec);
    EXPECT_TRUE(r.ok()) << r.output;
    for (const auto& d : json::parse(read_file(result))) {
      auto ld = from_json(d.at("graph"));
      EXPECT_TRUE(ld.g.has_value()) << d.at("name");
      if (ld.g) {
        out.emplace(d.at("name").get<std::string>(), *ld.g);
      }
    }
    return out;
  }();
  return all;
}

TEST(FusionPlan, EveryProblemFileMatchesItsGoldenPlan) {
  int compared = 0;
  for (const auto& e : fs::directory_iterator(problems)) {
    if (e.path().extension() != ".py") {
      continue;
    }
    const std::string name = e.path().stem().string();
    ASSERT_TRUE(graphs().count(name) != 0) << name;
    const json got = to_json(plan_fusion(graphs().at(name)));
    const fs::path golden = problems / (name + ".plan.json");
    if (std::getenv("KB_UPDATE_GOLDEN") != nullptr) { // regenerates the records, to review
      write_file_atomic(golden, got.dump(2) + "\n");
    }
    ASSERT_TRUE(fs::is_regular_file(golden)) << golden << "\n" << got.dump(2);
    EXPECT_EQ(got, json::parse(read_file(golden))) << name << "\n" << got.dump(2);
    ++compared;
  }
  EXPECT_GE(compared, 19);
}

TEST(FusionPlan, BadInputsEndWithTheirReason) {
  const std::map<std::string, std::pair<std::string, std::string>> expected{
      {"90_Linear_UnknownOp", {"unknown_op", "torch.lgamma"}},
      {"91_Linear_Branch", {"branch", "torch.sub"}},
      {"92_Elementwise_NoAnchor", {"no_anchor", "graph"}},
      {"93_Conv2d_Cumsum", {"unknown_op", "torch.cumsum"}},
  };
  for (const auto& [name, why] : expected) {
    const fusion_plan p = plan_fusion(graphs().at(name));
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.coverage(), "none");
    EXPECT_EQ(to_string(p.problems.front().why), why.first) << name;
    EXPECT_EQ(p.problems.front().op, why.second) << name;
    EXPECT_FALSE(p.problems.front().detail.empty());
  }
}

TEST(FusionPlan, ChoicesAtEachEdge) {
  // Elementwise ops, eval-mode BatchNorm and dropout fuse into the anchor's kernel; reductions,
  // softmax, norms with statistics and pooling start a kernel, and what follows them fuses there.
  const fusion_plan bn = plan_fusion(graphs().at("06_Conv2d_BatchNorm_ReLU"));
  ASSERT_TRUE(bn.ok());
  EXPECT_EQ(bn.kernels, 1);
  EXPECT_EQ(bn.steps.at(1).ops, (std::vector<std::string>{"nn.BatchNorm2d", "torch.relu"}));
  const fusion_plan deep = plan_fusion(graphs().at("15_Conv3d_Softmax_MaxPool_Sum"));
  ASSERT_TRUE(deep.ok());
  EXPECT_EQ(deep.kernels, 4);
  EXPECT_EQ(deep.coverage(), "split");
  for (size_t i = 1; i < deep.steps.size(); ++i) {
    EXPECT_EQ(deep.steps[i].edge, fuse_edge::split);
    EXPECT_EQ(deep.steps[i].kernel, static_cast<int>(i));
  }
  const fusion_plan lse = plan_fusion(graphs().at("12_ConvT2d_LogSumExp_Mish"));
  ASSERT_EQ(lse.steps.size(), 3u);
  EXPECT_EQ(lse.steps[1].why, fuse_reason::reduction_spans_tiles);
  EXPECT_EQ(lse.steps[2].edge, fuse_edge::fused);
  EXPECT_EQ(lse.steps[2].kernel, 1);
}

// A contract for lowering a graph with: the forward's inputs, then the graph's state, by name.
task::contract contract_for(const graph& g, const fs::path& dir) {
  task::contract c;
  c.id = "fused";
  c.kind = task::task_kind::pytorch;
  c.dir = dir;
  for (const auto& in : g.inputs) {
    task::tensor_spec t;
    t.name = in.value;
    t.shape = in.shape;
    c.inputs.push_back(t);
  }
  for (const auto& s : g.state) {
    task::tensor_spec t;
    t.name = s.value;
    t.role = "state";
    t.type = s.type;
    t.shape = s.shape;
    c.inputs.push_back(t);
  }
  return c;
}

TEST(FusionPlan, OneKernelPlansLowerOntoTheAnchorsFamily) {
  const std::map<std::string, std::string> rules{
      {"01_Linear_Scale_LeakyReLU", "matmul:linear+mul+leaky_relu"},
      {"02_Linear_ParamBias_GELU", "matmul:linear+add+gelu"},
      {"03_Linear_Sub_Mul_ReLU", "matmul:linear+sub+mul+relu"},
      {"04_Conv2d_ChannelBias_Tanh", "conv:conv2d+add+tanh"},
      {"05_ConvT3d_Scale_Clamp", "conv:conv_transpose3d+mul+clamp"},
      {"06_Conv2d_BatchNorm_ReLU", "conv:conv2d+BatchNorm2d+relu"},
      {"07_Linear_Swish_Residual", "matmul:linear+sigmoid+mul+add"},
  };
  for (const auto& [name, rule] : rules) {
    const graph& g = graphs().at(name);
    const task::contract c = contract_for(g, fs::temp_directory_path());
    const outcome o = lower(g, c);
    ASSERT_TRUE(o.ok()) << name << ": " << o.message();
    EXPECT_EQ(o.low->rule, rule);
    EXPECT_NE(o.low->math.find("const kb::epi::operands& ops"), std::string::npos) << o.low->math;
  }
  // The Linear's bias is operand 0, a parameter after it operand 1; the weight is b, transposed.
  const graph& g = graphs().at("02_Linear_ParamBias_GELU");
  const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.low->roles.at("x"), "a");
  EXPECT_EQ(o.low->roles.at("state_fc_weight"), "b");
  EXPECT_EQ(o.low->roles.at("state_shift"), "epilogue0");
  EXPECT_EQ(o.low->fam, task::family::matmul);
  task::contract applied = contract_for(g, fs::temp_directory_path());
  o.low->params(applied);
  ASSERT_TRUE(applied.matmul.has_value());
  EXPECT_TRUE(applied.matmul->trans_b);
  const graph& bn = graphs().at("06_Conv2d_BatchNorm_ReLU");
  const outcome ob = lower(bn, contract_for(bn, fs::temp_directory_path()));
  ASSERT_TRUE(ob.ok());
  EXPECT_EQ(ob.low->roles.at("state_conv_bias"), "bias");
  EXPECT_EQ(ob.low->roles.at("state_bn_running_mean"), "epilogue2");
  EXPECT_EQ(ob.low->roles.count("state_bn_num_batches_tracked"), 0u);
  // The family config carries the operands' input indices.
  task::contract cc = contract_for(bn, fs::temp_directory_path());
  cc.fam = task::family::conv;
  cc.lowering = ob.low->rule;
  for (auto& in : cc.inputs) {
    if (const auto it = ob.low->roles.find(in.name); it != ob.low->roles.end()) {
      in.role = it->second;
    }
  }
  ob.low->params(cc);
  const std::string config = task::family_config_source(cc);
  EXPECT_NE(config.find("/*epi=*/{"), std::string::npos) << config;
}

TEST(FusionPlan, PlansOfSeveralKernelsNameTheOpThatSplits) {
  const graph& g = graphs().at("08_Linear_Dropout_Softmax");
  const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.unsupported_ops(), std::vector<std::string>{"torch.softmax"});
  EXPECT_NE(o.message().find("softmax_spans_tiles"), std::string::npos) << o.message();
  const graph& b = graphs().at("91_Linear_Branch");
  const outcome ob = lower(b, contract_for(b, fs::temp_directory_path()));
  ASSERT_FALSE(ob.ok());
  EXPECT_NE(ob.message().find("branch"), std::string::npos) << ob.message();
}

} // namespace
} // namespace kb::graph
