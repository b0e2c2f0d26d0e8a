// The persistent store: the project's memory and evidence. Blobs (sources, binaries, logs, timing
// samples, result documents) live in a content-addressed folder named by their SHA-256; rows that
// tie them together (tasks, environments, runs, candidates, builds, evaluations, outcomes,
// experiences, jobs) live in SQLite (a folder, the embedded default) or in PostgreSQL (a
// postgresql:// URL: the store several hosts share, with the blobs in a shared folder). Every write
// is one transaction that takes the write lock up front and is durable when it returns, so a crash,
// a kill -9 or a second run at the same time never loses or half-writes a record. docs/store.md
// describes the layout and the schema.
//
// A `store` object is one connection: use one per thread, and open a new one after fork().
#pragma once

#include "common/names.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::store {

namespace fs = std::filesystem;

enum class run_status { running, finished, interrupted };
inline constexpr auto run_status_names =
    name_table<run_status>({{run_status::running, "running"},
                            {run_status::finished, "finished"},
                            {run_status::interrupted, "interrupted"}});
static_assert(run_status_names.well_formed());
std::string to_string(run_status s);
std::optional<run_status> run_status_from_string(const std::string& s);

// How a candidate compared with its baseline (rejected: failed verification; error: the tool or
// the candidate crashed; blocked: a stage could not run here).
enum class verdict { improved, same, regressed, inconclusive, rejected, error, blocked };
inline constexpr auto verdict_names = name_table<verdict>({{verdict::improved, "improved"},
                                                           {verdict::same, "same"},
                                                           {verdict::regressed, "regressed"},
                                                           {verdict::inconclusive, "inconclusive"},
                                                           {verdict::rejected, "rejected"},
                                                           {verdict::error, "error"},
                                                           {verdict::blocked, "blocked"}});
static_assert(verdict_names.well_formed());
std::string to_string(verdict v);
std::optional<verdict> verdict_from_string(const std::string& s);

enum class candidate_origin { baseline, portfolio, proposer, import, adversarial };
inline constexpr auto candidate_origin_names =
    name_table<candidate_origin>({{candidate_origin::baseline, "baseline"},
                                  {candidate_origin::portfolio, "portfolio"},
                                  {candidate_origin::proposer, "proposer"},
                                  {candidate_origin::import, "import"},
                                  {candidate_origin::adversarial, "adversarial"}});
static_assert(candidate_origin_names.well_formed());
std::string to_string(candidate_origin o);
std::optional<candidate_origin> candidate_origin_from_string(const std::string& s);

// ---- Where the store lives ----

// `explicit_dir` (--store), else $KBLASTER_STORE, else $KBLASTER_HOME, else
// ~/.local/share/kblaster. A folder, or a postgresql:// URL.
fs::path resolve_dir(const std::optional<fs::path>& explicit_dir);
// Whether a store location names a PostgreSQL database (postgresql://... or postgres://...).
bool is_database_url(const std::string& location);
// statfs(2) f_type of the filesystem holding `dir`.
uint64_t filesystem_type(const fs::path& dir);
// The name of the network or userspace filesystem `f_type` denotes ("NFS", "SMB2", "FUSE"), on
// which SQLite's file locking cannot be trusted; nullopt for a local one.
std::optional<std::string> network_filesystem_name(uint64_t f_type);

struct open_options {
  fs::path dir; // a folder, or a postgresql:// URL
  // With a URL: the folder for the blobs, which every host using the store must see at the same
  // path (a shared filesystem). Empty: $KBLASTER_STORE_FILES.
  fs::path files;
  std::function<uint64_t(const fs::path&)> filesystem_type = store::filesystem_type;
  int busy_timeout_ms = 10000; // [milliseconds] how long a writer waits for another's lock
  // For readers (the dashboard): the store must exist with the current schema; nothing is
  // created, migrated or reaped.
  bool read_only = false;
};

// ---- Records ----

struct blob_ref {
  std::string digest; // SHA-256, lower-case hex
  uint64_t size = 0;  // [bytes]
};

