#include "common/error.hpp"
#include "common/fs.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace kb::task {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

TEST(expr, evaluates_arithmetic_over_dims) {
  const std::map<std::string, int64_t> dims{{"M", 4096}, {"N", 393216}};
  EXPECT_EQ(eval_expr("8*M*N", dims), 8LL * 4096 * 393216);
  EXPECT_EQ(eval_expr("(M + 2) * 3 - N / 2", dims), (4096 + 2) * 3 - 393216 / 2);
  EXPECT_EQ(eval_expr("-M + 1", dims), -4095);
  EXPECT_THROW(eval_expr("M * Q", dims), input_error);
  EXPECT_THROW(eval_expr("M *", dims), input_error);
  EXPECT_THROW(eval_expr("M / (N - N)", dims), input_error);
  EXPECT_THROW(eval_expr("9223372036854775807 * 2", dims), input_error);
}

TEST(suite, core10_has_the_ten_kernelbench_tasks_at_v01_shapes) {
  const auto tasks = load_suite(root, "core10");
  std::vector<std::string> ids;
  for (const auto& c : tasks) {
    ids.push_back(c.id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"004", "007", "019", "023", "026", "036", "040", "047",
                                           "088", "095"}));
  const auto softmax = find_task(root, "023");
  EXPECT_EQ(softmax.official().dims.at("M"), 4096);
  EXPECT_EQ(softmax.official().dims.at("N"), 393216);
  EXPECT_EQ(find_task(root, "007").official().dims.at("K"), 64);
  EXPECT_EQ(find_task(root, "047").official().dims.at("N"), 4095);
  const auto ce = find_task(root, "095");
  EXPECT_EQ(ce.inputs[1].type, dtype::int64);
  EXPECT_EQ(ce.fam, family::loss);
}

TEST(suite, every_task_has_a_check_shape_and_three_distributions) {
  for (const auto& c : load_all(root)) {
    EXPECT_GE(c.shapes_with_role("check").size(), 1u) << c.id;
    for (const auto& in : c.inputs) {
      if (is_floating(in.type)) {
        EXPECT_GE(in.distributions.size(), 3u) << c.id << " " << in.name;
      }
    }
    EXPECT_EQ(c.digest.size(), 64u);
  }
}

TEST(roofline, floors_match_the_published_figures) {
  // The figures of tasks-core10.md: the H200's measured copy rate and its fp32 FMA peak, no
  // tensor cores (the published floors are fp32 SIMT ones).
  ceilings ceil;
  ceil.bandwidth = 4.3e12;
  ceil.fp32_flops = 67e12;
  ceil.tensor_flops = 0;
  // tasks-core10.md: byte floors at 4.3 TB/s.
  EXPECT_NEAR(floor_seconds(find_task(root, "019"), find_task(root, "019").official(), ceil) * 1e3,
              3.0, 0.05);
  EXPECT_NEAR(floor_seconds(find_task(root, "036"), find_task(root, "036").official(), ceil) * 1e3,
              3.5, 0.05);
  EXPECT_NEAR(floor_seconds(find_task(root, "088"), find_task(root, "088").official(), ceil) * 1e3,
              0.125, 0.005);
  // 007 is bounded by fp32 FMA throughput: 137 GFLOP at 67 TFLOP/s.
  EXPECT_NEAR(floor_seconds(find_task(root, "007"), find_task(root, "007").official(), ceil) * 1e3,
              2.05, 0.05);
}

class malformed : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::make_unique<temp_dir>("kb-task-test");
    std::ofstream(dir->path() / "math.cuh") << "// math\n";
    std::ofstream(dir->path() / "baseline.cu") << "// baseline\n";
  }
  std::string load_error(const std::string& toml) {
    std::ofstream(dir->path() / "task.toml") << toml;
    try {
      load_contract(dir->path() / "task.toml");
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  }
  std::unique_ptr<temp_dir> dir;
};

const char* valid_task = R"(
id = "900"
name = "t"
suite = "s"
family = "elementwise"
pytorch = "x"
[[inputs]]
name = "x"
dtype = "float32"
shape = ["N"]
distributions = ["uniform01", "normal", "heavy_tailed"]
[[outputs]]
name = "y"
dtype = "float32"
shape = ["N"]
[[shapes]]
role = "official"
dims = { N = 100 }
[[shapes]]
role = "check"
dims = { N = 7 }
[tolerance]
atol = 1e-4
rtol = 1e-4
rel_l2 = 1e-5
[roofline]
bytes = "8*N"
flops = "N"
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST_F(malformed, valid_file_loads) {
  EXPECT_EQ(load_error(valid_task), "no error");
}

