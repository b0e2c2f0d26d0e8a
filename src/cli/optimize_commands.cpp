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

} // namespace

void add_optimize_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* opt = app.add_subcommand(
      "optimize", "search for faster kernels: proposer, memory, verification, timing, outcomes");
  static std::string task_id;
  static std::string suite;
  static std::string proposer_name = "builtin";
  static int rollouts = 2;
  static int steps = 8;
  static std::string budget = "10m";
  static std::string gpu_budget;
  static int max_evals = 0;
  static int64_t resume = 0;
  static int64_t replay = 0;
  static std::string json_out;
  static bool no_sandbox = false;
  static uint64_t seed = 0;
  static bool no_screen = false;
  static double screen_margin = 0.05;
  static bool no_sanitize = false;
  static std::string counters = "cupti";
  static llm_options llm_opts;
  static executor_options exec_opts;
  opt->add_option("--task", task_id, "one task");
  opt->add_option("--suite", suite, "every task of a suite");
  opt->add_option("--proposer", proposer_name, "builtin (no network) or llm")
      ->check(CLI::IsMember({"builtin", "llm"}));
  opt->add_option("--rollouts", rollouts, "candidates proposed per step")->check(CLI::Range(1, 16));
  opt->add_option("--steps", steps, "steps per task")->check(CLI::Range(1, 1000));
  // Checked while parsing, so a bad value is a usage error before any work starts.
  const CLI::Validator duration([](std::string& v) { return duration_problem(v); }, "DURATION");
  opt->add_option("--budget", budget,
                  "wall time of each task's search, after its baseline (90s, 10m, 1h)")
      ->check(duration);
  opt->add_option("--gpu-budget", gpu_budget, "time in evaluation workers per task")
      ->check(duration);
  opt->add_option("--max-evals", max_evals, "candidate evaluations per task (0: no limit)");
  opt->add_option("--resume", resume, "continue an interrupted optimize run (its id)");
  opt->add_option("--replay", replay,
                  "serve the LLM's answers from this run's record, without the network");
  opt->add_option("--json", json_out, "write the results as JSON here");
  opt->add_option("--seed", seed,
                  "order of untried strategies and neighbouring points (0: library order)");
  opt->add_flag("--no-screen", no_screen,
                "send every candidate through the step's gate (no screening timing first)");
  opt->add_option("--screen-margin", screen_margin,
                  "the screen passes a candidate within this fraction of beating the best")
      ->check(CLI::Range(0.0, 0.5));
  opt->add_option("--counters", counters,
                  "hardware counters for the bottleneck state of the baseline and of each new "
                  "best: cupti (in a worker job after the gate; analytic where they cannot be "
                  "read) or none (the analytic roofline only)")
      ->check(CLI::IsMember({"cupti", "none"}));
  sandbox::add_no_sandbox_flag(*opt, &no_sandbox);
  opt->add_flag("--no-sanitize", no_sanitize,
                "do not run the sanitizers on a candidate before it becomes the best (recorded)");
  add_llm_options(*opt, llm_opts);
  add_executor_options(*opt, exec_opts);
  opt->callback([&globals, result] {
    const auto root = find_project_root(globals.root);
    // Where evaluations run, with the config file's [slurm] settings: checked before any work.
    const auto plan = plan_executor(exec_opts, llm_opts.config);
    if (plan.kind != "local") {
      say_line(globals, "executor  " + plan.describe());
    }
    auto st = open_store(globals);
    json args{{"task", task_id},
              {"suite", suite},
              {"proposer", proposer_name},
              {"rollouts", rollouts},
              {"steps", steps},
              {"budget", budget},
              {"gpu_budget", gpu_budget},
              {"max_evals", max_evals},
              {"no_sandbox", no_sandbox},
              {"seed", seed},
              {"screen", !no_screen},
              {"screen_margin", screen_margin},
              {"no_sanitize", no_sanitize},
              {"counters", counters}};
    int64_t run = 0;
    if (resume > 0) {
      const auto info = st.find_run(resume);
      if (!info || info->kind != "optimize") {
        fail_input("--resume {}: no optimize run with that id in {}", resume, st.dir().string());
      }
      args = info->args;
      run = resume;
    }
    const std::string a_task = args.value("task", "");
    const std::string a_suite = args.value("suite", "");
    if (a_task.empty() == a_suite.empty()) {
      fail_input("give --task ID or --suite NAME (one of them)");
    }
    std::vector<task::contract> tasks =
        a_task.empty() ? task::load_suite(root, a_suite)
                       : std::vector<task::contract>{task::find_task(root, a_task)};

    std::optional<llm::client_config> llm_config;
    std::optional<llm_setup> setup;
    if (args.value("proposer", "") == "llm") {
      setup = resolve_llm_options(llm_opts);
      llm_config = setup->client;
    }
    const auto report = run_preflight(globals, args.value("no_sandbox", false),
                                      replay > 0 ? std::nullopt : llm_config, st);
    if (run == 0) {
      run = st.begin_run("optimize", args);
    }
    std::vector<search::task_result> results;
    // --json: the preflight, every task's result, what was evaluated and how (`extra`).
    const auto write_json = [&](json extra) {
      if (json_out.empty()) {
        return;
      }
      json j{{"run", run}, {"preflight", report->to_json()}, {"tasks", json::array()}};
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
      write_file_atomic(json_out, j.dump(2) + "\n");
    };
    if (!report->usable()) {
      // Nothing can be searched here: every task ends blocked, with the reason, in the store.
      for (const auto& c : tasks) {
        search::task_result r;
        r.task = c.id;
        r.final = search::outcome::blocked;
        r.reason = "blocked.preflight." + report->checks.back().name;
        st.record_outcome({run, st.record_task(c), "blocked", r.reason, std::nullopt});
        results.push_back(r);
      }
      st.finish_run(run, store::run_status::finished, "blocked", report->reason);
      print_summary(results);
      write_json(json::object());
      fmt::print("\nGPU stages BLOCKED: {}\n", report->reason);
      *result = exit_code::blocked;
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
    search::optimize_options oo;
    oo.rollouts = args.value("rollouts", 2);
    oo.steps = args.value("steps", 8);
    oo.limits.wall = parse_duration(args.value("budget", std::string("10m")));
    if (!args.value("gpu_budget", std::string()).empty()) {
      oo.limits.gpu_seconds =
          static_cast<double>(parse_duration(args.value("gpu_budget", std::string())).count());
    }
    oo.limits.evaluations = args.value("max_evals", 0);
    oo.step.cache_dir = default_cache_dir();
    oo.step.no_sandbox = args.value("no_sandbox", false);
    oo.step.sessions = 1;
    oo.step.seeds = 2;
    oo.step.timing.max_wall = 2.0;
    oo.step.profile = args.value("counters", std::string("cupti")) == "cupti"
                          ? eval::profile_mode::improved
                          : eval::profile_mode::none;
    oo.confirm = oo.step;
    oo.confirm.profile = eval::profile_mode::none;
    oo.confirm.sessions = 2;
    oo.confirm.seeds = 3;
    oo.confirm.timing.max_wall = 6.0;
    oo.sanitize = !args.value("no_sanitize", false);
    if (!oo.sanitize) {
      say_line(globals, "sanitize  OFF (--no-sanitize): candidates become the best unsanitized");
    }
    apply_device_calibration(oo.step, st, globals);
    oo.confirm.ceilings = oo.step.ceilings;
    oo.confirm.delta = oo.step.delta;
    oo.confirm.delta_source = oo.step.delta_source;
    oo.seed = args.value("seed", uint64_t{0});
    oo.screening.enabled = args.value("screen", false);
    oo.screening.margin = args.value("screen_margin", 0.05);
    oo.screening.screen = search::screening_options(oo.step);

    search::memory mem(st);
    std::unique_ptr<search::proposer> prop;
    std::unique_ptr<llm::client> client;
    std::unique_ptr<llm::file_recorder> recorder;
    if (args.value("proposer", "") == "llm") {
      if (replay > 0) {
        client = llm::client::replay(
            setup->client, llm::load_record(st.dir() / "llm" / fmt::format("run-{}", replay)));
      } else {
        recorder =
            std::make_unique<llm::file_recorder>(st.dir() / "llm" / fmt::format("run-{}", run));
        client = std::make_unique<llm::client>(setup->client, recorder.get());
      }
      prop = std::make_unique<llm::llm_proposer>(*client, setup->proposer);
    } else {
      prop = std::make_unique<search::builtin_proposer>(mem);
    }
    std::mutex print_lock;
    const auto say = [&](const std::string& line) {
      if (!globals.quiet) {
        std::lock_guard lock(print_lock);
        fmt::print("{}\n", line);
        std::fflush(stdout);
      }
    };
    const auto exec = make_executor(globals, plan, root, st, run, say);
    const search::evaluator evaluate =
        [&exec](const task::contract& c, const eval::candidate_input& cand,
                const eval::candidate_input& base,
                const eval::options& o) { return exec->evaluate(c, cand, base, o); };
    const search::compile_fn compile =
        [&root](const task::contract& c, const eval::candidate_input& cand,
                const eval::options& o) { eval::compile_candidate(root, c, cand, o); };
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
    if (plan.kind == "local") {
      search::optimizer optimizer(st, run, mem, *prop, oo, gpu, evaluate, compile, say);
      for (const auto* c : todo) {
        results.push_back(optimizer.optimize(*c));
      }
    } else {
      // Tasks run at once, one per worker, each with its own store connection and memory; a
      // task does not see the attempts other tasks of this run make meanwhile, so what it
      // tries does not depend on how many GPUs there are.
      if (args.value("proposer", "") == "llm" && exec->slots() > 1) {
        fail_input("--gpus/--executor slurm run tasks at once, which the llm proposer does not "
                   "support yet; use --proposer builtin or one GPU");
      }
      std::vector<std::optional<search::task_result>> out(todo.size());
      std::vector<std::string> errors;
      std::atomic<size_t> next{0};
      std::vector<std::thread> threads;
      const size_t width = std::min(todo.size(), static_cast<size_t>(exec->slots()));
      for (size_t t = 0; t < width; ++t) {
        threads.emplace_back([&] {
          try {
            store::store tst(store::resolve_dir(globals.store));
            search::memory tmem(tst, run);
            search::builtin_proposer tprop(tmem);
            search::optimizer topt(tst, run, tmem, tprop, oo, gpu, evaluate, compile, say);
            for (size_t i = next++; i < todo.size(); i = next++) {
              out[i] = topt.optimize(*todo[i]);
            }
          } catch (const std::exception& e) {
            std::lock_guard lock(print_lock);
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
      for (auto& r : out) {
        if (r) {
          results.push_back(std::move(*r));
        }
      }
    }
    if (const int sig = stop_requested(); sig != 0) {
      // Stopped: the run stays resumable (tasks without an outcome continue from their
      // checkpoints).
      st.finish_run(run, store::run_status::interrupted, "interrupted", "run.interrupted");
      fmt::print(stderr, "run {} stopped by {}: continue it with kblaster optimize --resume {}\n",
                 run, signal_name(sig), run);
      return;
    }
    st.finish_run(run, store::run_status::finished, "finished", "");
    print_summary(results);
    write_json(
        {{"screening", {{"enabled", oo.screening.enabled}, {"margin", oo.screening.margin}}}});
    fmt::print("run {} recorded in {}\n", run, st.dir().string());
    std::vector<search::outcome> outcomes;
    for (const auto& r : results) {
      outcomes.push_back(r.final);
    }
    *result = search::exit_status(outcomes);
  });

  auto* mem_cmd =
      app.add_subcommand("memory", "inspect, export and import the optimization memory");
  mem_cmd->require_subcommand(1);
  auto* show = mem_cmd->add_subcommand("show", "what each strategy did, per family and GPU");
  static std::string family;
  show->add_option("--family", family, "one op family");
  show->callback([&globals, result] {
    auto st = open_store(globals);
    for (const auto* fam : {"elementwise", "normalize", "reduce", "loss", "matmul", "conv"}) {
      if (!family.empty() && family != fam) {
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
  static std::string export_file;
  exp->add_option("file", export_file)->required();
  exp->callback([&globals, result] {
    auto st = open_store(globals);
    search::memory mem(st);
    const auto j = mem.export_all({"elementwise", "normalize", "reduce", "loss", "matmul", "conv"});
    write_file_atomic(export_file, j.dump(1) + "\n");
    fmt::print("{} experiences written to {}\n", j.size(), export_file);
    *result = exit_code::ok;
  });
  auto* imp = mem_cmd->add_subcommand("import", "add experiences exported elsewhere");
  static std::string import_file;
  imp->add_option("file", import_file)->required()->check(CLI::ExistingFile);
  imp->callback([&globals, result] {
    auto st = open_store(globals);
    search::memory mem(st);
    const int n = mem.import_all(json::parse(read_file(import_file)));
    fmt::print("{} experiences imported into {}\n", n, st.dir().string());
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
