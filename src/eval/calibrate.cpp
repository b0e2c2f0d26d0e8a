// A/A calibration: a task's baseline against itself, in independent evaluations under the full
// gate. How often the gate calls an unchanged kernel significant (its false-positive rate) and how
// far from 1.0 those comparisons reach (the spread, which sets the gate's delta) are properties of
// this machine.
#include "eval/eval.hpp"
#include "stats/stats.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"

#include <fmt/format.h>

#include <cmath>

namespace kb::eval {

using nlohmann::json;

json calibrate(const fs::path& root, const task::contract& c, int repeats, const options& opt,
               const progress_fn& progress) {
  const candidate_input base{read_file(c.baseline), c.baseline.filename().string(), "baseline"};
  json evaluations = json::array();
  for (int r = 0; r < repeats; ++r) {
    options o = opt;
    o.seed_base = opt.seed_base + static_cast<uint64_t>(r);
    if (progress) {
      progress(fmt::format("calibrate: task {} repeat {}/{}", c.id, r + 1, repeats));
    }
    const result res = evaluate(root, c, base, base, o, progress);
    json e{{"repeat", r},
           {"verdict", to_string(res.final)},
           {"reason", res.reason},
           {"seconds", res.seconds}};
    if (res.gate) {
      const auto& g = *res.gate;
      e["p"] = g.p.value_or(g.mann_whitney_p.value_or(1.0));
      e["mann_whitney_p"] = g.mann_whitney_p.value_or(1.0);
      e["p_within"] = g.p_within.value_or(1.0);
      e["p_between"] = g.p_between ? json(*g.p_between) : json(nullptr);
      e["ratio"] = g.ratio;
      e["ratio_ci"] = {g.ratio_low, g.ratio_high};
      e["delta"] = g.delta;
    }
    // The timing scheme's own cost, where the evaluation measured it: each session times an
    // empty kernel the same way.
    std::vector<double> overheads;
    for (const auto& t : res.timing) {
      overheads.push_back(t.overhead_s);
    }
    // Each session's medians (the gate's, over unthrottled samples) and their log ratio: the
    // between-session test works on how these differ, so an A/A's sessions are the evidence of
    // its calibration.
    json sessions = json::array();
    if (res.gate) {
      for (const auto& m : res.gate->session_medians) {
        const bool both = m.baseline_s > 0 && m.candidate_s > 0;
        sessions.push_back({{"baseline_median_s", m.baseline_s},
                            {"candidate_median_s", m.candidate_s},
                            {"log_ratio", both ? std::log(m.candidate_s / m.baseline_s) : 0.0}});
      }
    }
    e["sessions"] = sessions;
    if (!overheads.empty()) {
      e["timing_overhead"] = {{"seconds", stats::median(overheads)}, {"sessions", overheads}};
    }
    evaluations.push_back(e);
  }
  return {{"task", c.id}, {"name", c.name}, {"shape", opt.shape}, {"evaluations", evaluations}};
}

aa_summary summarize_aa(const json& tasks, double alpha) {
  aa_summary s;
  std::vector<stats::ratio_interval> intervals;
  std::vector<double> overheads;
  std::vector<double> ps;
  for (const auto& t : tasks) {
    for (const auto& e : t.at("evaluations")) {
      if (!e.contains("p")) {
        ++s.failed;
        continue;
      }
      ++s.comparisons;
      ps.push_back(e.at("p").get<double>());
      if (ps.back() < alpha) {
        ++s.significant;
      }
      if (e.at("mann_whitney_p").get<double>() < alpha) {
        ++s.pooled_significant;
      }
      if (e.at("verdict") != "same") {
        ++s.not_same;
      }
      stats::ratio_interval ci;
      ci.ratio = e.at("ratio");
      ci.low = e.at("ratio_ci")[0];
      ci.high = e.at("ratio_ci")[1];
      intervals.push_back(ci);
      if (e.contains("timing_overhead") && e["timing_overhead"].is_object() &&
          e["timing_overhead"].contains("seconds") && e["timing_overhead"]["seconds"].is_number()) {
        overheads.push_back(e["timing_overhead"]["seconds"]);
      }
    }
  }
  if (s.comparisons == 0) {
    fail("calibration: no A/A comparison completed ({} failed)", s.failed);
  }
  const double n = static_cast<double>(s.comparisons);
  s.false_positive_rate = s.significant / n;
  const auto fp = stats::binomial_interval(static_cast<size_t>(s.significant),
                                           static_cast<size_t>(s.comparisons));
  s.false_positive_low = fp.low;
  s.false_positive_high = fp.high;
  const auto uniform = stats::ks_uniform(ps);
  s.p_uniformity_d = uniform.d;
  s.p_uniformity_p = uniform.p;
  s.pooled_false_positive_rate = s.pooled_significant / n;
  s.not_same_rate = s.not_same / n;
  const auto spread = stats::aa_spread_from_intervals(intervals);
  s.ratio_p95 = spread.ratio_p95;
  s.half_width_median = spread.half_width_median;
  s.spread = spread.spread;
  s.delta = stats::gate_delta(spread.spread, 0.01);
  if (!overheads.empty()) {
    s.timing_overhead_median = stats::median(overheads);
  }
  return s;
}

json aa_summary::to_json() const {
  return {{"comparisons", comparisons},
          {"failed", failed},
          {"significant", significant},
          {"false_positive_rate", false_positive_rate},
          {"false_positive_ci", {false_positive_low, false_positive_high}},
          {"p_uniformity", {{"ks_d", p_uniformity_d}, {"p", p_uniformity_p}}},
          {"pooled_mann_whitney_false_positive_rate", pooled_false_positive_rate},
          {"not_same", not_same},
          {"not_same_rate", not_same_rate},
          {"ratio_p95", ratio_p95},
          {"half_width_median", half_width_median},
          {"spread", spread},
          {"delta", delta},
          {"timing_overhead_median_s",
           timing_overhead_median ? json(*timing_overhead_median) : json(nullptr)}};
}

} // namespace kb::eval