TEST_F(malformed, errors_name_file_field_and_expectation) {
  const std::string e1 =
      load_error(replace(valid_task, "dtype = \"float32\"\nshape = [\"N\"]\ndistributions",
                         "dtype = \"float33\"\nshape = [\"N\"]\ndistributions"));
  EXPECT_NE(e1.find("task.toml"), std::string::npos) << e1;
  EXPECT_NE(e1.find("inputs[0].dtype"), std::string::npos) << e1;
  EXPECT_NE(e1.find("float33"), std::string::npos) << e1;

  const std::string e2 =
      load_error(replace(valid_task, "family = \"elementwise\"", "family = \"convolution\""));
  EXPECT_NE(e2.find("'family'"), std::string::npos) << e2;

  const std::string e3 = load_error(replace(valid_task, "role = \"check\"", "role = \"bench\""));
  EXPECT_NE(e3.find("role = \"check\""), std::string::npos) << e3;

  const std::string e4 = load_error(replace(valid_task, "bytes = \"8*N\"", "bytes = \"8*Q\""));
  EXPECT_NE(e4.find("roofline.bytes"), std::string::npos) << e4;
  EXPECT_NE(e4.find("unknown dim 'Q'"), std::string::npos) << e4;

  const std::string e5 = load_error(replace(valid_task, "atol = 1e-4", "atol = \"small\""));
  EXPECT_NE(e5.find("tolerance.atol"), std::string::npos) << e5;

  const std::string e6 =
      load_error(replace(valid_task, "id = \"900\"", "id = \"900\"\nid = \"901\""));
  EXPECT_NE(e6.find("TOML syntax error"), std::string::npos) << e6;

  const std::string e7 =
      load_error(replace(valid_task, "\"uniform01\", \"normal\"", "\"uniform02\", \"normal\""));
  EXPECT_NE(e7.find("distributions[0]"), std::string::npos) << e7;

  const std::string e8 = load_error(replace(valid_task, "dims = { N = 7 }", "dims = { N = 0 }"));
  EXPECT_NE(e8.find("positive integer"), std::string::npos) << e8;
}

TEST_F(malformed, reduction_families_need_reduce_dims) {
  const std::string e =
      load_error(replace(valid_task, "family = \"elementwise\"", "family = \"normalize\""));
  EXPECT_NE(e.find("reduce_dims"), std::string::npos) << e;
}

TEST_F(malformed, channel_rows_belong_to_normalize_tasks_with_one_span_of_row_axes) {
  // Only a normalize task has rows of kept axes.
  const std::string e1 =
      load_error(replace(valid_task, "family = \"elementwise\"",
                         "family = \"reduce\"\nreduce_dims = [0]\nchannel_rows = true"));
  EXPECT_NE(e1.find("channel_rows"), std::string::npos) << e1;
  // A batch norm of [N, C, H, W] reduces [0, 2, 3]; [0, 2] would leave two spans of rows (1, 3).
  std::string bn = replace(valid_task, "family = \"elementwise\"",
                           "family = \"normalize\"\nreduce_dims = [0, 2, 3]\nchannel_rows = "
                           "true\nmath = \"math.cuh\"\nbaseline = \"baseline.cu\"");
  bn = replace(bn, "shape = [\"N\"]\ndistributions", "role = \"x\"\nshape = [\"N\", \"C\", \"N\", "
                                                     "\"N\"]\ndistributions");
  bn = replace(bn, "dims = { N = 100 }", "dims = { N = 100, C = 3 }");
  bn = replace(bn, "dims = { N = 7 }", "dims = { N = 7, C = 2 }");
  EXPECT_EQ(load_error(bn), "no error");
  const std::string e2 = load_error(replace(bn, "reduce_dims = [0, 2, 3]", "reduce_dims = [0, 2]"));
  EXPECT_NE(e2.find("one consecutive span of row"), std::string::npos) << e2;
  // Without channel_rows the reduced axes themselves must be one span.
  const std::string e3 = load_error(replace(bn, "channel_rows = true", "channel_rows = false"));
  EXPECT_NE(e3.find("consecutive axes"), std::string::npos) << e3;
}

