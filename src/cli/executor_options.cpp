#include "cli/executor_options.hpp"

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/process.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

namespace kb::cli {

void add_executor_options(CLI::App& command, executor_options& opt) {
  const CLI::Validator gpu_list(
      [](std::string& v) {
        if (v.empty()) {
          return std::string();
        }
        try {
          search::parse_gpu_spec(v);
        } catch (const kb::input_error& e) {
          // CLI11 names the option in front already.
          const std::string why = e.what();
          return why.starts_with("--gpus ") ? why.substr(7) : why;
        }
        return std::string();
      },
      "all|N|LIST");
  command
      .add_option("--gpus", opt.gpus,
                  "evaluate on several GPUs of this host: all, a count, or indices/UUIDs "
                  "separated by commas (one worker per GPU)")
      ->envname("KBLASTER_GPUS")
      ->check(gpu_list);
  command.add_option("--executor", opt.executor, "local (this host) or slurm")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->envname("KBLASTER_EXECUTOR");
  command
      .add_option("--slurm-partition", opt.slurm.partition,
                  "sbatch --partition (else [slurm] partition)")
      ->envname("KBLASTER_SLURM_PARTITION");
  command
      .add_option("--slurm-account", opt.slurm.account, "sbatch --account (else [slurm] account)")
      ->envname("KBLASTER_SLURM_ACCOUNT");
  command
      .add_option("--slurm-gres", opt.slurm.gres,
                  "sbatch --gres per evaluation job (else [slurm] gres, else gpu:1; \"\" on a "
                  "cluster without GPUs)")
      ->envname("KBLASTER_SLURM_GRES");
  command
      .add_option("--slurm-time", opt.slurm.time,
                  "sbatch --time per evaluation job (else [slurm] time)")
      ->envname("KBLASTER_SLURM_TIME");
  command
      .add_option("--slurm-setup", opt.slurm.setup,
                  "shell lines each evaluation job runs before the worker, e.g. \"module load "
                  "cuda/13.0\" (else [slurm] setup)")
      ->envname("KBLASTER_SLURM_SETUP");
  command
      .add_option("--slurm-max-jobs", opt.slurm.max_jobs,
                  "evaluation jobs submitted at once (else [slurm] max_jobs, else 64)")
      ->check(CLI::Range(1, 100000));
  const CLI::Validator sbatch_arg([](std::string& v) { return search::sbatch_arg_problem(v); },
                                  "ARG");
  command
      .add_option("--slurm-sbatch-arg", opt.sbatch_args,
                  "one more sbatch option in one word, e.g. --slurm-sbatch-arg=--qos=high "
                  "(repeatable; replaces [slurm] sbatch_args)")
      ->check(sbatch_arg);
}

std::string executor_plan::describe() const {
  if (kind == "local") {
    return "local (this process, one GPU)";
  }
  if (kind == "gpus") {
    return fmt::format("one worker per GPU (--gpus {})", gpus);
  }
  return fmt::format("slurm: {} ({})", search::describe(slurm),
                     config_file
                         ? "settings from " + config_file->string() + " and the command line"
                         : "settings from the command line");
}

executor_plan plan_executor(const executor_options& opt,
                            const std::optional<std::filesystem::path>& config) {
  executor_plan plan;
  plan.gpus = opt.gpus;
  if (opt.executor == "slurm") {
    if (!opt.gpus.empty()) {
      fail_input(
          "--gpus is for one host; with --executor slurm each job gets one GPU (--slurm-gres)");
    }
    plan.kind = "slurm";
    plan.config_file = find_config_file(config);
    if (plan.config_file) {
      search::apply(search::slurm_settings_from_toml(*plan.config_file), plan.slurm);
    }
    search::slurm_settings line = opt.slurm;
    if (!opt.sbatch_args.empty()) {
      line.sbatch_args = opt.sbatch_args;
    }
    search::apply(line, plan.slurm);
  } else if (!opt.gpus.empty()) {
    plan.kind = "gpus";
  }
  return plan;
}

std::unique_ptr<search::executor>
make_executor(const global_options& globals, const executor_plan& plan,
              const std::filesystem::path& root, store::store& st, int64_t run,
              const std::function<void(const std::string&)>& say) {
  if (plan.kind == "local") {
    return search::make_local_executor(root);
  }
  const std::string location = store::resolve_dir(globals.store).string();
  search::queue_options q;
  q.store.dir = location;
  q.store.files = st.shared() ? st.dir() : std::filesystem::path();
  q.run = run;
  q.say = say;
  const auto logs = st.dir() / "workers" / fmt::format("run-{}", run);
  if (plan.kind == "slurm") {
    if (!st.shared()) {
      say("note: the store is a folder; Slurm jobs on other hosts need a postgresql:// store "
          "and a shared KBLASTER_STORE_FILES");
    }
    q.devices = fmt::format("slurm:{}:{}:{}", plan.slurm.partition, plan.slurm.account,
                            plan.slurm.gres);
    search::slurm_options s = plan.slurm;
    s.log_dir = logs;
    s.store_files = st.shared() ? st.dir().string() : "";
    return search::make_queue_executor(root, q,
                                       search::make_slurm_workers(self_executable(), location, s));
  }
  const auto uuids = search::resolve_gpus(plan.gpus);
  say(fmt::format("{} GPU workers: {}", uuids.size(), fmt::join(uuids, ", ")));
  q.devices = fmt::format("gpus:{}", fmt::join(uuids, ","));
  return search::make_queue_executor(
      root, q, search::make_gpu_workers(self_executable(), location, uuids, logs));
}

} // namespace kb::cli
