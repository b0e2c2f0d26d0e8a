// The comparison with PyTorch in `kblaster bench`: which method is "fastest", ratios with
// intervals, fast_p over all tasks and the geometric means.
#include "common/error.hpp"
#include "report/report.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace kb::report {
namespace {

using nlohmann::json;

// A provider's methods at one task: eager 2.0 ms, a compile that broke its graph and so ran
// eagerly at 1.0 ms, max-autotune compiled at 1.5 ms, a wrong method at 0.5 ms.
json provider_methods() {
  return json::parse(R"({
    "eager": {"correct": true, "stable": true, "median_s": 0.002, "ci_s": [0.0019, 0.0021]},
    "compile": {"correct": true, "stable": true, "median_s": 0.001, "ci_s": [0.00099, 0.00101],
                "compile": {"status": "not_compiled", "reason": "graph_break", "graphs": 1,
                            "graph_breaks": 2}},
    "max-autotune": {"correct": true, "stable": true, "median_s": 0.0015,
                     "ci_s": [0.00149, 0.00152], "unqueued_median_s": 0.0016,
                     "compile": {"status": "compiled", "graphs": 1, "graph_breaks": 0}},
    "wrong": {"correct": false, "reason": "mismatch", "median_s": 0.0005},
    "noisy": {"correct": true, "stable": false, "median_s": 0.0004}
  })");
}

TEST(report_compare, fastest_method_skips_not_compiled_and_incorrect_but_counts_unstable) {
  const auto all = pytorch_methods_from_json(provider_methods());
  ASSERT_EQ(all.size(), 5u);
  // The unstable method's median is the fastest correct one: it stays the reference.
  const auto noisy = fastest_method(all);
  ASSERT_TRUE(noisy);
  EXPECT_EQ(all[*noisy].name, "noisy");
  EXPECT_FALSE(all[*noisy].stable);
  json without_noisy = provider_methods();
  without_noisy.erase("noisy");
  const auto pm = pytorch_methods_from_json(without_noisy);
  const auto best = fastest_method(pm);
  ASSERT_TRUE(best);
  EXPECT_EQ(pm[*best].name, "max-autotune");
  EXPECT_EQ(pm[*best].compile, compile_status::compiled);
  EXPECT_EQ(pm[*best].graphs, 1);
  EXPECT_DOUBLE_EQ(*pm[*best].unqueued_median_s, 0.0016);
  for (const auto& m : pm) {
    if (m.name == "compile") {
      EXPECT_EQ(m.compile, compile_status::not_compiled);
      EXPECT_EQ(m.graph_breaks, 2);
      EXPECT_EQ(m.reason, "graph_break");
      EXPECT_FALSE(eligible_for_fastest(m));
    }
    if (m.name == "eager") {
      EXPECT_EQ(m.compile, compile_status::eager);
      EXPECT_TRUE(eligible_for_fastest(m));
    }
  }
  // With every method excluded there is no fastest one.
  json only_bad = without_noisy;
  only_bad.erase("eager");
  only_bad.erase("max-autotune");
  EXPECT_FALSE(fastest_method(pytorch_methods_from_json(only_bad)));
}

TEST(report_compare, malformed_provider_figures_are_errors) {
  EXPECT_THROW(pytorch_methods_from_json(json::array()), kb::error);
  EXPECT_THROW(pytorch_methods_from_json(json{{"eager", 3}}), kb::error);
  EXPECT_THROW(pytorch_methods_from_json(json{{"eager", {{"median_s", -1.0}}}}), kb::error);
  EXPECT_THROW(pytorch_methods_from_json(json{{"eager", {{"median_s", "fast"}}}}), kb::error);
  EXPECT_THROW(pytorch_methods_from_json(json{{"c", {{"compile", {{"status", "maybe"}}}}}}),
               kb::error);
  EXPECT_TRUE(pytorch_methods_from_json(json()).empty());
}

task_comparison task(std::string name, bool correct, double ours, std::optional<double> fastest,
                     std::optional<double> eager) {
  task_comparison t;
  t.task = std::move(name);
  t.correct = correct;
  t.candidate_s = ours;
  t.candidate_ci = {ours * 0.99, ours * 1.01};
  if (fastest) {
    t.fastest_method = "compile";
    t.fastest_s = *fastest;
    t.fastest_ci = {*fastest * 0.98, *fastest * 1.02};
  }
  t.eager_s = eager;
  return t;
}

