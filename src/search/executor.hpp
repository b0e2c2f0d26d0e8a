// Executors: what runs the evaluations a search asks for. The search calls `evaluate` (blocking;
// several tasks may call at once, up to `slots()`) and never learns where the work ran:
//   - local: in this process, one evaluation at a time on this host's GPU (the default);
//   - queue: each evaluation becomes a job in the store's queue, keyed by (task, candidate,
//     protocol), and workers (`kblaster queue work`) take jobs and write results back. Workers
//     come from a worker_provider: one per GPU of this host (pinned by UUID), or Slurm jobs.
//     A job already in the queue (another run asked for the same evaluation) is not run again:
//     its result is reused.
// An evaluation is self-contained (the candidate's sessions and its baseline's run in one job, on
// one GPU), so a verdict does not depend on how many GPUs there are.
#pragma once

#include "common/names.hpp"
#include "eval/eval.hpp"
#include "store/store.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kb::search {

namespace fs = std::filesystem;

// One evaluation as data that crosses processes: what eval::evaluate takes.
struct eval_request {
  fs::path project_root;
  fs::path task_file; // the task's task.toml (on a path every worker sees)
  eval::candidate_input candidate;
  eval::candidate_input baseline;
  eval::options options;
};
nlohmann::json to_json(const eval_request& r);
eval_request eval_request_from_json(const nlohmann::json& j);
// A result from a queue job (eval::to_json wrote it); kb::error for one that cannot be read.
eval::result eval_result_from_json(const nlohmann::json& j);
// The queue key: the task, the candidate source's digest and the protocol (the digest of the
// baseline's source, of every option that decides the result, of this tool's version and the
// judge protocol's version, and of `devices`: the GPUs the executor may run the job on). A result
// of another version or of other devices has another key, so it is never reused.
store::job_key job_key_of(const task::contract& c, const eval_request& r,
                          const std::string& devices = "");

class executor {
public:
  virtual ~executor() = default;
  virtual std::string name() const = 0;
  // How many evaluations can run at once.
  virtual int slots() const = 0;
  // Runs one evaluation and returns its result. Never throws for a bad candidate; a job the
  // workers could not finish comes back as verdict error with a queue.* or cluster.* reason.
  virtual eval::result evaluate(const task::contract& c, const eval::candidate_input& candidate,
                                const eval::candidate_input& baseline,
                                const eval::options& opt) = 0;
};

// Evaluations in this process, one at a time.
std::unique_ptr<executor> make_local_executor(fs::path project_root);

// Where queue workers come from.
class worker_provider {
public:
  virtual ~worker_provider() = default;
  virtual std::string name() const = 0;
  virtual int slots() const = 0;
  // Called every poll while jobs are pending (the queue ids): start workers, follow the ones
  // started, and put back in the queue (store::requeue) what a worker lost.
  virtual void tend(store::store& st, const std::vector<int64_t>& pending) = 0;
  // Stops every worker started.
  virtual void shutdown() = 0;
};

// How long an evaluation asked for on this thread may wait for its queue job: the search sets it
// to the end of its budget (--budget), so that a job no worker takes in time (no GPU free, a
// Slurm job pending) does not hold the run past it. Past the limit, a job still waiting for a
// worker is withdrawn (failed with reason budget.exhausted; a later enqueue of the same key, as
// `--resume` makes, retries it) and the evaluation is an error with that reason; a job a worker
// already holds runs on, and its result stays in the queue for reuse. The local executor does
// not wait on a queue: its evaluation in flight finishes. Scoped to the thread that makes it.
class wait_limit {
public:
  explicit wait_limit(std::chrono::steady_clock::time_point until);
  ~wait_limit();
  wait_limit(const wait_limit&) = delete;
  wait_limit& operator=(const wait_limit&) = delete;

private:
  std::optional<std::chrono::steady_clock::time_point> m_before;
};
// The limit a wait_limit of this thread set, if any.
std::optional<std::chrono::steady_clock::time_point> wait_limit_of_this_thread();

struct queue_options {
  store::open_options store;                   // the store the workers share
  std::chrono::milliseconds poll{200};         // how often results are looked for
  int max_attempts = 3;                        // per job
  std::optional<int64_t> run;                  // the run the jobs belong to
  std::string devices; // where jobs run (GPU UUIDs, a Slurm partition and gres): in each key
  // How long one evaluation may wait for its job; past it the job is abandoned (queue.deadline)
  // and the evaluation is an error. The search's budget (wait_limit) ends it sooner, and a stop
  // (SIGINT, SIGTERM) ends every wait at once (run.interrupted).
  std::chrono::seconds job_deadline{6 * 3600};
  std::function<void(const std::string&)> say; // progress lines (may be empty)
};
std::unique_ptr<executor> make_queue_executor(fs::path project_root, queue_options opt,
                                              std::unique_ptr<worker_provider> workers);

// `--gpus all|N|LIST` as written: all GPUs, the first N, or the GPUs a comma-separated list names
// by index or UUID ("0,2", "1," is GPU 1, "GPU-..."). Throws kb::input_error for text that is none
// of these, a count of 0, or a GPU named twice. Needs no GPU.
struct gpu_spec {
  bool all = false;
  size_t count = 0;               // the first N, when not 0
  std::vector<std::string> items; // indices ("0") and UUIDs ("GPU-..."), in order
};
gpu_spec parse_gpu_spec(const std::string& spec);

