#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "eval/verification.hpp"
#include "gpu/gpu.hpp"
#include "profile/profile.hpp"
#include "pytorch/pytorch.hpp"
#include "sandbox/sandbox.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace kb::cli {

namespace {

using nlohmann::json;

eval::options base_options(const fs::path& cache) {
  eval::options o;
  o.cache_dir = cache;
  return o;
}

std::string with_ms(double s) {
  return fmt::format("{:.4f} ms", s * 1e3);
}

// The last `lines` lines of a log, each indented, ending in a newline ("" for an empty log).
std::string indented_tail(const std::string& log, size_t lines) {
  std::vector<std::string> all;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    all.push_back(line);
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "          " + all[i] + "\n";
  }
  return out;
}

void print_summary(const task::contract& c, const eval::result& r) {
  fmt::print("task      {} {} ({}) at shape {}\n", c.id, c.name, c.suite, r.context.shape);
  if (r.context.device) {
    const auto& dev = *r.context.device;
    fmt::print("device    {} (driver {}, runtime {}), {}\n", dev.name, dev.driver_version,
               dev.cuda_runtime, r.context.arch);
  }
  for (const char* who : {"candidate", "baseline"}) {
    if (const auto b = r.builds.find(who); b != r.builds.end()) {
      fmt::print("compile   {:<9} {} {}\n", who, build::to_string(b->second.status),
                 b->second.cached ? "(cached)" : fmt::format("({:.1f} s)", b->second.seconds));
      if (!b->second.ok()) {
        // The compiler's own words, where the user looks (the last lines hold the errors).
        fmt::print("{}", indented_tail(b->second.log, 40));
      }
    }
  }
  for (const auto& l : r.verification) {
    if (l.accepted) {
      // The worst metrics over all checks, as the judge summarised them.
      const eval::verification_summary s =
          eval::summary_of(l).value_or(eval::verification_summary{});
      fmt::print("verify    {:<9} PASS {} checks; max abs err {:.3g}, max rel err {:.3g}, p99 "
                 "abs err {:.3g}, max rel L2 {:.3g}\n",
                 l.role, s.checks, s.max_abs_err, s.max_rel_err, s.p99_abs_err, s.rel_l2);
    } else {
      fmt::print("verify    {:<9} REJECTED {}: {}\n", l.role, l.reason, l.message);
    }
  }
  if (r.checker_selftest) {
    const eval::selftest_tally st = eval::tally_of(*r.checker_selftest);
    fmt::print("checker   rejects zeros at {}, a copy of the input at {}, a constant at {} of {} "
               "shapes (each tried until rejected at a shape; {} checks)\n",
               st.zeros_rejected_by, st.copy_of_input_rejected_by, st.constant_rejected_by,
               st.shapes, st.checks);
  }
  if (r.sanitize) {
    for (const auto& [tool, t] : *r.sanitize) {
      fmt::print("sanitize  {:<10} {}\n", tool, t.errors ? "ERRORS" : "clean");
    }
  }
  if (r.gate) {
    const auto& g = *r.gate;
    fmt::print("time      baseline  {} [{}, {}] n={}\n", with_ms(g.median_baseline_s),
               with_ms(g.median_baseline_low_s), with_ms(g.median_baseline_high_s), g.n_baseline);
    fmt::print("          candidate {} [{}, {}] n={}\n", with_ms(g.median_candidate_s),
               with_ms(g.median_candidate_low_s), with_ms(g.median_candidate_high_s), g.n_candidate);
    fmt::print("speedup   {:.3f}x [{:.3f}, {:.3f}] (95% hierarchical bootstrap of the ratio of "
               "medians), p = {:.2g} (between sessions), delta {:.1f}%\n",
               g.speedup, g.speedup_low, g.speedup_high, g.p.value_or(1.0), 100 * g.delta);
    const double floor = g.floor_fraction * g.median_candidate_s;
    fmt::print(
        "roofline  floor {} ({}); candidate reaches {:.1f}% of floor speed, baseline {:.1f}%\n",
        with_ms(floor), r.context.ceilings.source, 100 * g.floor_fraction,
        100 * floor / g.median_baseline_s);
  }
  if (!r.context.isolation.empty()) {
    fmt::print("isolation {}: {}\n", r.context.isolation, r.context.isolation_detail);
  }
  fmt::print("verdict   {} ({}) {}\n", eval::to_string(r.final), r.reason, r.message);
  fmt::print("elapsed   {:.1f} s\n", r.seconds);
}

int exit_for(eval::verdict v) {
  switch (v) {
  case eval::verdict::rejected:
    return exit_code::rejected;
  case eval::verdict::blocked:
    return exit_code::blocked;
  case eval::verdict::error:
    return exit_code::tool;
  default:
    return exit_code::ok;
  }
}

// The eval command's options: the evaluation's own (eval::options, with its defaults) and the
// command's files.
struct eval_args {
  std::string task_id;
  std::string candidate;
  std::string baseline;
  std::string json_out;
  std::string arch;
  eval::options o = base_options(default_cache_dir());
  std::string placement = gpu::protocol::to_string(o.timing.placement);
  int hang_timeout = static_cast<int>(o.hang_timeout.count());
};

eval::progress_fn progress_printer(const global_options& g) {
  if (g.quiet) {
    return {};
  }
  const bool tty = isatty(2) != 0;
  return [tty](const std::string& line) {
    if (tty) {
      fmt::print(stderr, "\r\033[K{}", line.substr(0, 160));
    } else {
      fmt::print(stderr, "{}\n", line);
    }
  };
}

