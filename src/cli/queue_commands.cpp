// `kblaster queue work` (a worker: takes evaluation jobs from the store's queue, writes results
// back; what --gpus starts per GPU and what a Slurm job runs) and `kblaster queue status`.
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "search/executor.hpp"

#include <fmt/format.h>

#include <map>

namespace kb::cli {

void add_queue_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* queue = app.add_subcommand("queue", "the store's queue of evaluation jobs");
  queue->require_subcommand(1);

  auto* work = queue->add_subcommand("work", "take evaluation jobs from the queue and run them");
  static int64_t job = 0;
  static int max_jobs = 0;
  static double idle_exit = 0;
  static double lease = 120;
  static std::string name;
  work->add_option("--job", job, "run this job only (what a cluster job does)");
  work->add_option("--max-jobs", max_jobs, "stop after this many jobs (0: no limit)");
  work->add_option("--idle-exit", idle_exit,
                   "stop after this many seconds without a job (0: when the queue is empty; a "
                   "worker per GPU waits for work until it is stopped)");
  work->add_option("--lease", lease, "seconds a job stays this worker's without renewal")
      ->check(CLI::Range(1.0, 86400.0));
  work->add_option("--name", name, "the worker's name in the queue (default host/pid)");
  static bool forever = false;
  work->add_flag("--forever", forever, "wait for jobs until stopped");
  work->callback([&globals, result] {
    search::worker_options o;
    o.name = name;
    o.lease = std::chrono::milliseconds(static_cast<int64_t>(lease * 1000));
    o.max_jobs = max_jobs;
    if (job > 0) {
      o.only_job = job;
    }
    o.idle_exit = forever ? std::chrono::milliseconds(std::chrono::hours(24 * 365))
                          : std::chrono::milliseconds(static_cast<int64_t>(idle_exit * 1000));
    const auto say = [&](const std::string& line) {
      if (!globals.quiet) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      }
    };
    const auto summary = search::run_worker([&] { return open_store(globals); }, o, say);
    say(fmt::format("worker: {} jobs done, {} not run", summary.done, summary.failed));
    *result = summary.failed > 0 ? exit_code::tool : exit_code::ok;
  });

  auto* probe = queue->add_subcommand(
      "probe", "enqueue jobs that only wait a given time, to measure the queue and its workers");
  static int probe_count = 100;
  static double probe_seconds = 0.5;
  static std::string probe_tag = "probe";
  probe->add_option("--count", probe_count, "jobs")->check(CLI::Range(1, 1000000));
  probe->add_option("--seconds", probe_seconds, "each job's work [s]")
      ->check(CLI::Range(0.0, 3600.0));
  probe->add_option("--tag", probe_tag,
                    "tells batches apart (jobs with one tag and index are one)");
  probe->callback([&globals, result] {
    auto st = open_store(globals);
    std::map<store::enqueue_outcome, int> found;
    st.atomically([&] {
      for (int i = 0; i < probe_count; ++i) {
        ++found[st.submit({"probe", fmt::format("{}-{}", probe_tag, i), "probe"},
                          {{"probe_seconds", probe_seconds}})
                    .outcome];
      }
    });
    // What the queue holds now for these jobs: only new and retried ones will be worked.
    fmt::print("{} probe jobs of {} s in {}: {} enqueued, {} already waiting, {} already done, {} "
               "failed and queued again, {} failed with no retry left\n",
               probe_count, probe_seconds, st.location(), found[store::enqueue_outcome::created],
               found[store::enqueue_outcome::waiting], found[store::enqueue_outcome::done],
               found[store::enqueue_outcome::retried], found[store::enqueue_outcome::failed]);
    *result = exit_code::ok;
  });

  auto* status = queue->add_subcommand("status", "how many jobs are queued, running, done, failed");
  static int64_t show_job = 0;
  status->add_option("--job", show_job, "one job");
  status->callback([&globals, result] {
    auto st = open_store(globals);
    if (show_job > 0) {
      const auto j = st.find_job(show_job);
      if (!j) {
        fail_input("no job {} in the store {}", show_job, st.location());
      }
      fmt::print("job {}: {} (task {}, candidate {}, attempts {}/{}, worker {}{}{})\n", j->id,
                 store::to_string(j->state), j->key.task, j->key.candidate_digest.substr(0, 12),
                 j->attempts, j->max_attempts, j->worker.empty() ? "-" : j->worker,
                 j->reason.empty() ? "" : ", reason ", j->reason);
      if (j->state == store::job_state::done) {
        const auto r = search::eval_result_from_json(j->result);
        fmt::print("result: {} {}\n", eval::to_string(r.final), r.reason);
      }
      *result = exit_code::ok;
      return;
    }
    const auto c = st.count_jobs();
    fmt::print("{}: {} queued, {} running, {} done, {} failed\n", st.location(), c.queued,
               c.running, c.done, c.failed);
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
