// The options that choose where evaluations run (--gpus, --executor, --slurm-*), shared by
// optimize and bench, and the executor they make.
#pragma once

#include "cli/commands.hpp"
#include "search/executor.hpp"

#include <memory>
#include <string>

namespace kb::cli {

struct executor_options {
  std::string gpus;               // all | N | LIST; empty: this process, one GPU
  std::string executor = "local"; // local | slurm
  std::string partition;
  std::string account;
  std::string gres = "gpu:1";
  std::string time_limit;
  int max_jobs = 64;
};

void add_executor_options(CLI::App& command, executor_options& opt);

// The executor the options name. `log_dir`: where workers' logs go.
std::unique_ptr<search::executor> make_executor(const global_options& globals,
                                                const executor_options& opt,
                                                const std::filesystem::path& root, store::store& st,
                                                int64_t run,
                                                const std::function<void(const std::string&)>& say);

} // namespace kb::cli
