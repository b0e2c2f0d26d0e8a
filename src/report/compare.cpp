// Our kernels against PyTorch's methods: which method is the fastest that counts, ratios with
// intervals, fast_p over all tasks and geometric means.
#include "report/report.hpp"

#include "common/error.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace kb::report {
namespace {

using nlohmann::json;

std::optional<double> positive(const json& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) {
    return std::nullopt;
  }
  if (!m[key].is_number()) {
    fail("PyTorch figures: '{}' is not a number", key);
  }
  const double v = m[key].get<double>();
  if (!(std::isfinite(v) && v > 0)) {
    fail("PyTorch figures: '{}' = {} is not a positive time", key, v);
  }
  return v;
}

double geomean_of(const std::vector<double>& x) {
  double log_sum = 0;
  for (double v : x) {
    log_sum += std::log(v);
  }
  return std::exp(log_sum / static_cast<double>(x.size()));
}

} // namespace

std::string_view to_string(compile_status v) {
  return compile_status_names.name(v);
}

std::vector<pytorch_method> pytorch_methods_from_json(const json& methods) {
  std::vector<pytorch_method> out;
  if (methods.is_null()) {
    return out;
  }
  if (!methods.is_object()) {
    fail("PyTorch figures: the methods of a task are not an object");
  }
  for (const auto& [name, m] : methods.items()) {
    if (!m.is_object()) {
      fail("PyTorch figures: method '{}' is not an object", name);
    }
    pytorch_method p;
    p.name = name;
    p.correct = m.value("correct", false);
    p.stable = m.value("stable", true);
    p.reason = m.value("reason", std::string());
    p.median_s = positive(m, "median_s");
    p.unqueued_median_s = positive(m, "unqueued_median_s");
    if (m.contains("ci_s") && m["ci_s"].is_array() && m["ci_s"].size() == 2) {
      p.ci_s = interval{m["ci_s"][0].get<double>(), m["ci_s"][1].get<double>()};
    }
    if (m.contains("compile") && m["compile"].is_object()) {
      const json& c = m["compile"];
      const std::string status = c.value("status", std::string());
      if (status == "compiled") {
        p.compile = compile_status::compiled;
      } else if (status == "not_compiled") {
        p.compile = compile_status::not_compiled;
      } else {
        fail("PyTorch figures: method '{}' has compile status '{}' (compiled or not_compiled)",
             name, status);
      }
      p.graphs = c.value("graphs", 0);
      p.graph_breaks = c.value("graph_breaks", 0);
      if (p.compile == compile_status::not_compiled && p.reason.empty()) {
        p.reason = c.value("reason", std::string("not_compiled"));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool eligible_for_fastest(const pytorch_method& m) {
  return m.correct && m.median_s && m.compile != compile_status::not_compiled;
}

std::optional<size_t> fastest_method(const std::vector<pytorch_method>& methods) {
  std::optional<size_t> best;
  for (size_t i = 0; i < methods.size(); ++i) {
    if (eligible_for_fastest(methods[i]) &&
        (!best || *methods[i].median_s < *methods[*best].median_s)) {
      best = i;
    }
  }
  return best;
}

bool resolved(const task_comparison& t) {
  return !(t.resolution_s > 0) || t.candidate_s >= resolved_multiple * t.resolution_s;
}

task_comparison compare_task(std::string task, bool correct, double candidate_s,
                             interval candidate_ci, double resolution_s, double floor_s,
                             const std::vector<pytorch_method>& methods) {
  task_comparison cmp;
  cmp.task = std::move(task);
  cmp.correct = correct;
  cmp.resolution_s = resolution_s;
  cmp.floor_s = floor_s;
  if (correct) {
    cmp.candidate_s = candidate_s;
    cmp.candidate_ci = candidate_ci;
  }
  if (const auto fastest = fastest_method(methods)) {
    const auto& m = methods[*fastest];
    cmp.fastest_method = m.name;
    cmp.fastest_s = *m.median_s;
    cmp.fastest_ci = m.ci_s.value_or(interval{cmp.fastest_s, cmp.fastest_s});
  }
  for (const auto& m : methods) {
    if (m.name == "eager" && m.correct && m.median_s) {
      cmp.eager_s = m.median_s;
    }
  }
  return cmp;
}

std::optional<ratio> speedup_vs_fastest(const task_comparison& t) {
  if (!t.correct || !t.fastest_method || !(t.candidate_s > 0) || !(t.fastest_s > 0)) {
    return std::nullopt;
  }
  ratio r;
  r.value = t.fastest_s / t.candidate_s;
  const double c_lo = t.candidate_ci.low > 0 ? t.candidate_ci.low : t.candidate_s;
  const double c_hi = t.candidate_ci.high > 0 ? t.candidate_ci.high : t.candidate_s;
  const double f_lo = t.fastest_ci.low > 0 ? t.fastest_ci.low : t.fastest_s;
  const double f_hi = t.fastest_ci.high > 0 ? t.fastest_ci.high : t.fastest_s;
  r.range = {f_lo / c_hi, f_hi / c_lo};
  return r;
}

std::optional<double> speedup_at_floor(const task_comparison& t) {
  if (!t.fastest_method || !(t.fastest_s > 0) || !(t.floor_s > 0)) {
    return std::nullopt;
  }
  return t.fastest_s / t.floor_s;
}

std::optional<double> speedup_vs_eager(const task_comparison& t) {
  if (!t.correct || !t.eager_s || !(t.candidate_s > 0)) {
    return std::nullopt;
  }
  return *t.eager_s / t.candidate_s;
}

suite_comparison compare_suite(const std::vector<task_comparison>& tasks) {
  suite_comparison s;
  s.tasks = tasks.size();
  std::vector<double> vs_fastest;
  std::vector<double> vs_eager;
  std::vector<double> vs_fastest_resolved;
  std::vector<double> vs_eager_resolved;
  std::vector<double> at_floor;
  std::vector<double> at_floor_resolved;
  size_t fast_1_0 = 0;
  size_t fast_1_5 = 0;
  size_t eager_1_0 = 0;
  for (const auto& t : tasks) {
    s.correct += t.correct ? 1 : 0;
    const bool measured = resolved(t);
    s.below_resolution += t.correct && !measured ? 1 : 0;
    if (const auto r = speedup_vs_fastest(t)) {
      vs_fastest.push_back(r->value);
      if (measured) {
        vs_fastest_resolved.push_back(r->value);
      }
      fast_1_0 += r->value > 1.0 ? 1 : 0;
      fast_1_5 += r->value > 1.5 ? 1 : 0;
      if (const auto f = speedup_at_floor(t)) {
        at_floor.push_back(*f);
        if (measured) {
          at_floor_resolved.push_back(*f);
        }
      }
    }
    if (const auto e = speedup_vs_eager(t)) {
      vs_eager.push_back(*e);
      if (measured) {
        vs_eager_resolved.push_back(*e);
      }
      eager_1_0 += *e > 1.0 ? 1 : 0;
    }
  }
  s.with_fastest = vs_fastest.size();
  s.with_eager = vs_eager.size();
  s.with_fastest_resolved = vs_fastest_resolved.size();
  s.with_eager_resolved = vs_eager_resolved.size();
  if (!vs_fastest_resolved.empty()) {
    s.geomean_vs_fastest_resolved = geomean_of(vs_fastest_resolved);
  }
  if (!vs_eager_resolved.empty()) {
    s.geomean_vs_eager_resolved = geomean_of(vs_eager_resolved);
  }
  if (!tasks.empty()) {
    const auto n = static_cast<double>(tasks.size());
    s.fast_1_0_vs_fastest = static_cast<double>(fast_1_0) / n;
    s.fast_1_5_vs_fastest = static_cast<double>(fast_1_5) / n;
    s.fast_1_0_vs_eager = static_cast<double>(eager_1_0) / n;
  }
  if (!vs_fastest.empty()) {
    s.geomean_vs_fastest = geomean_of(vs_fastest);
  }
  if (!vs_eager.empty()) {
    s.geomean_vs_eager = geomean_of(vs_eager);
  }
  if (!at_floor.empty()) {
    s.geomean_vs_fastest_at_floor = geomean_of(at_floor);
  }
  if (!at_floor_resolved.empty()) {
    s.geomean_vs_fastest_at_floor_resolved = geomean_of(at_floor_resolved);
  }
  return s;
}

namespace {

// A goal against one reference: over every task (each compared, none below the resolution) and
// over the resolved ones.
goal_check check_goal(const suite_comparison& s, const std::optional<double>& geomean,
                      size_t compared, const std::optional<double>& geomean_resolved, double goal) {
  return {geomean && compared == s.tasks && s.below_resolution == 0 && *geomean >= goal,
          geomean_resolved && *geomean_resolved >= goal};
}

} // namespace

goal_check check_goal_vs_fastest(const suite_comparison& s, double goal) {
  return check_goal(s, s.geomean_vs_fastest, s.with_fastest, s.geomean_vs_fastest_resolved, goal);
}

goal_check check_goal_vs_eager(const suite_comparison& s, double goal) {
  return check_goal(s, s.geomean_vs_eager, s.with_eager, s.geomean_vs_eager_resolved, goal);
}

json to_json(const suite_comparison& s) {
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"tasks", s.tasks},
          {"correct", s.correct},
          {"tasks_with_fastest_pytorch", s.with_fastest},
          {"tasks_with_eager", s.with_eager},
          {"tasks_below_resolution", s.below_resolution},
          {"resolved_multiple", resolved_multiple},
          {"tasks_with_fastest_pytorch_resolved", s.with_fastest_resolved},
          {"tasks_with_eager_resolved", s.with_eager_resolved},
          {"fast_1_0_vs_fastest_pytorch", s.fast_1_0_vs_fastest},
          {"fast_1_5_vs_fastest_pytorch", s.fast_1_5_vs_fastest},
          {"fast_1_0_vs_pytorch_eager", s.fast_1_0_vs_eager},
          {"geomean_vs_fastest_pytorch", opt(s.geomean_vs_fastest)},
          {"geomean_vs_pytorch_eager", opt(s.geomean_vs_eager)},
          {"geomean_vs_fastest_pytorch_resolved", opt(s.geomean_vs_fastest_resolved)},
          {"geomean_vs_pytorch_eager_resolved", opt(s.geomean_vs_eager_resolved)},
          {"geomean_vs_fastest_pytorch_at_floor", opt(s.geomean_vs_fastest_at_floor)},
          {"geomean_vs_fastest_pytorch_at_floor_resolved",
           opt(s.geomean_vs_fastest_at_floor_resolved)}};
}

} // namespace kb::report
