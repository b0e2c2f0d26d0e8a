// `kblaster queue work` (a worker: takes evaluation jobs from the store's queue, writes results
// back; what --gpus starts per GPU and what a Slurm job runs) and `kblaster queue status`.
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "search/executor.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

namespace kb::cli {

void add_queue_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* queue = app.add_subcommand("queue", "the store's queue of evaluation jobs");
  queue->require_subcommand(1);

  // Each subcommand's options, with their defaults; CLI11 writes into them while parsing.
  struct options {
    int64_t job = 0;
    int max_jobs = 0;
    double idle_exit = 0;
    double lease = 120;
    std::string name;
    bool forever = false;
    int probe_count = 100;
    double probe_seconds = 0.5;
    std::string probe_tag = "probe";
    int64_t show_job = 0;
  };
  const auto opts = std::make_shared<options>();

  auto* work = queue->add_subcommand("work", "take evaluation jobs from the queue and run them");
  work->add_option("--job", opts->job, "run this job only (what a cluster job does)");
  work->add_option("--max-jobs", opts->max_jobs, "stop after this many jobs (0: no limit)");
  work->add_option("--idle-exit", opts->idle_exit,
                   "stop after this many seconds without a job (0: when the queue is empty; a "
                   "worker per GPU waits for work until it is stopped)");
  work->add_option("--lease", opts->lease, "seconds a job stays this worker's without renewal")
      ->check(CLI::Range(1.0, 86400.0));
  work->add_option("--name", opts->name, "the worker's name in the queue (default host/pid)");
  work->add_flag("--forever", opts->forever, "wait for jobs until stopped");
  work->callback([&globals, result, opts] {
    search::worker_options o;
    o.name = opts->name;
    o.lease = std::chrono::milliseconds(static_cast<int64_t>(opts->lease * 1000));
    o.max_jobs = opts->max_jobs;
    if (opts->job > 0) {
      o.only_job = opts->job;
    }
    o.idle_exit = opts->forever ? std::chrono::milliseconds(std::chrono::hours(24 * 365))
                          : std::chrono::milliseconds(static_cast<int64_t>(opts->idle_exit * 1000));
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
  probe->add_option("--count", opts->probe_count, "jobs")->check(CLI::Range(1, 1000000));
  probe->add_option("--seconds", opts->probe_seconds, "each job's work [s]")
      ->check(CLI::Range(0.0, 3600.0));
  probe->add_option("--tag", opts->probe_tag,
                    "tells batches apart (jobs with one tag and index are one)");
  probe->callback([&globals, result, opts] {
    auto st = open_store(globals);
    std::map<store::enqueue_outcome, int> found;
    st.atomically([&] {
      for (int i = 0; i < opts->probe_count; ++i) {
        ++found[st.submit({"probe", fmt::format("{}-{}", opts->probe_tag, i), "probe"},
                          {{"probe_seconds", opts->probe_seconds}})
                    .outcome];
      }
    });
    // What the queue holds now for these jobs: only new and retried ones will be worked.
    fmt::print("{} probe jobs of {} s in {}: {} enqueued, {} already waiting, {} already done, {} "
               "failed and queued again, {} failed with no retry left\n",
               opts->probe_count, opts->probe_seconds, st.location(), found[store::enqueue_outcome::created],
               found[store::enqueue_outcome::waiting], found[store::enqueue_outcome::done],
               found[store::enqueue_outcome::retried], found[store::enqueue_outcome::failed]);
    *result = exit_code::ok;
  });

  auto* status = queue->add_subcommand("status", "how many jobs are queued, running, done, failed");
  status->add_option("--job", opts->show_job, "one job");
  status->callback([&globals, result, opts] {
    auto st = open_store(globals);
    if (opts->show_job > 0) {
      const auto j = st.find_job(opts->show_job);
      if (!j) {
        fail_input("no job {} in the store {}", opts->show_job, st.location());
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
