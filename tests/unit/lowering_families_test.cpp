// The lowering rules onto the families with typed parameters (src/graph/lower_families.cpp):
// problem files written for these tests (tests/data/kernelbench/lowering/level1, 136-166: pool,
// scan, argreduce, the matmul forms and conv; 167: a loss whose target broadcasts) imported with `kblaster tasks import`, lowered with
// the expected rule, roles, reduced axes and family parameters (golden records in
// tests/data/lowering/families.json, the family config included), and the forms a family does
// not cover (return_indices, padding_mode='reflect', argmax over no dim, an einsum that is not a
// tensor times a matrix) ending with an issue that names the op.
#include "common/fs.hpp"
#include "common/process.hpp"
#include "graph/graph.hpp"
#include "graph/lower.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

namespace kb::graph {
namespace {

using nlohmann::json;

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path problems = root / "tests" / "data" / "kernelbench" / "lowering" / "level1";
const fs::path golden = root / "tests" / "data" / "lowering" / "families.json";

process_result kblaster(std::vector<std::string> args) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(300);
  return run_process(spec);
}

class families_imported : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    out = std::make_unique<temp_dir>("kb-lower-families");
    std::vector<std::string> args{"tasks", "import", "--suite", "lowfam", "--out",
                                  out->path().string()};
    for (const auto& e : fs::directory_iterator(problems)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() == ".py" &&
          (name.rfind("126_", 0) == 0 || name.rfind("129_", 0) == 0 ||
           (name >= "136_" && name < "168_"))) {
        args.push_back(e.path().string());
      }
    }
    import = kblaster(args);
  }
  static void TearDownTestSuite() { out.reset(); }

  static task::contract contract(const std::string& id) {
    for (const auto& e : fs::directory_iterator(out->path())) {
      if (e.path().filename().string().rfind(id + "_", 0) == 0) {
        return task::load_contract(e.path() / "task.toml");
      }
    }
    ADD_FAILURE() << "no task " << id;
    return {};
  }
  static lowered_task lowered(const std::string& id) { return lower_task(contract(id)); }

  static inline std::unique_ptr<temp_dir> out;
  static inline process_result import;
};

const std::vector<std::string> lowered_ids{
    "L1_126", "L1_129", "L1_136", "L1_137", "L1_138", "L1_139", "L1_140", "L1_141", "L1_143",
    "L1_144", "L1_145", "L1_146", "L1_147", "L1_148", "L1_149", "L1_150", "L1_151", "L1_152",
    "L1_153", "L1_154", "L1_155", "L1_156", "L1_157", "L1_158", "L1_159", "L1_160", "L1_161",
    "L1_162", "L1_166", "L1_167"};

// What a lowered task is, as one record: rule, family, reduced axes, roles and family config.
json record(const lowered_task& r) {
  json roles = json::object();
  for (const auto& in : r.c.inputs) {
    roles[in.name] = in.role;
  }
  return {{"rule", r.c.lowering},
          {"family", task::to_string(r.c.fam)},
          {"reduce_dims", r.c.reduce_dims},
          {"roles", roles},
          {"config", task::family_config_source(r.c)}};
}

TEST_F(families_imported, every_form_is_lowered_as_the_golden_record_says) {
  ASSERT_EQ(import.exit_code, 0) << import.output;
  json got = json::object();
  for (const auto& id : lowered_ids) {
    SCOPED_TRACE(id);
    const auto r = lowered(id);
    ASSERT_TRUE(r.has_graph);
    ASSERT_TRUE(r.result.ok()) << r.result.message();
    EXPECT_TRUE(r.c.has_family());
    got[id] = record(r);
  }
  if (std::getenv("KBLASTER_UPDATE_GOLDEN") != nullptr) {
    // Regenerates the golden records when a rule deliberately changes (review the diff).
    write_file_atomic(golden, got.dump(2) + "\n");
  }
  const json want = json::parse(read_file(golden));
  for (const auto& id : lowered_ids) {
    EXPECT_EQ(got.at(id), want.at(id)) << id << ": got " << got.at(id).dump(2);
  }
}

