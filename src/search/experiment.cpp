#include "search/experiment.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "report/report.hpp"
#include "search/builtin_proposer.hpp"
#include "search/memory.hpp"
#include "search/strategies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <future>
#include <set>

namespace kb::search {

using nlohmann::json;

namespace {

std::string entry_key(const std::string& task, const std::string& strategy, const json& params) {
  return task + "|" + strategy + "|" + params.dump();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace

bool table_entry::correct() const {
  eval::result r;
  r.final = verdict;
  return accepted(r);
}

json outcome_table::to_json() const {
  json j{{"kind", "kblaster.outcome_table"},
         {"device", device},
         {"protocol", protocol},
         {"created", created},
         {"tasks", json::array()},
         {"entries", json::array()}};
  for (const auto& t : tasks) {
    j["tasks"].push_back({{"id", t.id}, {"contract", t.contract}});
  }
  for (const auto& e : entries) {
    j["entries"].push_back({{"task", e.task},
                            {"strategy", e.strategy},
                            {"params", e.params},
                            {"verdict", eval::to_string(e.verdict)},
                            {"reason", e.reason},
                            {"speedup", e.speedup},
                            {"candidate_seconds", e.candidate_seconds},
                            {"baseline_seconds", e.baseline_seconds},
                            {"seconds", e.seconds}});
  }
  return j;
}

outcome_table outcome_table::from_json(const json& j) {
  if (!j.is_object() || j.value("kind", "") != "kblaster.outcome_table") {
    fail_input("not an outcome table (expected \"kind\": \"kblaster.outcome_table\")");
  }
  outcome_table t;
  try {
    t.device = j.value("device", json::object());
    t.protocol = j.value("protocol", json::object());
    t.created = j.value("created", "");
    for (const auto& x : j.at("tasks")) {
      t.tasks.push_back({x.at("id").get<std::string>(), x.value("contract", std::string())});
    }
    for (const auto& x : j.at("entries")) {
      table_entry e;
      e.task = x.at("task");
      e.strategy = x.at("strategy");
      e.params = x.at("params");
      const auto v = eval::verdict_from_string(x.at("verdict"));
      if (!v) {
        fail_input("outcome table: unknown verdict {}", x.at("verdict").dump());
      }
      e.verdict = *v;
      e.reason = x.value("reason", "");
      e.speedup = x.value("speedup", 0.0);
      e.candidate_seconds = x.value("candidate_seconds", 0.0);
      e.baseline_seconds = x.value("baseline_seconds", 0.0);
      e.seconds = x.value("seconds", 0.0);
      t.entries.push_back(std::move(e));
    }
  } catch (const json::exception& e) {
    fail_input("outcome table: {}", e.what());
  }
  t.index();
  return t;
}

void outcome_table::index() {
  m_index.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    m_index[entry_key(entries[i].task, entries[i].strategy, entries[i].params)] = i;
  }
}

const table_entry* outcome_table::find(const std::string& task, const std::string& strategy,
                                       const json& params) const {
  const auto it = m_index.find(entry_key(task, strategy, params));
  return it == m_index.end() ? nullptr : &entries[it->second];
}

double outcome_table::best_speedup(const std::string& task) const {
  double best = 0;
  for (const auto& e : entries) {
    if (e.task == task && e.correct()) {
      best = std::max(best, e.speedup);
    }
  }
  return best;
}

std::vector<json> table_points(const strategy& st, int max_points) {
  std::vector<json> out;
  std::set<std::string> seen;
  std::deque<json> queue{resolve_params(st, st.defaults)};
  while (!queue.empty() && static_cast<int>(out.size()) < max_points) {
    json p = queue.front();
    queue.pop_front();
    if (!seen.insert(p.dump()).second) {
      continue;
    }
    out.push_back(p);
    for (auto& n : builtin_proposer::point_order(st, p)) {
      if (seen.count(n.dump()) == 0) {
        queue.push_back(std::move(n));
      }
    }
  }
  return out;
}

outcome_table record_table(const fs::path& project_root, const std::vector<task::contract>& tasks,
                           const evaluator& evaluate, const compile_fn& compile,
                           const record_options& options, outcome_table table,
                           const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& line) {
    if (progress) {
      progress(line);
    }
  };
  table.index();
  if (table.created.empty()) {
    table.created = utc_now();
  }
  table.protocol = {{"shape", options.gate.shape},
                    {"sessions", options.gate.sessions},
                    {"seeds", options.gate.seeds},
                    {"max_wall_s", options.gate.timing.max_wall},
                    {"min_samples", options.gate.timing.min_samples},
                    {"delta", options.gate.delta},
                    {"max_points", options.max_points}};
  struct job {
    const task::contract* c;
    const strategy* st;
    json params;
  };
  std::vector<job> jobs;
  for (const auto& c : tasks) {
    std::error_code ec;
    const auto rel = fs::relative(c.file, project_root, ec);
    if (std::none_of(table.tasks.begin(), table.tasks.end(),
                     [&](const table_task& t) { return t.id == c.id; })) {
      table.tasks.push_back({c.id, ec ? c.file.string() : rel.string()});
    }
    for (const strategy* st : strategies_for(c)) {
      for (auto& p : table_points(*st, options.max_points)) {
        if (table.find(c.id, st->name, p) == nullptr) {
          jobs.push_back({&c, st, std::move(p)});
        }
      }
    }
  }
  say(fmt::format("{} points to evaluate ({} already in the table)", jobs.size(),
                  table.entries.size()));
  const auto input_of = [](const job& j) {
    return eval::candidate_input{generate(*j.c, *j.st, j.params), j.st->name + ".cu", "proposer",
                                 j.st->name, j.params};
  };
  std::future<void> next_build;
  const auto start_build = [&](size_t i) {
    if (compile && i < jobs.size()) {
      next_build = std::async(std::launch::async, [&, i] {
        try {
          compile(*jobs[i].c, input_of(jobs[i]), options.gate);
        } catch (const std::exception&) {
          // The evaluation reports the build's failure.
        }
      });
    }
  };
  start_build(0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (next_build.valid()) {
      next_build.get();
    }
    start_build(i + 1); // the next candidate compiles while this one runs
    const job& j = jobs[i];
    const eval::candidate_input baseline{read_file(j.c->baseline),
                                         j.c->baseline.filename().string(), "baseline", "baseline"};
    const auto r = evaluate(*j.c, input_of(j), baseline, options.gate);
    table_entry e;
    e.task = j.c->id;
    e.strategy = j.st->name;
    e.params = j.params;
    e.verdict = r.final;
    e.reason = r.reason;
    e.seconds = r.seconds;
    if (accepted(r) && r.gate) {
      e.speedup = r.gate->speedup;
      e.candidate_seconds = r.gate->median_candidate_s;
      e.baseline_seconds = r.gate->median_baseline_s;
    }
    if (table.device.empty() && r.context.device) {
      table.device = *r.context.device;
    }
    say(fmt::format("[{}/{}] task {} {} {}: {} ({}) {:.3f}x", i + 1, jobs.size(), e.task,
                    e.strategy, e.params.dump(), eval::to_string(e.verdict), e.reason, e.speedup));
    table.entries.push_back(std::move(e));
    table.index();
    if (!options.checkpoint.empty()) {
      write_file_atomic(options.checkpoint, table.to_json().dump(1) + "\n");
    }
  }
  return table;
}

eval::result replay_evaluator::operator()(const task::contract& c,
                                          const eval::candidate_input& candidate,
                                          const eval::candidate_input& best,
                                          const eval::options& o) {
  ++m_calls;
  eval::result r;
  double base_seconds = 0;
  int n = 0;
  for (const auto& e : m_table.entries) {
    if (e.task == c.id && e.baseline_seconds > 0) {
      base_seconds += e.baseline_seconds;
      ++n;
    }
  }
  base_seconds = n > 0 ? base_seconds / n : 1e-3;
  struct side {
    const table_entry* entry = nullptr;
    double speedup = 1;
  };
  const auto lookup = [&](const eval::candidate_input& in) -> std::optional<side> {
    if (in.origin == "baseline") {
      return side{};
    }
    const table_entry* e = m_table.find(c.id, in.strategy, in.params);
    if (e == nullptr) {
      return std::nullopt;
    }
    return side{e, e->speedup};
  };
  const auto cand = lookup(candidate);
  const auto ref = lookup(best);
  if (!cand || !ref) {
    r.final = eval::verdict::error;
    r.reason = "replay.not_recorded";
    r.message =
        fmt::format("the table has no outcome for task {} {} {}", c.id,
                    (!cand ? candidate : best).strategy, (!cand ? candidate : best).params.dump());
    return r;
  }
  // Simulated wall time: the recorded evaluation's, scaled by the timing it asked for (a fixed
  // 1 s per call stands for the worker start and verification).
  const double recorded = cand->entry != nullptr ? cand->entry->seconds : 2.0;
  const double asked = o.verify_only ? 0 : o.sessions * o.timing.max_wall;
  const double table_timing = m_table.protocol.value("sessions", 1) *
                              m_table.protocol.value("max_wall_s", o.timing.max_wall);
  r.seconds = recorded * (1 + asked) / (1 + table_timing);
  m_seconds += r.seconds;
  r.worker_seconds = r.seconds;
  r.detail = {{"replay", true}, {"sessions", json::array({{{"seconds", r.seconds}}})}};
  if (cand->entry != nullptr && !cand->entry->correct()) {
    r.final = cand->entry->verdict;
    r.reason = cand->entry->reason;
    r.message = "replayed: " + cand->entry->reason;
    return r;
  }
  if (o.verify_only) {
    r.final = eval::verdict::same;
    r.reason = "verify.passed";
    return r;
  }
  const double t_best = base_seconds / ref->speedup;
  const double t_cand = base_seconds / cand->speedup;
  const double ratio = t_best / t_cand;
  r.final = ratio > 1 + o.delta
                ? eval::verdict::improved
                : (ratio < 1 - o.delta ? eval::verdict::regressed : eval::verdict::same);
  r.reason = "timing." + eval::to_string(r.final);
  r.gate = eval::gate_summary::of_medians(t_best, t_cand);
  return r;
}

json arm_result::to_json() const {
  return {{"evaluations", evaluations},
          {"to_target", to_target},
          {"reached", reached},
          {"best_speedup", best_speedup},
          {"first_strategy", first_strategy},
          {"first_params", first_params},
          {"trail", trail}};
}

double experiment_run::ratio() const {
  return without_memory.to_target > 0
             ? static_cast<double>(with_memory.to_target) / without_memory.to_target
             : 1.0;
}

json experiment_run::to_json() const {
  return {{"task", task},
          {"seed", seed},
          {"table_best", table_best},
          {"target_speedup", target_speedup},
          {"primed_experiences", primed_experiences},
          {"without_memory", without_memory.to_json()},
          {"with_memory", with_memory.to_json()},
          {"ratio", ratio()}};
}

double
experiment_result::ratio_where(const std::function<bool(const experiment_run&)>& counts) const {
  double with = 0;
  double without = 0;
  for (const auto& r : runs) {
    if (counts(r)) {
      with += r.with_memory.to_target;
      without += r.without_memory.to_target;
    }
  }
  return without > 0 ? with / without : 1.0;
}

double experiment_result::ratio() const {
  return ratio_where([](const experiment_run&) { return true; });
}

std::vector<std::string> experiment_result::hard_tasks() const {
  std::vector<std::string> out;
  for (const auto& r : runs) {
    if (r.without_memory.to_target > 1 && std::find(out.begin(), out.end(), r.task) == out.end()) {
      out.push_back(r.task);
    }
  }
  return out;
}

double experiment_result::hard_ratio() const {
  const auto hard = hard_tasks();
  return ratio_where([&](const experiment_run& r) {
    return std::find(hard.begin(), hard.end(), r.task) != hard.end();
  });
}

json experiment_result::to_json() const {
  json per_task = json::array();
  std::vector<std::string> order;
  for (const auto& r : runs) {
    if (std::find(order.begin(), order.end(), r.task) == order.end()) {
      order.push_back(r.task);
    }
  }
  for (const auto& t : order) {
    double with = 0;
    double without = 0;
    int n = 0;
    for (const auto& r : runs) {
      if (r.task == t) {
        with += r.with_memory.to_target;
        without += r.without_memory.to_target;
        ++n;
      }
    }
    per_task.push_back({{"task", t},
                        {"seeds", n},
                        {"mean_to_target_with_memory", with / n},
                        {"mean_to_target_without_memory", without / n},
                        {"ratio", without > 0 ? with / without : 1.0}});
  }
  json runs_json = json::array();
  for (const auto& r : runs) {
    runs_json.push_back(r.to_json());
  }
  return {
      {"kind", "kblaster.memory_experiment"},
      {"definition",
       "leave one task out: the search on the held-out task from an empty store and from a "
       "store primed with runs of every other task (same seed); evaluations until the best "
       "reaches the target fraction of the best the table holds for the task (max + 1 when "
       "never); ratio = sum with memory / sum without; hard_ratio the same over every run of the "
       "tasks where the search without memory took more than one evaluation in some seed "
       "(hard_tasks)"},
      {"target", options.target},
      {"max_evaluations", options.max_evaluations},
      {"rollouts", options.rollouts},
      {"seeds", options.seeds},
      {"table_device", table_device},
      {"ratio", ratio()},
      {"hard_tasks", hard_tasks()},
      {"hard_ratio", hard_ratio()},
      {"per_task", per_task},
      {"runs", runs_json}};
}

namespace {

struct replay_setup {
  const outcome_table* table;
  const experiment_options* options;
  uint64_t seed;
};

task_result search_once(const fs::path& dir, const task::contract& c, const replay_setup& s,
                        const json* primed, int* imported) {
  store::store st(dir);
  memory mem(st);
  if (primed != nullptr) {
    const int n = mem.import_all(*primed);
    if (imported != nullptr) {
      *imported = n;
    }
  }
  const outcome_table& table = *s.table;
  builtin_proposer prop(
      mem, s.seed,
      [&table](const task::contract& t, const std::string& strategy, const json& params) {
        return table.find(t.id, strategy, params) != nullptr;
      });
  optimize_options o;
  o.rollouts = s.options->rollouts;
  o.steps = 100000;
  o.limits.evaluations = s.options->max_evaluations;
  o.limits.wall = std::chrono::hours(24);
  o.target_floor_fraction = 1e9; // the table's best decides, not the floor
  o.seed = s.seed;
  o.confirm = o.step;
  replay_evaluator gpu(table);
  const int64_t run = st.begin_run("experiment", {{"task", c.id}, {"seed", s.seed}});
  optimizer opt(st, run, mem, prop, o, "replay", std::ref(gpu), {}, {});
  auto r = opt.optimize(c);
  st.finish_run(run, store::run_status::finished, "finished", "");
  return r;
}

arm_result arm_of(const task_result& r, double target, int max_evals) {
  arm_result a;
  a.evaluations = r.evaluations;
  a.to_target = max_evals + 1;
  for (size_t i = 0; i < r.best_after_evaluation.size(); ++i) {
    if (r.best_after_evaluation[i] >= target) {
      a.to_target = static_cast<int>(i) + 1;
      a.reached = true;
      break;
    }
  }
  a.best_speedup = r.best_after_evaluation.empty() ? 1.0 : r.best_after_evaluation.back();
  for (const auto& s : r.steps) {
    if (!s.contains("strategy")) {
      continue;
    }
    if (a.trail.empty()) {
      a.first_strategy = s.at("strategy");
      a.first_params = s.at("params");
    }
    a.trail.push_back({{"strategy", s.at("strategy")},
                       {"params", s.at("params")},
                       {"speedup", s.contains("measured_speedup_vs_baseline")
                                       ? s.at("measured_speedup_vs_baseline")
                                       : nlohmann::json(nullptr)}});
  }
  return a;
}

} // namespace

experiment_result run_memory_experiment(const std::vector<task::contract>& tasks,
                                        const outcome_table& table, const experiment_options& o,
                                        const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& line) {
    if (progress) {
      progress(line);
    }
  };
  std::optional<temp_dir> tmp;
  fs::path work = o.work_dir;
  if (work.empty()) {
    tmp.emplace("kb-memory-experiment");
    work = tmp->path();
  }
  fs::create_directories(work);
  experiment_result out;
  out.options = o;
  out.table_device = table.device;
  int counter = 0;
  const auto fresh = [&](const std::string& what) {
    return work / fmt::format("{:05d}-{}", counter++, what);
  };
  for (const uint64_t seed : o.seeds) {
    const replay_setup s{&table, &o, seed};
    // Priming: every task searched once from an empty store; its experiences kept.
    std::map<std::string, json> experiences;
    std::map<std::string, task_result> cold;
    for (const auto& c : tasks) {
      const fs::path dir = fresh("prime-" + c.id);
      cold[c.id] = search_once(dir, c, s, nullptr, nullptr);
      store::store st(dir);
      experiences[c.id] = memory(st).export_all({task::to_string(c.fam)});
      fs::remove_all(dir);
    }
    for (const auto& c : tasks) {
      const double best = table.best_speedup(c.id);
      if (best <= 1.0) {
        say(fmt::format("seed {} task {}: skipped (no faster entry in the table)", seed, c.id));
        continue;
      }
      experiment_run run;
      run.task = c.id;
      run.seed = seed;
      run.table_best = best;
      run.target_speedup = o.target * best;
      // Without memory: the cold run above is exactly that (an empty store, the same seed).
      run.without_memory = arm_of(cold[c.id], run.target_speedup, o.max_evaluations);
      json primed = json::array();
      for (const auto& [id, list] : experiences) {
        if (id != c.id) {
          for (const auto& e : list) {
            primed.push_back(e);
          }
        }
      }
      const fs::path dir = fresh("held-out-" + c.id);
      const auto with = search_once(dir, c, s, &primed, &run.primed_experiences);
      fs::remove_all(dir);
      run.with_memory = arm_of(with, run.target_speedup, o.max_evaluations);
      say(fmt::format("seed {} task {}: to {:.3f}x: {} evaluations without memory, {} with ({} "
                      "experiences of other tasks)",
                      seed, c.id, run.target_speedup, run.without_memory.to_target,
                      run.with_memory.to_target, run.primed_experiences));
      out.runs.push_back(std::move(run));
    }
  }
  return out;
}

std::string experiment_svg(const experiment_result& r) {
  const json j = r.to_json();
  report::bar_chart chart;
  chart.title = fmt::format("Evaluations to {:.0f}% of the best, with and without memory "
                            "(mean over {} seeds; all tasks: {:.2f}x)",
                            100 * r.options.target, r.options.seeds.size(), r.ratio());
  chart.axis_label = "candidate evaluations (lower is better)";
  chart.value_suffix = "";
  chart.reference = static_cast<double>(r.options.max_evaluations + 1);
  chart.reference_label = "never reached";
  chart.series = {"without memory", "with memory"};
  for (const auto& t : j.at("per_task")) {
    const std::string id = t.at("task");
    chart.bars.push_back(
        {id + " without memory", t.at("mean_to_target_without_memory").get<double>(), {}, 0});
    chart.bars.push_back(
        {id + " with memory", t.at("mean_to_target_with_memory").get<double>(), {}, 1});
  }
  if (chart.bars.empty()) {
    chart.bars.push_back({"no task with a faster entry", 0, {}});
  }
  return report::to_svg(chart);
}

} // namespace kb::search
