// The memory experiment and what makes it affordable: a table of measured outcomes and a replay
// evaluator that answers from it.
//
// `record_table` evaluates every table point of every applicable strategy of each task once
// against the task's baseline through a real evaluator (the GPU), and keeps (task, strategy,
// params) -> (verdict, reason, speedup over the baseline, times, wall seconds) with the device,
// the driver and the protocol. The search's decisions depend only on those outcomes, so a
// `replay_evaluator` over the table stands in for the GPU: a candidate against a best is the
// ratio of their recorded times, judged with the gate's delta.
//
// `run_memory_experiment`: for each task (held out) and seed, the search runs on the task twice
// from a fresh store, once empty and once primed with runs of every other task (same seed), and
// counts the evaluations until the best reaches `target` (95%) of the best the table holds for
// the task. Seeds change the search (the order of untried strategies and of neighbouring points).
#pragma once

#include "eval/eval.hpp"
#include "search/optimize.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::search {

namespace fs = std::filesystem;

struct table_entry {
  std::string task;
  std::string strategy;
  nlohmann::json params = nlohmann::json::object();
  eval::verdict verdict = eval::verdict::error; // against the baseline
  std::string reason;
  double speedup = 0;           // over the baseline (0 when not correct)
  double candidate_seconds = 0; // [s] median
  double baseline_seconds = 0;  // [s] median
  double seconds = 0;           // [s] wall time of the evaluation
  bool correct() const;
};

struct table_task {
  std::string id;
  std::string contract; // task.toml, relative to the project root
};

struct outcome_table {
  nlohmann::json device = nlohmann::json::object();   // name, driver and runtime versions
  nlohmann::json protocol = nlohmann::json::object(); // the evaluation options used
  std::string created;
  std::vector<table_task> tasks;
  std::vector<table_entry> entries;

  nlohmann::json to_json() const;
  // kb::input_error naming the field when the JSON is not a table.
  static outcome_table from_json(const nlohmann::json& j);
  const table_entry* find(const std::string& task, const std::string& strategy,
                          const nlohmann::json& params) const;
  // The best recorded speedup of a task's correct entries (0 when none).
  double best_speedup(const std::string& task) const;
  void index();

private:
  std::map<std::string, size_t> m_index;
};

// The points of a strategy a table records: breadth-first from the default along the built-in
// proposer's neighbourhood (one and two steps per axis), at most `max_points`.
std::vector<nlohmann::json> table_points(const strategy& st, int max_points);

struct record_options {
  int max_points = 8;  // per strategy
  eval::options gate;  // how each point is evaluated against the baseline
  fs::path checkpoint; // when set: the table is written here after every entry, and entries
                       // already there are not evaluated again
};

// Evaluates every table point of every strategy that applies to each task, against the task's
// baseline. `compile` (may be empty) builds the next candidate while the current one runs.
outcome_table record_table(const fs::path& project_root, const std::vector<task::contract>& tasks,
                           const evaluator& evaluate, const compile_fn& compile,
                           const record_options& options, outcome_table table,
                           const std::function<void(const std::string&)>& progress);

// Answers evaluations from a table. A point the table lacks is an error (replay.not_recorded).
class replay_evaluator {
public:
  explicit replay_evaluator(const outcome_table& table) : m_table(table) {}
  eval::result operator()(const task::contract& c, const eval::candidate_input& candidate,
                          const eval::candidate_input& best, const eval::options& o);
  int calls() const { return m_calls; }
  double seconds() const { return m_seconds; } // [s] the recorded wall time of the answers

private:
  const outcome_table& m_table;
  int m_calls = 0;
  double m_seconds = 0;
};

struct experiment_options {
  std::vector<uint64_t> seeds{1, 2, 3};
  int max_evaluations = 24; // per search
  int rollouts = 2;
  double target = 0.95; // of the table's best for the task
  fs::path work_dir;    // stores are made here (a temporary folder when empty)
};

struct arm_result {
  int evaluations = 0;
  int to_target = 0; // evaluations until the best reached the target; max + 1 when never
  bool reached = false;
  double best_speedup = 1;
  std::string first_strategy; // the first candidate's strategy and parameters
  nlohmann::json first_params;
  // Every evaluation in order: strategy, parameters and the replayed speedup over the baseline
  // (null where the table's entry was not correct).
  nlohmann::json trail = nlohmann::json::array();
  nlohmann::json to_json() const;
};

struct experiment_run {
  std::string task;
  uint64_t seed = 0;
  double table_best = 0;
  double target_speedup = 0;
  int primed_experiences = 0;
  arm_result without_memory;
  arm_result with_memory;
  double ratio() const; // with / without (evaluations to target)
  nlohmann::json to_json() const;
};

struct experiment_result {
  std::vector<experiment_run> runs;
  experiment_options options;
  nlohmann::json table_device;
  // Over all runs: sum of evaluations to target with memory / without.
  double ratio() const;
  // The tasks where the search without memory needed more than one evaluation in some seed:
  // where the built-in order does not find the target first, so there is something to learn.
  std::vector<std::string> hard_tasks() const;
  // ratio() over the runs of hard_tasks() (1 when there are none).
  double hard_ratio() const;
  // Sum with memory / sum without over the runs `counts` accepts (1 when that sum is 0).
  double ratio_where(const std::function<bool(const experiment_run&)>& counts) const;
  nlohmann::json to_json() const;
};

// Tasks without a correct faster entry in the table are skipped (nothing to reach).
experiment_result run_memory_experiment(const std::vector<task::contract>& tasks,
                                        const outcome_table& table, const experiment_options& o,
                                        const std::function<void(const std::string&)>& progress);

// Mean evaluations to target per task, with and without memory, as an SVG bar chart.
std::string experiment_svg(const experiment_result& r);

} // namespace kb::search
