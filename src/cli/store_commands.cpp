#include "cli/commands.hpp"
#include "common/error.hpp"
#include "eval/eval.hpp"
#include "store/store.hpp"

#include <fmt/format.h>

#include <memory>

namespace kb::cli {

namespace {

// The thing checked failed its check (a corrupt store, a tampered evidence folder).
constexpr int check_failed = 1;

std::string optional_number(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "-";
}

nlohmann::json to_json(const store::run_info& r) {
  return {{"id", r.id},
          {"kind", r.kind},
          {"args", r.args},
          {"started", r.started},
          {"finished", r.finished},
          {"status", to_string(r.status)},
          {"outcome", r.outcome},
          {"reason", r.reason},
          {"tool_version", r.tool_version},
          {"evaluations", r.evaluations}};
}

nlohmann::json to_json(const store::evaluation_row& row) {
  const auto& e = row.record;
  return {{"id", row.id},
          {"task", row.task_id},
          {"candidate", e.candidate},
          {"baseline", e.baseline ? nlohmann::json(*e.baseline) : nlohmann::json()},
          {"origin", to_string(row.origin)},
          {"strategy", row.strategy},
          {"shape", e.shape},
          {"verdict", to_string(e.verdict)},
          {"reason", e.reason},
          {"candidate_median",
           e.candidate_median ? nlohmann::json(*e.candidate_median) : nlohmann::json()},
          {"baseline_median",
           e.baseline_median ? nlohmann::json(*e.baseline_median) : nlohmann::json()},
          {"speedup", e.speedup ? nlohmann::json(*e.speedup) : nlohmann::json()},
          {"ci_low", e.ci_low ? nlohmann::json(*e.ci_low) : nlohmann::json()},
          {"ci_high", e.ci_high ? nlohmann::json(*e.ci_high) : nlohmann::json()},
          {"p_value", e.p_value ? nlohmann::json(*e.p_value) : nlohmann::json()},
          {"sandboxed", e.sandboxed},
          {"samples_digest", row.samples_digest},
          {"detail_digest", row.detail_digest},
          {"created", row.created}};
}

void add_runs_commands(CLI::App& app, const global_options& globals, int* result) {
  struct options {
    int limit = 50;
    int64_t run = 0;
    bool json = false;
  };
  auto opts = std::make_shared<options>();
  auto* runs = app.add_subcommand("runs", "list and show recorded runs");
  runs->require_subcommand(1);

  auto* list = runs->add_subcommand("list", "list the runs, newest first");
  list->add_option("--limit", opts->limit, "show at most this many runs")
      ->check(CLI::PositiveNumber);
  list->add_flag("--json", opts->json, "print JSON");
  list->callback([&globals, result, opts] {
    auto st = open_store(globals);
    const auto runs = st.list_runs(opts->limit);
    if (opts->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : runs) {
        j.push_back(to_json(r));
      }
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{:>6} {:<10} {:<11} {:<24} {:<24} {:>6} {:<14} {}\n", "id", "kind", "status",
                 "started", "finished", "evals", "outcome", "reason");
      for (const auto& r : runs) {
        fmt::print("{:>6} {:<10} {:<11} {:<24} {:<24} {:>6} {:<14} {}\n", r.id, r.kind,
                   to_string(r.status), r.started, r.finished.empty() ? "-" : r.finished,
                   r.evaluations, r.outcome.empty() ? "-" : r.outcome, r.reason);
      }
    }
    *result = exit_code::ok;
  });

  auto* show = runs->add_subcommand("show", "show a run and every evaluation it made");
  show->add_option("id", opts->run, "run id")->required();
  show->add_flag("--json", opts->json, "print JSON");
  show->callback([&globals, result, opts] {
    auto st = open_store(globals);
    const auto run = st.find_run(opts->run);
    if (!run) {
      fail_input("no run {} in the store {}", opts->run, st.dir().string());
    }
    const auto evaluations = st.evaluations_of_run(run->id);
    const auto outcomes = st.outcomes_of_run(run->id);
    if (opts->json) {
      nlohmann::json j = {{"run", to_json(*run)},
                          {"evaluations", nlohmann::json::array()},
                          {"outcomes", nlohmann::json::array()}};
      for (const auto& e : evaluations) {
        j["evaluations"].push_back(to_json(e));
      }
      for (const auto& o : outcomes) {
        j["outcomes"].push_back(
            {{"task", o.task},
             {"outcome", o.outcome},
             {"reason", o.reason},
             {"best_candidate",
              o.best_candidate ? nlohmann::json(*o.best_candidate) : nlohmann::json()}});
      }
      fmt::print("{}\n", j.dump(2));
      *result = exit_code::ok;
      return;
    }
    fmt::print("run {} ({}): {}\n", run->id, run->kind, to_string(run->status));
    fmt::print("  started   {}\n  finished  {}\n  args      {}\n  outcome   {}{}\n  kblaster  {}\n",
               run->started, run->finished.empty() ? "-" : run->finished, run->args.dump(),
               run->outcome.empty() ? "-" : run->outcome,
               run->reason.empty() ? "" : " (" + run->reason + ")", run->tool_version);
    fmt::print("\n{} evaluation(s)\n", evaluations.size());
    if (!evaluations.empty()) {
      fmt::print("{:>6} {:<6} {:<12} {:>6} {:<22} {:<13} {:<28} {:>8} {:>17} {:>9}\n", "id", "task",
                 "shape", "cand", "origin/strategy", "verdict", "reason", "speedup", "95% CI", "p");
    }
    for (const auto& row : evaluations) {
      const auto& e = row.record;
      const std::string ci =
          e.ci_low && e.ci_high ? fmt::format("[{:.3f}, {:.3f}]", *e.ci_low, *e.ci_high) : "-";
      fmt::print("{:>6} {:<6} {:<12} {:>6} {:<22} {:<13} {:<28} {:>8} {:>17} {:>9}\n", row.id,
                 row.task_id, e.shape, e.candidate,
                 to_string(row.origin) + (row.strategy.empty() ? "" : "/" + row.strategy),
                 to_string(e.verdict), e.reason.empty() ? "-" : e.reason,
                 optional_number(e.speedup, "{:.3f}x"), ci, optional_number(e.p_value, "{:.2g}"));
    }
    for (const auto& o : outcomes) {
      fmt::print("outcome: task #{} {}{}{}\n", o.task, o.outcome,
                 o.reason.empty() ? "" : " (" + o.reason + ")",
                 o.best_candidate ? fmt::format(", best candidate {}", *o.best_candidate) : "");
    }
    *result = exit_code::ok;
  });
}