// `--gpus all|N|LIST` as GPU UUIDs, from `nvidia-smi -L`. Throws kb::input_error for a GPU that
// is not there, and for what parse_gpu_spec refuses.
std::vector<std::string> resolve_gpus(const std::string& spec);

// One `kblaster queue work` process per GPU of this host, each with CUDA_VISIBLE_DEVICES=<UUID>.
std::unique_ptr<worker_provider> make_gpu_workers(fs::path kblaster, std::string store_location,
                                                  std::vector<std::string> gpu_uuids,
                                                  fs::path log_dir);

// Cluster jobs through Slurm: one sbatch job per queue job (`kblaster queue work --job ID`),
// followed with squeue (sacct once squeue forgets it). A job the cluster lost (preempted, node
// failure, cancelled, or ended without finishing its queue job) is put back in the queue and
// submitted again, up to the queue's attempts; a job past its time limit fails with reason
// cluster.timeout.
struct slurm_options {
  std::string partition;
  std::string account;
  std::string gres = "gpu:1";     // "" on a cluster without GPUs
  std::string time_limit;         // sbatch --time, e.g. 30:00; "" for the partition's default
  std::vector<std::string> extra; // more sbatch arguments
  // Shell lines the job runs before the worker (`module load cuda/13.0`, `source env.sh`); a line
  // that fails ends the job (FAILED, resubmitted while attempts remain).
  std::string setup;
  int max_jobs = 64;       // submitted at once
  int resubmits = 3;       // per queue job, after the cluster lost it
  fs::path log_dir;        // where the jobs' output goes (a shared path)
  std::string store_files; // KBLASTER_STORE_FILES for the jobs, when the store is a URL
};
std::unique_ptr<worker_provider> make_slurm_workers(fs::path kblaster, std::string store_location,
                                                    slurm_options opt);

// One layer of Slurm settings: the [slurm] table of the config file, or the command line (flags
// and KBLASTER_SLURM_* variables). What a layer sets replaces what the layers before it set.
struct slurm_settings {
  std::optional<std::string> partition;
  std::optional<std::string> account;
  std::optional<std::string> gres;
  std::optional<std::string> time;                     // time_limit
  std::optional<std::vector<std::string>> sbatch_args; // extra
  std::optional<std::string> setup;
  std::optional<int> max_jobs;
  std::optional<int> resubmits;
};
// The [slurm] table of a config file (common/config.hpp; absent table: nothing set). Unknown
// keys, wrong types and values out of range are kb::input_error naming the file and the key.
slurm_settings slurm_settings_from_toml(const fs::path& file);
void apply(const slurm_settings& layer, slurm_options& opt);
// Why an extra sbatch argument cannot be used, or "" when it can: each is one option in one word
// ("--qos=high"), and not one the executor sets itself (--wrap, --parsable, --job-name, --output,
// --ntasks, --array).
std::string sbatch_arg_problem(const std::string& arg);
// "partition gpu, account proj42, gres gpu:1, time 30:00, 64 jobs at once, sbatch --qos=high".
std::string describe(const slurm_options& opt);

// What a Slurm job state means for the queue job it runs.
enum class cluster_fate {
  waiting,  // PENDING, CONFIGURING, REQUEUED, SUSPENDED, RESIZING
  running,  // RUNNING, COMPLETING, STAGE_OUT
  finished, // COMPLETED: the queue job should be done; if not, it is resubmitted
  lost,     // PREEMPTED, NODE_FAIL, BOOT_FAIL, CANCELLED, DEADLINE, OUT_OF_MEMORY: resubmit
  timeout,  // TIMEOUT: the evaluation took longer than the limit; fails (cluster.timeout)
  failed,   // FAILED: the worker exited non-zero; resubmitted while attempts remain
};
inline constexpr auto cluster_fate_names =
    name_table<cluster_fate>({{cluster_fate::waiting, "waiting"},
                              {cluster_fate::running, "running"},
                              {cluster_fate::finished, "finished"},
                              {cluster_fate::lost, "lost"},
                              {cluster_fate::timeout, "timeout"},
                              {cluster_fate::failed, "failed"}});
static_assert(cluster_fate_names.well_formed());
cluster_fate slurm_fate(const std::string& state);
std::string to_string(cluster_fate f);

// ---- The worker ----

struct worker_options {
  std::string name; // who takes the jobs (host/pid when empty)
  std::chrono::milliseconds lease{std::chrono::minutes(2)}; // renewed every third of it
  int max_jobs = 0;                                         // 0: no limit
  std::optional<int64_t> only_job;                          // take this job only
  std::chrono::milliseconds idle_exit{0};                   // stop after this long without work
  std::chrono::milliseconds poll{500};
};

struct worker_summary {
  int done = 0;
  int failed = 0;
};

// Takes jobs from the store's queue, evaluates them and writes the results back. On a machine
// without a GPU a job still compiles its candidates, runs the task's CPU oracle and the checker's
// self-test (detail.cpu_check), and reports the GPU stages blocked. `open` opens a connection
// to the store (the lease is renewed from a thread of its own).
worker_summary run_worker(const std::function<store::store()>& open, const worker_options& opt,
                          const std::function<void(const std::string&)>& say);

} // namespace kb::search
