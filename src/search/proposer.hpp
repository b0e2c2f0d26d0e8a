// The proposer interface: what the optimization loop gives a proposer (the task, the best
// candidate so far, the performance state, what memory says worked, what just failed) and what a
// proposer returns (a candidate with an explicit hypothesis). The built-in proposer and the LLM
// proposer both implement it.
#pragma once

#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::search {

// What memory knows of one strategy on tasks like this one (retrieved and ranked by the loop).
struct strategy_outcome {
  std::string strategy; // e.g. "elementwise.vectorized"
  std::string description;
  nlohmann::json params; // the parameters of the best attempt
  // Whether `params` go before the strategy's default: they are this task's own, or another
  // task's that beat that task's default point by at least memory::transfer_margin.
  bool params_first = true;
  int attempts = 0;
  int successes = 0;       // correct and faster than the baseline
  double best_speedup = 0; // best measured speedup over the baseline (0: none correct)
  double mean_speedup = 0;
  std::string last_failure;     // reason code of the last failure, if any
  double score = 0;             // the bandit's score that ranked it
  bool addresses_state = false; // the strategy addresses the current bottleneck state
  nlohmann::json evidence = nlohmann::json::object(); // why memory ranked it here (weights, key)
  // What each parameter value did where this strategy ran: per axis and value (its JSON text),
  // the weighted mean of log2 of the speedup over that task's mean for the strategy, weighted as
  // the ranking weighs experiences (this task, then nearer shape classes). Empty without
  // experiences. The proposer tries first the neighbouring points whose moves scored best.
  std::map<std::string, std::map<std::string, double>> value_scores;
  // What moving from `centre` to `point` gained where the strategy ran: over the axes where they
  // differ, the score of the point's value less the centre's (0 for a value never seen).
  double move_score(const nlohmann::json& centre, const nlohmann::json& point) const;
};

struct failure_note {
  std::string strategy;
  nlohmann::json params;
  std::string stage;   // compile | verify | time | propose
  std::string reason;  // reason code
  std::string message; // compiler or verifier text, trimmed
};

struct proposal_context {
  const task::contract* task = nullptr;
  std::string shape; // the shape being optimized ("official")
  std::string gpu;   // "NVIDIA H200, sm_90a"
  int rollout = 0;
  int step = 0;

  std::string best_source; // source of the best verified candidate so far
  std::string best_strategy;
  nlohmann::json best_params;
  double baseline_seconds = 0; // median time of the task's baseline
  double best_seconds = 0;     // median time of the best candidate
  double floor_seconds = 0;    // roofline floor

  std::string state;      // bottleneck state in words ("memory-bound at 61% of ...")
  nlohmann::json metrics; // the numbers behind it
  std::vector<strategy_outcome> retrieved; // best first
  std::vector<failure_note> recent_failures;
};

struct proposal {
  std::string source;
  std::string strategy;
  nlohmann::json params = nlohmann::json::object();
  std::string hypothesis;         // why it should be faster
  double predicted_speedup = 1.0; // over the current best
  std::string origin;             // "builtin", "llm:<model>"
  nlohmann::json trace;           // proposer-specific record (prompt and answer digests, ...)
};

// Strategy names that mean where a candidate came from, not how it was written ("baseline",
// "portfolio", "oracle", "import"): no proposer may use them. Trust never follows a name (the
// task's own baseline is recognised by its source), but a name must not pretend either.
bool is_reserved_strategy_name(std::string_view name);

struct proposal_result {
  std::optional<proposal> candidate;
  bool exhausted = false; // the proposer has nothing more to offer for this context
  std::string failure;    // reason code when no candidate (e.g. "llm.malformed_answer")
  std::string message;    // human-readable detail of the failure
};

class proposer {
public:
  virtual ~proposer() = default;
  virtual std::string name() const = 0;
  virtual proposal_result propose(const proposal_context& context) = 0;
  // A bounded repair turn after `failed` did not compile or verify; `error` is the compiler or
  // verifier text.
  virtual proposal_result repair(const proposal_context& context, const proposal& failed,
                                 const std::string& error) = 0;
};

} // namespace kb::search