TEST_F(families_imported, strategies_are_offered_and_generated_for_each_form) {
  for (const auto& id : lowered_ids) {
    SCOPED_TRACE(id);
    const auto r = lowered(id);
    ASSERT_TRUE(r.result.ok()) << r.result.message();
    const auto list = search::strategies_for(r.c);
    ASSERT_FALSE(list.empty());
    EXPECT_EQ(list.front()->name.rfind(task::to_string(r.c.fam) + ".", 0), 0u)
        << list.front()->name;
    const std::string src = search::generate(r.c, *list.front(), json::object());
    EXPECT_NE(src.find("kb_family_config"), std::string::npos);
  }
}

TEST_F(families_imported, pool_parameters) {
  using task::pool_kind;
  const auto mp1 = lowered("L1_136").c;
  ASSERT_TRUE(mp1.pool);
  EXPECT_EQ(mp1.lowering, "pool:max1d");
  EXPECT_EQ(mp1.fam, task::family::pool);
  EXPECT_EQ(mp1.pool->kind, pool_kind::max);
  EXPECT_EQ(mp1.pool->rank, 1);
  EXPECT_EQ(mp1.pool->kernel, std::vector<int>{4});
  EXPECT_EQ(mp1.pool->stride, std::vector<int>{2});
  EXPECT_EQ(mp1.pool->padding, std::vector<int>{2});
  EXPECT_EQ(mp1.pool->dilation, std::vector<int>{2});
  EXPECT_FALSE(mp1.pool->ceil_mode);
  const auto mp2 = lowered("L1_137").c;
  ASSERT_TRUE(mp2.pool);
  EXPECT_TRUE(mp2.pool->ceil_mode);
  EXPECT_EQ(mp2.pool->stride, (std::vector<int>{2, 2}));
  const auto ap2 = lowered("L1_140").c;
  ASSERT_TRUE(ap2.pool);
  EXPECT_EQ(ap2.lowering, "pool:avg2d");
  EXPECT_EQ(ap2.pool->kind, pool_kind::avg);
  EXPECT_EQ(ap2.pool->kernel, (std::vector<int>{3, 2}));
  EXPECT_EQ(ap2.pool->stride, (std::vector<int>{3, 2}));
  EXPECT_EQ(ap2.pool->padding, (std::vector<int>{1, 1}));
  EXPECT_EQ(ap2.pool->dilation, (std::vector<int>{1, 1}));
  EXPECT_FALSE(ap2.pool->count_include_pad);
  EXPECT_EQ(ap2.pool->divisor_override, 0);
  const auto ap3 = lowered("L1_141").c;
  ASSERT_TRUE(ap3.pool);
  EXPECT_EQ(ap3.pool->rank, 3);
  EXPECT_TRUE(ap3.pool->count_include_pad);
  // The pool family's strategies are offered and generate for the lowered task.
  const auto list = search::strategies_for(mp2);
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list.front()->name.rfind("pool.", 0), 0u) << list.front()->name;
}

