// The optimization loop's rules without a GPU: outcome classification, the bandit's ranking and
// update, never repeating an attempt, budgets, and resuming an interrupted run. Evaluations are
// stood in for by a scripted evaluator; everything else (store, memory, proposer, generator) is
// real.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "search/builtin_proposer.hpp"
#include "search/executor.hpp"
#include "search/memory.hpp"
#include "search/optimize.hpp"
#include "search/strategies.hpp"
#include "search_test_support.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace kb::search {
namespace {

using nlohmann::json;
const fs::path root = KBLASTER_SOURCE_DIR;

TEST(outcomes, each_situation_ends_in_exactly_one_outcome) {
  outcome_inputs blocked;
  blocked.blocked = true;
  blocked.blocked_reason = "blocked.no_cuda_device";
  EXPECT_EQ(classify_outcome(blocked).first, outcome::blocked);
  outcome_inputs bad_baseline;
  bad_baseline.baseline_ok = false;
  bad_baseline.baseline_reason = "verify.mismatch";
  EXPECT_EQ(classify_outcome(bad_baseline),
            std::make_pair(outcome::failed, std::string("baseline.verify.mismatch")));
  // The evaluation's own reason for its baseline side is not named twice.
  bad_baseline.baseline_reason = "baseline.verify.mismatch";
  EXPECT_EQ(classify_outcome(bad_baseline),
            std::make_pair(outcome::failed, std::string("baseline.verify.mismatch")));
  outcome_inputs nothing;
  EXPECT_EQ(classify_outcome(nothing).first, outcome::timeout);
  nothing.stopped = search_stop::wall_budget;
  EXPECT_EQ(classify_outcome(nothing),
            std::make_pair(outcome::timeout, std::string("budget.exhausted_before_a_candidate")));
  nothing.stopped = search_stop::floor_target;
  EXPECT_EQ(
      classify_outcome(nothing),
      std::make_pair(outcome::no_improvement, std::string("search.baseline_at_floor_target")));
  nothing.stopped = search_stop::proposals_exhausted;
  EXPECT_EQ(classify_outcome(nothing),
            std::make_pair(outcome::no_improvement, std::string("search.proposals_exhausted")));
  outcome_inputs all_wrong;
  all_wrong.evaluated = 4;
  EXPECT_EQ(classify_outcome(all_wrong),
            std::make_pair(outcome::failed, std::string("search.no_correct_candidate")));
  outcome_inputs none_faster;
  none_faster.evaluated = 4;
  none_faster.correct = 3;
  EXPECT_EQ(classify_outcome(none_faster).first, outcome::no_improvement);
  auto confirmed = none_faster;
  confirmed.confirmation = eval::verdict::improved;
  EXPECT_EQ(classify_outcome(confirmed),
            std::make_pair(outcome::improved, std::string("confirm.improved")));
  confirmed.confirmation = eval::verdict::inconclusive;
  EXPECT_EQ(classify_outcome(confirmed),
            std::make_pair(outcome::no_improvement, std::string("confirm.inconclusive")));
  for (auto o : {outcome::improved, outcome::no_improvement, outcome::failed, outcome::blocked,
                 outcome::timeout}) {
    EXPECT_EQ(outcome_from_string(to_string(o)), o);
  }
}

store::experience attempt(const std::string& strategy, std::optional<double> speedup,
                          const std::string& task = "019") {
  store::experience e;
  e.task_id = task;
  e.family = "elementwise";
  e.gpu = "gpu";
  e.strategy = strategy;
  e.params = {{"p", 1}};
  e.correct = speedup.has_value();
  e.measured_speedup = speedup;
  e.failure_reason = speedup ? "" : "verify.mismatch";
  return e;
}

TEST(memory, rewards_and_ucb_favour_what_worked_and_try_the_untested_first) {
  EXPECT_DOUBLE_EQ(reward(attempt("a", 2.0)), 1.0);
  EXPECT_DOUBLE_EQ(reward(attempt("a", std::nullopt)), -1.0);
  const auto stats = summarize({attempt("good", 2.0), attempt("good", 1.5),
                                attempt("bad", std::nullopt), attempt("bad", 0.9)});
  ASSERT_EQ(stats.size(), 2u);
  const auto& bad = stats[0].strategy == "bad" ? stats[0] : stats[1];
  const auto& good = stats[0].strategy == "good" ? stats[0] : stats[1];
  EXPECT_EQ(good.successes, 2);
  EXPECT_DOUBLE_EQ(good.best_speedup, 2.0);
  EXPECT_EQ(bad.correct, 1);
  EXPECT_EQ(bad.last_failure, "verify.mismatch");
  EXPECT_GT(ucb_score(good, 4, 1.0), ucb_score(bad, 4, 1.0));
  EXPECT_TRUE(std::isinf(ucb_score(strategy_stats{}, 4, 1.0)));
  // With enough exploration weight, the less-tried strategy wins.
  strategy_stats once{"once", 1, 1, 0, 0.0};
  strategy_stats often{"often", 50, 50, 50, 0.3};
  EXPECT_GT(ucb_score(once, 51, 2.0), ucb_score(often, 51, 2.0));
  EXPECT_LT(ucb_score(once, 51, 0.0), ucb_score(often, 51, 0.0));
}

class loop : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::make_unique<temp_dir>("kb-optimize-test");
    st = std::make_unique<store::store>(dir->path() / "store");
    c = task::find_task(root, "019");
    gpu.speed = {{"elementwise.vectorized", 1.3}};
  }
  task_result run_loop(int64_t run, int steps, int max_evals,
                       std::chrono::seconds wall = std::chrono::seconds(600), bool sanitize = false,
                       eval::profile_mode profile = eval::profile_mode::none,
                       double target_floor_fraction = 1e9) {
    memory mem(*st);
    builtin_proposer prop(mem);
    optimize_options o;
    o.step.profile = profile;
    o.sanitize = sanitize;
    o.rollouts = 2;
    o.steps = steps;
    o.limits.evaluations = max_evals;
    o.limits.wall = wall;
    o.target_floor_fraction = target_floor_fraction; // default never reached: times are scripted
    optimizer opt(*st, run, mem, prop, o, "gpu", std::ref(gpu), {}, {});
    return opt.optimize(c);
  }
  std::unique_ptr<temp_dir> dir;
  std::unique_ptr<store::store> st;
  task::contract c;
  testing::scripted_gpu gpu;
};

