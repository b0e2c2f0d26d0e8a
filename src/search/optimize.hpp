// The optimization loop. For a task: establish the baseline (verified, timed); then, step by
// step, ask a proposer for candidates (one per rollout) with what memory ranks highest for the
// task's family and state, compile them in parallel, verify and time each against the current
// best on the GPU (serially), record every attempt in the store and in memory, and continue from
// the best. At the end the best is confirmed against the baseline with the full statistical gate,
// and the task ends in exactly one outcome.
#pragma once

#include "common/names.hpp"
#include "eval/eval.hpp"
#include "search/memory.hpp"
#include "search/proposer.hpp"
#include "search/screen.hpp"
#include "store/store.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kb::search {

enum class outcome { improved, no_improvement, failed, blocked, timeout };
inline constexpr auto outcome_names =
    name_table<outcome>({{outcome::improved, "improved"},
                         {outcome::no_improvement, "no_improvement"},
                         {outcome::failed, "failed"},
                         {outcome::blocked, "blocked"},
                         {outcome::timeout, "timeout"}});
static_assert(outcome_names.well_formed());
std::string to_string(outcome o);
std::optional<outcome> outcome_from_string(const std::string& s);

// Why a task's search loop ended (before the final gate), so that a run says whether its budget
// bound it: the step count, a limit of the budget, the floor target reached, the proposer with
// nothing new, or no strategy applicable at all.
enum class search_stop {
  steps,
  wall_budget,
  gpu_budget,
  evaluation_budget,
  floor_target,
  proposals_exhausted,
  no_strategy,
  interrupted // SIGINT or SIGTERM
};
inline constexpr auto search_stop_names =
    name_table<search_stop>({{search_stop::steps, "steps"},
                             {search_stop::wall_budget, "wall_budget"},
                             {search_stop::gpu_budget, "gpu_budget"},
                             {search_stop::evaluation_budget, "evaluation_budget"},
                             {search_stop::floor_target, "floor_target"},
                             {search_stop::proposals_exhausted, "proposals_exhausted"},
                             {search_stop::no_strategy, "no_strategy"},
                             {search_stop::interrupted, "interrupted"}});
static_assert(search_stop_names.well_formed());
std::string to_string(search_stop s);

struct budget {
  // [s] per task: the search's wall time, counted from the moment the baseline is verified and
  // timed (making an imported task ready and establishing its baseline come first, whatever they
  // cost, and are reported as the task's baseline_wall_seconds); the evaluation in flight when
  // it runs out finishes, and the best is still confirmed. A queued evaluation (--gpus, Slurm)
  // that no worker has taken by then ends with reason budget.exhausted (search::wait_limit).
  std::chrono::seconds wall{600};
  double gpu_seconds = 0; // [s] per task, 0: no limit (time spent in evaluation workers)
  int evaluations = 0;    // per task, 0: no limit
};

struct optimize_options {
  int rollouts = 2; // candidates proposed per step
  int steps = 8;
  budget limits;
  double target_floor_fraction =
      0.95;                 // stop once the best runs at this fraction of the floor's speed
  double exploration = 1.0; // UCB1's c
  uint64_t seed = 0;        // tie-breaking among untried strategies (0: library order)
  screen_options screening; // stages before the step's gate (off: the gate alone)
  eval::options step;       // how steps are evaluated (one session; quick)
  eval::options confirm;    // the final gate against the baseline (full protocol)
  // Run the four sanitizers (at the check shapes) on a candidate before it becomes the best; a
  // finding rejects it (reason sanitize.<tool>) and the search goes on. Off only on request
  // (`--no-sanitize`, recorded with the run).
  bool sanitize = true;
};

// What decides a task's outcome, and the rule (tested on its own).
struct outcome_inputs {
  bool blocked = false;
  std::string blocked_reason;
  bool baseline_ok = true;
  std::string baseline_reason;
  bool no_applicable_strategy = false;       // the proposer had nothing for this task at all
  std::optional<search_stop> stopped;        // why the search loop ended, once it has
  int evaluated = 0;                         // candidates evaluated beyond the baseline
  int correct = 0;                           // of them, accepted by verification
  std::optional<eval::verdict> confirmation; // the best against the baseline, when confirmed
  std::string confirmation_reason;
};
std::pair<outcome, std::string> classify_outcome(const outcome_inputs& in);

// The exit status of a run over tasks (docs/cli.md): exit_code::task_failed (4) when any task
// ended failed or timeout, else blocked (3) when any was blocked, else not_improved (2) when any
// ended no_improvement, else ok (0). No tasks: ok.
int exit_status(const std::vector<outcome>& outcomes);

struct task_result {
  std::string task;
  outcome final = outcome::failed;
  std::string reason;
  int evaluations = 0; // candidate evaluations made (not counting the baseline and confirmation)
  int evaluations_to_best = 0; // the evaluation that found the final best (0: the baseline)
  double baseline_seconds = 0; // [s] median
  double best_seconds = 0;     // [s] median
  double speedup = 1;          // confirmed median ratio (1 without an improvement)
  double floor_fraction = 0;   // floor / best
  std::string best_strategy = "baseline";
  nlohmann::json best_params = nlohmann::json::object();
  std::optional<int64_t> best_candidate;
  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json baseline_state = nlohmann::json::object(); // bottleneck of the baseline
  nlohmann::json final_state = nlohmann::json::object();    // bottleneck of the best
  std::vector<double> best_after_evaluation;  // best speedup over the baseline after each one
  double wall_seconds = 0;                    // [s] of the search (baseline to confirmation)
  double baseline_wall_seconds = 0;           // [s] of it, making the task ready and its baseline
  double candidates_per_minute = 0;           // candidate evaluations per minute of wall time
  std::map<std::string, int> stages;          // candidates by the stage they stopped at
  std::optional<search_stop> stopped_because; // absent where the search loop never ran
  // An imported task: the lowering rule the search ran on (contract::lowering), or, when none
  // covered it, the unsupported ops with their reasons (contract::not_lowered).
  std::string lowering;
  std::vector<std::string> unsupported;
  // A task that could not be made ready to evaluate (a module not trusted, a describe that
  // failed): what stopped it, with the process's output where one ran ("" otherwise).
  std::string detail;
  nlohmann::json to_json() const;
};

using evaluator =
    std::function<eval::result(const task::contract&, const eval::candidate_input& candidate,
                               const eval::candidate_input& baseline, const eval::options&)>;
using compile_fn =
    std::function<void(const task::contract&, const eval::candidate_input&, const eval::options&)>;

class optimizer {
public:
  // `gpu` names the device for memory ("NVIDIA H200"). `evaluate` runs one evaluation (the real
  // one, or a stand-in in tests); `compile` warms the build cache for a candidate (may be empty).
  optimizer(store::store& st, int64_t run, memory& mem, proposer& prop, optimize_options opt,
            std::string gpu, evaluator evaluate, compile_fn compile,
            std::function<void(const std::string&)> progress);

  task_result optimize(const task::contract& c);

private:
  store::store& m_store;
  int64_t m_run;
  memory& m_memory;
  proposer& m_proposer;
  optimize_options m_opt;
  std::string m_gpu;
  evaluator m_evaluate;
  compile_fn m_compile;
  std::function<void(const std::string&)> m_progress;
};

} // namespace kb::search
