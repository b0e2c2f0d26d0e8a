#include "search/screen.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kb::search {

using nlohmann::json;

std::string to_string(stage v) {
  return std::string(stage_names.name(v));
}

eval::options screening_options(const eval::options& step, double max_wall) {
  eval::options o = step;
  o.sessions = 1;
  o.verify_only = false;
  o.timing.max_wall = max_wall;
  o.timing.min_time = std::min(o.timing.min_time, max_wall / 4);
  o.timing.min_samples = std::min(o.timing.min_samples, 5);
  o.timing.max_samples = std::min(o.timing.max_samples, 200);
  o.profile = eval::profile_mode::none; // counters are for a new best, which only the gate makes
  return o;
}

json staged_result::to_json() const {
  return {{"stage_reached", to_string(reached)},
          {"stopped_because", stopped_because},
          {"screen_speedup", screen_speedup ? json(*screen_speedup) : json(nullptr)},
          {"calls", calls},
          {"seconds", seconds}};
}

bool accepted(const eval::result& r) {
  return r.final == eval::verdict::improved || r.final == eval::verdict::same ||
         r.final == eval::verdict::regressed || r.final == eval::verdict::inconclusive;
}

namespace {

double speedup_of(const eval::result& r) {
  return r.gate ? r.gate->speedup : 0.0;
}

bool verification_failure(const eval::result& r) {
  return r.reason.rfind("verify.", 0) == 0 || r.reason.rfind("build.", 0) == 0 ||
         r.reason.rfind("sanitize.", 0) == 0;
}

} // namespace

staged_result evaluate_staged(const stage_evaluator& evaluate, const task::contract& c,
                              const eval::candidate_input& candidate,
                              const eval::candidate_input& best, const eval::options& gate,
                              const screen_options& screening) {
  staged_result out;
  // One stage's evaluation: its result is the latest, and its wall time is recorded.
  const auto run = [&](stage st, const eval::options& o) {
    out.result = evaluate(c, candidate, best, o);
    ++out.calls;
    out.reached = st;
    out.seconds[to_string(st)] = out.result.seconds;
  };
  if (!screening.enabled) {
    run(stage::gate, gate);
    if (!accepted(out.result) && verification_failure(out.result)) {
      out.reached = stage::verify;
      out.stopped_because = out.result.reason;
    }
    return out;
  }
  if (screening.separate_verify) {
    eval::options v = gate;
    v.verify_only = true;
    run(stage::verify, v);
    if (!accepted(out.result)) {
      out.stopped_because = out.result.reason;
      return out;
    }
  }
  eval::options s = screening.screen;
  s.shape = gate.shape;
  run(stage::screen, s);
  if (!accepted(out.result)) {
    out.reached = verification_failure(out.result) ? stage::verify : stage::screen;
    out.stopped_because = out.result.reason;
    return out;
  }
  const double estimate = speedup_of(out.result);
  out.screen_speedup = estimate;
  const double pass_at = (1 + gate.delta) * (1 - screening.margin);
  if (estimate < pass_at) {
    out.stopped_because = "screen.not_promising";
    // The record says what the row says (evidence check compares them), and keeps the judge's.
    out.result.detail["screen"] = {{"judge_verdict", eval::to_string(out.result.final)},
                                   {"judge_reason", out.result.reason}};
    // The screen's verdict stands, but never as an improvement: only the gate says improved.
    if (out.result.final == eval::verdict::improved) {
      out.result.final = eval::verdict::inconclusive;
    }
    out.result.message = fmt::format("screen estimate {:.3f}x of the best, below {:.3f}x: not "
                                     "sent to the gate",
                                     estimate, pass_at);
    out.result.reason = "screen.not_promising";
    return out;
  }
  run(stage::gate, gate);
  return out;
}

} // namespace kb::search