TEST_F(loop, improves_records_every_step_and_never_repeats_an_attempt) {
  const int64_t run = st->begin_run("optimize", json::object());
  const auto r = run_loop(run, 3, 0);
  EXPECT_EQ(r.final, outcome::improved) << r.reason;
  EXPECT_EQ(r.best_strategy, "elementwise.vectorized");
  EXPECT_GT(r.speedup, 1.2);
  EXPECT_EQ(r.evaluations, 6); // 3 steps x 2 rollouts
  EXPECT_EQ(r.stopped_because, search_stop::steps);
  EXPECT_EQ(r.to_json()["stopped_because"], "steps");
  for (const auto& key : gpu.seen) {
    EXPECT_EQ(gpu.seen.count(key), 1u) << key << " evaluated twice";
  }
  // Every attempt is an experience, and every evaluation (baseline, steps, confirmation) a row.
  EXPECT_EQ(st->find_experiences("elementwise", "gpu").size(), 6u);
  EXPECT_EQ(st->evaluations_of_run(run).size(), 1u + 6u + 1u);
  EXPECT_EQ(st->outcomes_of_run(run).size(), 1u);
}

TEST_F(loop, a_second_run_with_the_same_memory_tries_only_new_points) {
  run_loop(st->begin_run("optimize", json::object()), 2, 0);
  const auto first = gpu.seen;
  gpu.seen.clear();
  run_loop(st->begin_run("optimize", json::object()), 2, 0);
  for (const auto& key : gpu.seen) {
    EXPECT_EQ(first.count(key), 0u) << key << " was already tried in the first run";
  }
}

TEST_F(loop, the_evaluation_budget_stops_the_search) {
  const auto r = run_loop(st->begin_run("optimize", json::object()), 50, 3);
  EXPECT_LE(r.evaluations, 3);
  EXPECT_EQ(r.final, outcome::improved);
  EXPECT_EQ(r.stopped_because, search_stop::evaluation_budget);
}

