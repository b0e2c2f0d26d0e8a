// The fusion planner (src/graph/fuse.cpp) on Level-2-style problem files written for these tests
// (tests/data/kernelbench_l2/*.py): each file's forward, read by scripts/kernelbench_parse.py, is
// planned and the plan compared exactly with its golden record (<name>.plan.json): the anchor,
// each step's rule, ops, edge (fused or split), reason and kernel, and the epilogue's operands.
// Files 90-93 are bad inputs: an op the graph does not know, a chain with a branch, a forward
// with no anchor, an op the planner does not place; each ends with its typed reason. The
// one-kernel plans are lowered onto matmul or conv with a generated epilogue (rule, roles
// epilogue<k>, the family config's operand indices); a plan of several kernels is not lowered and
// names the op that starts the second kernel. Files 17-24 are chains of several kernels, lowered
// into one candidate (kblaster/device/chain.cuh): the anchor with its epilogue into the
// workspace, then a reduce, normalize or pool launch per kernel, with an elementwise map where
// the epilogue reads per-channel operands; their generated math is evaluated on the host in
// double, and candidates of the anchor's strategies over it are compiled with nvcc. Files 06 and
// 94 put a batch norm (batch statistics, with and without running statistics) in a chain, and 25
// multiplies by a transposed parameter (x @ W.T). File 26 reads a second forward input of the
// output's shape after the norm kernel (at the element's index); 27 reads one in the anchor's
// own kernel (a map pass after the anchor, at the element's index), 35 in a later product's
// kernel and is refused. Files 36 and 37 end in a result larger than the chain's value (a
// per-channel bias over a row minimum; the forward's input added to a spatial mean), written by a
// broadcast pass of its own. Files 38 and 39 pool the forward's input before the convolution (the
// pooling is the chain's kernel 0); 95, an elementwise op before it, is refused.
#include "build/build.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "graph/fuse.hpp"
#include "graph/graph.hpp"
#include "graph/lower.hpp"
#include "host_program_support.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <kblaster/candidate.h>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fmt/format.h>

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
  EXPECT_GE(compared, 28);
}