void end_progress(const global_options& g) {
  if (!g.quiet && isatty(2) != 0) {
    fmt::print(stderr, "\r\033[K");
  }
}

} // namespace

void add_eval_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* worker =
      app.add_subcommand("worker", "evaluation worker process (started by kblaster itself)");
  worker->group("");
  worker->callback([result] { *result = gpu::judge_main(); });
  auto* runner = app.add_subcommand("runner", "candidate runner process (started by the judge)");
  runner->group("");
  runner->callback([result] {
    *result = gpu::runner_main(
        [](const std::function<void()>& prepare, const std::function<int()>& launch, void* stream,
           bool counters) { return profile::worker_calls(prepare, launch, stream, counters); });
  });

  auto* ev = app.add_subcommand("eval", "verify and time a candidate against the task's baseline");
  // The options bind into one eval::options: its member initialisers are the only defaults.
  const auto a = std::make_shared<eval_args>();
  sandbox::add_no_sandbox_flag(*ev, &a->o.no_sandbox);
  ev->add_option("--task", a->task_id, "task id")->required();
  ev->add_option("--candidate", a->candidate, "candidate .cu file")
      ->required()
      ->check(CLI::ExistingFile);
  ev->add_option("--baseline", a->baseline, "baseline .cu file (default: the task's baseline)")
      ->check(CLI::ExistingFile);
  ev->add_option("--json", a->json_out, "write the full record as JSON here");
  ev->add_option("--shape", a->o.shape, "shape to time (default official)");
  ev->add_option("--arch", a->arch, "target architecture (default: the device's, else sm_90a)");
  ev->add_flag(
      "--sanitize", a->o.sanitize,
      "run compute-sanitizer memcheck, racecheck, initcheck, synccheck at the check shapes");
  ev->add_flag("--verify-only", a->o.verify_only, "verify, do not time");
  ev->add_option("--sessions", a->o.sessions, "timing sessions, each in a fresh process")
      ->check(CLI::Range(1, 10));
  ev->add_option("--seeds", a->o.seeds, "input seeds per distribution and shape")
      ->check(CLI::Range(1, 20));
  ev->add_option("--max-wall", a->o.timing.max_wall, "wall-clock cap of one timing session [s]");
  ev->add_option("--hang-timeout", a->hang_timeout,
                 "seconds without progress before a worker is ended");
  ev->add_option("--seed", a->o.seed_base,
                 "replay an evaluation: the seed recorded in its detail.protocol.seed_base "
                 "(default: drawn from the system's CSPRNG)");
  ev->add_option("--input-sets", a->o.timing.input_sets,
                 "input sets rotated during timing (1 disables rotation)")
      ->check(CLI::Range(1, 3));
  ev->add_option("--placement", a->placement,
                 "where each timing session's buffers land: drawn (a drawn pad before each buffer, "
                 "a drawn order; a placement per session) or fixed (allocated in order)")
      ->check(CLI::IsMember({"fixed", "drawn"}));
  ev->callback([&globals, result, a] {
    const auto root = find_project_root(globals.root);
    auto c = task::find_task(root, a->task_id);
    if (const auto ready = pytorch::make_ready(root, c); !ready.ok) {
      const bool blocked = ready.reason.starts_with("blocked.");
      fmt::print("verdict   {} ({}) task {} is a pytorch task; {}\n", blocked ? "blocked" : "error",
                 ready.reason, c.id, ready.message);
      *result = blocked ? exit_code::blocked : exit_code::input;
      return;
    }
    // An imported task with an op graph: its lowered view, so that a candidate generated for
    // its family (KB_TASK_MATH) builds.
    c = lowered_contract(root, c, false);
    eval::options o = a->o;
    o.shape = c.shape(o.shape).name;
    o.timing.placement = *gpu::protocol::placement_from_string(a->placement);
    o.hang_timeout = std::chrono::seconds(a->hang_timeout);
    if (!a->arch.empty()) {
      o.arch = a->arch;
    }
    auto st = open_store(globals);
    apply_device_calibration(o, st, globals);
    const std::string& candidate = a->candidate;
    const std::string& baseline = a->baseline;
    const std::string& json_out = a->json_out;
    const eval::candidate_input cand{read_file(candidate), fs::path(candidate).filename().string(),
                                     "candidate"};
    const fs::path base_path = baseline.empty() ? c.baseline : fs::path(baseline);
    const eval::candidate_input base{read_file(base_path), base_path.filename().string(),
                                     "baseline"};
    const int64_t run = st.begin_run("eval", {{"task", c.id},
                                              {"candidate", candidate},
                                              {"baseline", base_path.string()},
                                              {"shape", o.shape},
                                              {"sanitize", o.sanitize},
                                              {"sessions", o.sessions},
                                              {"delta", o.delta},
                                              {"delta_source", o.delta_source},
                                              {"ceilings", task::to_json(o.ceilings)},
                                              {"no_sandbox", o.no_sandbox}});
    const auto r = eval::evaluate(root, c, cand, base, o, progress_printer(globals));
    end_progress(globals);
    const int64_t row = eval::record(st, run, c, cand, base, r);
    st.finish_run(run, store::run_status::finished, eval::to_string(r.final), r.reason);
    print_summary(c, r);
    fmt::print("recorded  run {} evaluation {} in {}\n", run, row, st.dir().string());
    if (!json_out.empty()) {
      write_file_atomic(json_out, eval::to_json(r).dump(2) + "\n"); // as stored, with timing
    }
    // A task whose own math does not compile is bad input, not a failure of the tool.
    *result = r.reason == "task.oracle_compile_error" ? exit_code::input : exit_for(r.final);
  });
}

} // namespace kb::cli
