// A stand-in for the GPU in tests of the search: evaluations answer from a script.
#pragma once

#include "eval/eval.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kb::search::testing {

// A scripted GPU: each strategy has a speed (baseline time / candidate time); "fail" ones are
// rejected.
struct scripted_gpu {
  std::map<std::string, double> speed;
  int calls = 0;
  std::multiset<std::string> seen; // strategy|params of candidates evaluated against the best
  // Sanitizer passes (options sanitize + verify_only): strategies listed here fail with the
  // given reason ("sanitize.memcheck"), others pass.
  std::map<std::string, std::string> sanitize_failure;
  std::vector<std::string> sanitized; // strategies that went through a sanitizer pass
  // The profile mode each timed evaluation asked for, in order; with `counters`, an evaluation
  // that asks gets CUPTI-like values (DRAM at 92% of peak), else a CUPTI refusal.
  std::vector<eval::profile_mode> profiles;
  bool counters = false;
  // How long the baseline's own evaluation (the baseline against itself) takes, as a slow
  // imported module's does.
  std::chrono::milliseconds baseline_delay{0};
  eval::result operator()(const task::contract&, const eval::candidate_input& cand,
                          const eval::candidate_input& base, const eval::options& opt) {
    ++calls;
    if (cand.origin == "baseline" && base.origin == "baseline" && baseline_delay.count() > 0) {
      std::this_thread::sleep_for(baseline_delay);
    }
    if (opt.sanitize && opt.verify_only) {
      sanitized.push_back(cand.strategy);
      eval::result r;
      const auto it = sanitize_failure.find(cand.strategy);
      r.final = it == sanitize_failure.end() ? eval::verdict::same : eval::verdict::rejected;
      r.reason = it == sanitize_failure.end() ? "verify.passed" : it->second;
      r.message = "scripted sanitizer pass";
      return r;
    }
    const auto speed_of = [&](const eval::candidate_input& in) {
      if (in.origin == "baseline") {
        return 1.0;
      }
      const auto it = speed.find(in.strategy);
      return it == speed.end() ? 1.0 : it->second + 0.001 * in.params.dump().size();
    };
    if (cand.origin != "baseline" && base.origin != "baseline") {
      seen.insert(cand.strategy + "|" + cand.params.dump());
    }
    eval::result r;
    if (cand.strategy == "fail") {
      r.final = eval::verdict::rejected;
      r.reason = "verify.mismatch";
      return r;
    }
    if (cand.strategy == "broken") { // does not compile: the compiler's output is in the build
      build::result b;
      b.status = build::outcome::compile_error;
      b.reason = "build.compile_error";
      b.log = std::string(3000, '.') + "\ncandidate.cu(3): error: expected a \";\"\n";
      r.builds.emplace("candidate", b);
      r.final = eval::verdict::rejected;
      r.reason = "build.compile_error";
      r.message = "the candidate does not compile (see builds.candidate.log_tail)";
      return r;
    }
    const double t_base = 1e-3 / speed_of(base);
    const double t_cand = 1e-3 / speed_of(cand);
    const double ratio = t_base / t_cand;
    r.final = ratio > 1.02 ? eval::verdict::improved
                           : (ratio < 0.98 ? eval::verdict::regressed : eval::verdict::same);
    r.reason = "timing." + eval::to_string(r.final);
    r.gate = eval::gate_summary::of_medians(t_base, t_cand);
    r.worker_seconds = 0.5;
    r.detail["sessions"] = nlohmann::json::array({{{"seconds", 0.5}}});
    profiles.push_back(opt.profile);
    if (opt.profile == eval::profile_mode::always ||
        (opt.profile == eval::profile_mode::improved && r.final == eval::verdict::improved)) {
      nlohmann::json values = nlohmann::json::object();
      if (counters) {
        values = {
            {"gpu__time_duration.sum", {{"value", t_cand * 1e9}, {"unit", "nsecond"}}},
            {"sm__throughput.avg.pct_of_peak_sustained_elapsed", {{"value", 20}, {"unit", "%"}}},
            {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
             {{"value", 92}, {"unit", "%"}}},
            {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
             {{"value", 92}, {"unit", "%"}}}};
      }
      eval::counters_run run;
      run.outcome = eval::verdict::same;
      run.reason = "verify.passed";
      run.values = {{"available", counters},
                    {"reason", counters ? "" : "libcupti.so.13 not found: scripted"},
                    {"values", values},
                    {"passes", counters ? 2 : 0}};
      r.counters = run;
    }
    return r;
  }
};

} // namespace kb::search::testing