TEST(FusionPlan, BadInputsEndWithTheirReason) {
  const std::map<std::string, std::pair<std::string, std::string>> expected{
      {"90_Linear_UnknownOp", {"unknown_op", "torch.lgamma"}},
      {"91_Linear_Branch", {"branch", "torch.sum"}},
      {"92_Elementwise_NoAnchor", {"no_anchor", "graph"}},
      {"93_Conv2d_Cumsum", {"unknown_op", "torch.cumsum"}},
      {"35_Linear_Linear_AddInput", {"operand_not_broadcast", "torch.add"}},
      {"95_Scale_Conv2d", {"before_anchor", "torch.mul"}},
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
  // Elementwise ops and dropout fuse into the anchor's kernel; reductions, softmax, norms with
  // statistics and pooling start a kernel, and what follows them fuses there. A BatchNorm
  // normalizes by the batch's statistics (KernelBench's training-mode forward), so it is a norm
  // with statistics, not a per-channel affine map, whatever track_running_stats says.
  const fusion_plan one = plan_fusion(graphs().at("03_Linear_Sub_Mul_ReLU"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.kernels, 1);
  const fusion_plan bn = plan_fusion(graphs().at("06_Conv2d_BatchNorm_ReLU"));
  ASSERT_TRUE(bn.ok());
  EXPECT_EQ(bn.kernels, 2);
  EXPECT_EQ(bn.steps.at(1).edge, fuse_edge::split);
  EXPECT_EQ(bn.steps.at(1).why, fuse_reason::norm_needs_statistics);
  EXPECT_EQ(bn.steps.at(1).ops, std::vector<std::string>{"nn.BatchNorm2d"});
  EXPECT_EQ(bn.steps.at(2).edge, fuse_edge::fused); // the relu, in the norm's apply pass
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
  // A per-channel operand after a convolution: its bias is the family's, the parameter an
  // epilogue operand.
  const graph& bn = graphs().at("04_Conv2d_ChannelBias_Tanh");
  const outcome ob = lower(bn, contract_for(bn, fs::temp_directory_path()));
  ASSERT_TRUE(ob.ok());
  EXPECT_EQ(ob.low->roles.at("state_conv_bias"), "bias");
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

TEST(FusionPlan, PlansOfSeveralKernelsThatAreNotLoweredNameTheirOp) {
  const graph& b = graphs().at("91_Linear_Branch");
  const outcome ob = lower(b, contract_for(b, fs::temp_directory_path()));
  ASSERT_FALSE(ob.ok());
  EXPECT_NE(ob.message().find("branch"), std::string::npos) << ob.message();
}

TEST(FusionPlan, PlansOfSeveralKernelsLowerIntoAChain) {
  // The anchor's rule, then each later kernel's step and the epilogue fused into it, split by '|'.
  const std::map<std::string, std::string> rules{
      {"08_Linear_Dropout_Softmax", "matmul:linear+dropout|softmax"},
      {"09_Conv3d_GroupNorm_Clamp", "conv:conv3d|group_norm+clamp"},
      {"10_Linear_Sum_Scale", "matmul:linear|sum+mul"},
      {"11_Conv2d_MaxPool_Sigmoid", "conv:conv2d|max2d+sigmoid"},
      {"12_ConvT2d_LogSumExp_Mish", "conv:conv_transpose2d|logsumexp+mish"},
      {"13_Conv2d_InstanceNorm_Div", "conv:conv2d|instance_norm+div"},
      {"14_Linear_LayerNorm_GELU", "matmul:linear|layer_norm+gelu"},
      {"15_Conv3d_Softmax_MaxPool_Sum", "conv:conv3d|softmax|max3d|sum"},
      {"16_Linear_Max_Sub_GELU", "matmul:linear|max+sub+gelu"},
      {"17_Linear_LogSumExp_ReLU", "matmul:linear|logsumexp+relu"},
      {"18_Conv2d_GroupNorm_Mean", "conv:conv2d|group_norm|mean"},
      {"19_Conv2d_ReLU_GlobalAvgPool_Scale", "conv:conv2d+relu|adaptive_avg2d(mean)+mul"},
      {"20_ConvT2d_AvgPool_Softmax", "conv:conv_transpose2d|avg2d|softmax"},
      {"21_Conv3d_InstanceNormAffine_Sigmoid", "conv:conv3d|instance_norm+sigmoid"},
      {"22_Conv2d_MaxOverChannels_Tanh", "conv:conv2d|max+tanh"},
      {"23_Linear_LogSoftmax_ParamScale", "matmul:linear|log_softmax+mul"},
      {"24_Conv2d_GroupNorm_MaxPool_Sum", "conv:conv2d|group_norm|max2d|sum"},
      // With or without running statistics, a BatchNorm normalizes by the batch's statistics.
      {"06_Conv2d_BatchNorm_ReLU", "conv:conv2d|batch_norm+relu"},
      {"94_Conv2d_BatchStats_ReLU", "conv:conv2d|batch_norm+relu"},
      {"25_Matmul_WeightT_Div_Sum", "matmul:matmul+div|sum+mul"},
      {"26_Linear_LayerNorm_AddInput", "matmul:linear|layer_norm+add+mul"},
      {"36_Linear_GroupNorm_Min_ChannelBias", "matmul:linear|group_norm|min|broadcast+add+tanh"},
      {"37_Conv2d_GlobalMean_GELU_AddInput", "conv:conv2d|mean+gelu|broadcast+add+mul"},
      // A pass over the forward's input before the convolution.
      {"38_AvgPool_Conv2d_ReLU", "conv:avg2d>conv2d+relu"},
      {"39_MaxPool3d_ConvT3d_Clamp_SpatialSoftmax_Scale",
       "conv:max3d>conv_transpose3d+clamp|softmax+mul"},
  };
  for (const auto& [name, rule] : rules) {
    SCOPED_TRACE(name);
    const graph& g = graphs().at(name);
    const fusion_plan p = plan_fusion(g);
    ASSERT_GT(p.kernels, 1);
    const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
    ASSERT_TRUE(o.ok()) << o.message();
    EXPECT_EQ(o.low->rule, rule);
    EXPECT_EQ(o.low->fam, p.anchor.rfind("nn.Conv", 0) == 0 ? task::family::conv
                                                             : task::family::matmul);
    // One launch per kernel after the anchor, in one generated chain.
    const std::string& m = o.low->math;
    EXPECT_NE(m.find("struct kb_chain"), std::string::npos);
    EXPECT_NE(m.find(fmt::format("static constexpr int kernels = {};", p.kernels)), std::string::npos)
        << m;
    size_t launches = 0;
    for (const std::string call : {"::launch_naive<kb_step", "::broadcast_map<kb_map"}) {
      for (size_t at = m.find(call); at != std::string::npos; at = m.find(call, at + 1)) {
        ++launches;
      }
    }
    EXPECT_EQ(launches, static_cast<size_t>(p.kernels - 1)) << m;
  }
  // GroupNorm is a normalize launch with 4 groups over axes [1, 5) of the conv's output, its
  // weight and bias (one per channel) the launch's own; the clamp folds into its apply.
  const graph& gn = graphs().at("09_Conv3d_GroupNorm_Clamp");
  const outcome o = lower(gn, contract_for(gn, fs::temp_directory_path()));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.low->roles.at("state_norm_weight"), "epilogue0");
  EXPECT_EQ(o.low->roles.at("state_norm_bias"), "epilogue1");
  EXPECT_EQ(o.low->roles.at("state_conv_bias"), "bias");
  EXPECT_NE(o.low->math.find("kb::normalize::launch_naive<kb_step1, float, true>(&sa, "
                             "kb::normalize::config{1, 5, 0, 1, 2, 0, 4})"),
            std::string::npos)
      << o.low->math;
  EXPECT_EQ(o.low->math.find("map_in_place"), std::string::npos) << o.low->math;
  // A centering x - mean(x over the spatial axes) is one normalize launch over those axes.
  const graph& ctr = graphs().at("28_Conv2d_CenterSpatial_ReLU");
  const outcome oc = lower(ctr, contract_for(ctr, fs::temp_directory_path()));
  ASSERT_TRUE(oc.ok()) << oc.message();
  EXPECT_EQ(oc.low->rule, "conv:conv2d|center+relu");
  EXPECT_NE(oc.low->math.find("kb::normalize::launch_naive<kb_step1, float, true>(&sa, "
                              "kb::normalize::config{2, 4, 0, -1, -1})"),
            std::string::npos)
      << oc.low->math;
  // LayerNorm's weight and bias are the normalize launch's own (they span the reduced axes).
  const graph& ln = graphs().at("14_Linear_LayerNorm_GELU");
  const outcome ol = lower(ln, contract_for(ln, fs::temp_directory_path()));
  ASSERT_TRUE(ol.ok());
  EXPECT_NE(ol.low->math.find("kb::normalize::config{1, 2, 0, 1, 2}"), std::string::npos)
      << ol.low->math;
  EXPECT_EQ(ol.low->math.find("map_in_place"), std::string::npos); // GELU folds into apply
  // BatchNorm: the normalize launch's channel rows (statistics per channel over the batch and
  // spatial axes), its weight and bias the launch's own (one per row); the ReLU folds into apply.
  const graph& bn = graphs().at("06_Conv2d_BatchNorm_ReLU");
  const outcome ob = lower(bn, contract_for(bn, fs::temp_directory_path()));
  ASSERT_TRUE(ob.ok());
  EXPECT_NE(ob.low->math.find("kb::normalize::config{1, 2, 0, 1, 2, 1}"), std::string::npos)
      << ob.low->math;
  EXPECT_EQ(ob.low->math.find("map_in_place"), std::string::npos);
  // `x @ self.weight.T`: the transpose before the product is the product's own (trans_b), the
  // weight as stored its operand b.
  const graph& wt = graphs().at("25_Matmul_WeightT_Div_Sum");
  const outcome ot = lower(wt, contract_for(wt, fs::temp_directory_path()));
  ASSERT_TRUE(ot.ok()) << ot.message();
  EXPECT_EQ(ot.low->roles.at("state_weight"), "b");
  EXPECT_EQ(ot.low->roles.at("x"), "a");
  task::contract wc = contract_for(wt, fs::temp_directory_path());
  ot.low->params(wc);
  ASSERT_TRUE(wc.matmul.has_value());
  EXPECT_TRUE(wc.matmul->trans_b);
  EXPECT_FALSE(wc.matmul->trans_a);
  // A forward input of the output's shape after a later kernel: read at the element's flat index
  // in that kernel's elementwise pass.
  const graph& fi = graphs().at("26_Linear_LayerNorm_AddInput");
  const outcome ofi = lower(fi, contract_for(fi, fs::temp_directory_path()));
  ASSERT_TRUE(ofi.ok()) << ofi.message();
  const std::string y_role = ofi.low->roles.at("y");
  ASSERT_EQ(y_role.rfind("epilogue", 0), 0u) << y_role;
  const std::string y_at = fmt::format("kb::epi::at<A>(ops, {}, i)", y_role.substr(8));
  EXPECT_NE(ofi.low->math.find("((v + " + y_at + ") * " + y_at + ")"), std::string::npos)
      << ofi.low->math;
  EXPECT_NE(ofi.low->math.find("kb::chain::map_in_place<kb_map1>"), std::string::npos);
  // A reduction's epilogue without operands folds into its finalize: no map pass.
  const graph& lse = graphs().at("17_Linear_LogSumExp_ReLU");
  const outcome oe = lower(lse, contract_for(lse, fs::temp_directory_path()));
  ASSERT_TRUE(oe.ok());
  EXPECT_EQ(oe.low->math.find("map_in_place"), std::string::npos);
  EXPECT_NE(oe.low->math.find("kb::reduce::config{1, 2, 0}"), std::string::npos);
}

TEST(FusionPlan, LaterProductsRunWithTheAnchorsStrategy) {
  // Two Linears: the second is kernel 1, the anchor family's launch of its own op (kb_op1: its
  // bias, then the scale) over the first kernel's output times its weight (an operand, trans_b).
  const graph& two = graphs().at("30_Linear_Sigmoid_Linear_LogSumExp");
  const outcome o = lower(two, contract_for(two, fs::temp_directory_path()));
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o.low->rule, "matmul:linear+sigmoid|linear+mul|logsumexp");
  const std::string w2 = o.low->roles.at("state_fc2_weight");
  const std::string b2 = o.low->roles.at("state_fc2_bias");
  ASSERT_EQ(w2.rfind("epilogue", 0), 0u);
  ASSERT_EQ(b2.rfind("epilogue", 0), 0u);
  const std::string& m = o.low->math;
  EXPECT_NE(m.find(fmt::format("const auto c = p.config(cfg, {}, 1);", w2.substr(8))),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("family.template launch<kb_op1>(&p.args, c)"), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("const A kb_acc = acc + kb::epi::at<A>(ops, {}, n);", b2.substr(8))),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("family.template workspace<kb_op1>"), std::string::npos) << m;
  EXPECT_NE(m.find("kb::reduce::launch_naive<kb_step2"), std::string::npos) << m;

  // Attention: Q @ K^T over the heads (batched, b transposed) scaled by 1/sqrt of Q's last dim at
  // run time, a softmax over the last dim, then the weights times V (V an operand).
  const graph& att = graphs().at("31_ScaledDotProductAttention");
  const outcome oa = lower(att, contract_for(att, fs::temp_directory_path()));
  ASSERT_TRUE(oa.ok()) << oa.message();
  EXPECT_EQ(oa.low->rule, "matmul:matmul|softmax|matmul");
  EXPECT_EQ(oa.low->roles.at("q"), "a");
  EXPECT_EQ(oa.low->roles.at("k"), "b");
  EXPECT_EQ(oa.low->roles.at("v"), "epilogue0");
  task::contract ac = contract_for(att, fs::temp_directory_path());
  oa.low->params(ac);
  ASSERT_TRUE(ac.matmul.has_value());
  EXPECT_TRUE(ac.matmul->trans_b);
  EXPECT_TRUE(ac.matmul->batch);
  EXPECT_EQ(ac.matmul->alpha, 1.0);
  const std::string& am = oa.low->math;
  EXPECT_NE(am.find("c0.alpha = cfg.alpha / ::sqrt(static_cast<double>(a->inputs[cfg.a].shape["
                    "a->inputs[cfg.a].ndim - 1]))"),
            std::string::npos)
      << am;
  EXPECT_NE(am.find("const auto c = p.config(cfg, 0, 0);"), std::string::npos) << am;
  EXPECT_NE(am.find("family.template launch<kb_op2>(&p.args, c)"), std::string::npos) << am;
  EXPECT_NE(am.find("kb::normalize::launch_naive<kb_step1"), std::string::npos) << am;

  // A depthwise then a pointwise convolution: the second is kernel 1, the anchor family's launch
  // of kb_op1 (its bias, ReLU and the scale) over the first's output, its weight an operand and
  // its hyperparameters its own.
  const graph& sep = graphs().at("34_Conv2d_Depthwise_Pointwise_ReLU");
  const outcome os = lower(sep, contract_for(sep, fs::temp_directory_path()));
  ASSERT_TRUE(os.ok()) << os.message();
  EXPECT_EQ(os.low->rule, "conv:conv2d|conv2d+relu+mul");
  EXPECT_EQ(os.low->roles.at("state_depthwise_weight"), "weight");
  const std::string pw = os.low->roles.at("state_pointwise_weight");
  const std::string pb = os.low->roles.at("state_pointwise_bias");
  ASSERT_EQ(pw.rfind("epilogue", 0), 0u);
  ASSERT_EQ(pb.rfind("epilogue", 0), 0u);
  const std::string& sm = os.low->math;
  EXPECT_NE(sm.find(fmt::format("auto c = p.conv_config(cfg, {});", pw.substr(8))),
            std::string::npos)
      << sm;
  EXPECT_NE(sm.find("family.template launch<kb_op1>(&p.args, c)"), std::string::npos) << sm;
  EXPECT_NE(sm.find("family.template workspace<kb_op1>(&p.args, c, &bytes)"), std::string::npos)
      << sm;
  EXPECT_NE(sm.find("c.stride[1] = 1;"), std::string::npos) << sm; // the pointwise's, not 2
  EXPECT_NE(sm.find(fmt::format("const A kb_v = v + kb::epi::at<A>(ops, {}, channel);",
                                pb.substr(8))),
            std::string::npos)
      << sm;
  task::contract sc = contract_for(sep, fs::temp_directory_path());
  os.low->params(sc);
  ASSERT_TRUE(sc.conv.has_value());
  EXPECT_EQ(sc.conv->stride, (std::vector<int>{2, 2})); // the anchor's [conv] table
  EXPECT_EQ(sc.conv->dilation, (std::vector<int>{2, 2}));

  // A forward input of the output's shape in the anchor's own epilogue: the anchor writes its
  // product (and bias), then a map pass applies the epilogue in place at each element's index.
  const graph& add = graphs().at("27_Linear_AddInput");
  const outcome oi = lower(add, contract_for(add, fs::temp_directory_path()));
  ASSERT_TRUE(oi.ok()) << oi.message();
  EXPECT_EQ(oi.low->rule, "matmul:linear|map+add+relu");
  const std::string yr = oi.low->roles.at("y");
  ASSERT_EQ(yr.rfind("epilogue", 0), 0u);
  const std::string& im = oi.low->math;
  EXPECT_NE(im.find("kb::chain::map_in_place<kb_map0>(a, kb::chain::dense(buf[0], s[0], rank[0]), "
                    "ops)"),
            std::string::npos)
      << im;
  EXPECT_NE(im.find(fmt::format("kb::epi::at<A>(ops, {}, i)", yr.substr(8))), std::string::npos)
      << im;
  EXPECT_NE(im.find("static constexpr int kernels = 1;"), std::string::npos) << im;

  // A plain attention expands into the three ops; a causal one is kept, and has no plan.
  const graph ex = expand_attention(att);
  ASSERT_EQ(ex.nodes.size(), 3u);
  EXPECT_EQ(ex.nodes[0].op, "torch.matmul");
  EXPECT_TRUE(ex.nodes[0].attr("transpose_b").boolean().value_or(false));
  EXPECT_EQ(ex.nodes[0].outputs[0].shape,
            (std::vector<std::string>{"batch_size", "heads", "seq_q", "seq_k"}));
  EXPECT_EQ(ex.nodes[1].op, "torch.softmax");
  EXPECT_EQ(ex.nodes[2].outputs[0].value, att.outputs[0].value);
  const graph& causal = graphs().at("32_Attention_Causal");
  EXPECT_EQ(expand_attention(causal).nodes.size(), 1u);
  const fusion_plan pc = plan_fusion(causal);
  ASSERT_FALSE(pc.ok());
  EXPECT_EQ(pc.problems[0].why, plan_issue::unknown_op);
}

