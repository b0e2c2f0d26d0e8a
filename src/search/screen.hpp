// Screening: more candidates per minute without changing what a verdict means. A candidate goes
// through stages: compile (queued ahead of the GPU, in parallel with GPU work), verify at the
// check shapes, a short screening timing against the current best (one session, few samples),
// and only when the screen's estimate is within `margin` of beating the best, the step's full
// gate (its rules unchanged). A candidate stopped early keeps the verdict of the stage that
// stopped it (rejected at verification; regressed, same or inconclusive at the screen: never
// improved), and the stage and reason are recorded.
#pragma once

#include "common/names.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kb::search {

enum class stage { verify, screen, gate };
inline constexpr auto stage_names = name_table<stage>(
    {{stage::verify, "verify"}, {stage::screen, "screen"}, {stage::gate, "gate"}});
static_assert(stage_names.well_formed());
std::string to_string(stage s);

struct screen_options {
  bool enabled = false;
  // The screen passes a candidate on when its estimated speedup over the best is at least
  // (1 + gate delta) * (1 - margin).
  double margin = 0.05;
  // A verify-only call before the screen. evaluate() verifies before it times, in the same worker,
  // so the screen itself stops a wrong candidate at verification; a separate call costs one more
  // worker start and is off by default.
  bool separate_verify = false;
  eval::options screen; // set from the step's options by screening_options()
};

// The screen's evaluation options from the step's: one session, at most `max_wall` [s] of timing
// and a few samples; everything else (shape, seeds, sandbox, cache) as the step's.
eval::options screening_options(const eval::options& step, double max_wall = 0.4);

struct staged_result {
  eval::result result; // of the last stage run (the gate's when it was reached)
  stage reached = stage::gate;
  std::string stopped_because;          // reason code; empty when the gate decided
  std::optional<double> screen_speedup; // the screen's estimate over the best
  int calls = 0;                        // evaluations made
  std::map<std::string, double> seconds; // [s] wall time of each stage's evaluation, by stage
  nlohmann::json to_json() const;
};

using stage_evaluator =
    std::function<eval::result(const task::contract&, const eval::candidate_input& candidate,
                               const eval::candidate_input& baseline, const eval::options&)>;

// Whether an evaluation accepted the candidate (it verified and was timed or verify-only passed).
bool accepted(const eval::result& r);

// Runs the stages for one candidate against `best`. Without screening: the gate alone.
staged_result evaluate_staged(const stage_evaluator& evaluate, const task::contract& c,
                              const eval::candidate_input& candidate,
                              const eval::candidate_input& best, const eval::options& gate,
                              const screen_options& screening);

} // namespace kb::search