TEST(report_compare, speedup_interval_combines_both_medians_intervals) {
  const auto r = speedup_vs_fastest(task("a", true, 1.0, 2.0, 4.0));
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->value, 2.0);
  EXPECT_DOUBLE_EQ(r->range.low, 2.0 * 0.98 / 1.01);
  EXPECT_DOUBLE_EQ(r->range.high, 2.0 * 1.02 / 0.99);
  EXPECT_DOUBLE_EQ(*speedup_vs_eager(task("a", true, 1.0, 2.0, 4.0)), 4.0);
  EXPECT_FALSE(speedup_vs_fastest(task("b", false, 1.0, 2.0, 4.0)));
  EXPECT_FALSE(speedup_vs_fastest(task("c", true, 1.0, std::nullopt, 4.0)));
  EXPECT_FALSE(speedup_vs_eager(task("d", true, 1.0, 2.0, std::nullopt)));
}

TEST(report_compare, fast_p_divides_by_all_tasks_and_geomeans_by_the_compared_ones) {
  // Ten tasks: seven faster than PyTorch's fastest, one correct but slower, one incorrect and
  // one without PyTorch figures: fast_1.0 = 7/10 (not 7/9 or 7/8).
  std::vector<task_comparison> ts;
  for (int i = 0; i < 7; ++i) {
    ts.push_back(task("fast" + std::to_string(i), true, 1.0, 2.0, 8.0));
  }
  ts.push_back(task("slow", true, 1.0, 0.5, 1.0));
  ts.push_back(task("wrong", false, 0.1, 2.0, 8.0));
  ts.push_back(task("nopytorch", true, 1.0, std::nullopt, std::nullopt));
  const auto s = compare_suite(ts);
  EXPECT_EQ(s.tasks, 10u);
  EXPECT_EQ(s.correct, 9u);
  EXPECT_EQ(s.with_fastest, 8u);
  EXPECT_EQ(s.with_eager, 8u);
  EXPECT_DOUBLE_EQ(s.fast_1_0_vs_fastest, 0.7);
  EXPECT_DOUBLE_EQ(s.fast_1_5_vs_fastest, 0.7);
  EXPECT_DOUBLE_EQ(s.fast_1_0_vs_eager, 0.7);
  ASSERT_TRUE(s.geomean_vs_fastest);
  EXPECT_NEAR(*s.geomean_vs_fastest, std::exp((7 * std::log(2.0) + std::log(0.5)) / 8), 1e-12);
  EXPECT_NEAR(*s.geomean_vs_eager, std::exp(7 * std::log(8.0) / 8), 1e-12);
  const json j = to_json(s);
  EXPECT_DOUBLE_EQ(j["fast_1_0_vs_fastest_pytorch"].get<double>(), 0.7);
  EXPECT_EQ(j["tasks_with_fastest_pytorch"].get<int>(), 8);
}

TEST(report_compare, a_suite_without_pytorch_figures_has_no_geomean) {
  const auto s = compare_suite({task("x", true, 1.0, std::nullopt, std::nullopt)});
  EXPECT_EQ(s.tasks, 1u);
  EXPECT_DOUBLE_EQ(s.fast_1_0_vs_fastest, 0.0);
  EXPECT_FALSE(s.geomean_vs_fastest);
  EXPECT_TRUE(to_json(s)["geomean_vs_fastest_pytorch"].is_null());
  EXPECT_EQ(compare_suite({}).tasks, 0u);
}

// A median resolved is one at least resolved_multiple (10) times the timing resolution; below
// it, the ratio is computed but left out of the resolved geometric means and of the goals.
TEST(report_compare, medians_below_ten_times_the_resolution_are_not_resolved) {
  auto t = task("a", true, 20e-6, 40e-6, 80e-6);
  t.resolution_s = 2e-6;
  EXPECT_TRUE(resolved(t)); // 20 us = 10 x 2 us
  t.candidate_s = 19.9e-6;
  EXPECT_FALSE(resolved(t));
  t.resolution_s = 0; // unknown: nothing to hold against it
  EXPECT_TRUE(resolved(t));
}