TEST_F(loop, an_exhausted_wall_clock_before_any_candidate_is_a_timeout) {
  const auto r = run_loop(st->begin_run("optimize", json::object()), 5, 0, std::chrono::seconds(0));
  EXPECT_EQ(r.final, outcome::timeout);
  EXPECT_EQ(r.evaluations, 0);
  EXPECT_EQ(r.stopped_because, search_stop::wall_budget);
}

TEST_F(loop, the_wall_budget_is_the_searchs_and_starts_after_the_baseline) {
  // A baseline that takes longer than the whole budget still leaves the search its budget.
  gpu.baseline_delay = std::chrono::milliseconds(1500);
  const auto r = run_loop(st->begin_run("optimize", json::object()), 1, 0, std::chrono::seconds(1));
  EXPECT_GE(r.baseline_wall_seconds, 1.5);
  EXPECT_EQ(r.evaluations, 2); // the one step's two rollouts
  EXPECT_EQ(r.final, outcome::improved) << r.reason;
  EXPECT_EQ(r.to_json()["baseline_wall_seconds"], r.baseline_wall_seconds);
}

// The budget bounds how long a queued evaluation of the search may wait (search::wait_limit),
// from the moment the baseline is verified; the baseline before it and the confirmation after it
// are not cut.
TEST_F(loop, the_searchs_evaluations_wait_no_longer_than_its_budget) {
  struct call {
    bool confirmation;
    std::optional<std::chrono::steady_clock::time_point> limit;
  };
  std::vector<call> calls;
  const auto evaluate = [&](const task::contract& tc, const eval::candidate_input& cand,
                            const eval::candidate_input& base, const eval::options& opt) {
    calls.push_back({opt.sessions == 7, wait_limit_of_this_thread()});
    return gpu(tc, cand, base, opt);
  };
  memory mem(*st);
  builtin_proposer prop(mem);
  optimize_options o;
  o.rollouts = 2;
  o.steps = 2;
  o.limits.wall = std::chrono::seconds(300);
  o.sanitize = false;
  o.confirm.sessions = 7; // tells the confirmation apart
  o.target_floor_fraction = 1e9;
  const auto before = std::chrono::steady_clock::now();
  optimizer opt(*st, st->begin_run("optimize", json::object()), mem, prop, o, "gpu", evaluate, {},
                {});
  const auto r = opt.optimize(c);
  const auto after = std::chrono::steady_clock::now();
  EXPECT_EQ(r.final, outcome::improved) << r.reason;
  ASSERT_EQ(calls.size(), 1u + 4u + 1u); // baseline, 2 steps x 2 rollouts, confirmation
  EXPECT_FALSE(calls.front().limit) << "the baseline's evaluation is not cut";
  EXPECT_TRUE(calls.back().confirmation);
  EXPECT_FALSE(calls.back().limit) << "the confirmation is not cut";
  for (size_t i = 1; i + 1 < calls.size(); ++i) {
    ASSERT_TRUE(calls[i].limit) << i;
    EXPECT_GE(*calls[i].limit, before + o.limits.wall) << i;
    EXPECT_LE(*calls[i].limit, after + o.limits.wall) << i;
  }
  EXPECT_FALSE(wait_limit_of_this_thread()) << "the limit ends with the task";
}

TEST_F(loop, a_best_at_the_floor_target_ends_the_search_and_says_so) {
  // A target of 0: the baseline already runs at that fraction of the floor's speed.
  const auto r = run_loop(st->begin_run("optimize", json::object()), 5, 0,
                          std::chrono::seconds(600), false, eval::profile_mode::none, 0.0);
  EXPECT_EQ(r.evaluations, 0);
  EXPECT_EQ(r.stopped_because, search_stop::floor_target);
  EXPECT_EQ(r.final, outcome::no_improvement);
  EXPECT_EQ(r.reason, "search.baseline_at_floor_target");
  EXPECT_EQ(r.to_json()["stopped_because"], "floor_target");
}

