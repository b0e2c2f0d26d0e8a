// The CPU path of every task's float64 oracle against values worked out by hand (the numbers in
// comments), through the same oracle module the GPU worker loads.
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kb::eval {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

fs::path cache_dir() {
  const char* env = std::getenv("KBLASTER_CACHE");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / "kblaster-test-cache";
}

std::vector<std::vector<double>> run(const std::string& id, std::map<std::string, int64_t> dims,
                                     const std::vector<std::vector<double>>& inputs) {
  const auto c = task::find_task(root, id);
  const fs::path module = build_oracle(root, c, cache_dir());
  task::shape_case s{"hand", "check", std::move(dims)};
  return cpu_reference(module, c, s, inputs);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

TEST(oracle, relu) {
  expect_near_all(run("019", {{"M", 1}, {"N", 4}}, {{-1.0, 0.0, 2.5, -0.0}})[0], {0, 0, 2.5, 0});
}

TEST(oracle, gelu_erf) {
  // 0.5 x (1 + erf(x / sqrt 2)) at 1, -1, 0.5
  expect_near_all(run("026", {{"M", 1}, {"N", 3}}, {{1.0, -1.0, 0.5}})[0],
                  {0.8413447460685429, -0.15865525393145707, 0.34573123063700656});
}

TEST(oracle, gelu_tanh_differs_from_erf) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at 1, -1, 0.5
  expect_near_all(run("088", {{"M", 1}, {"N", 3}}, {{1.0, -1.0, 0.5}})[0],
                  {0.8411919906082768, -0.15880800939172324, 0.34571400982514394});
}

TEST(oracle, softmax_rows) {
  // exp(k) / (e + e^2 + e^3) for k = 1, 2, 3; a constant row gives 1/3 each.
  expect_near_all(
      run("023", {{"M", 2}, {"N", 3}}, {{1.0, 2.0, 3.0, 5.0, 5.0, 5.0}})[0],
      {0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST(oracle, rmsnorm_over_strided_channels) {
  // x of shape (1, 2, 1, 2): channels (3, 4) at pixel 0 and (1, 1) at pixel 1, eps 1e-5:
  // 3 / sqrt(12.5 + 1e-5) = 0.8485277980128058, 4 / ... = 1.1313703973504077, 1 / sqrt(1 + 1e-5).
  const double one = 1.0 / std::sqrt(1.0 + 1e-5);
  expect_near_all(run("036", {{"B", 1}, {"C", 2}, {"H", 1}, {"W", 2}}, {{3.0, 1.0, 4.0, 1.0}})[0],
                  {0.8485277980128058, one, 1.1313703973504077, one});
}

TEST(oracle, layernorm_uses_weight_and_bias) {
  // x = 1 2 3 4: mean 2.5, biased variance 1.25; weight 1 2 1 1, bias 0 0 0 1.
  expect_near_all(run("040", {{"B", 1}, {"F", 1}, {"D1", 1}, {"D2", 4}},
                      {{1, 2, 3, 4}, {1, 2, 1, 1}, {0, 0, 0, 1}})[0],
                  {-1.3416354199689269, -0.894423613312618, 0.447211806656309, 2.341635419968927});
}

TEST(oracle, sum_over_dim_1) {
  // x of shape (1, 3, 2) = [[1, 2], [3, 4], [5, 6]] -> [9, 12]; second batch all ones -> [3, 3].
  expect_near_all(
      run("047", {{"B", 2}, {"R", 3}, {"N", 2}}, {{1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1}})[0],
      {9, 12, 3, 3});
}

TEST(oracle, cross_entropy_mean) {
  // Row 0: logsumexp(1, 2, 3) - 3 = 0.4076059644443806; row 1: logsumexp(1, 1, 1) - 1 = ln 3.
  const double want = (0.4076059644443806 + std::log(3.0)) / 2;
  expect_near_all(run("095", {{"N", 2}, {"C", 3}}, {{1, 2, 3, 1, 1, 1}, {2, 0}})[0], {want});
}

TEST(oracle, matvec) {
  // [[1, 2], [3, 4]] @ [1, 1] = [3, 7]
  expect_near_all(run("004", {{"M", 2}, {"K", 2}}, {{1, 2, 3, 4}, {1, 1}})[0], {3, 7});
}

TEST(oracle, matmul) {
  // [[1, 2], [3, 4]] @ [[1, 0, 2], [0, 1, 3]] = [[1, 2, 8], [3, 4, 18]]
  expect_near_all(run("007", {{"M", 2}, {"N", 3}, {"K", 2}}, {{1, 2, 3, 4}, {1, 0, 2, 0, 1, 3}})[0],
                  {1, 2, 8, 3, 4, 18});
}

TEST(oracle, rmsnorm_fp16_with_weight) {
  // x = 1 2, weight 0.5 2, eps 1e-6: 1 / sqrt(2.5 + 1e-6) * 0.5 and 2 / ... * 2 (all exact in
  // fp16).
  expect_near_all(run("102", {{"T", 1}, {"H", 2}}, {{1, 2}, {0.5, 2}})[0],
                  {0.3162277027713037, 2.5298216221704295});
}

TEST(oracle, fp16_inputs_are_rounded_before_the_oracle_sees_them) {
  // 1/3 is not representable in fp16: the oracle normalises the rounded value 0.333251953125.
  const auto y = run("102", {{"T", 1}, {"H", 1}}, {{1.0 / 3}, {1.0}})[0];
  const double x = 0.333251953125;
  EXPECT_NEAR(y[0], x / std::sqrt(x * x + 1e-6), 1e-12);
}

// Pointwise losses whose math and baseline are generated from the contract's [loss] expressions.
std::vector<std::vector<double>> run_test_task(const std::string& folder,
                                               std::map<std::string, int64_t> dims,
                                               const std::vector<std::vector<double>>& inputs) {
  const auto c = task::load_contract(root / "tests" / "data" / "tasks" / folder / "task.toml");
  const fs::path module = build_oracle(root, c, cache_dir());
  task::shape_case s{"hand", "check", std::move(dims)};
  return cpu_reference(module, c, s, inputs);
}

TEST(oracle, generated_pointwise_losses) {
  // MSE: ((1-0)^2 + (2-4)^2 + (-1-1)^2 + (0.5-0.5)^2) / 4 = 9 / 4
  expect_near_all(run_test_task("910_mse_pointwise", {{"B", 2}, {"D", 2}},
                                {{1.0, 2.0, -1.0, 0.5}, {0.0, 4.0, 1.0, 0.5}})[0],
                  {2.25});
  // Huber with delta 0.5, summed over C x L and divided by the batch B = 2 (bfloat16 storage:
  // the values are exact in bf16). |d| = 0.25 -> 0.5 * 0.0625; |d| = 2 -> 0.5 * (2 - 0.25);
  // |d| = 0 -> 0; |d| = 1 -> 0.5 * (1 - 0.25).
  expect_near_all(run_test_task("911_huber_bf16", {{"B", 2}, {"C", 1}, {"L", 2}},
                                {{0.25, 2.0, 1.0, -1.0}, {0.0, 0.0, 1.0, 0.0}})[0],
                  {(0.03125 + 0.875 + 0.0 + 0.375) / 2});
  // Hinge with targets [D] broadcast over the rows of x [B, D] (t[j] for x[i, j]):
  // max(0, 1 - 0.5 * 1) + max(0, 1 - 2 * -1) + max(0, 1 - 3 * 1) + max(0, 1 - -1 * -1), over 4.
  expect_near_all(run_test_task("940_hinge_broadcast", {{"B", 2}, {"D", 2}},
                                {{0.5, 2.0, 3.0, -1.0}, {1.0, -1.0}})[0],
                  {(0.5 + 3.0 + 0.0 + 0.0) / 4});
}

TEST(oracle, batch_norm_normalizes_each_channel_by_the_batch_statistics) {
  // x [B = 2, C = 2, 1, 1] = 1 2 3 4: channel 0 holds 1 and 3, channel 1 holds 2 and 4 (mean 2
  // and 3, biased variance 1 each); weight 1 2, bias 0 1 per channel; eps 1e-5.
  const double r = 1 / std::sqrt(1 + 1e-5);
  expect_near_all(run_test_task("941_batchnorm2d", {{"B", 2}, {"C", 2}, {"H", 1}, {"W", 1}},
                                {{1, 2, 3, 4}, {1, 2}, {0, 1}})[0],
                  {-r, -2 * r + 1, r, 2 * r + 1});
  // [N = 2, F = 1, L = 2] = 1 2 3 5: one channel of four values (mean 2.75, variance 2.1875).
  const double s = 1 / std::sqrt(2.1875 + 1e-5);
  expect_near_all(run_test_task("942_batchnorm1d_f16", {{"N", 2}, {"F", 1}, {"L", 2}},
                                {{1, 2, 3, 5}, {2}, {0.5}})[0],
                  {-1.75 * s * 2 + 0.5, -0.75 * s * 2 + 0.5, 0.25 * s * 2 + 0.5,
                   2.25 * s * 2 + 0.5});
}

TEST(oracle, group_norm_normalizes_each_group_and_scales_each_channel) {
  // x [B = 1, C = 8, 1, 2], 4 groups of 2 channels: each group is 4 values, the weight and bias
  // per channel (both positions of a channel share them); eps 1e-5.
  //   group 0: 1 3 | 5 7     mean 4, variance 5
  //   group 1: 0 0 | 0 4     mean 1, variance 3
  //   group 2: 2 2 | 2 2     variance 0: the bias alone
  //   group 3: -1 1 | -1 1   mean 0, variance 1
  const double ra = 1 / std::sqrt(5 + 1e-5);
  const double rb = 1 / std::sqrt(3 + 1e-5);
  const double rc = 1 / std::sqrt(1 + 1e-5);
  expect_near_all(run_test_task("943_groupnorm", {{"B", 1}, {"C", 8}, {"H", 1}, {"W", 2}},
                                {{1, 3, 5, 7, 0, 0, 0, 4, 2, 2, 2, 2, -1, 1, -1, 1},
                                 {1, 2, 3, 1, 1, 1, 2, 1},
                                 {0, 0, 1, 0, 0.5, -0.5, 0, 1}})[0],
                  {-3 * ra, -ra, 2 * ra, 6 * ra, -3 * rb + 1, -3 * rb + 1, -rb, 3 * rb, 0.5, 0.5,
                   -0.5, -0.5, -2 * rc, 2 * rc, -rc + 1, rc + 1});
  // One group a channel (an affine instance norm, bfloat16-exact values): [N = 1, C = 16, L = 2]
  // with channel c holding c and c + 2 (mean c + 1, variance 1), weight 2, bias c / 2.
  std::vector<double> x, w, b, want;
  const double r = 1 / std::sqrt(1 + 1e-5);
  for (int c = 0; c < 16; ++c) {
    x.insert(x.end(), {double(c), double(c + 2)});
    w.push_back(2);
    b.push_back(c / 2.0);
    want.insert(want.end(), {-2 * r + c / 2.0, 2 * r + c / 2.0});
  }
  expect_near_all(
      run_test_task("944_instancenorm_affine_bf16", {{"N", 1}, {"C", 16}, {"L", 2}}, {x, w, b})[0],
      want);
}

TEST(no_gpu, generated_losses_compile_and_their_checker_rejects_trivial_outputs) {
  options o;
  o.cache_dir = cache_dir();
  o.seeds = 2;
  for (const auto& [folder, generated] :
       {std::pair{"910_mse_pointwise", "return (x - t) * (x - t);"},
        std::pair{"911_huber_bf16", "kb::fn::fabs(x - t) < delta ? A(0.5) * (x - t) * (x - t)"},
        std::pair{"940_hinge_broadcast", "kb::fn::max(A(1) - x * t, A(0))"}}) {
    const auto c = task::load_contract(root / "tests" / "data" / "tasks" / folder / "task.toml");
    EXPECT_NE(read_file(c.math).find(generated), std::string::npos) << read_file(c.math);
    const auto report = check_task_without_gpu(root, c, o);
    EXPECT_TRUE(report.value("ok", false)) << folder << ": " << report.dump(2);
    EXPECT_GT(report["checker_selftest"].value("zeros_rejected_by", 0), 0) << folder;
    EXPECT_GT(report["checker_selftest"].value("constant_rejected_by", 0), 0) << folder;
  }
}

TEST(no_gpu, every_task_checker_rejects_trivial_outputs_on_the_cpu) {
  options o;
  o.cache_dir = cache_dir();
  o.seeds = 2;
  for (const auto& c : task::load_all(root)) {
    if (c.kind != task::task_kind::native) {
      continue; // checked by scripts/pytorch_oracle.py selftest where PyTorch is
    }
    const auto report = check_task_without_gpu(root, c, o);
    EXPECT_TRUE(report.value("ok", false)) << c.id << ": " << report.dump(2);
    EXPECT_GT(report["checker_selftest"].value("zeros_rejected_by", 0), 0) << c.id;
    EXPECT_GT(report["checker_selftest"].value("copy_of_input_rejected_by", 0), 0) << c.id;
    EXPECT_GT(report["checker_selftest"].value("constant_rejected_by", 0), 0) << c.id;
  }
}

} // namespace
} // namespace kb::eval
