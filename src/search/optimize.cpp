#include "search/optimize.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"
#include "pytorch/pytorch.hpp"
#include "search/executor.hpp"
#include "search/state.hpp"
#include "search/strategies.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <future>

namespace kb::search {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

std::string to_string(outcome v) {
  return std::string(outcome_names.name(v));
}

std::optional<outcome> outcome_from_string(const std::string& s) {
  return outcome_names.parse(s);
}

std::pair<outcome, std::string> classify_outcome(const outcome_inputs& in) {
  if (in.blocked) {
    return {outcome::blocked, in.blocked_reason.empty() ? "blocked" : in.blocked_reason};
  }
  if (!in.baseline_ok) {
    // The evaluation's reasons for its baseline side already name it ("baseline.verify.mismatch").
    const bool named = in.baseline_reason.rfind("baseline.", 0) == 0;
    return {outcome::failed, named ? in.baseline_reason : "baseline." + in.baseline_reason};
  }
  if (in.evaluated == 0 && in.no_applicable_strategy) {
    return {outcome::no_improvement, "search.no_applicable_strategy"};
  }
  // Nothing evaluated, and not for want of time: the baseline already at the floor target, or a
  // proposer with nothing to offer.
  if (in.evaluated == 0 && in.stopped == search_stop::floor_target) {
    return {outcome::no_improvement, "search.baseline_at_floor_target"};
  }
  if (in.evaluated == 0 && in.stopped == search_stop::proposals_exhausted) {
    return {outcome::no_improvement, "search.proposals_exhausted"};
  }
  if (in.evaluated == 0) {
    return {outcome::timeout, "budget.exhausted_before_a_candidate"};
  }
  if (in.correct == 0) {
    return {outcome::failed, "search.no_correct_candidate"};
  }
  if (!in.confirmation) {
    return {outcome::no_improvement, "search.nothing_faster_than_the_baseline"};
  }
  switch (*in.confirmation) {
  case eval::verdict::improved:
    return {outcome::improved, "confirm.improved"};
  case eval::verdict::blocked:
    return {outcome::blocked, "confirm." + in.confirmation_reason};
  case eval::verdict::error:
    return {outcome::failed, "confirm." + in.confirmation_reason};
  case eval::verdict::rejected:
    return {outcome::failed, "confirm.rejected." + in.confirmation_reason};
  default:
    return {outcome::no_improvement, "confirm." + eval::to_string(*in.confirmation)};
  }
}

int exit_status(const std::vector<outcome>& outcomes) {
  const auto any = [&](std::initializer_list<outcome> which) {
    return std::any_of(outcomes.begin(), outcomes.end(), [&](outcome o) {
      return std::find(which.begin(), which.end(), o) != which.end();
    });
  };
  if (any({outcome::failed, outcome::timeout})) {
    return exit_code::task_failed;
  }
  if (any({outcome::blocked})) {
    return exit_code::blocked;
  }
  if (any({outcome::no_improvement})) {
    return exit_code::not_improved;
  }
  return exit_code::ok;
}

std::string to_string(search_stop v) {
  return std::string(search_stop_names.name(v));
}

json task_result::to_json() const {
  return {{"task", task},
          {"outcome", to_string(final)},
          {"reason", reason},
          {"evaluations", evaluations},
          {"evaluations_to_best", evaluations_to_best},
          {"baseline_seconds", baseline_seconds},
          {"best_seconds", best_seconds},
          {"speedup", speedup},
          {"floor_fraction", floor_fraction},
          {"best_strategy", best_strategy},
          {"best_params", best_params},
          {"best_candidate", best_candidate ? json(*best_candidate) : json(nullptr)},
          {"steps", steps},
          {"baseline_state", baseline_state},
          {"final_state", final_state},
          {"best_after_evaluation", best_after_evaluation},
          {"wall_seconds", wall_seconds},
          {"baseline_wall_seconds", baseline_wall_seconds},
          {"candidates_per_minute", candidates_per_minute},
          {"stages", stages},
          {"stopped_because", stopped_because ? json(to_string(*stopped_because)) : json(nullptr)},
          {"lowering", lowering},
          {"unsupported", unsupported},
          {"detail", detail}};
}

optimizer::optimizer(store::store& st, int64_t run, memory& mem, proposer& prop,
                     optimize_options opt, std::string gpu, evaluator evaluate, compile_fn compile,
                     std::function<void(const std::string&)> progress)
    : m_store(st), m_run(run), m_memory(mem), m_proposer(prop), m_opt(std::move(opt)),
      m_gpu(std::move(gpu)), m_evaluate(std::move(evaluate)), m_compile(std::move(compile)),
      m_progress(std::move(progress)) {}

bool is_reserved_strategy_name(std::string_view name) {
  std::string n;
  for (const char ch : name) {
    if (std::isspace(static_cast<unsigned char>(ch)) == 0) {
      n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  for (const char* reserved : {"baseline", "portfolio", "oracle", "import", "adversarial"}) {
    if (n == reserved || n.starts_with(std::string(reserved) + ".")) {
      return true;
    }
  }
  return false;
}

namespace {

// A task stopped by SIGINT/SIGTERM gets no outcome: `--resume` continues it from its last
// checkpoint.
void record_unless_stopped(store::store& st, const store::outcome_record& o) {
  if (stop_requested() == 0) {
    st.record_outcome(o);
  }
}

// The best so far, and how it was found; checkpointed after every evaluation.
struct progress_state {
  std::string source;
  std::string strategy = "baseline";
  json params = json::object();
  double speedup = 1; // over the baseline, as measured step by step
  double seconds = 0; // [s] median of the best
  int evaluations = 0;
  int evaluations_to_best = 0;
  int correct = 0;
  double gpu_seconds = 0;

  json to_json(const std::string& digest) const {
    return {{"source_digest", digest},
            {"strategy", strategy},
            {"params", params},
            {"speedup", speedup},
            {"seconds", seconds},
            {"evaluations", evaluations},
            {"evaluations_to_best", evaluations_to_best},
            {"correct", correct},
            {"gpu_seconds", gpu_seconds}};
  }
};

// The end of the candidate's compiler output, at most `chars` of it ("" when it did not build).
std::string build_log_tail(const eval::result& r, size_t chars) {
  const auto b = r.builds.find("candidate");
  if (b == r.builds.end()) {
    return "";
  }
  const std::string& log = b->second.log;
  return log.size() > chars ? log.substr(log.size() - chars) : log;
}

double gpu_seconds_of(const eval::result& r) {
  return r.worker_seconds;
}

std::string state_words(const bottleneck& b, double floor, double seconds) {
  return fmt::format("{} ({}): {}; the best runs at {:.0f}% of the roofline floor's speed",
                     profile::to_string(b.state), to_string(b.source), b.sentence,
                     100 * floor / seconds);
}

// The optimizer's parts that one task's search works with.
struct search_env {
  store::store& store;
  int64_t run;
  memory& mem;
  proposer& prop;
  const optimize_options& opt;
  const std::string& gpu;
  const evaluator& evaluate;
  const compile_fn& compile;
  const std::function<void(const std::string&)>& progress;

  void say(const std::string& line) const {
    if (progress) {
      progress(line);
    }
  }
};

// The task being optimized, fixed for its whole search.
struct task_frame {
  const search_env& env;
  const task::contract& c;
  const task::shape_case& shape;
  double floor = 0; // [s] the roofline floor at the shape
  int64_t task_row = 0;
  clock_type::time_point started;
};

// A pytorch task where PyTorch (or its shared libpython) is missing (blocked), or whose module
// could not be run to find its outputs (failed: the baseline cannot exist).
task_result unready_task(const task_frame& f, const pytorch::readiness& ready, task_result res) {
  outcome_inputs in;
  if (ready.reason.starts_with("blocked.")) {
    in.blocked = true;
    in.blocked_reason = ready.reason;
  } else {
    in.baseline_ok = false;
    in.baseline_reason = ready.reason;
  }
  const auto [o, reason] = classify_outcome(in);
  res.final = o;
  res.reason = reason;
  res.detail = ready.message;
  record_unless_stopped(f.env.store, {f.env.run, f.task_row, to_string(o), reason, std::nullopt});
  f.env.say(fmt::format("task {}: {} ({}){}{}", f.c.id, to_string(o), reason,
                        ready.message.empty() ? "" : ": ", ready.message));
  return res;
}

// The task's outcome from `in` and the totals of the search into `res`, recorded and said.
task_result finish_task(const task_frame& f, task_result& res, const outcome_inputs& in,
                        const progress_state& p) {
  const auto [o, reason] = classify_outcome(in);
  res.final = o;
  res.reason = reason;
  res.evaluations = p.evaluations;
  res.evaluations_to_best = p.evaluations_to_best;
  res.wall_seconds = std::chrono::duration<double>(clock_type::now() - f.started).count();
  res.candidates_per_minute = res.wall_seconds > 0 ? 60.0 * p.evaluations / res.wall_seconds : 0.0;
  record_unless_stopped(f.env.store,
                        {f.env.run, f.task_row, to_string(o), reason, res.best_candidate});
  f.env.say(fmt::format("task {}: {} ({}) after {} evaluations; best {} {:.3f}x over the baseline",
                        f.c.id, to_string(o), reason, p.evaluations, res.best_strategy,
                        res.speedup));
  return res;
}

// The task's baseline, verified and timed against itself, and the options of the search's steps.
struct verified_baseline {
  eval::candidate_input input;
  eval::result result;
  bool host = false; // an eager PyTorch baseline: it dispatches on the host
  eval::options step_opt;
  bool ok = false; // accepted; otherwise `in` says why and the task is finished
};

verified_baseline verify_baseline(const task_frame& f, task_result& res, outcome_inputs& in,
                                  progress_state& p) {
  const task::contract& c = f.c;
  const optimize_options& opt = f.env.opt;
  verified_baseline b;
  b.input = {read_file(c.baseline), c.baseline.filename().string(), "baseline", "baseline"};
  f.env.say(fmt::format("task {}: baseline", c.id));
  // With counters asked for, the baseline's come with its A/A run (its state starts the search)
  // and each later gate's with a new best. An eager PyTorch baseline dispatches on the host: the
  // counters' replay does not read it (the state starts analytic) but candidates' are still read.
  b.host = eval::dispatches_on_host(c, b.input);
  eval::options base_opt = opt.step;
  if (opt.step.profile != eval::profile_mode::none) {
    base_opt.profile = b.host ? eval::profile_mode::none : eval::profile_mode::always;
  }
  b.result = f.env.evaluate(c, b.input, b.input, base_opt);
  eval::record(f.env.store, f.env.run, c, b.input, b.input, b.result);
  p.source = b.input.source;
  if (b.result.final == eval::verdict::blocked) {
    in.blocked = true;
    in.blocked_reason = b.result.reason;
    return b;
  }
  if (!accepted(b.result)) {
    in.baseline_ok = false;
    in.baseline_reason = b.result.reason;
    return b;
  }
  // The options of this task's steps: where the baseline's counters could not be read, later
  // candidates' cannot either, and asking again would only cost a worker per new best.
  b.step_opt = opt.step;
  if (b.step_opt.profile != eval::profile_mode::none && !b.host && !has_counters(b.result)) {
    b.step_opt.profile = eval::profile_mode::none;
    f.env.say(fmt::format("task {}: no counters for the baseline ({}); states stay analytic", c.id,
                          counters_note(b.result)));
  }
  res.baseline_seconds = b.result.gate ? b.result.gate->median_baseline_s : 0.0;
  p.seconds = res.baseline_seconds;
  b.ok = true;
  return b;
}

// Resuming: the last checkpoint of this task in this run (names under `prefix`) into `p`.
void resume_from_checkpoint(const task_frame& f, const std::string& prefix, progress_state& p) {
  store::store& st = f.env.store;
  for (const auto& [name, digest] : st.attachments(f.env.run)) {
    if (name.rfind(prefix, 0) == 0) {
      const json cp = json::parse(st.get(digest));
      p.source = st.get(cp.at("source_digest"));
      p.strategy = cp.at("strategy");
      p.params = cp.at("params");
      p.speedup = cp.at("speedup");
      p.seconds = cp.at("seconds");
      p.evaluations = cp.at("evaluations");
      p.evaluations_to_best = cp.at("evaluations_to_best");
      p.correct = cp.at("correct");
      p.gpu_seconds = cp.at("gpu_seconds");
    }
  }
  if (p.evaluations > 0) {
    f.env.say(fmt::format("task {}: resumed after {} evaluations, best {} {:.3f}x", f.c.id,
                          p.evaluations, p.strategy, p.speedup));
  }
}

// The search's budget, counted from the moment the baseline was verified.
struct search_budget {
  const optimize_options& opt;
  clock_type::time_point started;

  // The limit of the budget that is reached, if any.
  std::optional<search_stop> limit_reached(const progress_state& p) const {
    if (stop_requested() != 0) {
      return search_stop::interrupted;
    }
    if (clock_type::now() - started > opt.limits.wall) {
      return search_stop::wall_budget;
    }
    if (opt.limits.evaluations > 0 && p.evaluations >= opt.limits.evaluations) {
      return search_stop::evaluation_budget;
    }
    if (opt.limits.gpu_seconds > 0 && p.gpu_seconds >= opt.limits.gpu_seconds) {
      return search_stop::gpu_budget;
    }
    return std::nullopt;
  }
  bool left(const progress_state& p) const { return !limit_reached(p); }
};

// What the search's steps read and do not change.
struct search_setup {
  const task_frame& frame;
  const verified_baseline& baseline;
  const search_budget& budget;
  std::string checkpoint_prefix; // "checkpoint/<task>/"
  std::vector<const strategy*> applicable;
  shape_features features;
};

// What the search carries from step to step.
struct search_state {
  progress_state p; // the best so far
  // The bottleneck state of the best so far (the baseline's first): it keys memory, ranks the
  // strategies and goes into every step's record, experience and prompt.
  bottleneck state;
  memory_key key;
  std::vector<failure_note> failures;
  bool exhausted = false; // the proposer has nothing more to offer
};

// What the proposers are told at step `step`.
proposal_context step_context(const search_setup& su, const search_state& s, const task_result& res,
                              int step) {
  const task_frame& f = su.frame;
  const progress_state& p = s.p;
  proposal_context ctx;
  ctx.task = &f.c;
  ctx.shape = f.shape.name;
  ctx.gpu = f.env.gpu;
  ctx.step = step;
  ctx.best_source = p.source;
  ctx.best_strategy = p.strategy;
  ctx.best_params = p.params;
  ctx.baseline_seconds = res.baseline_seconds;
  ctx.best_seconds = p.seconds;
  ctx.floor_seconds = f.floor;
  ctx.state = state_words(s.state, f.floor, p.seconds);
  ctx.metrics = {{"state", profile::to_string(s.state.state)},
                 {"source", to_string(s.state.source)},
                 {"memory_key", s.key.to_string()},
                 {"numbers", s.state.numbers},
                 {"floor_fraction", f.floor / p.seconds},
                 {"speedup_over_baseline", p.speedup}};
  ctx.retrieved =
      f.env.mem.rank(f.c, f.env.gpu, su.applicable, s.key, {f.env.opt.exploration, f.env.opt.seed});
  ctx.recent_failures = s.failures;
  return ctx;
}

// The step's rollouts: a proposal from each that gives one (a refusal is noted as a failure).
std::vector<proposal> collect_proposals(const search_env& env, proposal_context& ctx,
                                        search_state& s, task_result& res, int step) {
  std::vector<proposal> proposals;
  for (int r = 0; r < env.opt.rollouts; ++r) {
    ctx.rollout = r;
    auto pr = env.prop.propose(ctx);
    if (pr.candidate && is_reserved_strategy_name(pr.candidate->strategy)) {
      pr.failure = "propose.reserved_strategy";
      pr.message = fmt::format("a proposal named its strategy \"{}\", a name reserved for "
                               "where a candidate comes from; refused",
                               pr.candidate->strategy);
      pr.candidate.reset();
    }
    if (!pr.candidate) {
      s.exhausted = pr.exhausted;
      s.failures.push_back({"", json::object(), "propose", pr.failure, pr.message});
      res.steps.push_back({{"step", step},
                           {"rollout", r},
                           {"proposal_failure", pr.failure},
                           {"message", pr.message}});
      if (pr.exhausted) {
        break;
      }
      continue;
    }
    proposals.push_back(*pr.candidate);
  }
  return proposals;
}

eval::candidate_input proposal_input(const proposal& prop) {
  return {prop.source, prop.strategy + ".cu", "proposer", prop.strategy, prop.params};
}

// The staged evaluation of `prop` against `best`, with a bounded repair turn for proposers that
// can (the LLM) when it did not build or verify; `prop` becomes the repaired proposal.
staged_result evaluate_with_repair(const search_setup& su, const proposal_context& ctx,
                                   const eval::candidate_input& cand,
                                   const eval::candidate_input& best, proposal& prop,
                                   search_state& s, task_result& res) {
  const task_frame& f = su.frame;
  const search_env& env = f.env;
  const eval::options& step_opt = su.baseline.step_opt;
  auto staged = evaluate_staged(env.evaluate, f.c, cand, best, step_opt, env.opt.screening);
  const auto& r = staged.result;
  // The built-in proposer proposes anew instead.
  if ((r.reason.rfind("build.", 0) == 0 || r.reason.rfind("verify.", 0) == 0) &&
      env.prop.name() != "builtin") {
    auto fixed = env.prop.repair(ctx, prop, r.message + "\n" + build_log_tail(r, 4000));
    if (fixed.candidate) {
      env.store.record_experience({0,
                                   "",
                                   env.run,
                                   f.c.id,
                                   task::to_string(f.c.fam),
                                   {},
                                   f.shape.name,
                                   task::to_string(f.c.inputs[0].type),
                                   env.gpu,
                                   std::nullopt,
                                   profile::to_string(s.state.state),
                                   prop.strategy,
                                   prop.params,
                                   prop.predicted_speedup,
                                   std::nullopt,
                                   false,
                                   r.reason});
      ++s.p.evaluations;
      res.best_after_evaluation.push_back(s.p.speedup);
      prop = *fixed.candidate;
      staged = evaluate_staged(env.evaluate, f.c, proposal_input(prop), best, step_opt,
                               env.opt.screening);
    }
  }
  return staged;
}

// Memory safety before an improvement may become the best: the sanitizers at the check shapes.
// A finding turns the improvement into a rejection (sanitize.<tool>, into `r`) and the search
// goes on. The note for the step's record (null when the sanitizers did not run).
json sanitize_improvement(const search_setup& su, int step, const proposal& prop,
                          const eval::candidate_input& best, eval::result& r, progress_state& p) {
  const task_frame& f = su.frame;
  const search_env& env = f.env;
  if (r.final != eval::verdict::improved || !env.opt.sanitize) {
    return json();
  }
  env.say(fmt::format("task {} step {}: sanitizing {}", f.c.id, step, prop.strategy));
  eval::options so = su.baseline.step_opt;
  so.sanitize = true;
  so.verify_only = true;
  const eval::candidate_input current = proposal_input(prop);
  const auto san = env.evaluate(f.c, current, best, so);
  eval::record(env.store, env.run, f.c, current, best, san);
  p.gpu_seconds += gpu_seconds_of(san);
  json note = {
      {"verdict", eval::to_string(san.final)}, {"reason", san.reason}, {"seconds", san.seconds}};
  if (!accepted(san)) {
    note["timing_verdict"] = eval::to_string(r.final);
    env.say(fmt::format("task {} step {}: {} rejected by the sanitizers ({})", f.c.id, step,
                        prop.strategy, san.reason));
    r = san;
  }
  return note;
}

// The experience of evaluating `prop` (result `r`) from the best `s.p` in state `s.state`.
store::experience experience_of(const search_setup& su, const search_state& s, const proposal& prop,
                                const eval::result& r) {
  const task_frame& f = su.frame;
  const shape_features& features = su.features;
  store::experience e;
  e.run = f.env.run;
  e.task_id = f.c.id;
  e.family = task::to_string(f.c.fam);
  e.op_features = {{"extent", features.extent},
                   {"inner", features.inner},
                   {"outer", features.outer},
                   {"m", features.m},
                   {"n", features.n},
                   {"k", features.k},
                   {"batch", features.batch},
                   {"elements", features.elements},
                   {"shape_class", s.key.shape.to_string()},
                   {"bottleneck",
                    {{"state", profile::to_string(s.state.state)},
                     {"source", to_string(s.state.source)},
                     {"numbers", s.state.numbers}}}};
  e.shape = f.shape.name;
  e.dtype = task::to_string(f.c.inputs[0].type);
  e.gpu = f.env.gpu;
  e.state_before = profile::to_string(s.state.state);
  e.strategy = prop.strategy;
  e.params = prop.params;
  e.predicted_speedup = prop.predicted_speedup * s.p.speedup;
  e.correct = accepted(r);
  e.failure_reason = e.correct ? "" : r.reason;
  const double vs_best = r.gate ? r.gate->speedup : 0.0;
  if (e.correct && vs_best > 0) {
    e.measured_speedup = vs_best * s.p.speedup;
  }
  return e;
}

// What went into one evaluation's entry of task_result::steps.
struct step_facts {
  int step = 0;
  const proposal& prop;
  const eval::result& result;
  const staged_result& staged;
  const json& why;
  const store::experience& experience;
  const json& sanitize_note;
};

json step_record_of(const step_facts& s) {
  const eval::result& r = s.result;
  json step_record{{"step", s.step},
                   {"strategy", s.prop.strategy},
                   {"params", s.prop.params},
                   {"verdict", eval::to_string(r.final)},
                   {"reason", r.reason},
                   {"hypothesis", s.prop.hypothesis},
                   {"predicted_speedup", s.prop.predicted_speedup},
                   {"why", s.why},
                   {"stage", s.staged.to_json()}};
  if (r.reason.rfind("build.", 0) == 0) {
    step_record["build_log_tail"] = build_log_tail(r, 1500);
  }
  if (s.experience.measured_speedup) {
    step_record["measured_speedup_vs_baseline"] = *s.experience.measured_speedup;
  }
  if (!s.sanitize_note.is_null()) {
    step_record["sanitize"] = s.sanitize_note;
  }
  return step_record;
}

// An improvement becomes the best: its state drives the next choices.
void adopt_new_best(const search_setup& su, search_state& s, const proposal& prop,
                    const eval::result& r, double measured_speedup, json& step_record) {
  const task_frame& f = su.frame;
  progress_state& p = s.p;
  p.source = prop.source;
  p.strategy = prop.strategy;
  p.params = prop.params;
  p.speedup = measured_speedup;
  p.seconds = r.gate->median_candidate_s;
  p.evaluations_to_best = p.evaluations;
  f.env.say(
      fmt::format("task {}: new best {} {:.3f}x over the baseline, {:.0f}% of the floor's speed",
                  f.c.id, p.strategy, p.speedup, 100 * f.floor / p.seconds));
  s.state = assess(f.c, f.shape, p.seconds, &r);
  s.key.state = s.state.state;
  step_record["new_state"] = s.state.to_json();
}

// One proposal of step `step`: evaluated against the best, sanitized when it improves,
// remembered, recorded in `res` and checkpointed.
void evaluate_proposal(const search_setup& su, const proposal_context& ctx, proposal prop,
                       search_state& s, task_result& res, int step) {
  const task_frame& f = su.frame;
  const search_env& env = f.env;
  progress_state& p = s.p;
  const eval::candidate_input cand = proposal_input(prop);
  // The best is trusted as the baseline only when it is the task's own baseline, by its
  // source: never by the name a proposer gave it.
  const eval::candidate_input best{p.source, p.strategy + ".cu",
                                   p.source == su.baseline.input.source ? "baseline" : "proposer",
                                   p.strategy, p.params};
  env.say(fmt::format("task {} step {}: {} {}", f.c.id, step, prop.strategy, prop.params.dump()));
  const json why = choice_record(s.state, ctx, prop);
  const auto staged = evaluate_with_repair(su, ctx, cand, best, prop, s, res);
  auto r = staged.result;
  eval::record(env.store, env.run, f.c, cand, best, r);
  ++p.evaluations;
  p.gpu_seconds += gpu_seconds_of(r);
  const json sanitize_note = sanitize_improvement(su, step, prop, best, r, p);
  const store::experience e = experience_of(su, s, prop, r);
  if (e.measured_speedup) {
    ++p.correct;
  }
  env.mem.remember(e);
  json step_record = step_record_of({step, prop, r, staged, why, e, sanitize_note});
  res.stages[to_string(staged.reached) +
             (staged.stopped_because.empty() ? "" : ":" + staged.stopped_because)] += 1;
  if (!e.correct) {
    s.failures.push_back(
        {prop.strategy, prop.params, "evaluate", r.reason, r.message.substr(0, 2000)});
  }
  res.steps.push_back(step_record);
  if (r.final == eval::verdict::improved && r.gate) {
    adopt_new_best(su, s, prop, r, *e.measured_speedup, step_record);
    res.steps.back() = step_record;
  }
  res.best_after_evaluation.push_back(p.speedup);
  const auto blob = env.store.put(p.to_json(env.store.put(p.source).digest).dump());
  env.store.attach(env.run, fmt::format("{}{:04d}", su.checkpoint_prefix, p.evaluations),
                   blob.digest);
}

// One step of the search: its proposals, compiled ahead and evaluated in turn while the budget
// lasts.
void run_step(const search_setup& su, search_state& s, task_result& res, int step) {
  const task_frame& f = su.frame;
  proposal_context ctx = step_context(su, s, res, step);
  std::vector<proposal> proposals = collect_proposals(f.env, ctx, s, res, step);
  // A compile queue ahead of the evaluator: every proposal of the step starts compiling at
  // once, on the CPU, and each evaluation (serial, on the GPU) waits only for its own build.
  std::vector<std::future<void>> builds;
  if (f.env.compile) {
    for (const auto& prop : proposals) {
      builds.push_back(std::async(std::launch::async, [&, prop] {
        f.env.compile(f.c, proposal_input(prop), su.baseline.step_opt);
      }));
    }
  }
  for (size_t pi = 0; pi < proposals.size(); ++pi) {
    if (pi < builds.size()) {
      builds[pi].get();
    }
    if (!su.budget.left(s.p)) {
      break;
    }
    evaluate_proposal(su, ctx, proposals[pi], s, res, step);
  }
  for (auto& b : builds) {
    if (b.valid()) {
      b.get();
    }
  }
}

// Why the search loop ended.
search_stop stop_reason(const search_setup& su, const search_state& s, const outcome_inputs& in) {
  if (in.no_applicable_strategy) {
    return search_stop::no_strategy;
  }
  if (s.exhausted) {
    return search_stop::proposals_exhausted;
  }
  if (const auto limit = su.budget.limit_reached(s.p)) {
    return *limit;
  }
  if (su.frame.floor / s.p.seconds >= su.frame.env.opt.target_floor_fraction) {
    return search_stop::floor_target;
  }
  return search_stop::steps;
}

// The final gate: the best against the baseline, full protocol.
void confirm_best(const task_frame& f, const verified_baseline& b, const progress_state& p,
                  task_result& res, outcome_inputs& in) {
  const search_env& env = f.env;
  env.say(fmt::format("task {}: confirming {} against the baseline", f.c.id, p.strategy));
  const eval::candidate_input best{p.source, p.strategy + ".cu", "proposer", p.strategy, p.params};
  const auto confirm = env.evaluate(f.c, best, b.input, env.opt.confirm);
  eval::record(env.store, env.run, f.c, best, b.input, confirm);
  in.confirmation = confirm.final;
  in.confirmation_reason = confirm.reason;
  if (accepted(confirm) && confirm.gate) {
    res.speedup = confirm.gate->speedup;
    res.best_seconds = confirm.gate->median_candidate_s;
    res.baseline_seconds = confirm.gate->median_baseline_s;
    res.floor_fraction = f.floor / res.best_seconds;
  }
  if (confirm.final != eval::verdict::improved) {
    res.speedup = accepted(confirm) ? res.speedup : 1.0;
  }
  const auto rows = env.store.evaluations_of_run(env.run);
  if (!rows.empty()) {
    res.best_candidate = rows.back().record.candidate;
  }
}

} // namespace

task_result optimizer::optimize(const task::contract& given) {
  const auto started = clock_type::now();
  // A pytorch task is made evaluable first (its module described, its oracle module and eager
  // baseline generated); a native one is used as it is.
  task::contract ready_contract;
  pytorch::readiness ready{true, "", ""};
  if (given.kind == task::task_kind::pytorch) {
    ready_contract = given;
    ready = pytorch::make_ready(find_project_root(), ready_contract);
  }
  // What the proposers are handed points at the caller's contract where it is used as it is.
  const task::contract& c = given.kind == task::task_kind::pytorch ? ready_contract : given;
  const search_env env{m_store, m_run,      m_memory,  m_proposer, m_opt,
                       m_gpu,   m_evaluate, m_compile, m_progress};
  task_result res;
  res.task = c.id;
  res.lowering = c.lowering;
  const auto& shape = c.shape(m_opt.step.shape);
  const double floor = task::floor_seconds(c, shape, m_opt.step.ceilings);
  const task_frame f{env, c, shape, floor, m_store.record_task(c), started};
  if (!ready.ok) {
    return unready_task(f, ready, res);
  }
  outcome_inputs in;
  search_state s;
  const verified_baseline baseline = verify_baseline(f, res, in, s.p);
  if (!baseline.ok) {
    return finish_task(f, res, in, s.p);
  }
  // The search's budget starts here: what came before is the price of a verified baseline.
  const search_budget budget{m_opt, clock_type::now()};
  // A queued evaluation waits no longer than the budget (the confirmation below is not cut).
  std::optional<wait_limit> budget_end(std::in_place, budget.started + m_opt.limits.wall);
  res.baseline_wall_seconds = std::chrono::duration<double>(budget.started - started).count();
  s.p.gpu_seconds += gpu_seconds_of(baseline.result);
  const search_setup su{f,
                        baseline,
                        budget,
                        fmt::format("checkpoint/{}/", c.id),
                        strategies_for(c),
                        features_of(c, shape)};
  resume_from_checkpoint(f, su.checkpoint_prefix, s.p);
  const eval::result* base = &baseline.result;
  s.state = assess(c, shape, s.p.seconds, s.p.source == baseline.input.source ? base : nullptr);
  res.baseline_state = assess(c, shape, res.baseline_seconds, base).to_json();
  s.key = {c.fam, s.state.state, classify_shape(su.features)};
  // The built-in proposer draws from the strategy library only: with nothing applicable the
  // search is over before it starts.
  if (su.applicable.empty() && m_proposer.name() == "builtin" && s.p.evaluations == 0) {
    if (c.not_lowered.empty()) {
      env.say(fmt::format("task {}: no strategy of the library applies", c.id));
    } else {
      // An imported task no lowering covers: the ops that stopped it, each with its reason.
      env.say(fmt::format("task {}: no strategy of the library applies: not lowered: {}", c.id,
                          fmt::join(c.not_lowered, "; ")));
    }
    res.unsupported = c.not_lowered;
    in.no_applicable_strategy = true;
    s.exhausted = true;
  }
  for (int step = 0; step < m_opt.steps && !s.exhausted && budget.left(s.p) &&
                     floor / s.p.seconds < m_opt.target_floor_fraction;
       ++step) {
    run_step(su, s, res, step);
  }
  res.stopped_because = stop_reason(su, s, in);
  in.stopped = res.stopped_because;
  res.final_state = s.state.to_json();
  in.evaluated = s.p.evaluations;
  in.correct = s.p.correct;
  res.best_strategy = s.p.strategy;
  res.best_params = s.p.params;
  res.best_seconds = s.p.seconds;
  res.floor_fraction = floor / s.p.seconds;
  budget_end.reset();
  // The final gate, not once stopped: the run is interrupted and `--resume` continues it.
  if (s.p.source != baseline.input.source && stop_requested() == 0) {
    confirm_best(f, baseline, s.p, res, in);
  }
  return finish_task(f, res, in, s.p);
}

} // namespace kb::search
