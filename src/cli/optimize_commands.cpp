// `kblaster optimize` (the search, with live progress and a summary) and `kblaster memory`.
#include "cli/commands.hpp"
#include "cli/executor_options.hpp"
#include "cli/llm_options.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "sandbox/sandbox.hpp"
#include "search/builtin_proposer.hpp"
#include "search/memory.hpp"
#include "search/optimize.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>

namespace kb::cli {

namespace {

using nlohmann::json;

// The longest budget taken: 30 days.
constexpr long max_duration_seconds = 30L * 24 * 3600;

// Why a duration ("10m", "90s", "1h", "600") cannot be a budget, or "" when it can: it must be
// more than nothing and at most 30 days.
std::string duration_problem(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex("0*([0-9]{1,9})([smh]?)"))) {
    return "expected a duration such as 90s, 10m or 1h (at most 30 days), got \"" + text + "\"";
  }
  const long n = std::stol(m[1]);
  const std::string unit = m[2];
  const long seconds = unit == "h" ? n * 3600 : unit == "m" ? n * 60 : n;
  if (seconds <= 0) {
    return "\"" + text + "\" is no time at all: a budget must be at least 1s";
  }
  if (seconds > max_duration_seconds) {
    return "\"" + text + "\" is more than 30 days";
  }
  return "";
}

// "10m", "90s", "1h", "600" -> seconds.
std::chrono::seconds parse_duration(const std::string& text) {
  if (const auto problem = duration_problem(text); !problem.empty()) {
    fail_input("--budget {}: {}", text, problem);
  }
  std::smatch m;
  std::regex_match(text, m, std::regex("0*([0-9]{1,9})([smh]?)"));
  const long n = std::stol(m[1]);
  const std::string unit = m[2];
  return std::chrono::seconds(unit == "h" ? n * 3600 : unit == "m" ? n * 60 : n);
}

void say_line(const global_options& globals, const std::string& line) {
  if (!globals.quiet) {
    fmt::print("{}\n", line);
  }
}

void print_summary(const std::vector<search::task_result>& results) {
  fmt::print("\n{:<5} {:<15} {:<32} {:>11} {:>11} {:>9} {:>7} {:>6} {:>8}  {}\n", "task", "outcome",
             "reason", "baseline ms", "best ms", "speedup", "floor%", "evals", "to best",
             "best strategy");
  for (const auto& r : results) {
    if (r.baseline_seconds <= 0) {
      fmt::print("{:<5} {:<15} {:<32} {:>11} {:>11} {:>9} {:>7} {:>6} {:>8}  -\n", r.task,
                 search::to_string(r.final), r.reason, "-", "-", "-", "-", r.evaluations, "-");
      continue;
    }
    fmt::print("{:<5} {:<15} {:<32} {:>11.4f} {:>11.4f} {:>8.3f}x {:>6.1f}% {:>6} {:>8}  {} {}\n",
               r.task, search::to_string(r.final), r.reason, 1e3 * r.baseline_seconds,
               1e3 * r.best_seconds, r.speedup, 100 * r.floor_fraction, r.evaluations,
               r.evaluations_to_best, r.best_strategy, r.best_params.dump());
  }
}

// What an optimize run records of its options, so that `--resume` continues it as it began: the
// defaults are these member initialisers, and to_json/from_json below are the one mapping (a
// record missing a field, written by an older kblaster, gets the default).
struct run_settings {
  std::string task;
  std::string suite;
  std::string proposer = "builtin";
  int rollouts = 2;
  int steps = 8;
  std::string budget = "10m";
  std::string gpu_budget;
  int max_evals = 0;
  bool no_sandbox = false;
  uint64_t seed = 0;
  bool screen = true;
  double screen_margin = 0.05;
  bool no_sanitize = false;
  std::string counters = "cupti";
};

void to_json(json& j, const run_settings& s) {
  j = {{"task", s.task},
       {"suite", s.suite},
       {"proposer", s.proposer},
       {"rollouts", s.rollouts},
       {"steps", s.steps},
       {"budget", s.budget},
       {"gpu_budget", s.gpu_budget},
       {"max_evals", s.max_evals},
       {"no_sandbox", s.no_sandbox},
       {"seed", s.seed},
       {"screen", s.screen},
       {"screen_margin", s.screen_margin},
       {"no_sanitize", s.no_sanitize},
       {"counters", s.counters}};
}