// The machine a measurement was taken on. Stored once per distinct content.
struct environment {
  std::string gpu_name;
  std::string gpu_uuid;
  int64_t sm_count = 0;
  int64_t sm_clock_mhz = 0;     // [MHz] maximum SM clock
  int64_t memory_clock_mhz = 0; // [MHz]
  std::string driver;
  std::string cuda_runtime;
  std::string nvcc_version;
  std::string hostname;
  // Anything else worth keeping (L2 size, ECC, compute capability, ...).
  nlohmann::json extra = nlohmann::json::object();

  nlohmann::json to_json() const;
};

// Seconds since the epoch of a time as the store writes it (UTC, ISO 8601:
// "2026-12-06T19:45:15.785Z"); nullopt when it does not parse.
std::optional<double> utc_seconds(const std::string& time);

struct run_info {
  int64_t id = 0;
  std::string kind; // eval, bench, optimize, calibrate, ...
  nlohmann::json args;
  std::string started;  // UTC, ISO 8601
  std::string finished; // empty while running
  run_status status = run_status::running;
  std::string outcome;
  std::string reason; // reason code
  std::string tool_version;
  int64_t evaluations = 0;
};

struct candidate_record {
  int64_t task = 0; // from record_task
  std::string source_digest;
  candidate_origin origin = candidate_origin::proposer;
  std::string strategy;
  nlohmann::json params = nlohmann::json::object();
  std::optional<int64_t> parent;
};

// What makes two builds interchangeable.
struct build_key {
  std::string source_digest;
  std::string flags; // the compiler flags as one string, in the order given
  std::string toolkit;
  std::string arch; // e.g. sm_90a
};

// Outcome "ok" marks a successful build (it must name a binary); anything else is a failure
// with a reason code.
struct build_record {
  build_key key;
  std::string outcome;
  std::string reason;
  std::optional<std::string> binary_digest;
  std::optional<std::string> log_digest;
  double seconds = 0; // [seconds] compile time
};

// One evaluation of a candidate. The key columns are what reports and queries need; `detail` is
// the full result document and `samples` every timing sample, both kept as blobs.
struct evaluation_record {
  int64_t run = 0;
  int64_t candidate = 0;
  std::optional<int64_t> baseline; // the candidate it was compared with
  std::optional<int64_t> environment;
  std::optional<int64_t> build;
  std::string shape;
  store::verdict verdict = store::verdict::error;
  std::string reason;                     // reason code
  std::optional<double> candidate_median; // [seconds]
  std::optional<double> baseline_median;  // [seconds]
  std::optional<double> speedup;          // baseline median / candidate median
  std::optional<double> ci_low;           // 95% interval of the speedup
  std::optional<double> ci_high;
  std::optional<double> p_value;        // the gate's p (statistics.p of the evaluation)
  std::optional<double> floor_fraction; // roofline floor / candidate median
  nlohmann::json samples;               // null when nothing was timed
  nlohmann::json correctness = nlohmann::json::object();
  bool sandboxed = false;
  nlohmann::json detail = nlohmann::json::object();
};

// An evaluation as read back: the record without its blobs (fetch them by digest), plus context.
struct evaluation_row {
  int64_t id = 0;
  std::string task_id;
  std::string strategy;
  candidate_origin origin = candidate_origin::proposer;
  std::string samples_digest; // empty when there were no samples
  std::string detail_digest;
  std::string created;
  evaluation_record record;
};

// The result of a run for one task.
struct outcome_record {
  int64_t run = 0;
  int64_t task = 0;
  std::string outcome;
  std::string reason;
  std::optional<int64_t> best_candidate;
};

// One attempt of the optimization loop, as the memory remembers it.
struct experience {
  int64_t id = 0;      // set when read back
  std::string created; // set when read back
  std::optional<int64_t> run;
  std::string task_id;
  std::string family;
  nlohmann::json op_features = nlohmann::json::object();
  std::string shape;
  std::string dtype;
  std::string gpu; // GPU name, as in environment::gpu_name
  std::optional<int64_t> environment;
  std::string state_before; // bottleneck state before the attempt
  std::string strategy;
  nlohmann::json params = nlohmann::json::object();
  std::optional<double> predicted_speedup;
  std::optional<double> measured_speedup; // absent when it did not compile or verify
  bool correct = false;
  std::string failure_reason; // reason code; empty on success
};

