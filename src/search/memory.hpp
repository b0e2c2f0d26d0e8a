// Optimization memory: what strategies did, on which tasks, in which state, on which GPU. It
// lives in the store (the experiences table) and persists across runs and tasks. Its key is
// family x bottleneck state x shape class: retrieval weighs every experience of the family on this
// GPU by how near its key is to the task's (1 / (1 + shape distance), halved for another state)
// and ranks the strategies that apply with UCB1 over the weighted rewards: exploit what worked on
// tasks like this one, try what is untested (those addressing the current state first), start a
// strategy from the best parameters of the nearest shape class, and never repeat an attempt (same
// strategy and parameters) on the same task.
#pragma once

#include "search/proposer.hpp"
#include "search/state.hpp"
#include "search/strategies.hpp"
#include "store/store.hpp"

#include <nlohmann/json.hpp>

#include <optional>

#include <string>
#include <vector>

namespace kb::search {

// What memory knows of one strategy (over all tasks of a family on one GPU).
struct strategy_stats {
  std::string strategy;
  int attempts = 0;
  int correct = 0;
  int successes = 0;      // correct and faster than the task's baseline
  double mean_reward = 0; // mean of log2(speedup over baseline); a failure counts as log2(0.5)
  double best_speedup = 0;
  nlohmann::json best_params = nlohmann::json::object();
  std::string last_failure;
};

std::vector<strategy_stats> summarize(const std::vector<store::experience>& experiences);

// The reward of one attempt: log2 of its speedup over the baseline, a failure counting as a 2x
// slowdown (so failing strategies sink, but can recover).
double reward(const store::experience& e);

// UCB1: mean reward + c * sqrt(ln(total) / attempts); an untried strategy scores +infinity.
double ucb_score(const strategy_stats& s, int total_attempts, double exploration);

// Where a task stands for memory: its family, its current bottleneck state and its shape class.
struct memory_key {
  task::family fam = task::family::elementwise;
  profile::state state = profile::state::unknown;
  shape_class shape;
  std::string to_string() const; // "normalize x memory_bound x normalize/float32/rows/12.14"
};

struct rank_options {
  double exploration = 1.0; // UCB1's c
  uint64_t seed = 0; // breaks ties among untried strategies (0: library order); changes the search
};

// The weight of one experience for a task at `key`: 1 for the task itself, else
// 1 / (1 + distance of the shape classes), halved when the state differs.
double key_weight(const store::experience& e, const std::string& task_id, const memory_key& key);

class memory {
public:
  // How much another task's best point must have beaten that task's default point before a
  // search starts from it rather than from the default (strategy_outcome::params_first).
  static constexpr double transfer_margin = 1.10;

  explicit memory(store::store& st) : m_store(st) {}
  // Tasks of `run` that run at once on several GPUs must not see each other's attempts, or what
  // a task tries would depend on how many GPUs there are: rank ignores experiences of this run
  // that belong to other tasks.
  memory(store::store& st, int64_t isolated_run) : m_store(st), m_isolated_run(isolated_run) {}

  // The strategies of `applicable`, best first, with their outcomes on this family and GPU.
  std::vector<strategy_outcome> rank(const task::contract& c, const std::string& gpu,
                                     const std::vector<const strategy*>& applicable,
                                     double exploration = 1.0) const;
  // The strategies of `applicable`, best first, for a task at `key` (see key_weight); each
  // outcome says why it ranked there (`evidence`).
  std::vector<strategy_outcome> rank(const task::contract& c, const std::string& gpu,
                                     const std::vector<const strategy*>& applicable,
                                     const memory_key& key, const rank_options& options) const;
  // Attempts of this task (any run) with this strategy, newest first.
  std::vector<store::experience> attempts(const task::contract& c, const std::string& gpu,
                                          const std::string& strategy) const;
  bool tried(const task::contract& c, const std::string& gpu, const std::string& strategy,
             const nlohmann::json& params) const;
  void remember(const store::experience& e) { m_store.record_experience(e); }

  // Export and import, as JSON (the experiences themselves).
  nlohmann::json export_all(const std::vector<std::string>& families) const;
  int import_all(const nlohmann::json& experiences);

private:
  std::vector<store::experience> visible(const task::contract& c, const std::string& gpu) const;

  store::store& m_store;
  std::optional<int64_t> m_isolated_run;
};

} // namespace kb::search
