// The profile-guided, learning search without a GPU: bottleneck states and shape classes, the
// state in every step and experience, memory that transfers across tasks, screening that keeps
// the verdicts, and the memory experiment on synthetic outcome tables (where memory must help and
// where it cannot).
#include "common/error.hpp"
#include "common/fs.hpp"
#include "llm/llm.hpp"
#include "search/builtin_proposer.hpp"
#include "search/experiment.hpp"
#include "search/memory.hpp"
#include "search/optimize.hpp"
#include "search/screen.hpp"
#include "search/state.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <functional>

#include <map>
#include <set>

namespace kb::search {
namespace {

using nlohmann::json;
const fs::path root = KBLASTER_SOURCE_DIR;

TEST(state, shape_classes_round_trip_and_measure_distance) {
  const auto relu = task::find_task(root, "019");
  const auto k = classify_shape(features_of(relu, relu.official()));
  EXPECT_EQ(k.fam, task::family::elementwise);
  EXPECT_EQ(k.layout, "flat");
  ASSERT_EQ(k.log2_buckets.size(), 1u);
  const auto back = shape_class::parse(k.to_string());
  ASSERT_TRUE(back.has_value()) << k.to_string();
  EXPECT_EQ(back->to_string(), k.to_string());
  EXPECT_EQ(distance(k, *back), 0);
  auto bigger = k;
  bigger.log2_buckets[0] += 3;
  EXPECT_EQ(distance(k, bigger), 3);
  auto half = k;
  half.dtype = "float16";
  EXPECT_EQ(distance(k, half), 4);
  const auto norm = task::find_task(root, "023");
  EXPECT_EQ(distance(k, classify_shape(features_of(norm, norm.official()))), 100);
  EXPECT_FALSE(shape_class::parse("nonsense").has_value());
  EXPECT_FALSE(shape_class::parse("elementwise/float32/flat/x").has_value());
}

TEST(state, analytic_without_counters) {
  const auto c = task::find_task(root, "019");
  const auto& s = c.official();
  const double floor = task::floor_seconds(c, s, task::ceilings{});
  // At the floor's time the roofline itself proves the bound.
  const auto at_floor = assess(c, s, floor);
  EXPECT_EQ(at_floor.source, state_source::analytic);
  EXPECT_EQ(at_floor.state, profile::state::memory_bound) << at_floor.sentence;
  EXPECT_TRUE(at_floor.numbers.contains("bandwidth_fraction"));
  // Far from the floor, the roofline alone cannot tell: unknown, still analytic.
  EXPECT_EQ(assess(c, s, 10 * floor).state, profile::state::unknown);
}

TEST(state, counters_collected_with_the_evaluation_are_classified_and_their_absence_explained) {
  const auto c = task::find_task(root, "019");
  const auto& s = c.official();
  const double floor = task::floor_seconds(c, s, task::ceilings{});
  // What eval::evaluate keeps as detail.profile with profile_mode improved or always: CUPTI's
  // values as the runner read them. DRAM at 91% of peak: memory-bound, whatever the roofline says.
  profile::cupti_values v;
  v.available = true;
  v.passes = 3;
  v.values = {{"gpu__time_duration.sum", {3.1e6, "nsecond"}},
              {"sm__throughput.avg.pct_of_peak_sustained_elapsed", {22, "%"}},
              {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", {91, "%"}},
              {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", {91, "%"}},
              {"sm__warps_active.avg.pct_of_peak_sustained_active", {80, "%"}},
              {"sm__ctas_launched.sum", {16896, ""}}};
  eval::result r;
  r.counters = eval::counters_run{eval::verdict::same, "verify.passed", "", 1.5, v.to_json(), 3e-3};
  EXPECT_TRUE(has_counters(r));
  EXPECT_EQ(counters_note(r), "CUPTI: 6 metrics in 3 passes");
  const auto measured = assess(c, s, 10 * floor, &r);
  EXPECT_EQ(measured.source, state_source::cupti);
  EXPECT_EQ(measured.state, profile::state::memory_bound) << measured.sentence;
  EXPECT_FALSE(measured.numbers.contains("why_analytic"));

  // CUPTI could not read them: the analytic state, with the reason in its numbers.
  profile::cupti_values denied;
  denied.reason = "ERR_NVGPUCTRPERM: no permission";
  r.counters->values = denied.to_json();
  EXPECT_FALSE(has_counters(r));
  EXPECT_EQ(counters_note(r), "CUPTI: ERR_NVGPUCTRPERM: no permission");
  const auto fallback = assess(c, s, 10 * floor, &r);
  EXPECT_EQ(fallback.source, state_source::analytic);
  EXPECT_NE(fallback.numbers.value("why_analytic", "").find("ERR_NVGPUCTRPERM"), std::string::npos)
      << fallback.numbers.dump();

  // The counters' run itself failed: said so; and an evaluation that asked for none.
  r.counters = eval::counters_run{eval::verdict::rejected, "crash.exit", "", 1.0, {}, {}};
  EXPECT_FALSE(has_counters(r));
  EXPECT_EQ(counters_note(r), "the counters' run ended rejected (crash.exit)");
  EXPECT_NE(assess(c, s, floor, &r).numbers.value("why_analytic", "").find("crash.exit"),
            std::string::npos);
  EXPECT_EQ(counters_note(eval::result{}), "the evaluation did not collect them");
}

TEST(state, every_strategy_addresses_the_unknown_state_and_its_own) {
  for (const auto& st : all_strategies()) {
    EXPECT_TRUE(addresses(st, profile::state::unknown)) << st.name;
  }
  EXPECT_TRUE(addresses(find_strategy("normalize.split_row"), profile::state::small_grid));
  EXPECT_FALSE(addresses(find_strategy("normalize.block_row"), profile::state::small_grid));
  EXPECT_TRUE(addresses(find_strategy("matmul.register_tiled"), profile::state::compute_bound));
}

// A deterministic GPU whose speed depends on the point: speed(task, strategy, params) from a
// table, 1.0 when absent. Counts the calls by kind (verify-only, screen, gate).
struct point_gpu {
  std::map<std::string, double> speed; // "strategy|params" -> baseline time / candidate time
  std::map<std::string, int> calls;
  std::vector<std::pair<std::string, std::string>> gate_verdicts; // point, verdict
  double of(const eval::candidate_input& in) const {
    if (in.origin == "baseline") {
      return 1.0;
    }
    const auto it = speed.find(in.strategy + "|" + in.params.dump());
    return it == speed.end() ? 1.0 : it->second;
  }
  eval::result operator()(const task::contract&, const eval::candidate_input& cand,
                          const eval::candidate_input& best, const eval::options& o) {
    const bool screen = o.timing.max_wall < 1.0;
    calls[o.verify_only ? "verify" : (screen ? "screen" : "gate")] += 1;
    eval::result r;
    if (o.verify_only) {
      r.final = eval::verdict::same;
      r.reason = "verify.passed";
      return r;
    }
    const double ratio = of(cand) / of(best);
    r.final = ratio > 1 + o.delta
                  ? eval::verdict::improved
                  : (ratio < 1 - o.delta ? eval::verdict::regressed : eval::verdict::same);
    r.reason = "timing." + eval::to_string(r.final);
    r.gate = eval::gate_summary::of_medians(1e-3 / of(best), 1e-3 / of(cand));
    r.worker_seconds = screen ? 0.5 : 3.0;
    r.detail["statistics"] = *r.gate;
    r.detail["sessions"] = json::array({{{"seconds", r.worker_seconds}}});
    if (!screen && cand.origin != "baseline" && best.origin != "baseline") {
      gate_verdicts.emplace_back(cand.strategy + "|" + cand.params.dump(),
                                 eval::to_string(r.final));
    }
    return r;
  }
};

task_result run_search(store::store& st, const task::contract& c, point_gpu& gpu, uint64_t seed,
                       bool screening, int max_evals) {
  memory mem(st);
  builtin_proposer prop(mem, seed);
  optimize_options o;
  o.rollouts = 2;
  o.steps = 100;
  o.limits.evaluations = max_evals;
  o.target_floor_fraction = 1e9;
  o.seed = seed;
  o.screening.enabled = screening;
  o.screening.screen = screening_options(o.step);
  optimizer opt(st, st.begin_run("optimize", json::object()), mem, prop, o, "gpu", std::ref(gpu),
                {}, {});
  return opt.optimize(c);
}

// Speeds for every table point of elementwise.vectorized: the default 1.1x, one distant point
// 2x, the rest between 0.7x and 1.3x.
std::map<std::string, double> synthetic_speeds(uint64_t salt, int best_index) {
  const auto& st = find_strategy("elementwise.vectorized");
  std::map<std::string, double> out;
  const auto points = table_points(st, 12);
  for (size_t i = 0; i < points.size(); ++i) {
    const double wobble = static_cast<double>((i * 7919 + salt * 104729) % 61) / 100.0;
    out["elementwise.vectorized|" + points[i].dump()] =
        static_cast<int>(i) == best_index ? 2.0 : (i == 0 ? 1.1 : 0.7 + wobble);
  }
  return out;
}

TEST(learning_loop, every_step_records_the_state_that_led_to_it_and_why) {
  temp_dir dir("kb-learn-test");
  store::store st(dir.path() / "store");
  const auto c = task::find_task(root, "019");
  point_gpu gpu;
  gpu.speed = synthetic_speeds(1, 5);
  const auto r = run_search(st, c, gpu, 0, false, 6);
  ASSERT_EQ(r.evaluations, 6);
  EXPECT_EQ(r.baseline_state.at("source"), "analytic");
  for (const auto& step : r.steps) {
    ASSERT_TRUE(step.contains("why")) << step.dump();
    EXPECT_TRUE(profile::state_from_string(step["why"]["state"]["state"]).has_value());
    EXPECT_EQ(step["why"]["state"]["source"], "analytic");
    EXPECT_TRUE(step["why"].contains("score"));
    EXPECT_TRUE(step["why"]["retrieved"]["evidence"].contains("key"));
    EXPECT_EQ(step["stage"]["stage_reached"], "gate");
  }
  EXPECT_EQ(r.best_after_evaluation.size(), 6u);
  for (const auto& e : st.find_experiences("elementwise", "gpu")) {
    EXPECT_TRUE(profile::state_from_string(e.state_before).has_value()) << e.state_before;
    EXPECT_TRUE(shape_class::parse(e.op_features.value("shape_class", "")).has_value());
    EXPECT_EQ(e.op_features["bottleneck"]["source"], "analytic");
  }
  EXPECT_GT(r.candidates_per_minute, 0);
}

// What a run of task `c` leaves in memory: every point of strategy `st` tried, correct, with the
// speedup `speedup_of(point index)`.
void record_run(store::store& st, const task::contract& c, const strategy& strat,
                const std::vector<json>& points, const std::function<double(size_t)>& speedup_of) {
  for (size_t i = 0; i < points.size(); ++i) {
    store::experience e;
    e.task_id = c.id;
    e.family = task::to_string(c.fam);
    e.gpu = "gpu";
    e.state_before = "unknown";
    e.op_features = {{"shape_class", classify_shape(features_of(c, c.official())).to_string()}};
    e.strategy = strat.name;
    e.params = points[i];
    e.correct = true;
    e.measured_speedup = speedup_of(i);
    st.record_experience(e);
  }
}

// Two elementwise tasks of one shape class: 026, whose run memory holds, and 019, searched.
class memory_transfer : public ::testing::Test {
protected:
  temp_dir dir{"kb-learn-test"};
  store::store st{dir.path() / "store"};
  task::contract gelu = task::find_task(root, "026");
  task::contract relu = task::find_task(root, "019");
  const strategy& vec = find_strategy("elementwise.vectorized");
  std::vector<json> points = table_points(vec, 12);
};

TEST_F(memory_transfer, memory_of_another_task_of_the_same_class_starts_from_its_best_params) {
  // What a run of 026 left: its best is a point far down the proposer's order.
  record_run(st, gelu, vec, points, [](size_t i) { return i == 7 ? 1.9 : 1.05; });
  point_gpu gpu;
  const auto r = run_search(st, relu, gpu, 0, false, 1);
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps[0]["params"], points[7]);
  EXPECT_EQ(r.steps[0]["why"]["started_from"], points[7]);
  EXPECT_EQ(r.steps[0]["why"]["retrieved"]["evidence"]["params_from_task"], "026");
  // Without that memory the first candidate is the default.
  temp_dir empty("kb-learn-test");
  store::store fresh(empty.path() / "store");
  const auto cold = run_search(fresh, relu, gpu, 0, false, 1);
  EXPECT_EQ(cold.steps[0]["params"], resolve_params(vec, vec.defaults));
}

TEST_F(memory_transfer, a_small_lesson_of_another_task_goes_after_the_default) {
  ASSERT_EQ(points[0], resolve_params(vec, vec.defaults));
  // 026's best beat its default by 3%, within what separates neighbouring points on one task.
  record_run(st, gelu, vec, points, [](size_t i) { return i == 7 ? 1.30 : (i == 0 ? 1.26 : 1.2); });
  point_gpu gpu;
  const auto r = run_search(st, relu, gpu, 0, false, 2);
  ASSERT_GE(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0]["params"], points[0]); // the default first
  // then its neighbour whose move gained most on 026, which here is 026's best point
  EXPECT_EQ(r.steps[1]["params"], points[7]);
  const auto& evidence = r.steps[0]["why"]["retrieved"]["evidence"];
  EXPECT_EQ(evidence["params_from_task"], "026");
  EXPECT_FALSE(evidence["params_first"].get<bool>());
  EXPECT_NEAR(evidence["params_margin_over_default"].get<double>(), 1.30 / 1.26, 1e-9);
}

TEST_F(memory_transfer, what_each_parameter_value_did_on_other_tasks_orders_the_neighbours) {
  const json defaults = resolve_params(vec, vec.defaults);
  ASSERT_EQ(points[0], defaults);
  // On 026, every point with 8-byte vectors ran 20% faster than the others; on 019 itself, one
  // point with 16-byte vectors ran fastest (a task's own attempts are its own best, not a lesson).
  record_run(st, gelu, vec, points, [&](size_t i) {
    return points[i]["vector_bytes"] == 8 ? 1.2 : 1.0;
  });
  record_run(st, relu, vec, {defaults}, [](size_t) { return 3.0; });
  memory mem(st);
  const auto key = memory_key{relu.fam, profile::state::unknown,
                              classify_shape(features_of(relu, relu.official()))};
  const auto ranked = mem.rank(relu, "gpu", {&vec}, key, {});
  ASSERT_EQ(ranked.size(), 1u);
  const auto& scores = ranked[0].value_scores;
  ASSERT_TRUE(scores.count("vector_bytes"));
  EXPECT_GT(scores.at("vector_bytes").at("8"), 0);
  EXPECT_LT(scores.at("vector_bytes").at("16"), 0);
  json to8 = defaults;
  to8["vector_bytes"] = 8;
  json to4 = defaults;
  to4["vector_bytes"] = 4;
  EXPECT_GT(ranked[0].move_score(defaults, to8), 0);
  EXPECT_DOUBLE_EQ(ranked[0].move_score(defaults, defaults), 0);
  EXPECT_GT(ranked[0].move_score(defaults, to8), ranked[0].move_score(defaults, to4));

  // The proposer: the centre first, then the neighbour whose move gained most elsewhere.
  temp_dir empty("kb-learn-test");
  store::store fresh(empty.path() / "store");
  memory none(fresh);
  builtin_proposer prop(none);
  proposal_context ctx;
  ctx.task = &relu;
  ctx.gpu = "gpu";
  strategy_outcome o = ranked[0];
  o.params = defaults;
  o.params_first = true;
  ctx.retrieved = {o};
  EXPECT_EQ(prop.propose(ctx).candidate->params, defaults);
  EXPECT_EQ(prop.propose(ctx).candidate->params, to8);
  // Without such experiences the neighbours keep the library's order, where 8-byte vectors are
  // not the first move.
  ASSERT_NE(builtin_proposer::point_order(vec, defaults)[1], to8);
  builtin_proposer plain(none);
  o.value_scores.clear();
  ctx.retrieved = {o};
  EXPECT_EQ(plain.propose(ctx).candidate->params, defaults);
  EXPECT_EQ(plain.propose(ctx).candidate->params, builtin_proposer::point_order(vec, defaults)[1]);
}

// A proposer that keeps what the loop handed it, proposing as the built-in one does.
struct capturing_proposer : builtin_proposer {
  using builtin_proposer::builtin_proposer;
  std::vector<proposal_context> seen;
  proposal_result propose(const proposal_context& ctx) override {
    seen.push_back(ctx);
    return builtin_proposer::propose(ctx);
  }
};

TEST(learning_loop, the_prompt_carries_the_state_its_source_and_memory_key) {
  temp_dir dir("kb-learn-test");
  store::store st(dir.path() / "store");
  const auto c = task::find_task(root, "019");
  memory mem(st);
  capturing_proposer prop(mem);
  optimize_options o;
  o.steps = 1;
  o.rollouts = 1;
  o.target_floor_fraction = 1e9;
  point_gpu gpu;
  optimizer opt(st, st.begin_run("optimize", json::object()), mem, prop, o, "gpu", std::ref(gpu),
                {}, {});
  opt.optimize(c);
  ASSERT_EQ(prop.seen.size(), 1u);
  const auto& ctx = prop.seen[0];
  EXPECT_EQ(ctx.metrics.at("source"), "analytic");
  EXPECT_TRUE(profile::state_from_string(ctx.metrics.at("state")).has_value());
  const auto messages =
      llm::build_prompt(ctx, llm::load_prompt_material(root, c), llm::prompt_limits{});
  const std::string& text = messages.at(1).content;
  EXPECT_NE(text.find("(analytic)"), std::string::npos) << text;
  EXPECT_NE(text.find(ctx.metrics.at("memory_key").get<std::string>()), std::string::npos);
  EXPECT_NE(text.find("bandwidth_fraction"), std::string::npos);
}

TEST(learning_loop, seeds_change_the_order_of_the_search) {
  std::set<std::string> orders;
  for (uint64_t seed : {1, 2, 3, 4}) {
    temp_dir dir("kb-learn-test");
    store::store st(dir.path() / "store");
    point_gpu gpu;
    gpu.speed = synthetic_speeds(1, 5);
    const auto r = run_search(st, task::find_task(root, "019"), gpu, seed, false, 4);
    std::string order;
    for (const auto& s : r.steps) {
      order += s["params"].dump();
    }
    orders.insert(order);
  }
  EXPECT_GT(orders.size(), 1u);
}

TEST(screening, same_final_verdicts_with_fewer_full_gates) {
  const auto c = task::find_task(root, "019");
  for (uint64_t seed : {1, 2, 3}) {
    point_gpu plain;
    point_gpu screened;
    plain.speed = screened.speed = synthetic_speeds(seed, static_cast<int>(seed + 3));
    temp_dir d1("kb-learn-test");
    temp_dir d2("kb-learn-test");
    store::store s1(d1.path() / "store");
    store::store s2(d2.path() / "store");
    const auto a = run_search(s1, c, plain, seed, false, 12);
    const auto b = run_search(s2, c, screened, seed, true, 12);
    EXPECT_EQ(a.final, b.final);
    EXPECT_EQ(a.best_strategy, b.best_strategy);
    EXPECT_EQ(a.best_params, b.best_params);
    EXPECT_DOUBLE_EQ(a.speedup, b.speedup);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    int stopped = 0;
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i]["params"], b.steps[i]["params"]);
      const std::string full = a.steps[i]["verdict"];
      const std::string staged = b.steps[i]["verdict"];
      if (b.steps[i]["stage"]["stage_reached"] == "gate") {
        EXPECT_EQ(full, staged) << i;
      } else {
        ++stopped;
        EXPECT_EQ(b.steps[i]["stage"]["stopped_because"], "screen.not_promising");
        EXPECT_NE(full, "improved") << "the screen stopped a candidate the gate improves";
        EXPECT_NE(staged, "improved");
      }
    }
    EXPECT_GT(stopped, 0);
    // Every candidate went through the gate without screening; with it, only the promising.
    EXPECT_EQ(plain.calls["gate"], 1 + a.evaluations + 1); // baseline, steps, confirmation
    EXPECT_EQ(screened.calls["screen"], b.evaluations);
    EXPECT_EQ(screened.calls["gate"], 1 + (b.evaluations - stopped) + 1);
    EXPECT_LT(screened.calls["gate"], plain.calls["gate"]);
  }
}