// What a device can do, measured by `kblaster calibrate --device` (eval/device_limits). Rates of
// tensor cores are absent where the device has none for that type.
struct device_limits {
  int64_t id = 0;      // set when read back
  std::string created; // set when read back
  std::string gpu_uuid;
  std::string gpu_name;
  std::string driver;
  std::string toolkit;
  double copy_bandwidth = 0;               // [bytes/s] device-to-device copy, bytes read + written
  double read_bandwidth = 0;               // [bytes/s] read-only stream
  double fp32_flops = 0;                   // [FLOP/s] fp32 FMA, 2 FLOP per FMA
  std::optional<double> fp16_tensor_flops; // [FLOP/s] mma, fp32 accumulate
  std::optional<double> bf16_tensor_flops; // [FLOP/s]
  std::optional<double> tf32_tensor_flops; // [FLOP/s]
  nlohmann::json detail = nlohmann::json::object();
};

// How the timing gate behaves on a device: A/A comparisons of baselines against themselves
// (`kblaster calibrate`). The delta it sets is what eval, optimize and bench use there.
struct gate_calibration {
  int64_t id = 0;      // set when read back
  std::string created; // set when read back
  std::string gpu_uuid;
  std::optional<int64_t> run;
  int64_t comparisons = 0;
  double false_positive_rate = 0; // share of A/A comparisons with p < alpha
  double not_same_rate = 0;       // share whose verdict is not `same`
  double spread = 0;              // [fraction] 95th percentile of the A/A reach
  double delta = 0;               // [fraction] max(1%, spread)
  nlohmann::json detail = nlohmann::json::object();
};

struct verify_report {
  int64_t blobs_checked = 0;
  std::vector<std::string> corrupt;  // digests whose file no longer hashes to its name
  std::vector<std::string> missing;  // digests a row references that have no file
  std::vector<std::string> database; // what integrity_check and foreign_key_check found
  // Files that are no catalogued blob: left by a crash, harmless, removed by gc.
  std::vector<fs::path> stray;
  bool ok() const { return corrupt.empty() && missing.empty() && database.empty(); }
};

struct gc_report {
  int64_t removed_blobs = 0;
  uint64_t removed_bytes = 0;
  int64_t removed_stray = 0;
  int64_t kept_recent = 0; // unreferenced but younger than the grace period
};

// ---- The job queue ----

enum class job_state { queued, running, done, failed };
inline constexpr auto job_state_names = name_table<job_state>({{job_state::queued, "queued"},
                                                               {job_state::running, "running"},
                                                               {job_state::done, "done"},
                                                               {job_state::failed, "failed"}});
static_assert(job_state_names.well_formed());
std::string to_string(job_state s);
std::optional<job_state> job_state_from_string(const std::string& s);

// What makes two jobs the same work: the task, the candidate's source digest and the protocol (a
// digest of everything else that decides the result: baseline, options).
struct job_key {
  std::string task;
  std::string candidate_digest;
  std::string protocol;
};

struct job {
  int64_t id = 0;
  std::optional<int64_t> run; // the run that enqueued it first
  job_key key;
  nlohmann::json payload; // what the worker needs (the submitter's typed request, as JSON)
  job_state state = job_state::queued;
  int attempts = 0; // times a worker took it
  int max_attempts = 1;
  std::string worker;        // who holds or held it
  int64_t lease_expires = 0; // [ms since the epoch]
  nlohmann::json result;     // set when done
  std::string reason;        // reason code when failed
};

// What an enqueue found: a new job, one already waiting or running, one done (its result is
// reused), a failed one queued again (`retried`), or a failed one whose retries are spent.
enum class enqueue_outcome { created, waiting, done, retried, failed };
std::string to_string(enqueue_outcome o);