void from_json(const json& j, run_settings& s) {
  const run_settings d;
  s.task = j.value("task", d.task);
  s.suite = j.value("suite", d.suite);
  s.proposer = j.value("proposer", d.proposer);
  s.rollouts = j.value("rollouts", d.rollouts);
  s.steps = j.value("steps", d.steps);
  s.budget = j.value("budget", d.budget);
  s.gpu_budget = j.value("gpu_budget", d.gpu_budget);
  s.max_evals = j.value("max_evals", d.max_evals);
  s.no_sandbox = j.value("no_sandbox", d.no_sandbox);
  s.seed = j.value("seed", d.seed);
  s.screen = j.value("screen", d.screen);
  s.screen_margin = j.value("screen_margin", d.screen_margin);
  s.no_sanitize = j.value("no_sanitize", d.no_sanitize);
  s.counters = j.value("counters", d.counters);
}

// `kblaster optimize`'s options as given on the command line: the run's settings and what only
// this invocation uses.
struct optimize_args {
  run_settings run;
  int64_t resume = 0;
  int64_t replay = 0;
  std::string json_out;
  int reuse_preflight = 0; // [s]
  llm_options llm_opts;
  executor_options exec_opts;
};

void add_optimize_options(CLI::App& cmd, optimize_args& a) {
  cmd.add_option("--task", a.run.task, "one task");
  cmd.add_option("--suite", a.run.suite, "every task of a suite");
  cmd.add_option("--proposer", a.run.proposer, "builtin (no network) or llm")
      ->check(CLI::IsMember({"builtin", "llm"}));
  cmd.add_option("--rollouts", a.run.rollouts, "candidates proposed per step")
      ->check(CLI::Range(1, 16));
  cmd.add_option("--steps", a.run.steps, "steps per task")->check(CLI::Range(1, 1000));
  // Checked while parsing, so a bad value is a usage error before any work starts.
  const CLI::Validator duration([](std::string& v) { return duration_problem(v); }, "DURATION");
  cmd.add_option("--budget", a.run.budget,
                 "wall time of each task's search, after its baseline (90s, 10m, 1h)")
      ->check(duration);
  cmd.add_option("--gpu-budget", a.run.gpu_budget, "time in evaluation workers per task")
      ->check(duration);
  cmd.add_option("--max-evals", a.run.max_evals, "candidate evaluations per task (0: no limit)");
  cmd.add_option("--resume", a.resume, "continue an interrupted optimize run (its id)");
  cmd.add_option("--replay", a.replay,
                 "serve the LLM's answers from this run's record, without the network");
  cmd.add_option("--json", a.json_out, "write the results as JSON here");
  cmd.add_option("--reuse-preflight", a.reuse_preflight,
                 "take the GPU checks of the preflight from a usable one of this store that "
                 "finished at most this many seconds ago on the same device (a pass of one "
                 "optimize per task); the store and device checks always run")
      ->check(CLI::Range(0, 86400));
  cmd.add_option("--seed", a.run.seed,
                 "order of untried strategies and neighbouring points (0: library order)");
  cmd.add_flag("--no-screen{false}", a.run.screen,
               "send every candidate through the step's gate (no screening timing first)");
  cmd.add_option("--screen-margin", a.run.screen_margin,
                 "the screen passes a candidate within this fraction of beating the best")
      ->check(CLI::Range(0.0, 0.5));
  cmd.add_option("--counters", a.run.counters,
                 "hardware counters for the bottleneck state of the baseline and of each new "
                 "best: cupti (in a worker job after the gate; analytic where they cannot be "
                 "read) or none (the analytic roofline only)")
      ->check(CLI::IsMember({"cupti", "none"}));
  sandbox::add_no_sandbox_flag(cmd, &a.run.no_sandbox);
  cmd.add_flag("--no-sanitize", a.run.no_sanitize,
               "do not run the sanitizers on a candidate before it becomes the best (recorded)");
  add_llm_options(cmd, a.llm_opts);
  add_executor_options(cmd, a.exec_opts);
}