TEST_F(families_imported, scan_and_argreduce_parameters) {
  const auto sum = lowered("L1_129").c;
  ASSERT_TRUE(sum.scan);
  EXPECT_EQ(sum.lowering, "scan:cumsum");
  EXPECT_EQ(sum.scan->op, task::scan_op::sum);
  EXPECT_EQ(sum.scan->dim, 1);
  EXPECT_FALSE(sum.scan->reverse || sum.scan->exclusive || sum.scan->masked);
  const auto prod = lowered("L1_143").c;
  ASSERT_TRUE(prod.scan);
  EXPECT_EQ(prod.scan->op, task::scan_op::prod);
  const auto rev = lowered("L1_144").c;
  ASSERT_TRUE(rev.scan);
  EXPECT_EQ(rev.lowering, "scan:cumsum+reverse");
  EXPECT_TRUE(rev.scan->reverse);
  const auto exclusive = lowered("L1_166").c;
  ASSERT_TRUE(exclusive.scan);
  EXPECT_EQ(exclusive.lowering, "scan:cumsum+exclusive");
  EXPECT_TRUE(exclusive.scan->exclusive);
  EXPECT_FALSE(exclusive.scan->reverse);
  const auto masked = lowered("L1_145").c;
  ASSERT_TRUE(masked.scan);
  EXPECT_EQ(masked.lowering, "scan:cumsum+masked");
  EXPECT_TRUE(masked.scan->masked);
  ASSERT_EQ(masked.inputs.size(), 2u);
  EXPECT_EQ(masked.inputs[0].role, "x");
  EXPECT_EQ(masked.inputs[1].role, "mask");
  const auto amax = lowered("L1_146").c;
  ASSERT_TRUE(amax.argreduce);
  EXPECT_EQ(amax.lowering, "argreduce:argmax");
  EXPECT_EQ(amax.argreduce->op, task::argreduce_op::argmax);
  EXPECT_EQ(amax.argreduce->dim, 1);
  EXPECT_FALSE(amax.argreduce->keepdim);
  EXPECT_TRUE(amax.reduce_dims.empty()); // the axis is the [argreduce] table's
  ASSERT_EQ(amax.outputs.size(), 1u);
  EXPECT_EQ(amax.outputs[0].type, task::dtype::int64);
  const auto amin = lowered("L1_147").c;
  ASSERT_TRUE(amin.argreduce);
  EXPECT_EQ(amin.argreduce->op, task::argreduce_op::argmin);
  EXPECT_EQ(amin.argreduce->dim, 1); // dim=-1 of a 2-D input
  EXPECT_TRUE(amin.argreduce->keepdim);
}

TEST_F(families_imported, matmul_form_parameters) {
  struct want {
    std::string rule;
    task::matmul_params p;
  };
  task::matmul_params batch;
  batch.batch = true;
  task::matmul_params ta;
  ta.trans_a = true;
  task::matmul_params tb;
  tb.trans_b = true;
  task::matmul_params tab;
  tab.trans_a = tab.trans_b = true;
  task::matmul_params tril;
  tril.mask = task::matmul_mask::lower;
  task::matmul_params diag;
  diag.diag_a = true;
  const std::map<std::string, want> expected{
      {"L1_148", {"matmul:bmm", batch}},         {"L1_149", {"matmul:tensor_mm", batch}},
      {"L1_150", {"matmul:tensor_mm", batch}},   {"L1_151", {"matmul:diag_mm", diag}},
      {"L1_152", {"matmul:diag_mm", diag}},      {"L1_153", {"matmul:mm+tril", tril}},
      {"L1_154", {"matmul:mm+trans_a", ta}},     {"L1_155", {"matmul:mm+trans_b", tb}},
      {"L1_156", {"matmul:mm+trans_ab", tab}},
  };
  for (const auto& [id, w] : expected) {
    SCOPED_TRACE(id);
    const auto c = lowered(id).c;
    EXPECT_EQ(c.lowering, w.rule);
    EXPECT_EQ(c.fam, task::family::matmul);
    ASSERT_TRUE(c.matmul);
    EXPECT_TRUE(*c.matmul == w.p);
    ASSERT_GE(c.inputs.size(), 2u);
    EXPECT_EQ(c.inputs[0].role, "a");
    EXPECT_EQ(c.inputs[1].role, "b");
    // The product's shape as the kernels see it exists for the form.
    std::string why;
    EXPECT_TRUE(task::matmul_shape_of(c, c.official(), &why).has_value()) << why;
  }
}

