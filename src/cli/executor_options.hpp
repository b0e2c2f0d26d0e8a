// The options that choose where evaluations run (--gpus, --executor, --slurm-*, and the [slurm]
// table of the config file), shared by optimize and bench, and the executor they make.
#pragma once

#include "cli/commands.hpp"
#include "search/executor.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kb::cli {

struct executor_options {
  std::string gpus;               // all | N | LIST; empty: this process, one GPU
  std::string executor = "local"; // local | slurm
  // The command line's layer of Slurm settings: the --slurm-* flags and KBLASTER_SLURM_*.
  search::slurm_settings slurm;
  std::vector<std::string> sbatch_args; // --slurm-sbatch-arg, repeated
};

// --gpus, --executor and the --slurm-* options. --gpus is checked while parsing (a usage error);
// which GPUs it names is resolved when the executor is made.
void add_executor_options(CLI::App& command, executor_options& opt);

// What the options ask for, resolved before any work so that a bad config file stops the command
// at once (kb::input_error naming the file and the key).
struct executor_plan {
  std::string kind = "local"; // local | gpus | slurm
  std::string gpus;           // as written
  // Slurm: the defaults, then the config file's [slurm] table, then the command line.
  search::slurm_options slurm;
  std::optional<std::filesystem::path> config_file; // the file the [slurm] table came from
  // One line for the output: where the evaluations run and, for Slurm, with which settings.
  std::string describe() const;
};
executor_plan plan_executor(const executor_options& opt,
                            const std::optional<std::filesystem::path>& config);

// The executor the plan names. Workers' logs go to <store>/workers/run-<run>/.
std::unique_ptr<search::executor> make_executor(const global_options& globals,
                                                const executor_plan& plan,
                                                const std::filesystem::path& root, store::store& st,
                                                int64_t run,
                                                const std::function<void(const std::string&)>& say);

} // namespace kb::cli
