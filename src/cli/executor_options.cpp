#include "cli/executor_options.hpp"

#include "common/error.hpp"
#include "common/process.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

namespace kb::cli {

void add_executor_options(CLI::App& command, executor_options& opt) {
  command
      .add_option("--gpus", opt.gpus,
                  "evaluate on several GPUs of this host: all, a count, or indices/UUIDs "
                  "separated by commas (one worker per GPU)")
      ->envname("KBLASTER_GPUS");
  command.add_option("--executor", opt.executor, "local (this host) or slurm")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->envname("KBLASTER_EXECUTOR");
  command.add_option("--slurm-partition", opt.partition, "sbatch --partition")
      ->envname("KBLASTER_SLURM_PARTITION");
  command.add_option("--slurm-account", opt.account, "sbatch --account")
      ->envname("KBLASTER_SLURM_ACCOUNT");
  command
      .add_option(
          "--slurm-gres", opt.gres,
          "sbatch --gres per evaluation job (default gpu:1; \"\" on a cluster without GPUs)")
      ->envname("KBLASTER_SLURM_GRES");
  command.add_option("--slurm-time", opt.time_limit, "sbatch --time per evaluation job")
      ->envname("KBLASTER_SLURM_TIME");
  command.add_option("--slurm-max-jobs", opt.max_jobs, "evaluation jobs submitted at once")
      ->check(CLI::Range(1, 100000));
}

std::unique_ptr<search::executor>
make_executor(const global_options& globals, const executor_options& opt,
              const std::filesystem::path& root, store::store& st, int64_t run,
              const std::function<void(const std::string&)>& say) {
  if (opt.executor == "local" && opt.gpus.empty()) {
    return search::make_local_executor(root);
  }
  const std::string location = store::resolve_dir(globals.store).string();
  search::queue_options q;
  q.store.dir = location;
  q.store.files = st.shared() ? st.dir() : std::filesystem::path();
  q.run = run;
  q.say = say;
  const auto logs = st.dir() / "workers" / fmt::format("run-{}", run);
  if (opt.executor == "slurm") {
    if (!opt.gpus.empty()) {
      fail_input(
          "--gpus is for one host; with --executor slurm each job gets one GPU (--slurm-gres)");
    }
    if (!st.shared()) {
      say("note: the store is a folder; Slurm jobs on other hosts need a postgresql:// store "
          "and a shared KBLASTER_STORE_FILES");
    }
    search::slurm_options s;
    s.partition = opt.partition;
    s.account = opt.account;
    s.gres = opt.gres;
    s.time_limit = opt.time_limit;
    s.max_jobs = opt.max_jobs;
    s.log_dir = logs;
    s.store_files = st.shared() ? st.dir().string() : "";
    return search::make_queue_executor(root, q,
                                       search::make_slurm_workers(self_executable(), location, s));
  }
  const auto uuids = search::resolve_gpus(opt.gpus);
  say(fmt::format("{} GPU workers: {}", uuids.size(), fmt::join(uuids, ", ")));
  return search::make_queue_executor(
      root, q, search::make_gpu_workers(self_executable(), location, uuids, logs));
}

} // namespace kb::cli