// The run the search records into and its arguments: a new one (id 0 until it begins) with the
// command line's, or, with --resume, the interrupted run with its own.
struct optimize_run {
  int64_t id = 0;
  run_settings settings;
};

optimize_run resolve_run(const optimize_args& a, store::store& st) {
  optimize_run r{0, a.run};
  if (a.resume > 0) {
    const auto info = st.find_run(a.resume);
    if (!info || info->kind != "optimize") {
      fail_input("--resume {}: no optimize run with that id in {}", a.resume, st.dir().string());
    }
    r.settings = info->args.get<run_settings>();
    r.id = a.resume;
  }
  return r;
}

// The tasks the run's arguments name (one task or a suite).
std::vector<task::contract> tasks_of(const fs::path& root, const run_settings& s) {
  if (s.task.empty() == s.suite.empty()) {
    fail_input("give --task ID or --suite NAME (one of them)");
  }
  return s.task.empty() ? task::load_suite(root, s.suite)
                        : std::vector<task::contract>{task::find_task(root, s.task)};
}

// --json: the preflight, every task's result, what was evaluated and how (`extra`).
void write_results_json(const std::string& path, int64_t run, const preflight_report& report,
                        const std::vector<search::task_result>& results, const json& extra) {
  if (path.empty()) {
    return;
  }
  json j{{"run", run}, {"preflight", report.to_json()}, {"tasks", json::array()}};
  int evaluated = 0;
  double seconds = 0;
  for (const auto& r : results) {
    j["tasks"].push_back(r.to_json());
    evaluated += r.evaluations;
    seconds += r.wall_seconds;
  }
  j["candidates_evaluated"] = evaluated;
  j["candidates_per_minute"] = seconds > 0 ? 60.0 * evaluated / seconds : 0.0;
  j.update(extra);
  write_file_atomic(path, j.dump(2) + "\n");
}

// Nothing can be searched here: every task ends blocked, with the reason, in the store. The exit
// code.
int end_blocked(store::store& st, int64_t run, const std::vector<task::contract>& tasks,
                const preflight_report& report, const std::string& json_out) {
  std::vector<search::task_result> results;
  for (const auto& c : tasks) {
    search::task_result r;
    r.task = c.id;
    r.final = search::outcome::blocked;
    r.reason = "blocked.preflight." + report.checks.back().name;
    st.record_outcome({run, st.record_task(c), "blocked", r.reason, std::nullopt});
    results.push_back(r);
  }
  st.finish_run(run, store::run_status::finished, "blocked", report.reason);
  print_summary(results);
  write_results_json(json_out, run, report, results, json::object());
  fmt::print("\nGPU stages BLOCKED: {}\n", report.reason);
  return exit_code::blocked;
}

// The search's options from the run's arguments and the device's calibration.
search::optimize_options search_options_of(const run_settings& s, store::store& st,
                                           const global_options& globals) {
  search::optimize_options oo;
  oo.rollouts = s.rollouts;
  oo.steps = s.steps;
  oo.limits.wall = parse_duration(s.budget);
  if (!s.gpu_budget.empty()) {
    oo.limits.gpu_seconds = static_cast<double>(parse_duration(s.gpu_budget).count());
  }
  oo.limits.evaluations = s.max_evals;
  oo.step.cache_dir = default_cache_dir();
  oo.step.no_sandbox = s.no_sandbox;
  oo.step.sessions = 1;
  oo.step.seeds = 2;
  oo.step.timing.max_wall = 2.0;
  oo.step.profile = s.counters == "cupti" ? eval::profile_mode::improved : eval::profile_mode::none;
  oo.confirm = oo.step;
  oo.confirm.profile = eval::profile_mode::none;
  // The confirmation is a full evaluation: eval::options' own protocol (as `kblaster eval`).
  const eval::options full;
  oo.confirm.sessions = full.sessions;
  oo.confirm.seeds = full.seeds;
  oo.confirm.timing.max_wall = full.timing.max_wall;
  oo.sanitize = !s.no_sanitize;
  if (!oo.sanitize) {
    say_line(globals, "sanitize  OFF (--no-sanitize): candidates become the best unsanitized");
  }
  apply_device_calibration(oo.step, st, globals);
  oo.confirm.ceilings = oo.step.ceilings;
  oo.confirm.delta = oo.step.delta;
  oo.confirm.delta_source = oo.step.delta_source;
  oo.seed = s.seed;
  oo.screening.enabled = s.screen;
  oo.screening.margin = s.screen_margin;
  oo.screening.screen = search::screening_options(oo.step);
  return oo;
}

