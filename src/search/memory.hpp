// Optimization memory: what strategies did, on which tasks, in which state, on which GPU. It
// lives in the store (the experiences table) and persists across runs and tasks. Retrieval ranks
// the strategies that apply to a task with UCB1 over measured speedups: exploit what worked on
// tasks of the same family on this GPU, try what is untested, and never repeat an attempt (same
// strategy and parameters) on the same task.
#pragma once

#include "search/proposer.hpp"
#include "search/strategies.hpp"
#include "store/store.hpp"

#include <nlohmann/json.hpp>

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

class memory {
public:
  explicit memory(store::store& st) : m_store(st) {}

  // The strategies of `applicable`, best first, with their outcomes on this family and GPU.
  std::vector<strategy_outcome> rank(const task::contract& c, const std::string& gpu,
                                     const std::vector<const strategy*>& applicable,
                                     double exploration = 1.0) const;
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
  store::store& m_store;
};

} // namespace kb::search