TEST(screening, a_wrong_candidate_stops_at_verification) {
  const auto c = task::find_task(root, "019");
  const auto wrong = [](const task::contract&, const eval::candidate_input& cand,
                        const eval::candidate_input&, const eval::options&) {
    eval::result r;
    r.final = cand.origin == "baseline" ? eval::verdict::same : eval::verdict::rejected;
    r.reason = cand.origin == "baseline" ? "timing.same" : "verify.mismatch";
    return r;
  };
  screen_options so;
  so.enabled = true;
  so.screen = screening_options(eval::options{});
  const eval::candidate_input cand{"x", "x.cu", "proposer", "s", json::object()};
  const eval::candidate_input base{"y", "y.cu", "baseline", "baseline", json::object()};
  const auto r = evaluate_staged(wrong, c, cand, base, eval::options{}, so);
  EXPECT_EQ(r.reached, stage::verify);
  EXPECT_EQ(r.stopped_because, "verify.mismatch");
  EXPECT_EQ(r.calls, 1);
  so.separate_verify = true;
  EXPECT_EQ(evaluate_staged(wrong, c, cand, base, eval::options{}, so).calls, 1);
}

TEST(screening, each_stage_records_its_own_wall_time) {
  const auto c = task::find_task(root, "019");
  // The screen finds the candidate 1.2x the best, so it goes on to the gate; each stage's
  // evaluation reports a different wall time.
  const auto timed = [](const task::contract&, const eval::candidate_input&,
                        const eval::candidate_input&, const eval::options& o) {
    eval::result r;
    r.final = eval::verdict::improved;
    r.reason = "timing.improved";
    r.gate = eval::gate_summary{};
    r.gate->speedup = 1.2;
    r.seconds = o.sessions == 1 ? 2.5 : 9.0;
    return r;
  };
  screen_options so;
  so.enabled = true;
  so.screen = screening_options(eval::options{});
  eval::options gate;
  gate.sessions = 2;
  const eval::candidate_input cand{"x", "x.cu", "proposer", "s", json::object()};
  const eval::candidate_input base{"y", "y.cu", "baseline", "baseline", json::object()};
  const auto r = evaluate_staged(timed, c, cand, base, gate, so);
  EXPECT_EQ(r.reached, stage::gate);
  EXPECT_EQ(r.calls, 2);
  EXPECT_DOUBLE_EQ(r.seconds.at("screen"), 2.5);
  EXPECT_DOUBLE_EQ(r.seconds.at("gate"), 9.0);
  EXPECT_EQ(r.to_json()["seconds"], (json{{"gate", 9.0}, {"screen", 2.5}}));
  so.enabled = false;
  const auto plain = evaluate_staged(timed, c, cand, base, gate, so);
  EXPECT_EQ(plain.seconds.size(), 1u);
  EXPECT_DOUBLE_EQ(plain.seconds.at("gate"), 9.0);
}

