// `kblaster experiment record-table` (every table point of every task, on the GPU, once) and
// `kblaster experiment memory` (the leave-one-out memory experiment, replayed from a table).
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "sandbox/sandbox.hpp"
#include "search/experiment.hpp"
#include "task/task.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <sstream>

namespace kb::cli {

namespace {

using nlohmann::json;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) {
      out.push_back(item);
    }
  }
  return out;
}

std::vector<task::contract> tasks_in(const fs::path& dir) {
  std::vector<task::contract> out;
  if (!fs::is_directory(dir)) {
    fail_input("--task-dir {}: not a folder", dir.string());
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() == "task.toml") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    out.push_back(task::load_contract(f));
  }
  return out;
}

} // namespace

void add_experiment_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::vector<std::string> suites;
    std::vector<std::string> task_dirs;
    std::string rec_out;
    int max_points = 8;
    bool no_sandbox = false;
    std::string table_file;
    std::string task_list;
    int seeds = 5;
    int max_evals = 24;
    int rollouts = 2;
    double target = 0.95;
    std::string out_dir;
  };
  const auto opts = std::make_shared<options>();

  auto* exp = app.add_subcommand("experiment", "measure the search: outcome tables and the memory "
                                               "experiment");
  exp->require_subcommand(1);

  auto* rec = exp->add_subcommand(
      "record-table", "evaluate every table point of every task once on the GPU (resumable)");
  rec->add_option("--suite", opts->suites, "tasks of a suite (repeatable)");
  rec->add_option("--task-dir", opts->task_dirs, "every task.toml under a folder (repeatable)");
  rec->add_option("--max-points", opts->max_points, "table points per strategy")
      ->check(CLI::Range(1, 1000));
  rec->add_option("--out", opts->rec_out, "the table (JSON); entries already there are kept")->required();
  sandbox::add_no_sandbox_flag(*rec, &opts->no_sandbox);
  rec->callback([&globals, result, opts] {
    const auto root = find_project_root(globals.root);
    std::vector<task::contract> tasks;
    for (const auto& s : opts->suites) {
      for (auto& c : task::load_suite(root, s)) {
        tasks.push_back(std::move(c));
      }
    }
    for (const auto& d : opts->task_dirs) {
      for (auto& c : tasks_in(d)) {
        tasks.push_back(std::move(c));
      }
    }
    if (tasks.empty()) {
      fail_input("give --suite NAME or --task-dir DIR");
    }
    search::outcome_table table;
    if (fs::exists(opts->rec_out)) {
      table = search::outcome_table::from_json(json::parse(read_file(opts->rec_out)));
    }
    auto st = open_store(globals);
    const auto report = run_preflight(globals, opts->no_sandbox, std::nullopt, st);
    if (!report->usable()) {
      fmt::print("GPU stages BLOCKED: {}\n", report->reason);
      *result = exit_code::blocked;
      return;
    }
    search::record_options ro;
    ro.max_points = opts->max_points;
    ro.checkpoint = opts->rec_out;
    ro.gate.cache_dir = default_cache_dir();
    ro.gate.no_sandbox = opts->no_sandbox;
    ro.gate.sessions = 1;
    ro.gate.seeds = 2;
    ro.gate.timing.max_wall = 2.0;
    const auto say = [&](const std::string& line) {
      if (!globals.quiet) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      }
    };
    table = search::record_table(
        root, tasks,
        [&root](const task::contract& c, const eval::candidate_input& cand,
                const eval::candidate_input& base,
                const eval::options& o) { return eval::evaluate(root, c, cand, base, o, {}); },
        [&root](const task::contract& c, const eval::candidate_input& cand,
                const eval::options& o) { eval::compile_candidate(root, c, cand, o); },
        ro, std::move(table), say);
    if (table.device.empty()) {
      table.device = report->checks.at(1).data;
    }
    write_file_atomic(opts->rec_out, table.to_json().dump(1) + "\n");
    fmt::print("{} entries for {} tasks written to {}\n", table.entries.size(), table.tasks.size(),
               opts->rec_out);
    *result = exit_code::ok;
  });

  auto* mem = exp->add_subcommand(
      "memory", "leave-one-out: evaluations to 95% of the best with and without a primed store");
  mem->add_option("--table", opts->table_file, "an outcome table (experiment record-table)")->required();
  mem->add_option("--tasks", opts->task_list, "comma-separated task ids (default: the table's)");
  mem->add_option("--seeds", opts->seeds, "seeds 1..N")->check(CLI::Range(1, 1000));
  mem->add_option("--max-evals", opts->max_evals, "evaluations per search")->check(CLI::Range(1, 10000));
  mem->add_option("--rollouts", opts->rollouts, "candidates per step")->check(CLI::Range(1, 16));
  mem->add_option("--target", opts->target, "fraction of the table's best")->check(CLI::Range(0.1, 1.0));
  mem->add_option("--out", opts->out_dir, "writes memory-experiment.json and .svg here")->required();
  mem->callback([&globals, result, opts] {
    const auto root = find_project_root(globals.root);
    const auto table = search::outcome_table::from_json(json::parse(read_file(opts->table_file)));
    const auto wanted = split_list(opts->task_list);
    std::vector<task::contract> tasks;
    for (const auto& t : table.tasks) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), t.id) == wanted.end()) {
        continue;
      }
      const fs::path file =
          fs::path(t.contract).is_absolute() ? fs::path(t.contract) : root / t.contract;
      tasks.push_back(fs::is_regular_file(file) ? task::load_contract(file)
                                                : task::find_task(root, t.id));
    }
    for (const auto& w : wanted) {
      if (std::none_of(tasks.begin(), tasks.end(),
                       [&](const task::contract& c) { return c.id == w; })) {
        fail_input("--tasks: {} is not in the table {}", w, opts->table_file);
      }
    }
    search::experiment_options o;
    o.seeds.clear();
    for (int s = 1; s <= opts->seeds; ++s) {
      o.seeds.push_back(static_cast<uint64_t>(s));
    }
    o.max_evaluations = opts->max_evals;
    o.rollouts = opts->rollouts;
    o.target = opts->target;
    const auto say = [&](const std::string& line) {
      if (!globals.quiet) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      }
    };
    const auto r = search::run_memory_experiment(tasks, table, o, say);
    fs::create_directories(opts->out_dir);
    write_file_atomic(fs::path(opts->out_dir) / "memory-experiment.json", r.to_json().dump(2) + "\n");
    write_file_atomic(fs::path(opts->out_dir) / "memory-experiment.svg", search::experiment_svg(r));
    fmt::print("evaluations to {:.0f}% of the best, with memory / without, over {} runs: {:.3f}\n",
               100 * opts->target, r.runs.size(), r.ratio());
    const auto hard = r.hard_tasks();
    fmt::print("where the built-in order does not reach it first ({} tasks: {}): {:.3f}\n",
               hard.size(), fmt::join(hard, " "), r.hard_ratio());
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