// The proposer of a local search, with the LLM client (and its recorder) it talks through.
struct proposer_parts {
  std::unique_ptr<search::proposer> prop;
  std::unique_ptr<llm::client> client;
  std::unique_ptr<llm::file_recorder> recorder;
};

proposer_parts make_proposer(const run_settings& s, const std::optional<llm_setup>& setup,
                             int64_t replay, store::store& st, int64_t run, search::memory& mem) {
  proposer_parts p;
  if (s.proposer == "llm") {
    if (replay > 0) {
      p.client = llm::client::replay(
          setup->client, llm::load_record(st.dir() / "llm" / fmt::format("run-{}", replay)));
    } else {
      p.recorder =
          std::make_unique<llm::file_recorder>(st.dir() / "llm" / fmt::format("run-{}", run));
      p.client = std::make_unique<llm::client>(setup->client, p.recorder.get());
    }
    p.prop = std::make_unique<llm::llm_proposer>(*p.client, setup->proposer);
  } else {
    p.prop = std::make_unique<search::builtin_proposer>(mem);
  }
  return p;
}

// Progress lines, each whole whatever thread says it (none with --quiet).
struct line_printer {
  const global_options& globals;
  std::mutex lock;

  void operator()(const std::string& line) {
    if (!globals.quiet) {
      std::lock_guard guard(lock);
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
  }
};

// The tasks of `tasks` without an outcome in the run yet (`--resume` skips the others).
std::vector<const task::contract*>
unfinished_tasks(store::store& st, int64_t run, const std::vector<task::contract>& tasks,
                 const std::function<void(const std::string&)>& say) {
  const auto done = st.outcomes_of_run(run);
  std::vector<const task::contract*> todo;
  for (const auto& c : tasks) {
    const int64_t row = st.record_task(c);
    if (std::any_of(done.begin(), done.end(),
                    [&](const store::outcome_record& o) { return o.task == row; })) {
      say(fmt::format("task {}: already finished in run {}", c.id, run));
      continue;
    }
    todo.push_back(&c);
  }
  return todo;
}

// What every task's optimizer is made with, besides its store, memory and proposer.
struct optimizer_parts {
  int64_t run = 0;
  const search::optimize_options& oo;
  const std::string& gpu;
  const search::evaluator& evaluate;
  const search::compile_fn& compile;
  const std::function<void(const std::string&)>& say;
};

// Tasks run at once, one per worker slot, each with its own store connection and memory; a task
// does not see the attempts other tasks of this run make meanwhile, so what it tries does not
// depend on how many GPUs there are. The results in the order of `todo`.
std::vector<search::task_result> optimize_at_once(const global_options& globals,
                                                  const optimizer_parts& parts, size_t slots,
                                                  const std::vector<const task::contract*>& todo,
                                                  line_printer& printer) {
  std::vector<std::optional<search::task_result>> out(todo.size());
  std::vector<std::string> errors;
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const size_t width = std::min(todo.size(), slots);
  for (size_t t = 0; t < width; ++t) {
    threads.emplace_back([&] {
      try {
        store::store tst(store::resolve_dir(globals.store));
        search::memory tmem(tst, parts.run);
        search::builtin_proposer tprop(tmem);
        search::optimizer topt(tst, parts.run, tmem, tprop, parts.oo, parts.gpu, parts.evaluate,
                               parts.compile, parts.say);
        for (size_t i = next++; i < todo.size(); i = next++) {
          out[i] = topt.optimize(*todo[i]);
        }
      } catch (const std::exception& e) {
        std::lock_guard guard(printer.lock);
        errors.push_back(e.what());
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  if (!errors.empty()) {
    fail("{}", errors.front());
  }
  std::vector<search::task_result> results;
  for (auto& r : out) {
    if (r) {
      results.push_back(std::move(*r));
    }
  }
  return results;
}

// The run's end: interrupted (resumable), or finished with its summary. The exit code, or none
// when interrupted.
std::optional<int> end_run(store::store& st, int64_t run, const optimize_args& a,
                           const preflight_report& report, const search::optimize_options& oo,
                           const std::vector<search::task_result>& results) {
  if (const int sig = stop_requested(); sig != 0) {
    // Stopped: the run stays resumable (tasks without an outcome continue from their
    // checkpoints).
    st.finish_run(run, store::run_status::interrupted, "interrupted", "run.interrupted");
    fmt::print(stderr, "run {} stopped by {}: continue it with kblaster optimize --resume {}\n",
               run, signal_name(sig), run);
    return std::nullopt;
  }
  st.finish_run(run, store::run_status::finished, "finished", "");
  print_summary(results);
  write_results_json(
      a.json_out, run, report, results,
      {{"screening", {{"enabled", oo.screening.enabled}, {"margin", oo.screening.margin}}}});
  fmt::print("run {} recorded in {}\n", run, st.dir().string());
  std::vector<search::outcome> outcomes;
  for (const auto& r : results) {
    outcomes.push_back(r.final);
  }
  return search::exit_status(outcomes);
}

// `kblaster optimize`: the search over the tasks asked for; `*result` is set to the exit code
// (left as it is when the run is interrupted).
void run_optimize(const global_options& globals, const optimize_args& a, int* result) {
  const auto root = find_project_root(globals.root);
  // Where evaluations run, with the config file's [slurm] settings: checked before any work.
  const auto plan = plan_executor(a.exec_opts, a.llm_opts.config);
  if (plan.kind != "local") {
    say_line(globals, "executor  " + plan.describe());
  }
  auto st = open_store(globals);
  optimize_run run = resolve_run(a, st);
  const run_settings& settings = run.settings;
  std::vector<task::contract> tasks = tasks_of(root, settings);
  std::optional<llm::client_config> llm_config;
  std::optional<llm_setup> setup;
  if (settings.proposer == "llm") {
    setup = resolve_llm_options(a.llm_opts);
    llm_config = setup->client;
  }
  const auto report =
      run_preflight(globals, settings.no_sandbox, a.replay > 0 ? std::nullopt : llm_config, st,
                    std::chrono::seconds(a.reuse_preflight));
  if (run.id == 0) {
    run.id = st.begin_run("optimize", settings);
  }
  if (!report->usable()) {
    *result = end_blocked(st, run.id, tasks, *report, a.json_out);
    return;
  }
  // Imported tasks with an op graph are lowered onto their family: the search sees lowered
  // contracts (or, where no lowering covers one, the ops that stop it).
  for (auto& c : tasks) {
    c = lowered_contract(root, c, true);
    if (!c.lowering.empty()) {
      say_line(globals, fmt::format("task {}: lowered by {} (family {})", c.id, c.lowering,
                                    task::to_string(c.fam)));
    }
  }
  const std::string gpu = report->checks.at(1).data.value("name", "gpu");
  const search::optimize_options oo = search_options_of(settings, st, globals);
  search::memory mem(st);
  const proposer_parts proposer = make_proposer(settings, setup, a.replay, st, run.id, mem);
  line_printer printer{globals, {}};
  const std::function<void(const std::string&)> say = [&printer](const std::string& line) {
    printer(line);
  };
  const auto exec = make_executor(globals, plan, root, st, run.id, say);
  const search::evaluator evaluate =
      [&exec](const task::contract& c, const eval::candidate_input& cand,
              const eval::candidate_input& base,
              const eval::options& o) { return exec->evaluate(c, cand, base, o); };
  const search::compile_fn compile =
      [&root](const task::contract& c, const eval::candidate_input& cand, const eval::options& o) {
        eval::compile_candidate(root, c, cand, o);
      };
  const auto todo = unfinished_tasks(st, run.id, tasks, say);
  std::vector<search::task_result> results;
  if (plan.kind == "local") {
    search::optimizer optimizer(st, run.id, mem, *proposer.prop, oo, gpu, evaluate, compile, say);
    for (const auto* c : todo) {
      results.push_back(optimizer.optimize(*c));
    }
  } else {
    if (settings.proposer == "llm" && exec->slots() > 1) {
      fail_input("--gpus/--executor slurm run tasks at once, which the llm proposer does not "
                 "support yet; use --proposer builtin or one GPU");
    }
    results = optimize_at_once(globals, {run.id, oo, gpu, evaluate, compile, say},
                               static_cast<size_t>(exec->slots()), todo, printer);
  }
  if (const auto code = end_run(st, run.id, a, *report, oo, results)) {
    *result = *code;
  }
}

// `kblaster memory show|export|import`'s options.
struct memory_args {
  std::string family;      // show --family
  std::string export_file; // export FILE
  std::string import_file; // import FILE
};

void add_memory_commands(CLI::App& app, const global_options& globals, int* result) {
  auto a = std::make_shared<memory_args>();
  auto* mem_cmd =
      app.add_subcommand("memory", "inspect, export and import the optimization memory");
  mem_cmd->require_subcommand(1);
  auto* show = mem_cmd->add_subcommand("show", "what each strategy did, per family and GPU");
  show->add_option("--family", a->family, "one op family");
  show->callback([&globals, result, a] {
    auto st = open_store(globals);
    for (const auto* fam : {"elementwise", "normalize", "reduce", "loss", "matmul", "conv"}) {
      if (!a->family.empty() && a->family != fam) {
        continue;
      }
      for (const auto& gpu : st.gpus()) {
        const auto stats = search::summarize(st.find_experiences(fam, gpu));
        if (stats.empty()) {
          continue;
        }
        fmt::print("{} on {}\n  {:<32} {:>8} {:>8} {:>9} {:>11} {:>8}  {}\n", fam, gpu, "strategy",
                   "attempts", "correct", "faster", "mean x", "best x",
                   "best params / last failure");
        for (const auto& s : stats) {
          fmt::print("  {:<32} {:>8} {:>8} {:>9} {:>10.3f}x {:>7.3f}x  {} {}\n", s.strategy,
                     s.attempts, s.correct, s.successes, std::exp2(s.mean_reward), s.best_speedup,
                     s.best_params.dump(), s.last_failure);
        }
      }
    }
    *result = exit_code::ok;
  });
  auto* exp = mem_cmd->add_subcommand("export", "write every experience as JSON");
  exp->add_option("file", a->export_file)->required();
  exp->callback([&globals, result, a] {
    auto st = open_store(globals);
    search::memory mem(st);
    const auto j = mem.export_all({"elementwise", "normalize", "reduce", "loss", "matmul", "conv"});
    write_file_atomic(a->export_file, j.dump(1) + "\n");
    fmt::print("{} experiences written to {}\n", j.size(), a->export_file);
    *result = exit_code::ok;
  });
  auto* imp = mem_cmd->add_subcommand("import", "add experiences exported elsewhere");
  imp->add_option("file", a->import_file)->required()->check(CLI::ExistingFile);
  imp->callback([&globals, result, a] {
    auto st = open_store(globals);
    search::memory mem(st);
    const int n = mem.import_all(json::parse(read_file(a->import_file)));
    fmt::print("{} experiences imported into {}\n", n, st.dir().string());
    *result = exit_code::ok;
  });
}

} // namespace

void add_optimize_commands(CLI::App& app, const global_options& globals, int* result) {
  // The options live as long as the command that parses into them.
  auto a = std::make_shared<optimize_args>();
  auto* opt = app.add_subcommand(
      "optimize", "search for faster kernels: proposer, memory, verification, timing, outcomes");
  add_optimize_options(*opt, *a);
  opt->callback([&globals, result, a] { run_optimize(globals, *a, result); });
  add_memory_commands(app, globals, result);
}

} // namespace kb::cli
