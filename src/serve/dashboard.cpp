// The dashboard's JSON documents, read from the store through its public API.
#include "serve/serve.hpp"

#include "common/error.hpp"
#include "common/sha256.hpp"
#include "eval/eval.hpp"
#include "eval/verification.hpp"
#include "report/report.hpp"
#include "search/memory.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <set>

namespace kb::serve {

using nlohmann::json;

namespace {

json opt(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json();
}
json opt(const std::optional<int64_t>& v) {
  return v ? json(*v) : json();
}

// An evaluation's stored result, when it has a readable one (a page shows what is there).
std::optional<eval::result> stored(const store::store& st, const store::evaluation_row& row,
                                   bool with_samples = false) {
  return eval::stored_result(st, row, with_samples);
}

std::string text_of(const store::store& st, const std::string& digest) {
  if (digest.empty() || !st.exists(digest)) {
    return {};
  }
  try {
    return st.get(digest);
  } catch (const std::exception&) {
    return {};
  }
}

json row_json(const store::evaluation_row& row) {
  const auto& e = row.record;
  return {{"id", row.id},
          {"task", row.task_id},
          {"candidate", e.candidate},
          {"compared_with", opt(e.baseline)},
          {"origin", to_string(row.origin)},
          {"strategy", row.strategy},
          {"shape", e.shape},
          {"verdict", to_string(e.verdict)},
          {"reason", e.reason},
          {"candidate_median_s", opt(e.candidate_median)},
          {"baseline_median_s", opt(e.baseline_median)},
          {"speedup", opt(e.speedup)},
          {"ci_low", opt(e.ci_low)},
          {"ci_high", opt(e.ci_high)},
          {"p_value", opt(e.p_value)},
          {"floor_fraction", opt(e.floor_fraction)},
          {"sandboxed", e.sandboxed},
          {"created", row.created}};
}

json run_json(const store::run_info& r) {
  return {{"id", r.id},
          {"kind", r.kind},
          {"args", r.args},
          {"started", r.started},
          {"finished", r.finished},
          {"status", to_string(r.status)},
          {"outcome", r.outcome},
          {"reason", r.reason},
          {"tool_version", r.tool_version},
          {"evaluations", r.evaluations}};
}

// The search's rule for the best so far, for any run: a candidate becomes the best when its
// evaluation's verdict is `improved` against the candidate it was compared with; its speedup over
// the task's baseline is its speedup over that candidate times that candidate's own.
struct progress {
  std::map<int64_t, double> vs_baseline; // candidate -> speedup over the task's baseline
  double best = 1.0;
  std::optional<int64_t> best_candidate;
};

std::optional<double> advance(progress& p, const store::evaluation_row& row) {
  const auto& e = row.record;
  if (row.origin == store::candidate_origin::baseline && e.baseline == e.candidate) {
    p.vs_baseline[e.candidate] = 1.0;
    return 1.0;
  }
  std::optional<double> factor;
  if (e.baseline) {
    if (auto it = p.vs_baseline.find(*e.baseline); it != p.vs_baseline.end()) {
      factor = it->second;
    } else if (e.baseline == e.candidate) {
      factor = 1.0;
    }
  }
  std::optional<double> s;
  if (e.speedup && factor) {
    s = *e.speedup * *factor;
    if (e.verdict != store::verdict::rejected && e.verdict != store::verdict::error &&
        e.verdict != store::verdict::blocked && !p.vs_baseline.contains(e.candidate)) {
      p.vs_baseline[e.candidate] = *s;
    }
  }
  if (e.verdict == store::verdict::improved && s && *s > p.best) {
    p.best = *s;
    p.best_candidate = e.candidate;
  }
  return s;
}

bool matches_date(const std::string& started, const std::string& since, const std::string& until) {
  if (!since.empty() && started.substr(0, since.size()) < since) {
    return false;
  }
  if (!until.empty() && started.substr(0, until.size()) > until) {
    return false;
  }
  return true;
}

std::vector<store::evaluation_row> rows_of_task(const std::vector<store::evaluation_row>& all,
                                                const std::string& task) {
  std::vector<store::evaluation_row> out;
  for (const auto& r : all) {
    if (r.task_id == task) {
      out.push_back(r);
    }
  }
  return out;
}

store::run_info require_run(const store::store& st, int64_t run) {
  auto r = st.find_run(run);
  if (!r) {
    throw not_found(fmt::format("no run {} in the store", run));
  }
  return *r;
}

// GPU name of a task's evaluations (the memory is kept per GPU).
std::string gpu_of(const std::optional<eval::result>& r) {
  return r && r->context.device ? r->context.device->name : "";
}

std::optional<task::contract> load_contract(const std::optional<fs::path>& root,
                                            const std::string& id) {
  if (!root) {
    return std::nullopt;
  }
  try {
    return task::find_task(*root, id);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace

std::optional<double> seconds_between(const std::string& from, const std::string& to) {
  const auto a = store::utc_seconds(from);
  const auto b = store::utc_seconds(to);
  if (!a || !b) {
    return std::nullopt;
  }
  return *b - *a;
}

dashboard::dashboard(const store::store& st, dashboard_options options)
    : m_store(st), m_options(std::move(options)) {}

json dashboard::runs(const run_filter& f) const {
  json out = json::array();
  for (const auto& r : m_store.list_runs(std::max(1, f.limit))) {
    if ((!f.kind.empty() && r.kind != f.kind) ||
        (!f.status.empty() && to_string(r.status) != f.status) ||
        !matches_date(r.started, f.since, f.until)) {
      continue;
    }
    std::set<std::string> tasks;
    std::set<std::string> outcomes;
    if (!r.outcome.empty()) {
      outcomes.insert(r.outcome);
    }
    for (const auto& row : m_store.evaluations_of_run(r.id)) {
      tasks.insert(row.task_id);
    }
    for (const auto& o : m_store.outcomes_of_run(r.id)) {
      outcomes.insert(o.outcome);
      if (auto id = m_store.task_id_of(o.task)) {
        tasks.insert(*id);
      }
    }
    if ((!f.task.empty() && !tasks.contains(f.task)) ||
        (!f.outcome.empty() && !outcomes.contains(f.outcome))) {
      continue;
    }
    json j = run_json(r);
    j["tasks"] = tasks;
    j["task_outcomes"] = outcomes;
    out.push_back(j);
  }
  return out;
}

json dashboard::run(int64_t id) const {
  const auto r = require_run(m_store, id);
  const auto rows = m_store.evaluations_of_run(id);
  std::map<std::string, store::outcome_record> outcomes;
  std::vector<std::string> order;
  for (const auto& o : m_store.outcomes_of_run(id)) {
    const auto task = m_store.task_id_of(o.task).value_or(fmt::format("#{}", o.task));
    outcomes[task] = o;
    order.push_back(task);
  }
  for (const auto& row : rows) {
    if (std::find(order.begin(), order.end(), row.task_id) == order.end()) {
      order.push_back(row.task_id);
    }
  }
  json tasks = json::array();
  for (const auto& task : order) {
    const auto mine = rows_of_task(rows, task);
    json t = {{"task", task}, {"outcome", ""}, {"reason", ""}, {"best_candidate", nullptr}};
    if (auto it = outcomes.find(task); it != outcomes.end()) {
      t["outcome"] = it->second.outcome;
      t["reason"] = it->second.reason;
      t["best_candidate"] = opt(it->second.best_candidate);
    }
    int candidates = 0;
    double seconds = 0;
    progress p;
    for (const auto& row : mine) {
      advance(p, row);
      if (!(row.origin == store::candidate_origin::baseline &&
            row.record.baseline == row.record.candidate)) {
        ++candidates;
      }
      const auto r = stored(m_store, row);
      seconds += r ? r->seconds : 0.0;
    }
    // The headline: the last evaluation of the best candidate against the task's baseline (the
    // search's confirmation), else the last evaluation of the task.
    const store::evaluation_row* head = mine.empty() ? nullptr : &mine.back();
    const auto best = t["best_candidate"].is_number() ? t["best_candidate"].get<int64_t>()
                                                      : p.best_candidate.value_or(-1);
    for (const auto& row : mine) {
      if (row.record.candidate == best && row.record.baseline &&
          p.vs_baseline.contains(*row.record.baseline) &&
          p.vs_baseline[*row.record.baseline] == 1.0) {
        head = &row;
      }
    }
    if (head) {
      const auto& e = head->record;
      t["evaluation"] = head->id;
      t["verdict"] = to_string(e.verdict);
      t["verdict_reason"] = e.reason;
      t["speedup"] = opt(e.speedup);
      t["ci_low"] = opt(e.ci_low);
      t["ci_high"] = opt(e.ci_high);
      t["floor_fraction"] = opt(e.floor_fraction);
      t["strategy"] = head->strategy;
      if (t["outcome"] == "") {
        t["outcome"] = to_string(e.verdict);
        t["reason"] = e.reason;
      }
    }
    t["best_so_far"] = p.best;
    t["evaluations"] = candidates;
    t["seconds"] = seconds;
    if (!mine.empty()) {
      t["wall_seconds"] = opt(seconds_between(mine.front().created, mine.back().created));
    }
    tasks.push_back(t);
  }
  json evaluations = json::array();
  for (const auto& row : rows) {
    evaluations.push_back(row_json(row));
  }
  json attachments = json::array();
  for (const auto& [name, digest] : m_store.attachments(id)) {
    attachments.push_back({{"name", name}, {"digest", digest}});
  }
  return {{"run", run_json(r)},
          {"tasks", tasks},
          {"evaluations", evaluations},
          {"attachments", attachments}};
}

json dashboard::search(int64_t run, const std::string& task) const {
  const auto r = require_run(m_store, run);
  const auto rows = rows_of_task(m_store.evaluations_of_run(run), task);
  if (rows.empty()) {
    throw not_found(fmt::format("run {} evaluated nothing of task {}", run, task));
  }
  progress p;
  json candidates = json::array();
  json curve = json::array();
  std::string family;
  std::string gpu;
  int step = 0;
  for (const auto& row : rows) {
    const auto d = stored(m_store, row);
    if (family.empty() && d) {
      family = d->task.family;
    }
    if (gpu.empty()) {
      gpu = gpu_of(d);
    }
    const bool self_baseline = row.origin == store::candidate_origin::baseline &&
                               row.record.baseline == row.record.candidate;
    const auto vs_baseline = advance(p, row);
    json c = row_json(row);
    c["speedup_vs_baseline"] = opt(vs_baseline);
    c["message"] = d ? d->message : "";
    c["seconds"] = d ? d->seconds : 0.0;
    c["step"] = self_baseline ? 0 : ++step;
    candidates.push_back(c);
    curve.push_back({{"step", self_baseline ? 0 : step},
                     {"wall_s", opt(seconds_between(rows.front().created, row.created))},
                     {"best", p.best},
                     {"evaluation", row.id},
                     {"verdict", to_string(row.record.verdict)}});
  }
  // The memory's record of the run's attempts at this task, and what it knows of each strategy.
  json steps = json::array();
  json ranking = json::array();
  if (!family.empty()) {
    const auto all = m_store.find_experiences(family, gpu);
    std::vector<store::experience> mine;
    for (const auto& x : all) {
      if (x.run == run && x.task_id == task) {
        mine.push_back(x);
      }
    }
    std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    int i = 0;
    for (const auto& x : mine) {
      steps.push_back({{"step", ++i},
                       {"state_before", x.state_before},
                       {"strategy", x.strategy},
                       {"params", x.params},
                       {"predicted_speedup", opt(x.predicted_speedup)},
                       {"measured_speedup", opt(x.measured_speedup)},
                       {"correct", x.correct},
                       {"failure_reason", x.failure_reason},
                       {"created", x.created}});
    }
    auto stats = search::summarize(all);
    int total = 0;
    for (const auto& s : stats) {
      total += s.attempts;
    }
    std::sort(stats.begin(), stats.end(),
              [](const auto& a, const auto& b) { return a.mean_reward > b.mean_reward; });
    for (const auto& s : stats) {
      const double ucb = search::ucb_score(s, total, 1.0);
      ranking.push_back({{"strategy", s.strategy},
                         {"attempts", s.attempts},
                         {"correct", s.correct},
                         {"successes", s.successes},
                         {"mean_reward", s.mean_reward},
                         {"ucb", std::isfinite(ucb) ? json(ucb) : json()},
                         {"best_speedup", s.best_speedup},
                         {"best_params", s.best_params},
                         {"last_failure", s.last_failure}});
    }
  }
  return {{"run", run_json(r)}, {"task", task},   {"family", family},         {"gpu", gpu},
          {"best", p.best},     {"curve", curve}, {"candidates", candidates}, {"steps", steps},
          {"ranking", ranking}};
}

json dashboard::evaluation(int64_t run, int64_t id) const {
  const auto rows = m_store.evaluations_of_run(run);
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.id == id; });
  if (it == rows.end()) {
    throw not_found(fmt::format("no evaluation {} in run {}", id, run));
  }
  const eval::result d = stored(m_store, *it, /*with_samples=*/true).value_or(eval::result{});
  json out = row_json(*it);
  out["message"] = d.message;
  out["source"] = text_of(m_store, d.candidate.source_digest);
  out["compared_source"] = text_of(m_store, d.baseline.source_digest);
  // The task's baseline: the candidate of origin baseline among the run's evaluations of the task.
  out["baseline_source"] = nullptr;
  for (const auto& r : rows) {
    if (r.task_id == it->task_id && r.origin == store::candidate_origin::baseline) {
      if (const auto bd = stored(m_store, r)) {
        out["baseline_source"] = text_of(m_store, bd->candidate.source_digest);
        break;
      }
    }
  }
  const auto b = d.builds.find("candidate");
  const build::result cand_build = b != d.builds.end() ? b->second : build::result{};
  out["build"] = {{"status", b != d.builds.end() ? build::to_string(cand_build.status) : ""},
                  {"reason", cand_build.reason},
                  {"seconds", cand_build.seconds},
                  {"cached", cand_build.cached},
                  {"flags", cand_build.flags},
                  {"log", cand_build.log}};
  json checks = json::array();
  // Each library's checks as the judge's runner recorded them (eval::checks_of).
  for (const auto& layer : d.verification) {
    for (const auto& c : eval::checks_of(layer)) {
      const json seed = c.seed ? json(*c.seed) : json();
      for (const auto& o : c.outputs) {
        const auto number = [](const auto& v) { return v ? json(*v) : json(); };
        checks.push_back({{"role", layer.role},
                          {"shape", c.shape},
                          {"distribution", c.distribution},
                          {"seed", seed},
                          {"passed", c.passed},
                          {"inputs_unchanged", c.inputs_unchanged},
                          {"reason", c.reason},
                          {"output", o.output},
                          {"max_abs_err", number(o.max_abs_err)},
                          {"max_rel_err", number(o.max_rel_err)},
                          {"p99_abs_err", number(o.p99_abs_err)},
                          {"rel_l2", number(o.rel_l2)},
                          {"violations", number(o.violations)},
                          {"nonfinite", number(o.nonfinite)},
                          {"unwritten", number(o.unwritten)}});
      }
      if (c.outputs.empty()) {
        checks.push_back({{"role", layer.role},
                          {"shape", c.shape},
                          {"distribution", c.distribution},
                          {"seed", seed},
                          {"passed", c.passed},
                          {"reason", c.reason}});
      }
    }
  }
  out["verification"] = checks;
  out["correctness"] = it->record.correctness;
  // Timing: every sample [s] per side, and each session's medians.
  json samples = {{"candidate", json::array()}, {"baseline", json::array()}};
  for (const auto& session : d.timing) {
    for (const char* side : {"candidate", "baseline"}) {
      if (const auto s = session.samples.find(side); s != session.samples.end()) {
        for (const auto& x : s->second) {
          samples[side].push_back(x.t);
        }
      }
    }
  }
  out["samples"] = samples;
  json medians = json::array();
  if (d.gate) {
    for (const auto& m : d.gate->session_medians) {
      medians.push_back({{"baseline", m.baseline_s}, {"candidate", m.candidate_s}});
    }
  }
  out["session_medians"] = medians;
  out["statistics"] = d.gate ? json(*d.gate) : json::object();
  out["sanitize"] = d.sanitize ? json(*d.sanitize) : json();
  out["profile"] = d.counters ? json(*d.counters) : json();
  out["bottleneck"] = json(); // the classifier's word is the profiler's report, not a record's
  out["floor_s"] = d.floor_s ? json(*d.floor_s) : json();
  return out;
}

json dashboard::roofline(int64_t run, const std::string& task) const {
  const auto rows = rows_of_task(m_store.evaluations_of_run(run), task);
  if (rows.empty()) {
    throw not_found(fmt::format("run {} evaluated nothing of task {}", run, task));
  }
  const auto c = load_contract(m_options.project_root, task);
  json out = {{"task", task}, {"available", c.has_value()}, {"points", json::array()}};
  if (!c) {
    out["reason"] = "the task's contract is not in the project folder (--root)";
    return out;
  }
  task::ceilings ceil;
  for (const auto& row : rows) {
    // The ceilings the judge computed against: those of a record that names its timed shape.
    if (const auto d = stored(m_store, row); d && !d->context.shape.empty()) {
      ceil.bandwidth = d->context.ceilings.bandwidth;
      ceil.fp32_flops = d->context.ceilings.fp32_flops;
      ceil.source = d->context.ceilings.source;
      break;
    }
  }
  out["name"] = c->name;
  out["bandwidth"] = ceil.bandwidth;
  out["peak_bandwidth"] = ceil.peak_bandwidth;
  out["fp32_flops"] = ceil.fp32_flops;
  out["ceilings_source"] = ceil.source;
  out["ridge"] = ceil.fp32_flops / ceil.bandwidth;
  std::set<std::pair<int64_t, std::string>> seen; // one point per candidate and shape
  for (const auto& row : rows) {
    const auto& e = row.record;
    const std::string shape_name = e.shape.empty() ? c->official().name : e.shape;
    const task::shape_case* s = nullptr;
    try {
      s = &c->shape(shape_name);
    } catch (const std::exception&) {
      continue;
    }
    const double bytes = task::roofline_bytes(*c, *s);
    const double flops = task::roofline_flops(*c, *s);
    auto place = [&](int64_t candidate, const std::optional<double>& median,
                     const std::string& label, const std::string& verdict) {
      if (!median || *median <= 0 || !seen.insert({candidate, shape_name}).second) {
        return;
      }
      out["points"].push_back({{"candidate", candidate},
                               {"evaluation", row.id},
                               {"label", label},
                               {"verdict", verdict},
                               {"shape", shape_name},
                               {"seconds", *median},
                               {"bytes", bytes},
                               {"flops", flops},
                               {"intensity", bytes > 0 ? flops / bytes : 0.0},
                               {"flops_per_s", flops / *median},
                               {"bytes_per_s", bytes / *median},
                               {"floor_fraction", task::floor_seconds(*c, *s, ceil) / *median}});
    };
    if (e.baseline) {
      const bool base_is_baseline =
          row.origin == store::candidate_origin::baseline && e.baseline == e.candidate;
      if (base_is_baseline || e.verdict != store::verdict::rejected) {
        place(*e.baseline, e.baseline_median, base_is_baseline ? "baseline" : "compared", "");
      }
    }
    if (e.verdict != store::verdict::rejected && e.verdict != store::verdict::error &&
        e.verdict != store::verdict::blocked) {
      place(e.candidate, e.candidate_median,
            row.strategy.empty() ? to_string(row.origin) : row.strategy, to_string(e.verdict));
    }
  }
  return out;
}

json dashboard::suite(std::optional<int64_t> run) const {
  // The bench run: the one asked for, else the newest.
  std::optional<store::run_info> bench;
  if (run) {
    bench = require_run(m_store, *run);
  } else {
    for (const auto& r : m_store.list_runs(1000)) {
      if (r.kind == "bench") {
        bench = r;
        break;
      }
    }
  }
  json pytorch = json::object();
  std::string pytorch_source;
  auto read_json = [](const fs::path& p) -> json {
    std::ifstream in(p);
    if (!in) {
      return json();
    }
    try {
      return json::parse(in);
    } catch (const std::exception&) {
      return json();
    }
  };
  if (bench && bench->args.contains("pytorch") && bench->args["pytorch"].is_string()) {
    const fs::path p = bench->args["pytorch"].get<std::string>();
    if (const json j = read_json(p); j.is_object() && j.contains("tasks")) {
      pytorch = j["tasks"];
      pytorch_source = p.string();
    }
  }
  json from_file;
  if (m_options.bench_json) {
    from_file = read_json(*m_options.bench_json);
    if (pytorch.empty() && from_file.is_object() && from_file.contains("pytorch")) {
      pytorch = from_file["pytorch"].value("tasks", json::object());
      pytorch_source = m_options.bench_json->string();
    }
  }
  json rows = json::array();
  std::set<std::string> methods;
  // Whether a median is resolved (report::resolved): at least 10 times the judge's timing
  // resolution, the row's own where its record names it, else the judge's default.
  const double default_resolution = eval::options().resolution_s;
  auto add_resolved = [](json& row, const std::optional<double>& median, double resolution) {
    report::task_comparison c;
    c.correct = median.has_value();
    c.candidate_s = median.value_or(0);
    c.resolution_s = resolution;
    row["resolved"] = !median || report::resolved(c);
  };
  auto add_methods = [&](json& row, const std::string& task, const std::string& shape,
                         const std::optional<double>& median) {
    json by = json::object();
    if (pytorch.contains(task) && pytorch[task].contains(shape)) {
      for (const auto& [method, m] : pytorch[task][shape].items()) {
        if (m.is_object() && m.value("correct", false) && m.contains("median_s") && median &&
            *median > 0) {
          by[method] = m["median_s"].get<double>() / *median;
          methods.insert(method);
        }
      }
    }
    row["vs_pytorch"] = by;
  };
  std::string source;
  if (bench) {
    source = fmt::format("run {}", bench->id);
    std::set<std::pair<std::string, std::string>> seen;
    const auto all = m_store.evaluations_of_run(bench->id);
    for (auto it = all.rbegin(); it != all.rend(); ++it) { // the newest per task and shape
      const auto& e = it->record;
      if (!seen.insert({it->task_id, e.shape}).second) {
        continue;
      }
      json row = {{"task", it->task_id},
                  {"shape", e.shape},
                  {"verdict", to_string(e.verdict)},
                  {"speedup", opt(e.speedup)},
                  {"ci_low", opt(e.ci_low)},
                  {"ci_high", opt(e.ci_high)},
                  {"evaluation", it->id},
                  {"candidate_median_s", opt(e.candidate_median)}};
      add_methods(row, it->task_id, e.shape, e.candidate_median);
      add_resolved(row, e.candidate_median, default_resolution);
      rows.push_back(row);
    }
    std::reverse(rows.begin(), rows.end());
  } else if (from_file.is_object() && from_file.contains("rows")) {
    source = m_options.bench_json->string();
    for (const auto& r : from_file["rows"]) {
      const std::string task = r.value("task", "");
      const std::string shape = r.value("shape", "official");
      // The row's statistics are its evaluation's gate, in the gate's one mapping.
      std::optional<eval::gate_summary> gate;
      try {
        gate = eval::gate_of(r.value("statistics", json::object()));
      } catch (const std::exception&) {
      }
      std::optional<double> median;
      if (r.contains("candidate_median_s") && r["candidate_median_s"].is_number()) {
        median = r["candidate_median_s"].get<double>();
      } else if (gate && gate->median_candidate_s > 0) {
        median = gate->median_candidate_s;
      }
      json row = {{"task", task},
                  {"shape", shape},
                  {"verdict", r.value("verdict", "")},
                  {"speedup", r.value("speedup", json())},
                  {"ci_low", nullptr},
                  {"ci_high", nullptr},
                  {"candidate_median_s", opt(median)}};
      add_methods(row, task, shape, median);
      add_resolved(row, median,
                   gate && gate->resolution_s > 0 ? gate->resolution_s : default_resolution);
      rows.push_back(row);
    }
  }
  return {{"available", !rows.empty()},
          {"source", source},
          {"run", bench ? json(bench->id) : json()},
          {"pytorch_source", pytorch_source},
          {"methods", methods},
          {"rows", rows}};
}

std::string dashboard::version() const {
  std::string state;
  for (const auto& r : m_store.list_runs(100000)) {
    state += fmt::format("{}:{}:{}:{}:{};", r.id, to_string(r.status), r.evaluations, r.finished,
                         r.outcome);
  }
  return sha256_hex(state).substr(0, 16);
}

} // namespace kb::serve