TEST_F(loop, a_resumed_run_continues_from_its_checkpoint_without_repeating) {
  const int64_t run = st->begin_run("optimize", json::object());
  const auto first = run_loop(run, 50, 2); // "killed" after two evaluations
  EXPECT_EQ(first.evaluations, 2);
  st->record_outcome({run, st->record_task(c), "interrupted", "",
                      std::nullopt}); // what a kill leaves is only the checkpoint
  const auto before = gpu.seen;
  const auto resumed = run_loop(run, 50, 5);
  EXPECT_EQ(resumed.evaluations, 5); // 2 restored from the checkpoint + 3 new
  for (const auto& key : gpu.seen) {
    EXPECT_EQ(gpu.seen.count(key), 1u) << key << " repeated after resume";
  }
  EXPECT_EQ(st->find_experiences("elementwise", "gpu").size(), 5u);
}

TEST_F(loop, a_blocked_baseline_blocks_the_task) {
  memory mem(*st);
  builtin_proposer prop(mem);
  optimize_options o;
  const auto blocked = [](const task::contract&, const eval::candidate_input&,
                          const eval::candidate_input&, const eval::options&) {
    eval::result r;
    r.final = eval::verdict::blocked;
    r.reason = "blocked.no_cuda_device";
    return r;
  };
  optimizer opt(*st, st->begin_run("optimize", json::object()), mem, prop, o, "gpu", blocked, {},
                {});
  const auto r = opt.optimize(c);
  EXPECT_EQ(r.final, outcome::blocked);
  EXPECT_EQ(r.reason, "blocked.no_cuda_device");
}

TEST_F(loop, a_candidate_is_sanitized_before_it_becomes_the_best) {
  const int64_t run = st->begin_run("optimize", json::object());
  const auto r = run_loop(run, 3, 0, std::chrono::seconds(600), true);
  EXPECT_EQ(r.final, outcome::improved) << r.reason;
  EXPECT_EQ(r.best_strategy, "elementwise.vectorized");
  // Only candidates that timed as improved went through the sanitizers, each before it became
  // the best; the pass is recorded in the step and as an evaluation of its own.
  ASSERT_FALSE(gpu.sanitized.empty());
  for (const auto& s : gpu.sanitized) {
    EXPECT_EQ(s, "elementwise.vectorized");
  }
  int sanitized_steps = 0;
  for (const auto& step : r.steps) {
    if (step.contains("sanitize")) {
      ++sanitized_steps;
      EXPECT_EQ(step["sanitize"]["reason"], "verify.passed");
    }
  }
  EXPECT_EQ(sanitized_steps, static_cast<int>(gpu.sanitized.size()));
  EXPECT_EQ(st->evaluations_of_run(run).size(), 1u + 6u + gpu.sanitized.size() + 1u);
}