TEST_F(malformed, groups_belong_to_normalize_tasks_whose_channels_divide_into_them) {
  // A group norm of [N, C, L]: the channels (axis 1) cut into groups, the weight per channel.
  std::string gn = replace(valid_task, "family = \"elementwise\"",
                           "family = \"normalize\"\nreduce_dims = [1, 2]\ngroups = 2\nmath = "
                           "\"math.cuh\"\nbaseline = \"baseline.cu\"");
  gn = replace(gn, "shape = [\"N\"]\ndistributions",
               "role = \"x\"\nshape = [\"N\", \"C\", \"N\"]\ndistributions");
  gn = replace(gn, "dims = { N = 100 }", "dims = { N = 100, C = 4 }");
  gn = replace(gn, "dims = { N = 7 }", "dims = { N = 7, C = 6 }");
  EXPECT_EQ(load_error(gn), "no error");
  // C = 6 at one shape does not divide into 4 groups.
  const std::string e1 = load_error(replace(gn, "groups = 2", "groups = 4"));
  EXPECT_NE(e1.find("a divisor of x's 6 channels"), std::string::npos) << e1;
  EXPECT_NE(load_error(replace(gn, "groups = 2", "groups = 0")).find("groups"), std::string::npos);
  // Only a normalize task without channel rows has groups.
  const std::string e2 = load_error(replace(gn, "groups = 2", "groups = 2\nchannel_rows = true"));
  EXPECT_NE(e2.find("groups"), std::string::npos) << e2;
  const std::string e3 = load_error(replace(gn, "family = \"normalize\"", "family = \"reduce\""));
  EXPECT_NE(e3.find("groups"), std::string::npos) << e3;
  ASSERT_EQ(load_error(gn), "no error");
  const contract c = load_contract(dir->path() / "task.toml");
  EXPECT_EQ(c.groups, 2);
  EXPECT_NE(family_config_source(c).find("kb_family_config{1, 3, 0, -1, -1, 0, 2}"),
            std::string::npos)
      << family_config_source(c);
}

TEST(row_span, the_reduced_or_the_kept_axes_as_one_span) {
  const auto span = [](std::vector<int> dims, bool channel_rows, size_t rank) {
    const auto s = row_span_of(dims, channel_rows, rank);
    return s ? std::pair{s->begin, s->end} : std::pair{-1, -1};
  };
  EXPECT_EQ(span({1, 2}, false, 4), (std::pair{1, 3}));
  EXPECT_EQ(span({1, 3}, false, 4), (std::pair{-1, -1}));
  EXPECT_EQ(span({0, 2, 3}, true, 4), (std::pair{1, 2})); // BatchNorm2d
  EXPECT_EQ(span({0}, true, 2), (std::pair{1, 2}));       // BatchNorm1d of [N, C]
  EXPECT_EQ(span({0, 2}, true, 3), (std::pair{1, 2}));    // BatchNorm1d of [N, C, L]
  EXPECT_EQ(span({0, 1}, true, 4), (std::pair{2, 4}));
  EXPECT_EQ(span({0, 2}, true, 4), (std::pair{-1, -1})); // rows 1 and 3: two spans
  EXPECT_EQ(span({0, 1, 2, 3}, true, 4), (std::pair{-1, -1})); // no row axis
  EXPECT_EQ(span({0, 4}, true, 4), (std::pair{-1, -1}));       // past the rank
  EXPECT_EQ(span({2, 0}, true, 4), (std::pair{-1, -1}));       // not increasing
  const contract bn = load_contract(root / "tests/data/tasks/941_batchnorm2d/task.toml");
  EXPECT_TRUE(bn.channel_rows);
  EXPECT_EQ(row_span_of(bn).begin, 1);
  EXPECT_EQ(row_span_of(bn).end, 2);
  EXPECT_NE(family_config_source(bn).find("kb_family_config{1, 2, 0, 1, 2, 1, 0}"), std::string::npos)
      << family_config_source(bn);
}

TEST(oracle_source, binds_family_and_roles) {
  const auto src = oracle_module_source(find_task(root, "040"));
  EXPECT_NE(src.find("kblaster/device/families/normalize.cuh"), std::string::npos);
  EXPECT_NE(src.find("kb_family_config{1, 4, 0, 1, 2, 0, 0}"), std::string::npos) << src;
  const auto ce = oracle_module_source(find_task(root, "095"));
  EXPECT_NE(ce.find("kb_family_config{1, 2, 0, 1}"), std::string::npos) << ce;
}

} // namespace
} // namespace kb::task