// A table for the elementwise tasks: per task, the points of elementwise.vectorized with speeds
// from `speed_of(task index, point index)`.
outcome_table synthetic_table(const std::vector<task::contract>& tasks, int points,
                              const std::function<double(size_t, size_t)>& speed_of) {
  outcome_table t;
  t.device = {{"name", "synthetic"}};
  t.protocol = {{"sessions", 1}, {"max_wall_s", 2.0}};
  const auto& st = find_strategy("elementwise.vectorized");
  const auto pts = table_points(st, points);
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    t.tasks.push_back({tasks[ti].id, fs::relative(tasks[ti].file, root).string()});
    for (size_t pi = 0; pi < pts.size(); ++pi) {
      table_entry e;
      e.task = tasks[ti].id;
      e.strategy = st.name;
      e.params = pts[pi];
      e.speedup = speed_of(ti, pi);
      e.verdict = e.speedup > 1.01 ? eval::verdict::improved : eval::verdict::regressed;
      e.reason = "timing." + eval::to_string(e.verdict);
      e.baseline_seconds = 1e-3;
      e.candidate_seconds = 1e-3 / e.speedup;
      e.seconds = 5;
      t.entries.push_back(e);
    }
  }
  t.index();
  return t;
}

std::vector<task::contract> elementwise_tasks() {
  return {task::find_task(root, "019"), task::find_task(root, "026"), task::find_task(root, "088")};
}