struct enqueue_result {
  int64_t id = 0;
  enqueue_outcome outcome = enqueue_outcome::created;
  int attempts = 0;   // attempts the job has had, over every enqueue
  std::string reason; // the reason of the last failure, kept when it is queued again
};

struct queue_counts {
  int64_t queued = 0;
  int64_t running = 0;
  int64_t done = 0;
  int64_t failed = 0;
};

struct evidence_report {
  int64_t run = 0;
  int64_t files = 0;
  std::string manifest_digest; // SHA-256 of MANIFEST: note it to detect a rewritten manifest
  std::vector<std::string> problems;
  bool ok() const { return problems.empty(); }
};

// What an evaluation's detail blob says of it, for the evidence check to compare with its row.
// The store keeps the blob opaque: its reader (eval::recorded_outcome_of) is given by the caller.
struct recorded_outcome {
  std::string verdict;
  std::string reason;
  // The gate's figures, when it compared the two.
  std::optional<double> speedup;
  std::optional<double> baseline_median; // [s]
  std::optional<double> candidate_median;
};
// Reads a detail blob's text; throws when it is not a record.
using record_reader = std::function<recorded_outcome(const std::string& detail_blob)>;

class store {
public:
  // Opens the store at options.dir, creating it (folders 0700, store.sqlite 0600) and upgrading
  // its schema as needed; runs of this machine whose process is gone are marked interrupted.
  // With options.read_only: none of that (kb::input_error when there is no store there, or one of
  // another schema).
  explicit store(const open_options& options);
  explicit store(const fs::path& dir);
  ~store();
  store(store&&) noexcept;
  store& operator=(store&&) noexcept;

  // The folder of the blobs (and of the database, for SQLite).
  const fs::path& dir() const;
  // Where the store is, for messages: the folder, or the URL without its password.
  std::string location() const;
  bool shared() const; // PostgreSQL
  int schema_version() const;

  // ---- Blobs ----
  // A blob no row references yet is safe from gc for its grace period (an hour by default);
  // reference it in a record soon, or store it inside `atomically` together with the record.
  blob_ref put(std::string_view bytes);
  blob_ref put_file(const fs::path& path);
  // The bytes of a blob, checked against its digest (kb::error when missing or corrupt).
  std::string get(const std::string& digest) const;
  fs::path path_of(const std::string& digest) const;
  bool exists(const std::string& digest) const;

  // Runs `body` in one transaction: every record it makes is stored, or none is.
  void atomically(const std::function<void()>& body);

  // ---- Records; each returns the row's id ----
  int64_t record_task(const task::contract& contract);
  int64_t record_environment(const environment& env);
  int64_t begin_run(const std::string& kind, const nlohmann::json& args);
  void finish_run(int64_t run, run_status status, const std::string& outcome,
                  const std::string& reason);
  // A candidate is stored once per (task, source); recording it again returns the first id.
  int64_t record_candidate(const candidate_record& candidate);
  int64_t record_build(const build_record& build);
  int64_t record_evaluation(const evaluation_record& evaluation);
  void record_outcome(const outcome_record& outcome);
  int64_t record_experience(const experience& exp);
  // Attaches a named blob (a profiler report, a log) to a run.
  void attach(int64_t run, const std::string& name, const std::string& digest);
  int64_t record_device_limits(const device_limits& limits);
  int64_t record_gate_calibration(const gate_calibration& calibration);
  // The newest limits measured on this device with this driver and toolkit.
  std::optional<device_limits> find_device_limits(const std::string& gpu_uuid,
                                                  const std::string& driver,
                                                  const std::string& toolkit) const;
  // The newest gate calibration of this device.
  std::optional<gate_calibration> find_gate_calibration(const std::string& gpu_uuid) const;
  // The GPU names that experiences were recorded on.
  std::vector<std::string> gpus() const;
  // The run's attachments as (name, digest), in the order they were attached.
  std::vector<std::pair<std::string, std::string>> attachments(int64_t run) const;

