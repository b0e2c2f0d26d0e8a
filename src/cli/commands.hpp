// The CLI: one function per command family, registered on a CLI11 app in commands.cpp.
#pragma once

#include "cli/preflight.hpp"
#include "eval/eval.hpp"
#include "search/optimize.hpp"
#include "store/store.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::cli {

std::string_view help_text();
// The entries of the help text for one command (`eval`) or subcommand (`tasks import`).
std::string command_help(const std::vector<std::string>& words);

// Options every command sees.
struct global_options {
  std::optional<std::filesystem::path> root;    // project folder (tasks/, include/)
  std::optional<std::filesystem::path> store;   // store folder or postgresql:// URL
  std::vector<std::filesystem::path> task_dirs; // --tasks: folders of tasks besides tasks/
  bool quiet = false;
};

int run(int argc, char** argv);

// --config FILE: the config file (common/config.hpp) instead of $KBLASTER_CONFIG or the default.
void add_config_option(CLI::App& command, std::optional<std::filesystem::path>& config);

// Runs the preflight checks, printing each (unless --quiet), and records the report in `st`.
// `reuse_within` > 0 takes the GPU checks from a usable preflight that recent on this device
// (preflight_options::reuse_within).
std::optional<cli::preflight_report>
run_preflight(const global_options& globals, bool no_sandbox,
              const std::optional<llm::client_config>& llm, store::store& st,
              std::chrono::seconds reuse_within = std::chrono::seconds(0));

// The store named by --store, $KBLASTER_HOME or the default location.
store::store open_store(const global_options& globals);

// The device's ceilings (measured once per device, driver and toolkit, else the conservative
// default) and the gate's delta (from the device's A/A calibration, else 1%) into `o`, each
// printed with its source unless --quiet.
void apply_device_calibration(eval::options& o, store::store& st, const global_options& globals);
std::string_view no_gate_calibration_note();

// Exit status of bench: 4 when any kernel was rejected or failed, else 3 when any was blocked,
// else 0.
int exit_for_bench(const std::vector<eval::verdict>& verdicts);

// Each command family adds its subcommands to `app`; the callback it installs sets `*result`
// to the process exit code.
void add_tasks_commands(CLI::App& app, const global_options& globals, int* result);
// tasks lower (after add_tasks_commands).
void add_lower_commands(CLI::App& app, const global_options& globals, int* result);
// An imported pytorch task with a graph.json lowered onto its family (src/graph/lower.hpp), or
// returned unlowered with contract::not_lowered saying why; other tasks as they are. With
// `describe` and PyTorch on this machine, the module is described first (its state and outputs).
task::contract lowered_contract(const std::filesystem::path& root, const task::contract& c,
                                bool describe);
void add_eval_commands(CLI::App& app, const global_options& globals, int* result);
void add_bench_commands(CLI::App& app, const global_options& globals, int* result);
void add_preflight_commands(CLI::App& app, const global_options& globals, int* result);
void add_optimize_commands(CLI::App& app, const global_options& globals, int* result);
void add_check_commands(CLI::App& app, const global_options& globals, int* result);
void add_llm_commands(CLI::App& app, const global_options& globals, int* result);
// runs list|show, store verify|gc, evidence export|check.
void add_store_commands(CLI::App& app, const global_options& globals, int* result);
void add_strategies_commands(CLI::App& app, const global_options& globals, int* result);
void add_profile_commands(CLI::App& app, const global_options& globals, int* result);
void add_experiment_commands(CLI::App& app, const global_options& globals, int* result);
// calibrate, and the hidden device-limits-probe.
void add_calibrate_commands(CLI::App& app, const global_options& globals, int* result);
// serve: the dashboard (runs kblaster-serve beside the binary).
void add_serve_commands(CLI::App& app, const global_options& globals, int* result);
// queue work|status: evaluation jobs in the store's queue.
void add_queue_commands(CLI::App& app, const global_options& globals, int* result);

} // namespace kb::cli