TEST_F(families_imported, conv_parameters_and_module_state_roles) {
  const auto c1 = lowered("L1_157").c;
  ASSERT_TRUE(c1.conv);
  EXPECT_EQ(c1.lowering, "conv:conv1d");
  EXPECT_EQ(c1.fam, task::family::conv);
  EXPECT_TRUE(c1.roof.tensor_cores); // the physical limit at the tensor-core rate
  EXPECT_FALSE(c1.conv->transposed);
  EXPECT_EQ(c1.conv->in_channels, "cin");
  EXPECT_EQ(c1.conv->out_channels, "cout");
  EXPECT_EQ(c1.conv->kernel, std::vector<std::string>{"3"});
  EXPECT_EQ(c1.conv->stride, std::vector<int>{2});
  EXPECT_EQ(c1.conv->padding, std::vector<int>{1});
  EXPECT_EQ(c1.conv->dilation, std::vector<int>{2});
  EXPECT_TRUE(c1.conv->bias);
  // The weight and the bias are the module's state inputs, after the forward's x.
  ASSERT_EQ(c1.inputs.size(), 3u);
  EXPECT_EQ(c1.inputs[0].role, "x");
  EXPECT_EQ(c1.inputs[1].name, "state_conv_weight");
  EXPECT_EQ(c1.inputs[1].role, "weight");
  EXPECT_EQ(c1.inputs[2].name, "state_conv_bias");
  EXPECT_EQ(c1.inputs[2].role, "bias");
  const auto c2 = lowered("L1_158").c;
  ASSERT_TRUE(c2.conv);
  EXPECT_EQ(c2.conv->groups, "2");
  EXPECT_EQ(c2.conv->kernel, (std::vector<std::string>{"3", "5"}));
  EXPECT_EQ(c2.conv->stride, (std::vector<int>{1, 2}));
  EXPECT_EQ(c2.conv->padding, (std::vector<int>{1, 2}));
  EXPECT_FALSE(c2.conv->bias);
  const auto t1 = lowered("L1_160").c;
  ASSERT_TRUE(t1.conv);
  EXPECT_EQ(t1.lowering, "conv:conv_transpose1d");
  EXPECT_TRUE(t1.conv->transposed);
  EXPECT_EQ(t1.conv->output_padding, std::vector<int>{1});
  EXPECT_EQ(t1.conv->out_channels, "cout");
  const auto t3 = lowered("L1_162").c;
  ASSERT_TRUE(t3.conv);
  EXPECT_EQ(t3.conv->rank, 3);
  EXPECT_EQ(t3.conv->stride, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(t3.conv->dilation, (std::vector<int>{2, 2, 2}));
  const auto list = search::strategies_for(c1);
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list.front()->name.rfind("conv.", 0), 0u) << list.front()->name;
}

TEST_F(families_imported, forms_a_family_does_not_cover_name_their_op) {
  const std::map<std::string, std::pair<std::string, std::string>> expected{
      {"L1_142", {"nn.MaxPool2d", "return_indices"}},
      {"L1_163", {"nn.Conv2d", "padding_mode='reflect'"}},
      {"L1_164", {"torch.argmax", "dim=None"}},
      {"L1_165", {"torch.einsum", "ij,kj->ik"}},
  };
  for (const auto& [id, w] : expected) {
    SCOPED_TRACE(id);
    const auto r = lowered(id);
    ASSERT_TRUE(r.has_graph);
    ASSERT_FALSE(r.result.ok());
    ASSERT_FALSE(r.result.issues.empty());
    EXPECT_EQ(r.result.issues[0].why, reason::no_lowering);
    EXPECT_EQ(r.result.issues[0].op, w.first) << r.result.message();
    EXPECT_NE(r.result.message().find(w.second), std::string::npos) << r.result.message();
    EXPECT_FALSE(r.c.has_family());
    ASSERT_FALSE(r.c.not_lowered.empty());
    EXPECT_NE(r.c.not_lowered[0].find(w.first), std::string::npos);
  }
}

} // namespace
} // namespace kb::graph