  // ---- Queries ----
  // The binary of a successful build with this key whose blob is present and intact.
  std::optional<std::string> find_build(const build_key& key) const;
  std::vector<run_info> list_runs(int limit) const; // newest first
  std::optional<run_info> find_run(int64_t run) const;
  std::vector<evaluation_row> evaluations_of_run(int64_t run) const;
  std::vector<outcome_record> outcomes_of_run(int64_t run) const;
  // The task id ("023") of a tasks row, as outcome_record::task names it.
  std::optional<std::string> task_id_of(int64_t task_row) const;
  // What strategies did on tasks of a family on a GPU (one strategy, or all), newest first.
  std::vector<experience>
  find_experiences(const std::string& family, const std::string& gpu,
                   const std::optional<std::string>& strategy = std::nullopt) const;
  // Marks runs of this machine whose process is gone as interrupted; returns how many.
  int reap_interrupted_runs();

  // ---- The job queue ----
  // Enqueues a job unless one with the same key exists. A failed one is queued again with
  // `max_attempts` more attempts while it has had fewer than max_attempts * (1 + max_retries) in
  // all (a transient fault is not a permanent failure), its last reason kept until it finishes.
  enqueue_result submit(const job_key& key, const nlohmann::json& payload,
                        std::optional<int64_t> run = std::nullopt, int max_attempts = 3,
                        int max_retries = 3);
  // submit(), returning the job's id.
  int64_t enqueue(const job_key& key, const nlohmann::json& payload,
                  std::optional<int64_t> run = std::nullopt, int max_attempts = 3);
  // Takes the oldest queued job, or a running one whose lease expired, for `worker`, with a lease
  // of `lease`. Many workers, on many hosts, never take the same job at once (PostgreSQL:
  // SELECT ... FOR UPDATE SKIP LOCKED; SQLite: the write lock). A running job whose lease expired
  // after max_attempts takes fails with reason queue.attempts_exhausted.
  // `only`: take that job or none (a cluster job started for one queue job).
  std::optional<job> claim(const std::string& worker, std::chrono::milliseconds lease,
                           std::optional<int64_t> only = std::nullopt);
  // Extends the lease; false when the job is no longer this worker's.
  bool renew(int64_t job, const std::string& worker, std::chrono::milliseconds lease);
  // Stores the result and marks the job done (unless another worker finished it first: the first
  // result stays). Returns whether this call finished it.
  bool complete(int64_t job, const std::string& worker, const nlohmann::json& result);
  // Gives the job back to the queue (`retry`, while attempts remain) or marks it failed.
  void release(int64_t job, const std::string& worker, const std::string& reason, bool retry);
  // Puts a failed or running job back in the queue with fresh attempts (the executor resubmits
  // what a cluster lost).
  void requeue(int64_t job, const std::string& reason);
  // Marks a job that is not done failed, with a reason (an executor gives up on it).
  void abandon(int64_t job, const std::string& reason);
  std::optional<job> find_job(int64_t job) const;
  std::optional<job> find_job(const job_key& key) const;
  queue_counts count_jobs() const;

  // ---- Maintenance and evidence ----
  verify_report verify() const;
  // Removes blobs no row references, and files left by interrupted writes, once they are older
  // than `grace` (a blob stored just now may be about to be referenced).
  gc_report gc(std::chrono::seconds grace, bool dry_run = false);
  // Writes the run's rows (rows.json), the blobs they reference (blobs/<digest>) and a MANIFEST
  // of SHA-256 per file to `out`, which must not exist or be empty. Returns the evidence check.
  evidence_report export_evidence(int64_t run, const fs::path& out,
                                  const record_reader& read) const;

private:
  struct impl;
  std::unique_ptr<impl> m_impl;
};

// Checks an exported evidence folder: every file listed in MANIFEST with its hash, nothing else
// present, no symlinks, every blob named by its hash and every blob rows.json lists present;
// each evaluation row's verdict, reason, medians and speedup those of its detail blob as `read`
// reads it, the speedup the ratio of the medians.
evidence_report check_evidence(const fs::path& dir, const record_reader& read);

} // namespace kb::store