TEST(memory_experiment, memory_at_least_halves_the_evaluations_when_the_best_transfers) {
  const auto tasks = elementwise_tasks();
  // Every task's best is the same point, far down the proposer's order; the rest are slower.
  const auto table = synthetic_table(tasks, 12, [](size_t ti, size_t pi) {
    return pi == 9 ? 2.0 + 0.1 * static_cast<double>(ti)
                   : 1.02 + 0.01 * static_cast<double>((pi * 5 + ti) % 7);
  });
  const auto round = outcome_table::from_json(table.to_json());
  EXPECT_EQ(round.entries.size(), table.entries.size());
  ASSERT_NE(round.find("019", "elementwise.vectorized", table.entries[9].params), nullptr);
  experiment_options o;
  o.seeds = {1, 2, 3};
  o.max_evaluations = 12;
  const auto r = run_memory_experiment(tasks, round, o, {});
  ASSERT_EQ(r.runs.size(), tasks.size() * o.seeds.size());
  for (const auto& run : r.runs) {
    EXPECT_TRUE(run.with_memory.reached);
    EXPECT_EQ(run.with_memory.to_target, 1) << run.to_json().dump();
    EXPECT_GT(run.primed_experiences, 0);
  }
  EXPECT_LE(r.ratio(), 0.5) << r.to_json().dump(1);
  const auto svg = experiment_svg(r);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("019 with memory"), std::string::npos);
}