TEST_F(loop, a_sanitizer_finding_rejects_the_candidate_and_the_search_goes_on) {
  gpu.sanitize_failure = {{"elementwise.vectorized", "sanitize.memcheck"}};
  const int64_t run = st->begin_run("optimize", json::object());
  const auto r = run_loop(run, 3, 0, std::chrono::seconds(600), true);
  EXPECT_EQ(r.evaluations, 6); // the search went on after each rejection
  EXPECT_NE(r.best_strategy, "elementwise.vectorized");
  EXPECT_NE(r.final, outcome::improved) << r.reason;
  int rejected = 0;
  for (const auto& step : r.steps) {
    if (step.contains("sanitize")) {
      EXPECT_EQ(step["verdict"], "rejected");
      EXPECT_EQ(step["reason"], "sanitize.memcheck");
      EXPECT_EQ(step["sanitize"]["timing_verdict"], "improved");
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  // Memory remembers it as a failure with the sanitizer's reason.
  bool remembered = false;
  for (const auto& e : st->find_experiences("elementwise", "gpu")) {
    if (e.failure_reason == "sanitize.memcheck") {
      remembered = true;
      EXPECT_FALSE(e.correct);
    }
  }
  EXPECT_TRUE(remembered);
}

TEST_F(loop, without_sanitize_no_sanitizer_pass_runs) {
  const auto r = run_loop(st->begin_run("optimize", json::object()), 3, 0);
  EXPECT_EQ(r.final, outcome::improved);
  EXPECT_TRUE(gpu.sanitized.empty());
}

TEST_F(loop, counters_come_with_the_baseline_and_each_new_best_and_drive_the_state) {
  gpu.counters = true;
  const auto r = run_loop(st->begin_run("optimize", json::object()), 3, 0,
                          std::chrono::seconds(600), false, eval::profile_mode::improved);
  ASSERT_EQ(r.final, outcome::improved) << r.reason;
  // The baseline's A/A run collects them whatever its verdict; each step's gate on a new best.
  ASSERT_FALSE(gpu.profiles.empty());
  EXPECT_EQ(gpu.profiles.front(), eval::profile_mode::always);
  for (size_t i = 1; i + 1 < gpu.profiles.size(); ++i) {
    EXPECT_EQ(gpu.profiles[i], eval::profile_mode::improved) << i;
  }
  EXPECT_EQ(gpu.profiles.back(), eval::profile_mode::none); // the confirmation
  EXPECT_EQ(r.baseline_state.at("source"), "cupti");
  EXPECT_EQ(r.baseline_state.at("state"), "memory_bound");
  EXPECT_EQ(r.final_state.at("source"), "cupti");
  int new_states = 0;
  for (const auto& step : r.steps) {
    EXPECT_TRUE(step.at("why").contains("state")) << step.dump();
    if (step.contains("new_state")) {
      ++new_states;
      EXPECT_EQ(step["new_state"].at("source"), "cupti") << step.dump();
    }
  }
  EXPECT_GE(new_states, 1);
}

TEST_F(loop, without_counters_for_the_baseline_no_step_asks_for_them) {
  gpu.counters = false;
  const auto r = run_loop(st->begin_run("optimize", json::object()), 2, 0,
                          std::chrono::seconds(600), false, eval::profile_mode::improved);
  ASSERT_EQ(r.final, outcome::improved) << r.reason;
  EXPECT_EQ(gpu.profiles.front(), eval::profile_mode::always);
  for (size_t i = 1; i < gpu.profiles.size(); ++i) {
    EXPECT_EQ(gpu.profiles[i], eval::profile_mode::none) << i;
  }
  EXPECT_EQ(r.baseline_state.at("source"), "analytic");
  EXPECT_NE(r.baseline_state.at("numbers").value("why_analytic", "").find("libcupti"),
            std::string::npos)
      << r.baseline_state.dump();
}

TEST_F(loop, a_task_no_strategy_applies_to_ends_at_once_without_improvement) {
  for (auto& t : c.inputs) {
    t.type = task::dtype::int64; // no strategy of the library handles these inputs
  }
  ASSERT_TRUE(strategies_for(c).empty());
  const auto r = run_loop(st->begin_run("optimize", json::object()), 5, 0);
  EXPECT_EQ(r.final, outcome::no_improvement);
  EXPECT_EQ(r.reason, "search.no_applicable_strategy");
  EXPECT_EQ(r.evaluations, 0);
  EXPECT_EQ(r.stopped_because, search_stop::no_strategy);
  EXPECT_EQ(gpu.calls, 1); // the baseline only
}

TEST(outcomes, exit_status_of_a_run) {
  EXPECT_EQ(exit_status({}), exit_code::ok);
  EXPECT_EQ(exit_status({outcome::improved, outcome::improved}), exit_code::ok);
  EXPECT_EQ(exit_status({outcome::improved, outcome::no_improvement}), exit_code::not_improved);
  EXPECT_EQ(exit_status({outcome::no_improvement, outcome::blocked}), exit_code::blocked);
  EXPECT_EQ(exit_status({outcome::blocked, outcome::timeout}), exit_code::task_failed);
  EXPECT_EQ(exit_status({outcome::improved, outcome::failed}), exit_code::task_failed);
  EXPECT_EQ(exit_code::task_failed, 4);
  EXPECT_EQ(exit_code::not_improved, 2);
}

TEST(outcomes, no_applicable_strategy_is_no_improvement_not_timeout) {
  outcome_inputs in;
  in.no_applicable_strategy = true;
  EXPECT_EQ(classify_outcome(in),
            std::make_pair(outcome::no_improvement, std::string("search.no_applicable_strategy")));
}

TEST(builtin, proposes_the_default_first_then_neighbours_and_corners) {
  const auto& st = find_strategy("elementwise.vectorized");
  const auto order = builtin_proposer::point_order(st, st.defaults);
  ASSERT_GE(order.size(), 2u);
  EXPECT_EQ(order.front(), resolve_params(st, st.defaults));
  for (const auto& p : order) {
    EXPECT_NO_THROW(resolve_params(st, p)) << p.dump();
  }
}

} // namespace
} // namespace kb::search