void add_store_maintenance_commands(CLI::App& app, const global_options& globals, int* result) {
  struct options {
    int64_t grace = 3600; // [seconds]
    bool dry_run = false;
  };
  auto opts = std::make_shared<options>();
  auto* cmd = app.add_subcommand("store", "check and clean the store");
  cmd->require_subcommand(1);

  auto* verify =
      cmd->add_subcommand("verify", "re-hash every blob; report corrupt and missing ones");
  verify->callback([&globals, result] {
    auto st = open_store(globals);
    const auto report = st.verify();
    for (const auto& digest : report.corrupt) {
      fmt::print("corrupt  {}  {}\n", digest, st.path_of(digest).string());
    }
    for (const auto& digest : report.missing) {
      fmt::print("missing  {}  {}\n", digest, st.path_of(digest).string());
    }
    for (const auto& problem : report.database) {
      fmt::print("database {}\n", problem);
    }
    fmt::print("{}: {} blob(s) checked, {} corrupt, {} missing, {} database problem(s), {} stray "
               "file(s){}\n",
               st.dir().string(), report.blobs_checked, report.corrupt.size(),
               report.missing.size(), report.database.size(), report.stray.size(),
               report.stray.empty() ? "" : " (left by interrupted writes; gc removes them)");
    *result = report.ok() ? exit_code::ok : check_failed;
  });

  auto* gc = cmd->add_subcommand("gc", "remove blobs that no row references");
  gc->add_option("--grace", opts->grace, "keep unreferenced blobs younger than this [seconds]")
      ->check(CLI::NonNegativeNumber);
  gc->add_flag("--dry-run", opts->dry_run, "only report what would be removed");
  gc->callback([&globals, result, opts] {
    auto st = open_store(globals);
    const auto report = st.gc(std::chrono::seconds(opts->grace), opts->dry_run);
    fmt::print("{}{} blob(s) ({} bytes) and {} stray file(s); kept {} younger than {} s\n",
               opts->dry_run ? "would remove " : "removed ", report.removed_blobs,
               report.removed_bytes, report.removed_stray, report.kept_recent, opts->grace);
    *result = exit_code::ok;
  });
}

void add_evidence_commands(CLI::App& app, const global_options& globals, int* result) {
  struct options {
    int64_t run = 0;
    std::filesystem::path out;
    std::filesystem::path dir;
    std::string manifest_sha256;
  };
  auto opts = std::make_shared<options>();
  auto* cmd =
      app.add_subcommand("evidence", "export a run as a self-checking folder, and check one");
  cmd->require_subcommand(1);

  auto print_problems = [](const store::evidence_report& report) {
    for (const auto& problem : report.problems) {
      fmt::print("problem  {}\n", problem);
    }
  };

  auto* exp = cmd->add_subcommand("export", "write a run's rows, blobs and MANIFEST to a folder");
  exp->add_option("run", opts->run, "run id")->required();
  exp->add_option("--out", opts->out, "folder to create (must not exist, or be empty)")->required();
  exp->callback([&globals, result, opts, print_problems] {
    auto st = open_store(globals);
    const auto report = st.export_evidence(opts->run, opts->out, eval::recorded_outcome_of);
    print_problems(report);
    fmt::print("exported run {} to {}: {} file(s); MANIFEST sha256 {}\n", opts->run,
               opts->out.string(), report.files, report.manifest_digest);
    *result = report.ok() ? exit_code::ok : check_failed;
  });

  auto* check = cmd->add_subcommand("check", "verify an evidence folder against its MANIFEST");
  check->add_option("dir", opts->dir, "evidence folder")->required();
  check->add_option("--manifest-sha256", opts->manifest_sha256,
                    "the MANIFEST digest `evidence export` printed (and its author published): "
                    "a folder whose MANIFEST was rewritten fails");
  check->callback([result, opts, print_problems] {
    auto report = store::check_evidence(opts->dir, eval::recorded_outcome_of);
    if (!opts->manifest_sha256.empty() && report.manifest_digest != opts->manifest_sha256) {
      report.problems.push_back(fmt::format("MANIFEST sha256 {} is not the published {}",
                                            report.manifest_digest, opts->manifest_sha256));
    }
    print_problems(report);
    fmt::print("{}: run {}, {} file(s), MANIFEST sha256 {}: {}\n", opts->dir.string(), report.run,
               report.files, report.manifest_digest,
               report.ok() ? "ok" : fmt::format("{} problem(s)", report.problems.size()));
    *result = report.ok() ? exit_code::ok : check_failed;
  });
}

} // namespace

void add_store_commands(CLI::App& app, const global_options& globals, int* result) {
  add_runs_commands(app, globals, result);
  add_store_maintenance_commands(app, globals, result);
  add_evidence_commands(app, globals, result);
}

} // namespace kb::cli