TEST(memory_experiment, the_hard_tasks_are_those_the_built_in_order_does_not_solve_first) {
  const auto tasks = elementwise_tasks();
  // 019's best is its default point (the first the proposer tries); 026's and 088's best is a
  // point far down the order, the same on both.
  const auto table = synthetic_table(tasks, 12, [](size_t ti, size_t pi) {
    if (ti == 0) {
      return pi == 0 ? 2.0 : 1.05;
    }
    return pi == 9 ? 2.0 + 0.1 * static_cast<double>(ti) : 1.02;
  });
  experiment_options o;
  o.seeds = {1, 2};
  o.max_evaluations = 12;
  const auto r = run_memory_experiment(tasks, table, o, {});
  EXPECT_EQ(r.hard_tasks(), (std::vector<std::string>{"026", "088"}));
  double with = 0;
  double without = 0;
  for (const auto& run : r.runs) {
    if (run.task == "019") {
      EXPECT_EQ(run.without_memory.to_target, 1);
      continue;
    }
    with += run.with_memory.to_target;
    without += run.without_memory.to_target;
  }
  EXPECT_DOUBLE_EQ(r.hard_ratio(), with / without);
  EXPECT_LT(r.hard_ratio(), r.ratio()); // 019's single evaluation dilutes the overall ratio
  const auto j = r.to_json();
  EXPECT_EQ(j["hard_tasks"], json({"026", "088"}));
  EXPECT_DOUBLE_EQ(j["hard_ratio"].get<double>(), r.hard_ratio());
}