TEST(FusionPlan, ResidualsAcrossAKernelBoundaryReadTheWorkspace) {
  // x_conv + 2 tanh(norm(x_conv)): the conv's output is kernel 0's buffer, still in the workspace
  // when kernel 1's map pass runs; it reads it at the element's index through the last operand
  // slot, pointed at that buffer.
  const graph& g = graphs().at("33_Conv2d_GroupNorm_ResidualAdd");
  const fusion_plan p = plan_fusion(g);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[2].residuals, std::vector<std::string>{p.steps[0].value});
  const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o.low->rule, "conv:conv2d|group_norm+tanh+mul+add|logsumexp");
  const std::string& m = o.low->math;
  EXPECT_NE(m.find("rops.p[7] = static_cast<const float*>(buf[0]);"), std::string::npos) << m;
  EXPECT_NE(m.find("kb::chain::map_in_place<kb_map1>(a, kb::chain::dense(buf[1], s[2], rank[2]), "
                   "rops)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("(kb::epi::at<A>(ops, 7, i) + (kb::fn::tanh(v) * A(2)))"), std::string::npos)
      << m;
  // The value inside a kernel (before its epilogue) is not left whole: still a branch.
  const graph& b = graphs().at("91_Linear_Branch");
  const fusion_plan pb = plan_fusion(b);
  ASSERT_FALSE(pb.ok());
  EXPECT_EQ(pb.problems[0].why, plan_issue::branch);
}

TEST(FusionPlan, TheBroadcastPassReadsEachElementAtItsSourcePosition) {
  // kb::chain::broadcast_view on the host (nvcc compiles chain.cuh; no GPU is needed): the
  // element of y each position reads from x, and the shapes that do not broadcast.
  const temp_dir t("kb-broadcast-view");
  write_file_atomic(t.path() / "check.cu", R"(#include <kblaster/device/chain.cuh>
#include <cstdio>
static int failures = 0;
static kb::chain::broadcast_view view(const int64_t* xs, int xr, const int64_t* ys, int yr,
                                      bool want) {
  kb::chain::broadcast_view v{};
  const bool got = kb::chain::broadcast_view_of(kb::chain::dense(nullptr, xs, xr),
                                                kb::chain::dense(nullptr, ys, yr), &v);
  if (got != want) {
    std::printf("broadcast of rank %d to rank %d: got %d\n", xr, yr, got);
    ++failures;
  }
  return v;
}
int main() {
  // [3, 1] to [1, 4, 3, 1]: element (0, c, b, 0) reads x[b].
  const int64_t a[] = {3, 1}, ay[] = {1, 4, 3, 1};
  const auto va = view(a, 2, ay, 4, true);
  for (int c = 0; c < 4; ++c) {
    for (int b = 0; b < 3; ++b) {
      if (va.source(c * 3 + b) != b) {
        std::printf("[3,1] -> [1,4,3,1] at (%d, %d): %lld\n", c, b, (long long)va.source(c * 3 + b));
        ++failures;
      }
    }
  }
  // [2, 3, 1, 1] to [2, 3, 4, 5]: element (n, c, h, w) reads x[n * 3 + c].
  const int64_t b[] = {2, 3, 1, 1}, by[] = {2, 3, 4, 5};
  const auto vb = view(b, 4, by, 4, true);
  for (int i = 0; i < 120; ++i) {
    if (vb.source(i) != i / 20) {
      std::printf("[2,3,1,1] -> [2,3,4,5] at %d: %lld\n", i, (long long)vb.source(i));
      ++failures;
    }
  }
  // [2, 1, 5] to [2, 4, 5]: element (n, r, w) reads x[n * 5 + w].
  const int64_t c[] = {2, 1, 5}, cy[] = {2, 4, 5};
  const auto vc = view(c, 3, cy, 3, true);
  if (vc.source(1 * 20 + 3 * 5 + 4) != 1 * 5 + 4) {
    ++failures;
  }
  // A dim neither 1 nor the result's, and a value of higher rank than the result: refused.
  const int64_t d[] = {2, 3}, dy[] = {4, 3}, e[] = {1, 2, 3};
  view(d, 2, dy, 2, false);
  view(e, 3, d, 2, false);
  return failures == 0 ? 0 : 1;
}
)");
  EXPECT_TRUE(host_program::builds_and_passes(
      {KBLASTER_NVCC, "-std=c++20", "-I", (root / "include").string(),
       (t.path() / "check.cu").string()},
      t.path() / "check"));
}

TEST(FusionPlan, AResultLargerThanTheChainsValueIsAPassOfItsOwn) {
  // min over the features [batch, 1] + a (1, C, 1, 1) bias: a [1, C, batch, 1] result, written
  // by a broadcast pass that reads the minimum at each element's broadcast position and the bias
  // at its channel (axis 1 of the result); tanh after it in the same pass.
  const graph& g = graphs().at("36_Linear_GroupNorm_Min_ChannelBias");
  const fusion_plan p = plan_fusion(g);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p.kernels, 4);
  ASSERT_EQ(p.steps.size(), 5u);
  EXPECT_EQ(p.steps[3].kind, fuse_kind::expand);
  EXPECT_EQ(to_string(p.steps[3].why), "broadcast_grows");
  EXPECT_EQ(p.steps[3].operands, std::vector<std::string>{"state_bias"});
  EXPECT_EQ(p.steps[4].kind, fuse_kind::epilogue);
  EXPECT_EQ(p.steps[4].kernel, 3);
  const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
  ASSERT_TRUE(o.ok()) << o.message();
  const std::string& m = o.low->math;
  EXPECT_NE(m.find("kb::chain::broadcast_map<kb_map3>(a, kb::chain::dense(buf[2], s[5], "
                   "rank[5]), kb::chain::dense(buf[3], s[6], rank[6]), ops)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("s[6][1] = kb_d_out_features;"), std::string::npos) << m;
  EXPECT_NE(m.find("s[6][2] = kb_d_batch_size;"), std::string::npos) << m;
  // The forward's input read again after the anchor's kernel: from the call's input, through the
  // last operand slot, at the element's index of the larger result.
  const graph& r = graphs().at("37_Conv2d_GlobalMean_GELU_AddInput");
  const fusion_plan pr = plan_fusion(r);
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ(pr.steps[3].residuals, std::vector<std::string>{"x"});
  const outcome orr = lower(r, contract_for(r, fs::temp_directory_path()));
  ASSERT_TRUE(orr.ok()) << orr.message();
  const std::string& mr = orr.low->math;
  EXPECT_NE(mr.find("rops.p[7] = static_cast<const float*>(a->inputs[cfg.x].data);"),
            std::string::npos)
      << mr;
  EXPECT_NE(mr.find("if (!kb::chain::dense_float(a->inputs[cfg.x]))"), std::string::npos) << mr;
  EXPECT_NE(mr.find("kb::chain::broadcast_map<kb_map2>"), std::string::npos) << mr;
  // An operand that broadcasts over neither the chain's value nor the larger result is refused.
  graph bad = g;
  for (auto& st : bad.state) {
    if (st.value == "state_bias") {
      st.shape = {"1", "1", "out_features", "1"};
    }
  }
  for (auto& n : bad.nodes) {
    for (auto& i : n.inputs) {
      if (i.value == "state_bias") {
        i.shape = {"1", "1", "out_features", "1"};
      }
    }
  }
  const fusion_plan pbad = plan_fusion(bad);
  ASSERT_FALSE(pbad.ok());
  EXPECT_EQ(pbad.problems[0].why, plan_issue::operand_not_broadcast);
}

TEST(FusionPlan, APassOverTheInputBeforeTheAnchorStartsTheChain) {
  // avg_pool(x) then a convolution: the pooling is kernel 0, from the call's input into the
  // workspace; the convolution is the anchor at kernel 1, its input (role x, the forward's input)
  // replaced by the pooled value; its ReLU stays in its tile, and it writes the output.
  const graph& g = graphs().at("38_AvgPool_Conv2d_ReLU");
  const fusion_plan p = plan_fusion(g);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.anchor, "nn.Conv2d");
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].kind, fuse_kind::pool);
  EXPECT_EQ(p.steps[0].kernel, 0);
  EXPECT_EQ(p.steps[1].kind, fuse_kind::anchor);
  EXPECT_EQ(p.steps[1].kernel, 1);
  EXPECT_EQ(p.steps[1].why, fuse_reason::product_reads_rows);
  EXPECT_EQ(p.steps[2].kernel, 1);
  task::contract c = contract_for(g, fs::temp_directory_path());
  const outcome o = lower(g, c);
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o.low->roles.at("x"), "x");
  const std::string& m = o.low->math;
  EXPECT_NE(m.find("      kb_tensor x = a->inputs[cfg.x];\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kb::pool::launch_naive<kb_step0, float, true>"), std::string::npos) << m;
  // The anchor reads buffer 0 at the pooled shape (s[1]) and writes the output (buffer 1, s[2]);
  // its workspace query sees the same input.
  EXPECT_NE(m.find("const kb::chain::input_swap in(a, cfg.x, kb::chain::dense(buf[0], s[1], "
                   "rank[1]));"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("const kb::chain::input_swap in(a, cfg.x, kb::chain::dense(nullptr, s[1], "
                   "rank[1]));"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("kb_tensor y = kb::chain::dense(buf[1], s[2], rank[2]);"), std::string::npos)
      << m;
  EXPECT_NE(m.find("return kb::lowered::relu(v);"), std::string::npos) << m;
  // The [conv] table is the convolution's own: its input is the pooled shape, and the flops
  // count its output, not the forward input's size.
  o.low->params(c);
  ASSERT_TRUE(c.conv.has_value());
  ASSERT_EQ(c.conv->input.size(), 4u);
  EXPECT_EQ(c.conv->input[0], "batch_size");
  EXPECT_EQ(c.conv->input[1], "in_channels");
  EXPECT_EQ(c.conv->in_channels, "in_channels");
  // A per-channel scale after a softmax over the flattened spatial dims, viewed back: the view
  // keeps the batch and channel dims, so the scale is read at each element's channel.
  const graph& s5 = graphs().at("39_MaxPool3d_ConvT3d_Clamp_SpatialSoftmax_Scale");
  const outcome o5 = lower(s5, contract_for(s5, fs::temp_directory_path()));
  ASSERT_TRUE(o5.ok()) << o5.message();
  EXPECT_NE(o5.low->math.find("return (v * kb::epi::at<A>(ops, 0, channel));"), std::string::npos)
      << o5.low->math;
  EXPECT_NE(o5.low->math.find("kb::chain::map_in_place<kb_map2>"), std::string::npos);
  // A product after a pass over its input is refused with the product named.
  graph mm = g;
  for (auto& n : mm.nodes) {
    if (n.op == "nn.Conv2d") {
      n.op = "nn.Linear";
    }
  }
  const fusion_plan pm = plan_fusion(mm);
  ASSERT_TRUE(pm.ok());
  const outcome om = lower(mm, contract_for(mm, fs::temp_directory_path()));
  EXPECT_FALSE(om.ok());
  EXPECT_NE(om.message().find("a product after a pass over the forward's input"), std::string::npos)
      << om.message();
}

#ifndef KBLASTER_CUDA_INCLUDE
#define KBLASTER_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

TEST(FusionPlan, ChainStepsComputeWhatPyTorchDoes) {
  // The generated ops of the kernels after the anchor, in double on the host (the launches are
  // compiled only by nvcc), against PyTorch's definitions written out by hand.
  const std::map<std::string, std::string> ns{
      {"09_Conv3d_GroupNorm_Clamp", "gn"},       {"14_Linear_LayerNorm_GELU", "ln"},
      {"17_Linear_LogSumExp_ReLU", "lse"},       {"19_Conv2d_ReLU_GlobalAvgPool_Scale", "gap"},
      {"20_ConvT2d_AvgPool_Softmax", "poolsm"},  {"22_Conv2d_MaxOverChannels_Tanh", "mx"},
      {"23_Linear_LogSoftmax_ParamScale", "lsm"}, {"06_Conv2d_BatchNorm_ReLU", "bn"},
      {"26_Linear_LayerNorm_AddInput", "addin"}, {"28_Conv2d_CenterSpatial_ReLU", "ctr"},
      {"36_Linear_GroupNorm_Min_ChannelBias", "gmin"},
      {"37_Conv2d_GlobalMean_GELU_AddInput", "gin"}};
  const temp_dir t("kb-chain-math");
  std::string prog = "#include <kblaster/device/core.cuh>\n#include <kblaster/device/epilogue.cuh>\n"
                     "#include <kblaster/device/lowered.cuh>\n"
                     "#include <kblaster/device/online_softmax.cuh>\n#include <cmath>\n#include <cstdio>\n";
  for (const auto& [name, space] : ns) {
    const graph& g = graphs().at(name);
    const outcome o = lower(g, contract_for(g, fs::temp_directory_path()));
    ASSERT_TRUE(o.ok()) << name << ": " << o.message();
    write_file_atomic(t.path() / (space + ".cuh"), o.low->math);
    prog += "namespace " + space + " {\n#include \"" + (t.path() / (space + ".cuh")).string() +
            "\"\n}\n";
  }
  prog += R"(
static int failures = 0;
static void expect(const char* what, double got, double want) {
  if (!(std::fabs(got - want) <= 1e-12 * (1 + std::fabs(want)))) {
    std::printf("%s: got %.17g, want %.17g\n", what, got, want);
    ++failures;
  }
}
template <class Op> typename Op::state over(std::initializer_list<double> xs) {
  typename Op::state a = Op::init(), b = Op::init();
  int i = 0;
  for (double x : xs) {
    if (i++ % 2 == 0) a = Op::accumulate(a, x); else b = Op::accumulate(b, x);
  }
  return Op::combine(a, b);
}
int main() {
  // GroupNorm: (x - mean) / sqrt(var + eps) over the group, then weight[c], bias[c] (the launch
  // passes the channel's), clamp(max 0.5).
  using G = gn::kb_step1<double>;
  const auto gs = G::finalize(over<G>({1, 2, 3, 6}), 4, nullptr);
  // mean 3, squared deviations 4 + 1 + 0 + 9 = 14 (biased variance 14 / 4)
  const double rstd = 1 / std::sqrt(14.0 / 4 + 1e-5);
  expect("group norm", G::apply(3.1, gs, 1, 0), 0.1 * rstd);
  expect("group norm affine", G::apply(3.2, gs, 0.5, 0.25), 0.2 * rstd * 0.5 + 0.25);
  expect("group norm affine, clamped", G::apply(6, gs, 2, -1), 0.5);
  // LayerNorm with its weight and bias, then the exact GELU.
  using L = ln::kb_step1<double>;
  const auto ls = L::finalize(over<L>({1, 3}), 2, nullptr);
  const double y = (3 - 2) / std::sqrt(1 + 1e-5) * 2 + 0.5;
  expect("layer norm + gelu", L::apply(3, ls, 2, 0.5), 0.5 * y * (1 + std::erf(y / std::sqrt(2.0))));
  // logsumexp over the features, then ReLU.
  using E = lse::kb_step1<double>;
  expect("logsumexp + relu", E::finalize(over<E>({1, 2, 3}), 3, nullptr),
         std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  expect("logsumexp + relu, negative", E::finalize(over<E>({-5, -6}), 2, nullptr), 0);
  // Global average pooling as a mean over the spatial axes, times 2.
  using P = gap::kb_step1<double>;
  expect("global average pool * 2", P::finalize(over<P>({1, 2, 6}), 3, nullptr), 6);
  // Average pooling (identity epilogue), then softmax over channels.
  expect("avg pool epilogue", poolsm::kb_step1<double>::epilogue(0.75, nullptr), 0.75);
  using S = poolsm::kb_step2<double>;
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(4.0);
  expect("softmax", S::apply(2, S::finalize(over<S>({1, 2, 4}), 3, nullptr), 1, 0), std::exp(2.0) / z);
  // Max over channels (NaN wins), then tanh.
  using M = mx::kb_step1<double>;
  expect("max + tanh", M::finalize(over<M>({0.1, -2, 0.4}), 3, nullptr), std::tanh(0.4));
  const double nan = std::nan("");
  if (!std::isnan(M::finalize(over<M>({0.1, nan, 0.4}), 3, nullptr))) {
    std::printf("max: a NaN in the row does not give NaN\n");
    ++failures;
  }
  // log_softmax, then a per-feature parameter: the map reads operand 1 (the Linear's bias is 0).
  using LS = lsm::kb_step1<double>;
  const double l = LS::apply(2, LS::finalize(over<LS>({1, 2, 4}), 3, nullptr), 1, 0);
  expect("log_softmax", l, 2 - std::log(z));
  const float scale[] = {3.0f, -2.0f};
  kb::epi::operands sc{};
  sc.p[1] = scale;
  expect("log_softmax * scale[1]", lsm::kb_map1<double>::map(l, 1, 5, sc), -2 * l);
  // BatchNorm (the batch's statistics of a channel), its weight and bias, then ReLU.
  // A centering over the spatial axes, then ReLU: x - mean(x), folded into one apply.
  using Z = ctr::kb_step1<double>;
  const auto zs = Z::finalize(over<Z>({1, 2, 6}), 3, nullptr);
  expect("centering + relu", Z::apply(6, zs, 1, 0), 3);
  expect("centering + relu, below the mean", Z::apply(2, zs, 1, 0), 0);
  using B = bn::kb_step1<double>;
  const auto bs = B::finalize(over<B>({1, 3}), 2, nullptr);
  expect("batch norm + relu", B::apply(3, bs, 2, 0.5), 1 / std::sqrt(1 + 1e-5) * 2 + 0.5);
  expect("batch norm + relu, negative", B::apply(1, bs, 2, 0.5), 0);
  // LayerNorm, then (v + y[i]) * y[i]: y read at the element's flat index.
  const float yv[] = {0.5f, -1.5f, 2.0f};
  kb::epi::operands yo{};
  for (int k = 0; k < kb::epi::max_operands; ++k) {
    yo.p[k] = yv;
  }
  expect("layer norm, + y[2], * y[2]", addin::kb_map1<double>::map(0.25, 0, 2, yo), (0.25 + 2) * 2);
  expect("layer norm, + y[1], * y[1]", addin::kb_map1<double>::map(0.25, 0, 1, yo), (0.25 - 1.5) * -1.5);
  // The broadcast passes: min + bias[channel], then tanh; mean, GELU, + x[i], then * 2.
  expect("min + bias[2], tanh", gmin::kb_map3<double>::map(0.25, 2, 7, yo), std::tanh(2.25));
  const double gm = 0.5 * 0.75 * (1 + std::erf(0.75 / std::sqrt(2.0)));
  expect("mean + gelu", gin::kb_step1<double>::finalize(over<gin::kb_step1<double>>({0.5, 1}), 2,
                                                        nullptr), gm);
  expect("(v + x[1]) * 2", gin::kb_map2<double>::map(gm, 0, 1, yo), (gm - 1.5) * 2);
  return failures == 0 ? 0 : 1;
}
)";
  write_file_atomic(t.path() / "check.cpp", prog);
  EXPECT_TRUE(host_program::builds_and_passes({"c++", "-std=c++20", "-I", (root / "include").string(),
                                          "-I", KBLASTER_CUDA_INCLUDE,
                                          (t.path() / "check.cpp").string()},
                                         t.path() / "check"));
}

// kb_args over a contract's tensors at one shape, with no device memory behind them: enough for
// a candidate's host-side checks and its workspace query.
struct host_args {
  std::vector<kb_tensor> inputs;
  std::vector<kb_tensor> outputs;
  kb_args args{};

  host_args(const task::contract& c, const task::shape_case& s) {
    const auto fill = [](const std::vector<task::concrete_tensor>& ts, std::vector<kb_tensor>& out) {
      for (const auto& t : ts) {
        kb_tensor k{};
        k.data = reinterpret_cast<void*>(uintptr_t{1} << 20);
        k.dtype = static_cast<kb_dtype>(task::abi_dtype(t.type));
        k.ndim = static_cast<int32_t>(t.shape.size());
        int64_t stride = 1;
        for (int i = k.ndim - 1; i >= 0; --i) {
          k.shape[i] = t.shape[i];
          k.strides[i] = stride;
          stride *= t.shape[i];
        }
        out.push_back(k);
      }
    };
    fill(task::concrete_inputs(c, s), inputs);
    fill(task::concrete_outputs(c, s), outputs);
    args.abi_version = KB_ABI_VERSION;
    args.num_inputs = static_cast<int32_t>(inputs.size());
    args.inputs = inputs.data();
    args.num_outputs = static_cast<int32_t>(outputs.size());
    args.outputs = outputs.data();
  }
};

TEST(FusionPlan, ChainedCandidatesCompileAndSizeTheirWorkspace) {
  // Imported as `kblaster tasks import` does, lowered, offered the anchor's strategies; the
  // candidate of the first compiles with nvcc, and its workspace holds each intermediate
  // (float32, 256-byte aligned) before the anchor strategy's own.
  const temp_dir out("kb-chain-import");
  process_spec imp;
  imp.argv = {KBLASTER_BINARY, "tasks", "import", "--suite", "chain", "--out", out.path().string()};
  const std::map<std::string, std::vector<std::vector<int64_t>>> files{
      {"09_Conv3d_GroupNorm_Clamp", {{4, 8, 6, 14, 14}}},
      {"17_Linear_LogSumExp_ReLU", {{32, 48}}},
      {"24_Conv2d_GroupNorm_MaxPool_Sum", {{2, 12, 12, 12}, {2, 12, 12, 12}, {2, 12, 6, 6}}},
      {"06_Conv2d_BatchNorm_ReLU", {{8, 16, 32, 32}}}, // a batch norm step, channel rows
      {"26_Linear_LayerNorm_AddInput", {{32, 48}}},    // an operand read at the element's index
      {"28_Conv2d_CenterSpatial_ReLU", {{4, 8, 16, 18}}}, // a centering step
      {"30_Linear_Sigmoid_Linear_LogSumExp", {{32, 40}, {32, 24}}}, // a second product
      {"31_ScaledDotProductAttention", {{2, 3, 20, 24}, {2, 3, 20, 24}}}, // attention
      {"33_Conv2d_GroupNorm_ResidualAdd", {{2, 8, 12, 10}, {2, 8, 12, 10}}}, // a residual
      {"34_Conv2d_Depthwise_Pointwise_ReLU", {{2, 6, 8, 6}}}, // a second convolution
      {"27_Linear_AddInput", {}}, // the anchor's epilogue in a map pass over the output
      {"36_Linear_GroupNorm_Min_ChannelBias", {{24, 32}, {24, 32}, {24, 1}}}, // a larger result
      {"37_Conv2d_GlobalMean_GELU_AddInput", {{4, 16, 12, 10}, {4, 16, 1, 1}}}, // x read again
      {"38_AvgPool_Conv2d_ReLU", {{2, 4, 8, 6}}}, // a pass over the input before the anchor
      {"39_MaxPool3d_ConvT3d_Clamp_SpatialSoftmax_Scale", {{2, 3, 4, 5, 3}, {2, 5, 7, 9, 5}}},
  };
  for (const auto& [name, shapes] : files) {
    imp.argv.push_back((problems / (name + ".py")).string());
  }
  imp.timeout = std::chrono::seconds(300);
  const auto ir = run_process(imp);
  ASSERT_TRUE(ir.ok()) << ir.output;
  static build::compiler comp(build::detect_toolchain(), default_cache_dir());
  for (const auto& [name, shapes] : files) {
    SCOPED_TRACE(name);
    fs::path dir;
    for (const auto& e : fs::directory_iterator(out.path())) {
      if (e.path().filename().string().find(name.substr(3)) != std::string::npos) {
        dir = e.path();
      }
    }
    ASSERT_FALSE(dir.empty());
    const auto r = lower_task(task::load_contract(dir / "task.toml"));
    ASSERT_TRUE(r.result.ok()) << r.result.message();
    const task::contract& c = r.c;
    ASSERT_TRUE(search::chained(c));
    const auto list = search::strategies_for(c);
    ASSERT_FALSE(list.empty());
    // A later convolution is not described by the anchor's features: every conv strategy is
    // offered (the depthwise anchor's short reduction alone would offer conv.direct only).
    const bool later = name.rfind("30_", 0) == 0 || name.rfind("31_", 0) == 0 ||
                       name.rfind("34_", 0) == 0;
    EXPECT_EQ(search::later_products(c), later) << c.lowering;
    if (later && c.fam == task::family::conv) {
      size_t family = 0;
      for (const auto& st : search::all_strategies()) {
        family += st.fam == c.fam ? 1 : 0;
      }
      EXPECT_EQ(list.size(), family);
      // Each strategy's candidate runs a convolution it does not fit with the other one at its
      // default point, and compiles.
      for (const auto* other : list) {
        const std::string src = search::generate(c, *other, nlohmann::json::object());
        EXPECT_NE(src.find("struct kb_fallback_params"), std::string::npos) << src;
        auto req = build::candidate_request(root, c, src, "candidate.cu");
        req.timeout = std::chrono::seconds(600);
        const auto res = comp.compile(req);
        EXPECT_TRUE(res.ok()) << other->name << ":\n" << res.log;
      }
    }
    if (name.rfind("38_", 0) == 0) {
      // The strategy runs the convolution of the pooled input: [2, 4, 8, 6] by a 3x3 kernel
      // (padding 1) into [2, 8, 8, 6]; its features are that product's.
      const auto f = search::features_of(c, c.official());
      EXPECT_EQ(f.m, 2 * 8 * 6);
      EXPECT_EQ(f.n, 8);
      EXPECT_EQ(f.k, 4 * 3 * 3);
    }
    const search::strategy& st = *list.front();
    EXPECT_EQ(st.fam, c.fam);
    const std::string src = search::generate(c, st, nlohmann::json::object());
    EXPECT_NE(src.find("kb_chain::launch(args, kb_family_config"), std::string::npos) << src;
    auto req = build::candidate_request(root, c, src, "candidate.cu");
    req.timeout = std::chrono::seconds(600);
    const auto res = comp.compile(req);
    ASSERT_TRUE(res.ok()) << st.name << ":\n" << res.log;
    void* lib = dlopen(res.binary.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    const auto launch = reinterpret_cast<int (*)(const kb_args*)>(dlsym(lib, "kb_launch"));
    const auto workspace =
        reinterpret_cast<int (*)(const kb_args*, uint64_t*)>(dlsym(lib, "kb_workspace_bytes"));
    ASSERT_TRUE(launch != nullptr && workspace != nullptr);
    host_args h(c, c.official());
    uint64_t bytes = 0;
    ASSERT_EQ(workspace(&h.args, &bytes), 0);
    uint64_t intermediates = 0;
    for (const auto& s : shapes) {
      int64_t n = 1;
      for (const int64_t d : s) {
        n *= d;
      }
      intermediates += (static_cast<uint64_t>(n) * 4 + 255) / 256 * 256;
    }
    if (st.has_workspace) {
      EXPECT_GE(bytes, intermediates);
    } else {
      EXPECT_EQ(bytes, intermediates);
    }
    // Refused before any device work: no output, an output of another size, float64 inputs.
    host_args none(c, c.official());
    none.args.num_outputs = 0;
    EXPECT_NE(workspace(&none.args, &bytes), 0);
    EXPECT_NE(launch(&none.args), 0);
    host_args wrong(c, c.official());
    wrong.outputs[0].shape[0] += 1;
    EXPECT_NE(launch(&wrong.args), 0);
    host_args f64(c, c.official());
    for (auto& t : f64.inputs) {
      t.dtype = KB_FLOAT64;
    }
    EXPECT_NE(launch(&f64.args), 0);
    dlclose(lib);
  }
}

} // namespace
} // namespace kb::graph