TEST(report_compare, resolved_geomeans_and_goals_leave_out_launch_bound_tasks) {
  // Two large tasks at 0.9x of PyTorch's fastest (2x over eager) and two tiny ones at 4x (8x):
  // the geomean over all is 1.897x, over the resolved tasks 0.9x.
  std::vector<task_comparison> ts;
  for (int i = 0; i < 2; ++i) {
    ts.push_back(task("large" + std::to_string(i), true, 1e-3, 0.9e-3, 2e-3));
    ts.push_back(task("tiny" + std::to_string(i), true, 1e-6, 4e-6, 8e-6));
  }
  for (auto& t : ts) {
    t.resolution_s = 2e-6;
  }
  const auto s = compare_suite(ts);
  EXPECT_EQ(s.below_resolution, 2u);
  EXPECT_EQ(s.with_fastest, 4u);
  EXPECT_EQ(s.with_fastest_resolved, 2u);
  EXPECT_EQ(s.with_eager_resolved, 2u);
  EXPECT_NEAR(*s.geomean_vs_fastest, std::sqrt(0.9 * 4.0), 1e-12);
  EXPECT_NEAR(*s.geomean_vs_fastest_resolved, 0.9, 1e-12);
  EXPECT_NEAR(*s.geomean_vs_eager_resolved, 2.0, 1e-12);
  // 1.897x clears a 1.3x goal only through the tiny tasks: not met, either way.
  const auto g = check_goal_vs_fastest(s, 1.3);
  EXPECT_FALSE(g.met);
  EXPECT_FALSE(g.met_resolved);
  // Over eager (2x resolved, 4x all) a 1.5x goal holds for the resolved tasks; over every task
  // it is not met while two are below the resolution.
  const auto e = check_goal_vs_eager(s, 1.5);
  EXPECT_FALSE(e.met);
  EXPECT_TRUE(e.met_resolved);
  // Without the tiny tasks both hold.
  EXPECT_TRUE(check_goal_vs_eager(compare_suite({ts[0], ts[2]}), 1.5).met);
  const json j = to_json(s);
  EXPECT_EQ(j["tasks_below_resolution"].get<int>(), 2);
  EXPECT_NEAR(j["geomean_vs_fastest_pytorch_resolved"].get<double>(), 0.9, 1e-12);
}

// What is left to win: the speedup a kernel at the task's floor would have over the fastest
// method, per task and as the geometric means over the compared (and resolved) tasks.
TEST(report_compare, speedup_at_the_floor_bounds_what_the_suite_can_reach) {
  auto large = task("large", true, 1.1e-3, 1.0e-3, 2e-3); // PyTorch at 95% of a 0.95 ms floor
  large.floor_s = 0.95e-3;
  large.resolution_s = 2e-6;
  auto tiny = task("tiny", true, 1e-6, 4e-6, 8e-6); // launch-bound: the floor is 0.1 us
  tiny.floor_s = 0.1e-6;
  tiny.resolution_s = 2e-6;
  auto unknown = task("no-floor", true, 1e-3, 1e-3, 1e-3);
  auto wrong = task("wrong", false, 0, 1e-3, 1e-3); // not compared: not in the means
  wrong.floor_s = 0.5e-3;
  ASSERT_TRUE(speedup_at_floor(large));
  EXPECT_NEAR(*speedup_at_floor(large), 1.0 / 0.95, 1e-12);
  EXPECT_NEAR(*speedup_at_floor(tiny), 40.0, 1e-9);
  EXPECT_FALSE(speedup_at_floor(unknown));
  EXPECT_FALSE(speedup_at_floor(task("no-pytorch", true, 1e-3, std::nullopt, 1e-3)));
  const auto s = compare_suite({large, tiny, unknown, wrong});
  ASSERT_TRUE(s.geomean_vs_fastest_at_floor);
  EXPECT_NEAR(*s.geomean_vs_fastest_at_floor, std::sqrt(40.0 / 0.95), 1e-9);
  ASSERT_TRUE(s.geomean_vs_fastest_at_floor_resolved);
  EXPECT_NEAR(*s.geomean_vs_fastest_at_floor_resolved, 1.0 / 0.95, 1e-12);
  const json j = to_json(s);
  EXPECT_NEAR(j["geomean_vs_fastest_pytorch_at_floor_resolved"].get<double>(), 1.0 / 0.95, 1e-12);
  EXPECT_TRUE(to_json(compare_suite({unknown}))["geomean_vs_fastest_pytorch_at_floor"].is_null());
}

TEST(report_compare, compare_task_takes_the_fastest_eligible_method_and_eager) {
  json methods = provider_methods();
  methods.erase("noisy");
  const auto pm = pytorch_methods_from_json(methods);
  const auto c = compare_task("x", true, 0.001, {0.00099, 0.00101}, 2e-6, 0.0008, pm);
  ASSERT_TRUE(c.fastest_method);
  EXPECT_EQ(*c.fastest_method, "max-autotune");
  EXPECT_DOUBLE_EQ(c.fastest_s, 0.0015);
  EXPECT_DOUBLE_EQ(c.fastest_ci.low, 0.00149);
  EXPECT_DOUBLE_EQ(*c.eager_s, 0.002);
  EXPECT_DOUBLE_EQ(c.resolution_s, 2e-6);
  EXPECT_DOUBLE_EQ(c.floor_s, 0.0008);
  EXPECT_DOUBLE_EQ(speedup_vs_fastest(c)->value, 1.5);
  // An incorrect kernel keeps no time of its own.
  const auto w = compare_task("y", false, 0.001, {0.00099, 0.00101}, 2e-6, 0.0008, pm);
  EXPECT_DOUBLE_EQ(w.candidate_s, 0);
  EXPECT_FALSE(speedup_vs_fastest(w));
  EXPECT_FALSE(compare_task("z", true, 0.001, {}, 2e-6, 0, {}).fastest_method);
}

} // namespace
} // namespace kb::report