TEST(memory_experiment, no_false_gain_when_nothing_can_be_learned) {
  const auto tasks = elementwise_tasks();
  // One strategy with one point: every search takes exactly one evaluation.
  const auto table = synthetic_table(tasks, 1, [](size_t ti, size_t) { return 1.5 + 0.1 * ti; });
  experiment_options o;
  o.seeds = {1, 2};
  o.max_evaluations = 8;
  const auto r = run_memory_experiment(tasks, table, o, {});
  ASSERT_EQ(r.runs.size(), tasks.size() * 2);
  EXPECT_DOUBLE_EQ(r.ratio(), 1.0);
  for (const auto& run : r.runs) {
    EXPECT_EQ(run.with_memory.to_target, run.without_memory.to_target);
  }
}

TEST(replay, answers_from_the_table_and_refuses_what_it_lacks) {
  const auto tasks = elementwise_tasks();
  const auto table = synthetic_table(tasks, 3, [](size_t, size_t pi) { return 1.0 + pi; });
  replay_evaluator gpu(table);
  const auto& c = tasks[0];
  const eval::candidate_input base{"", "b.cu", "baseline", "baseline", json::object()};
  const auto& e2 = table.entries[2];
  const auto& e1 = table.entries[1];
  eval::options o;
  const auto r = gpu(c, {"", "c.cu", "proposer", e2.strategy, e2.params},
                     {"", "c.cu", "proposer", e1.strategy, e1.params}, o);
  EXPECT_EQ(r.final, eval::verdict::improved);
  ASSERT_TRUE(r.gate);
  EXPECT_NEAR(r.gate->speedup, 3.0 / 2.0, 1e-12);
  const auto missing = gpu(c, {"", "c.cu", "proposer", e2.strategy, json{{"block", 7}}}, base, o);
  EXPECT_EQ(missing.final, eval::verdict::error);
  EXPECT_EQ(missing.reason, "replay.not_recorded");
  EXPECT_THROW(outcome_table::from_json(json{{"kind", "other"}}), kb::input_error);
  EXPECT_EQ(gpu.calls(), 2);
}

} // namespace
} // namespace kb::search
