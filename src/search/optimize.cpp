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
    return {outcome::failed, "baseline." + in.baseline_reason};
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
          {"unsupported", unsupported}};
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
  const auto say = [&](const std::string& line) {
    if (m_progress) {
      m_progress(line);
    }
  };
  task_result res;
  res.task = c.id;
  res.lowering = c.lowering;
  const auto& shape = c.shape(m_opt.step.shape);
  const double floor = task::floor_seconds(c, shape, m_opt.step.ceilings);
  const int64_t task_row = m_store.record_task(c);
  outcome_inputs in;
  if (!ready.ok) {
    // A pytorch task where PyTorch (or its shared libpython) is missing (blocked), or whose
    // module could not be run to find its outputs (failed: the baseline cannot exist).
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
    record_unless_stopped(m_store, {m_run, task_row, to_string(o), reason, std::nullopt});
    say(fmt::format("task {}: {} ({})", c.id, to_string(o), reason));
    return res;
  }
  const eval::candidate_input baseline{read_file(c.baseline), c.baseline.filename().string(),
                                       "baseline", "baseline"};
  const auto finish = [&](const progress_state& p) {
    const auto [o, reason] = classify_outcome(in);
    res.final = o;
    res.reason = reason;
    res.evaluations = p.evaluations;
    res.evaluations_to_best = p.evaluations_to_best;
    res.wall_seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    res.candidates_per_minute =
        res.wall_seconds > 0 ? 60.0 * p.evaluations / res.wall_seconds : 0.0;
    record_unless_stopped(m_store, {m_run, task_row, to_string(o), reason, res.best_candidate});
    say(fmt::format("task {}: {} ({}) after {} evaluations; best {} {:.3f}x over the baseline",
                    c.id, to_string(o), reason, p.evaluations, res.best_strategy, res.speedup));
    return res;
  };

  // The baseline, verified and timed against itself.
  say(fmt::format("task {}: baseline", c.id));
  // With counters asked for, the baseline's come with its A/A run (its state starts the search)
  // and each later gate's with a new best. An eager PyTorch baseline dispatches on the host: the
  // counters' replay does not read it (the state starts analytic) but candidates' are still read.
  const bool host_baseline = eval::dispatches_on_host(c, baseline);
  eval::options base_opt = m_opt.step;
  if (m_opt.step.profile != eval::profile_mode::none) {
    base_opt.profile = host_baseline ? eval::profile_mode::none : eval::profile_mode::always;
  }
  const auto base = m_evaluate(c, baseline, baseline, base_opt);
  eval::record(m_store, m_run, c, baseline, baseline, base);
  progress_state p;
  p.source = baseline.source;
  if (base.final == eval::verdict::blocked) {
    in.blocked = true;
    in.blocked_reason = base.reason;
    return finish(p);
  }
  if (!accepted(base)) {
    in.baseline_ok = false;
    in.baseline_reason = base.reason;
    return finish(p);
  }
  // The options of this task's steps: where the baseline's counters could not be read, later
  // candidates' cannot either, and asking again would only cost a worker per new best.
  eval::options step_opt = m_opt.step;
  if (step_opt.profile != eval::profile_mode::none && !host_baseline && !has_counters(base)) {
    step_opt.profile = eval::profile_mode::none;
    say(fmt::format("task {}: no counters for the baseline ({}); states stay analytic", c.id,
                    counters_note(base)));
  }
  res.baseline_seconds = base.gate ? base.gate->median_baseline_s : 0.0;
  p.seconds = res.baseline_seconds;
  // The search's budget starts here: what came before is the price of a verified baseline.
  const auto search_started = clock_type::now();
  // A queued evaluation waits no longer than the budget (the confirmation below is not cut).
  std::optional<wait_limit> budget_end(std::in_place, search_started + m_opt.limits.wall);
  res.baseline_wall_seconds = std::chrono::duration<double>(search_started - started).count();
  p.gpu_seconds += gpu_seconds_of(base);

  // Resuming: the last checkpoint of this task in this run.
  const std::string prefix = fmt::format("checkpoint/{}/", c.id);
  for (const auto& [name, digest] : m_store.attachments(m_run)) {
    if (name.rfind(prefix, 0) == 0) {
      const json cp = json::parse(m_store.get(digest));
      p.source = m_store.get(cp.at("source_digest"));
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
    say(fmt::format("task {}: resumed after {} evaluations, best {} {:.3f}x", c.id, p.evaluations,
                    p.strategy, p.speedup));
  }

  // The limit of the budget that is reached, if any.
  const auto limit_reached = [&]() -> std::optional<search_stop> {
    if (stop_requested() != 0) {
      return search_stop::interrupted;
    }
    if (clock_type::now() - search_started > m_opt.limits.wall) {
      return search_stop::wall_budget;
    }
    if (m_opt.limits.evaluations > 0 && p.evaluations >= m_opt.limits.evaluations) {
      return search_stop::evaluation_budget;
    }
    if (m_opt.limits.gpu_seconds > 0 && p.gpu_seconds >= m_opt.limits.gpu_seconds) {
      return search_stop::gpu_budget;
    }
    return std::nullopt;
  };
  const auto budget_left = [&] { return !limit_reached(); };
  std::vector<failure_note> failures;
  const auto applicable = strategies_for(c);
  const auto features = features_of(c, shape);
  // The bottleneck state of the best so far (the baseline's first): it keys memory, ranks the
  // strategies and goes into every step's record, experience and prompt.
  bottleneck state = assess(c, shape, p.seconds, p.source == baseline.source ? &base : nullptr);
  res.baseline_state = assess(c, shape, res.baseline_seconds, &base).to_json();
  memory_key key{c.fam, state.state, classify_shape(features)};
  bool exhausted = false;
  // The built-in proposer draws from the strategy library only: with nothing applicable the
  // search is over before it starts.
  if (applicable.empty() && m_proposer.name() == "builtin" && p.evaluations == 0) {
    if (c.not_lowered.empty()) {
      say(fmt::format("task {}: no strategy of the library applies", c.id));
    } else {
      // An imported task no lowering covers: the ops that stopped it, each with its reason.
      say(fmt::format("task {}: no strategy of the library applies: not lowered: {}", c.id,
                      fmt::join(c.not_lowered, "; ")));
    }
    res.unsupported = c.not_lowered;
    in.no_applicable_strategy = true;
    exhausted = true;
  }
  for (int step = 0; step < m_opt.steps && !exhausted && budget_left() &&
                     floor / p.seconds < m_opt.target_floor_fraction;
       ++step) {
    proposal_context ctx;
    ctx.task = &c;
    ctx.shape = shape.name;
    ctx.gpu = m_gpu;
    ctx.step = step;
    ctx.best_source = p.source;
    ctx.best_strategy = p.strategy;
    ctx.best_params = p.params;
    ctx.baseline_seconds = res.baseline_seconds;
    ctx.best_seconds = p.seconds;
    ctx.floor_seconds = floor;
    ctx.state = state_words(state, floor, p.seconds);
    ctx.metrics = {{"state", profile::to_string(state.state)},
                   {"source", to_string(state.source)},
                   {"memory_key", key.to_string()},
                   {"numbers", state.numbers},
                   {"floor_fraction", floor / p.seconds},
                   {"speedup_over_baseline", p.speedup}};
    ctx.retrieved = m_memory.rank(c, m_gpu, applicable, key, {m_opt.exploration, m_opt.seed});
    ctx.recent_failures = failures;
    std::vector<proposal> proposals;
    for (int r = 0; r < m_opt.rollouts; ++r) {
      ctx.rollout = r;
      auto pr = m_proposer.propose(ctx);
      if (pr.candidate && is_reserved_strategy_name(pr.candidate->strategy)) {
        pr.failure = "propose.reserved_strategy";
        pr.message = fmt::format("a proposal named its strategy \"{}\", a name reserved for "
                                 "where a candidate comes from; refused",
                                 pr.candidate->strategy);
        pr.candidate.reset();
      }
      if (!pr.candidate) {
        exhausted = pr.exhausted;
        failures.push_back({"", json::object(), "propose", pr.failure, pr.message});
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
    // A compile queue ahead of the evaluator: every proposal of the step starts compiling at
    // once, on the CPU, and each evaluation (serial, on the GPU) waits only for its own build.
    std::vector<std::future<void>> builds;
    if (m_compile) {
      for (const auto& prop : proposals) {
        builds.push_back(std::async(std::launch::async, [&, prop] {
          m_compile(c, {prop.source, prop.strategy + ".cu", "proposer", prop.strategy, prop.params},
                    step_opt);
        }));
      }
    }
    const auto wait_builds = [&] {
      for (auto& b : builds) {
        if (b.valid()) {
          b.get();
        }
      }
    };
    for (size_t pi = 0; pi < proposals.size(); ++pi) {
      auto& prop = proposals[pi];
      if (pi < builds.size()) {
        builds[pi].get();
      }
      if (!budget_left()) {
        break;
      }
      const eval::candidate_input cand{prop.source, prop.strategy + ".cu", "proposer",
                                       prop.strategy, prop.params};
      // The best is trusted as the baseline only when it is the task's own baseline, by its
      // source: never by the name a proposer gave it.
      const eval::candidate_input best{p.source, p.strategy + ".cu",
                                       p.source == baseline.source ? "baseline" : "proposer",
                                       p.strategy, p.params};
      say(fmt::format("task {} step {}: {} {}", c.id, step, prop.strategy, prop.params.dump()));
      const json why = choice_record(state, ctx, prop);
      auto staged = evaluate_staged(m_evaluate, c, cand, best, step_opt, m_opt.screening);
      auto r = staged.result;
      // A bounded repair turn for proposers that can (the LLM); the built-in one proposes anew.
      if ((r.reason.rfind("build.", 0) == 0 || r.reason.rfind("verify.", 0) == 0) &&
          m_proposer.name() != "builtin") {
        auto fixed = m_proposer.repair(ctx, prop, r.message + "\n" + build_log_tail(r, 4000));
        if (fixed.candidate) {
          m_store.record_experience({0,
                                     "",
                                     m_run,
                                     c.id,
                                     task::to_string(c.fam),
                                     {},
                                     shape.name,
                                     task::to_string(c.inputs[0].type),
                                     m_gpu,
                                     std::nullopt,
                                     profile::to_string(state.state),
                                     prop.strategy,
                                     prop.params,
                                     prop.predicted_speedup,
                                     std::nullopt,
                                     false,
                                     r.reason});
          ++p.evaluations;
          res.best_after_evaluation.push_back(p.speedup);
          prop = *fixed.candidate;
          staged = evaluate_staged(
              m_evaluate, c,
              {prop.source, prop.strategy + ".cu", "proposer", prop.strategy, prop.params}, best,
              step_opt, m_opt.screening);
          r = staged.result;
        }
      }
      eval::record(m_store, m_run, c, cand, best, r);
      ++p.evaluations;
      p.gpu_seconds += gpu_seconds_of(r);
      // Memory safety before it may become the best: the sanitizers at the check shapes. A
      // finding turns the improvement into a rejection (sanitize.<tool>) and the search goes on.
      json sanitize_note;
      if (r.final == eval::verdict::improved && m_opt.sanitize) {
        say(fmt::format("task {} step {}: sanitizing {}", c.id, step, prop.strategy));
        eval::options so = step_opt;
        so.sanitize = true;
        so.verify_only = true;
        const eval::candidate_input current{prop.source, prop.strategy + ".cu", "proposer",
                                            prop.strategy, prop.params};
        const auto san = m_evaluate(c, current, best, so);
        eval::record(m_store, m_run, c, current, best, san);
        p.gpu_seconds += gpu_seconds_of(san);
        sanitize_note = {{"verdict", eval::to_string(san.final)},
                         {"reason", san.reason},
                         {"seconds", san.seconds}};
        if (!accepted(san)) {
          sanitize_note["timing_verdict"] = eval::to_string(r.final);
          say(fmt::format("task {} step {}: {} rejected by the sanitizers ({})", c.id, step,
                          prop.strategy, san.reason));
          r = san;
        }
      }
      store::experience e;
      e.run = m_run;
      e.task_id = c.id;
      e.family = task::to_string(c.fam);
      e.op_features = {{"extent", features.extent},
                       {"inner", features.inner},
                       {"outer", features.outer},
                       {"m", features.m},
                       {"n", features.n},
                       {"k", features.k},
                       {"batch", features.batch},
                       {"elements", features.elements},
                       {"shape_class", key.shape.to_string()},
                       {"bottleneck",
                        {{"state", profile::to_string(state.state)},
                         {"source", to_string(state.source)},
                         {"numbers", state.numbers}}}};
      e.shape = shape.name;
      e.dtype = task::to_string(c.inputs[0].type);
      e.gpu = m_gpu;
      e.state_before = profile::to_string(state.state);
      e.strategy = prop.strategy;
      e.params = prop.params;
      e.predicted_speedup = prop.predicted_speedup * p.speedup;
      e.correct = accepted(r);
      e.failure_reason = e.correct ? "" : r.reason;
      const double vs_best = r.gate ? r.gate->speedup : 0.0;
      if (e.correct && vs_best > 0) {
        e.measured_speedup = vs_best * p.speedup;
        ++p.correct;
      }
      m_memory.remember(e);
      json step_record{{"step", step},
                       {"strategy", prop.strategy},
                       {"params", prop.params},
                       {"verdict", eval::to_string(r.final)},
                       {"reason", r.reason},
                       {"hypothesis", prop.hypothesis},
                       {"predicted_speedup", prop.predicted_speedup},
                       {"why", why},
                       {"stage", staged.to_json()}};
      if (r.reason.rfind("build.", 0) == 0) {
        step_record["build_log_tail"] = build_log_tail(r, 1500);
      }
      res.stages[to_string(staged.reached) +
                 (staged.stopped_because.empty() ? "" : ":" + staged.stopped_because)] += 1;
      if (e.measured_speedup) {
        step_record["measured_speedup_vs_baseline"] = *e.measured_speedup;
      }
      if (!sanitize_note.is_null()) {
        step_record["sanitize"] = sanitize_note;
      }
      if (!e.correct) {
        failures.push_back(
            {prop.strategy, prop.params, "evaluate", r.reason, r.message.substr(0, 2000)});
      }
      res.steps.push_back(step_record);
      if (r.final == eval::verdict::improved && r.gate) {
        p.source = prop.source;
        p.strategy = prop.strategy;
        p.params = prop.params;
        p.speedup = *e.measured_speedup;
        p.seconds = r.gate->median_candidate_s;
        p.evaluations_to_best = p.evaluations;
        say(fmt::format(
            "task {}: new best {} {:.3f}x over the baseline, {:.0f}% of the floor's speed", c.id,
            p.strategy, p.speedup, 100 * floor / p.seconds));
        // A new best: its state drives the next choices.
        state = assess(c, shape, p.seconds, &r);
        key.state = state.state;
        step_record["new_state"] = state.to_json();
        res.steps.back() = step_record;
      }
      res.best_after_evaluation.push_back(p.speedup);
      const auto blob = m_store.put(p.to_json(m_store.put(p.source).digest).dump());
      m_store.attach(m_run, fmt::format("{}{:04d}", prefix, p.evaluations), blob.digest);
    }
    wait_builds();
  }
  if (in.no_applicable_strategy) {
    res.stopped_because = search_stop::no_strategy;
  } else if (exhausted) {
    res.stopped_because = search_stop::proposals_exhausted;
  } else if (const auto limit = limit_reached()) {
    res.stopped_because = *limit;
  } else if (floor / p.seconds >= m_opt.target_floor_fraction) {
    res.stopped_because = search_stop::floor_target;
  } else {
    res.stopped_because = search_stop::steps;
  }
  in.stopped = res.stopped_because;
  res.final_state = state.to_json();
  in.evaluated = p.evaluations;
  in.correct = p.correct;
  res.best_strategy = p.strategy;
  res.best_params = p.params;
  res.best_seconds = p.seconds;
  res.floor_fraction = floor / p.seconds;

  // The final gate: the best against the baseline, full protocol (not once stopped: the run is
  // interrupted and `--resume` continues it).
  budget_end.reset();
  if (p.source != baseline.source && stop_requested() == 0) {
    say(fmt::format("task {}: confirming {} against the baseline", c.id, p.strategy));
    const eval::candidate_input best{p.source, p.strategy + ".cu", "proposer", p.strategy,
                                     p.params};
    const auto confirm = m_evaluate(c, best, baseline, m_opt.confirm);
    eval::record(m_store, m_run, c, best, baseline, confirm);
    in.confirmation = confirm.final;
    in.confirmation_reason = confirm.reason;
    if (accepted(confirm) && confirm.gate) {
      res.speedup = confirm.gate->speedup;
      res.best_seconds = confirm.gate->median_candidate_s;
      res.baseline_seconds = confirm.gate->median_baseline_s;
      res.floor_fraction = floor / res.best_seconds;
    }
    if (confirm.final != eval::verdict::improved) {
      res.speedup = accepted(confirm) ? res.speedup : 1.0;
    }
    const auto rows = m_store.evaluations_of_run(m_run);
    if (!rows.empty()) {
      res.best_candidate = rows.back().record.candidate;
    }
  }
  return finish(p);
}

} // namespace kb::search
