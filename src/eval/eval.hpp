// Evaluation: verify a candidate against the task's float64 oracle, then time it against a
// baseline under the statistical gate. GPU work runs in worker processes (`kblaster worker`), one
// at a time per device: a candidate that crashes, hangs or corrupts its CUDA context ends only
// its worker, its failure becomes a verdict with a reason code, and the next job gets a fresh one.
#pragma once

#include "build/build.hpp"
#include "common/names.hpp"
#include "gpu/protocol.hpp"
#include "store/store.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::eval {

namespace fs = std::filesystem;

// Final word on one evaluation: the store's verdict, one enum for both (stored, so names
// round-trip through strings).
using verdict = store::verdict;
using store::to_string;
using store::verdict_from_string;

struct timing_options {
  int min_samples = 10;       // per side, per session
  int max_samples = 4000;     // per side, over all sessions (each session takes its share)
  double min_time = 0.5;      // [s] of measured time per side, over all sessions (each takes its
                              // share), before the noise rule may stop
  double target_rsd = 0.005;  // relative standard deviation that ends sampling
  double max_wall = 6.0;      // [s] per session
  int input_sets = 3;         // rotated input sets (pointer-keyed caching is caught)
  int check_every = 4;        // every k-th round poisons and re-checks both outputs
  bool cold_l2 = true;        // flush L2 before every sample
  bool block_launches = true; // queue launches behind a blocking kernel
  double throttle_fraction = 0.75; // discard samples below this fraction of the default SM clock
  gpu::protocol::placement placement = gpu::protocol::placement::drawn; // where the buffers land
};

// Counters of the candidate for the search, which they steer and never rank: collected with
// CUPTI, in a worker job of their own once the gate has decided, and kept as
// result::counters beside the verdict they cannot change. `improved`: only when the verdict is
// improved (a new best); `always`: every candidate the gate compared (a baseline's A/A run).
enum class profile_mode { none, improved, always };
inline constexpr auto profile_mode_names =
    name_table<profile_mode>({{profile_mode::none, "none"},
                              {profile_mode::improved, "improved"},
                              {profile_mode::always, "always"}});
static_assert(profile_mode_names.well_formed());
std::string to_string(profile_mode m);
std::optional<profile_mode> profile_mode_from_string(const std::string& s);

// The seed of one evaluation: the one given (a replay, `eval --seed N`), else drawn from the
// system's CSPRNG. Kept below 2^53 so that every JSON reader holds it exactly.
uint64_t evaluation_seed(uint64_t given);

struct options {
  std::string shape = "official";
  int seeds = 3;          // per distribution and shape
  uint64_t seed_base = 0; // input seeds derive from it; 0: drawn from the CSPRNG per evaluation
  int determinism_runs = 5;
  int sessions = 2; // timing sessions, each in a fresh worker
  bool verify_only = false;
  bool sanitize = false; // compute-sanitizer memcheck/racecheck/initcheck/synccheck at check shapes
  profile_mode profile = profile_mode::none;
  std::chrono::seconds hang_timeout{30}; // no word from a worker for this long ends it
  std::chrono::seconds compile_timeout{120};
  timing_options timing;
  double delta = 0.01; // gate: max(1%, A/A spread); set from calibration
  std::string delta_source = "default 1%";
  // The gate's absolute floor: the smallest difference of medians the judge's timing can tell
  // apart (see stats::structured_options::resolution_s) [s].
  double resolution_s = 2e-6;
  // The device's ceilings (resolve_ceilings); the default is the conservative one.
  task::ceilings ceilings;
  std::optional<std::string> arch; // default: the device's
  fs::path cache_dir;
  bool no_sandbox = false; // run candidates unprotected (recorded on every evaluation)
};

// One line of progress, for the CLI.
using progress_fn = std::function<void(const std::string& line)>;

struct candidate_input {
  std::string source;
  std::string name; // file name, for messages
  std::string origin =
      "candidate";      // candidate | baseline | portfolio | adversarial | proposer | import
  std::string strategy; // what produced it, when a proposer did
  nlohmann::json params = nlohmann::json::object();
};

// What the gate measured, for the callers that decide or report with it, and how it decided. In
// a stored result it is `gate`; reports (bench.json) keep it as a row's `statistics`.
struct gate_summary {
  int n_baseline = 0; // unthrottled samples
  int n_candidate = 0;
  double median_baseline_s = 0;  // [s]
  double median_candidate_s = 0; // [s]
  // Distribution-free 95% intervals of the two medians (order statistics).
  double median_baseline_low_s = 0;
  double median_baseline_high_s = 0;
  double median_candidate_low_s = 0;
  double median_candidate_high_s = 0;
  double speedup = 0;     // baseline / candidate
  double speedup_low = 0; // its 95% interval
  double speedup_high = 0;
  std::optional<double> p;   // the gate's test (sessions and blocks respected)
  double floor_fraction = 0; // the roofline floor over the candidate's median
  // The test behind p: the candidate/baseline ratio with its interval, the gate's delta, the
  // within- and between-session tests, and the pooled Mann-Whitney p kept for reference.
  double ratio = 1;
  double ratio_low = 1;
  double ratio_high = 1;
  double delta = 0;        // the delta the gate used: at least resolution_s over the baseline
  double resolution_s = 0; // [s] the gate's absolute floor
  std::optional<double> p_within;
  std::optional<double> p_between;
  std::optional<double> mann_whitney_p;
  // Each session's medians over its unthrottled samples, the figures the between-session test
  // compares (empty in records written before they travelled).
  struct session_median {
    double baseline_s = 0;
    double candidate_s = 0;
  };
  std::vector<session_median> session_medians;
  // How the gate decided on the pooled samples: absent for two medians alone (of_medians).
  struct decision {
    size_t throttled_dropped = 0; // samples below the throttle fraction of the default clock
    // The block-and-session test behind p (stats::block_test).
    size_t sessions = 0;
    size_t blocks = 0;
    size_t rounds_per_block = 0;
    double mean_log_ratio = 0;
    double p_within = 1;
    std::optional<double> p_between; // with at least two sessions
    double p = 1;
    std::string verdict; // the statistics' word, before the roofline check
    std::string reason;
    double baseline_floor_fraction = 0; // the roofline floor over the baseline's median
    double physical_limit_s = 0;        // [s] the task at the device's peak rates
    bool faster_than_physical_limit = false;
  };
  std::optional<decision> decided;

  // Two medians and nothing else known of them (a replayed or scripted comparison): the speedup
  // with an interval of that point alone.
  static gate_summary of_medians(double baseline_s, double candidate_s);
};
void to_json(nlohmann::json& j, const gate_summary& g);
void from_json(const nlohmann::json& j, gate_summary& g);
// A gate's statistics as a report keeps them (bench.json's rows), read over the defaults of that
// mapping: files of earlier versions, or written by hand, may hold only some of the fields.
// nullopt when there are none (the row was not timed).
std::optional<gate_summary> gate_of(const nlohmann::json& statistics);

// The candidate's counters, collected after the gate (profile_mode): a worker job of its own,
// whose check must pass again before its values count.
struct counters_run {
  verdict outcome = verdict::error; // `same` when it ran and passed its check
  std::string reason;
  std::string message;
  double seconds = 0;
  // CUPTI's values as the runner read them (profile::cupti_values' JSON), when it ran.
  nlohmann::json values = nlohmann::json::object();
  std::optional<double> event_median_s; // [s] the call under CUDA events, cold L2
};
void to_json(nlohmann::json& j, const counters_run& c);
void from_json(const nlohmann::json& j, counters_run& c);

// Where and how an evaluation ran: what the store's environment and build rows hold.
struct run_context {
  std::optional<gpu::protocol::device> device; // the judge's device, once a judge ran
  std::string toolkit;                    // nvcc's version
  std::string arch;                       // the target it compiled for
  std::string isolation;                  // sandboxed | unprotected | blocked
  std::string isolation_detail;
  std::string isolation_probe; // what the sandbox probe found on this host
  std::string shape;           // the timed shape
  task::ceilings ceilings;     // the floor and the physical limit were computed against these
};

// The task an evaluation was of.
struct task_ref {
  std::string id;
  std::string suite;
  std::string family; // task::family's name
  std::string digest; // the contract's
};

// One of the two sources an evaluation compared.
struct source_ref {
  std::string name;          // file name, for messages
  std::string origin;        // candidate_input::origin
  std::string source_digest; // sha256 of the source: its blob in the store
};

// One compute-sanitizer tool's word on the candidate (options::sanitize).
struct sanitizer_run {
  int exit_code = -1; // the runner's, -1 when it did not end by itself
  bool errors = false;
  std::optional<long> summary_errors; // the tool's summary line, when it printed one
  std::optional<long> summary_warnings;
  std::string failure;  // how the worker ended (none, crash, hang, ...)
  std::string log_tail; // the end of the runner's output, where the tool prints
};
void to_json(nlohmann::json& j, const sanitizer_run& s);
void from_json(const nlohmann::json& j, sanitizer_run& s);

// The version of a stored result's mapping (to_json(result)), kept in every record. Earlier
// records carry none: see stored_result.
inline constexpr int result_schema_version = 3;

struct result {
  verdict final = verdict::error;
  std::string reason;  // reason code, e.g. "verify.mismatch", "crash.sigsegv", "timing.improved"
  std::string message; // one readable sentence
  std::optional<gate_summary> gate; // when the gate compared the two (whatever it decided)
  double worker_seconds = 0;        // [s] in judge sessions (the GPU's time for it)
  run_context context;
  std::map<std::string, build::result> builds; // oracle, baseline, candidate: as far as it got
  std::vector<gpu::protocol::library_result>
      verification; // each library's word in the first session
  std::optional<gpu::protocol::selftest> checker_selftest;
  std::vector<gpu::protocol::session_timing> timing; // every session that timed
  std::optional<counters_run> counters;         // when the options asked for them
  task_ref task;                                // of the contract, when the judge saw it
  source_ref candidate;                         // what was compared
  source_ref baseline;
  std::optional<double> floor_s; // [s] the task's roofline floor at the timed shape
  std::optional<std::map<std::string, sanitizer_run>> sanitize; // tool -> its word, when run
  // What has no field above, for people and for the record: the shape's dims, the protocol's
  // settings, each session's seconds and log, the toolchain, provenance. Nothing reads it back.
  nlohmann::json detail = nlohmann::json::object();
  double seconds = 0; // [s] wall time of the whole evaluation
};
// A result's one JSON mapping: the stored evaluation (its detail blob in the store, without the
// timing kept once as the samples blob) and what queue jobs carry between processes and hosts.
nlohmann::json to_json(const result& r);

// The one reader of a result written by to_json, of this schema or an earlier one. Records
// without a "schema" field are of an earlier one: schema 1, the judge's whole document as
// record() stored it (verdict, reason, message, seconds beside "statistics", "builds",
// "verification", "checker_selftest", "profile", "device", "isolation", ...); schema 2, the
// mapping of the queue's results (typed fields with that document as "detail"). They are
// upgraded step by step to this schema. Throws std::invalid_argument when it is none of them.
result stored_result(const nlohmann::json& record);
// An evaluation as stored: its detail blob read by stored_result and, `with_samples`, its timing
// from the samples blob. nullopt when the blob is missing or unreadable.
std::optional<result> stored_result(const store::store& st, const store::evaluation_row& row,
                                    bool with_samples = true);
// What the store's evidence check compares with an evaluation row (store::record_reader).
store::recorded_outcome recorded_outcome_of(const std::string& detail_blob);

// Whether this source is the generated eager baseline of a pytorch task, byte for byte: its calls
// dispatch on the host (the interpreter, PyTorch's dispatcher), so the host-work rule takes the
// empty kernel as its control and its kernels are not read by the counters' replay.
bool dispatches_on_host(const task::contract& c, const candidate_input& in);

// Verifies and times `candidate` against `baseline` on task `c`. Never throws for a bad
// candidate; throws kb::error only when the tool itself cannot go on.
result evaluate(const fs::path& project_root, const task::contract& c,
                const candidate_input& candidate, const candidate_input& baseline,
                const options& opt, const progress_fn& progress);

// For the profiler (profile/): the candidate compiled, verified on one check at `opt.shape` (the
// official distribution, the first seed), then called inside the worker as profile::worker_calls
// does: timed under CUDA events, once inside the NVTX range Nsight Compute selects and, with
// `counters`, under CUPTI. `prefix` goes in front of the worker (Nsight Compute and its flags),
// as compute-sanitizer does for --sanitize; `tool_dirs` are the folders that tool reads (its
// installation), bound read-only into the sandbox.
struct instrumented_run {
  result outcome;                  // verdict `same` when the candidate ran and passed its check
  gpu::protocol::profile_calls profile; // the profiler's calls as the runner reported them
  std::string log; // the worker's whole stdout and stderr: Nsight Compute prints there
};
instrumented_run run_instrumented(const fs::path& project_root, const task::contract& c,
                                  const candidate_input& candidate, const options& opt,
                                  const std::vector<std::string>& prefix,
                                  const std::vector<fs::path>& tool_dirs, bool counters,
                                  const progress_fn& progress);

// Builds the task's oracle module (cached) and returns the shared object.
fs::path build_oracle(const fs::path& project_root, const task::contract& c,
                      const fs::path& cache_dir);

// Runs the task's float64 CPU oracle on host inputs, given as doubles and stored in each input's
// dtype first (so fp16 inputs are rounded as the GPU would see them). Returns every output.
std::vector<std::vector<double>> cpu_reference(const fs::path& oracle_module,
                                               const task::contract& c, const task::shape_case& s,
                                               const std::vector<std::vector<double>>& inputs);

// What a machine without a GPU can still do for a task: compile its oracle module and baseline,
// run the CPU oracle at the check shapes and prove the checker rejects trivial outputs there.
nlohmann::json check_task_without_gpu(const fs::path& project_root, const task::contract& c,
                                      const options& opt);

// Compiles a candidate exactly as evaluate() will (in the sandbox, into the same cache), without
// running it: lets a caller compile several candidates in parallel before GPU work that is serial.
build::result compile_candidate(const fs::path& project_root, const task::contract& c,
                                const candidate_input& candidate, const options& opt);

// Records one evaluation in the store (task, environment, both candidates with their sources, the
// candidate's build with binary and log, the evaluation with all samples and the full detail), in
// one transaction. Returns the evaluation's row id.
int64_t record(store::store& st, int64_t run, const task::contract& c,
               const candidate_input& candidate, const candidate_input& baseline, const result& r);

// Whether a CUDA device is usable here, with the reason when not (no driver, no device, ...).
struct device_probe {
  bool available = false;
  std::string reason;
  nlohmann::json info; // name, uuid, sm count, clocks, memory, driver and runtime versions
};
device_probe probe_device();

// ---- What the device can do (its ceilings), measured once per device, driver and toolkit ----

// Headroom of the physical limit over the measured rates, for what the measuring kernels do not
// reach: a read stream a little faster than the simple one, and tensor-core code (wgmma) up to
// twice as fast as mma.sync through wmma.
inline constexpr double limit_headroom_bandwidth = 1.10;
inline constexpr double limit_headroom_fp32 = 1.05;
inline constexpr double limit_headroom_tensor = 2.0;
// The version of the measuring method, kept with each measurement; one taken by an older method
// is measured again (2: each bandwidth the best of several streaming kernels).
inline constexpr int limits_method_version = 2;

// The version of the judge's protocol: how a candidate is verified and timed and what a verdict
// and a speedup mean. Raised with every change that can change a verdict or a speedup; kept with
// every evaluation (detail.provenance, with the tool's version and the device's UUID) and part of
// every queue key, so that a result of an earlier judge is never handed back as a new one.
inline constexpr int judge_protocol_version = 1;

// Runs the measuring kernels on device 0 in this process (GPU).
store::device_limits measure_device_limits();
nlohmann::json to_json(const store::device_limits& limits);
store::device_limits device_limits_from_json(const nlohmann::json& j);
// Whether stored limits were measured by this version of the method (older ones are taken again).
bool measured_by_current_method(const store::device_limits& limits);
// The ceilings of stored limits, or the conservative default (task::ceilings) without them.
task::ceilings ceilings_from(const std::optional<store::device_limits>& limits);
// Runs `kblaster device-limits-probe` as a child and reads its result; nullopt with `error` set
// when it fails.
std::optional<store::device_limits> run_limits_probe(std::string* error);

struct ceilings_resolution {
  task::ceilings ceilings; // the conservative default unless limits were found or measured
  std::optional<store::device_limits> limits;
  bool measured_now = false;
  std::string note; // where the ceilings come from, to print
};
// The device's stored limits (matching UUID, driver and toolkit); when there are none and
// `measure_when_missing`, measures them in a child and stores them.
ceilings_resolution resolve_ceilings(store::store& st, const device_probe& device,
                                     bool measure_when_missing, const progress_fn& progress);

// A/A calibration: the baseline of `c` against itself in `repeats` independent evaluations
// ({task, name, shape, evaluations: [{verdict, p, mann_whitney_p, ratio, ratio_ci, ...}]}).
nlohmann::json calibrate(const fs::path& project_root, const task::contract& c, int repeats,
                         const options& opt, const progress_fn& progress);

// What A/A comparisons over tasks say about the gate on this device.
struct aa_summary {
  int comparisons = 0;        // completed A/A evaluations
  int failed = 0;             // evaluations that ended without statistics
  int significant = 0;        // p < alpha (the gate's test)
  int pooled_significant = 0; // pooled Mann-Whitney p < alpha (for comparison)
  int not_same = 0;           // verdict other than `same`
  double false_positive_rate = 0;
  double false_positive_low = 0; // its 95% interval (Clopper-Pearson)
  double false_positive_high = 1;
  // A calibrated test's p values are uniform under A/A: the Kolmogorov-Smirnov test of that,
  // which says more of a few dozen comparisons than the count below alpha does.
  double p_uniformity_d = 0;
  double p_uniformity_p = 1;
  double pooled_false_positive_rate = 0;
  double not_same_rate = 0;
  double ratio_p95 = 0;
  double half_width_median = 0;
  double spread = 0; // [fraction] 95th percentile of the reach of the A/A intervals
  double delta = 0;  // [fraction] max(1%, spread): the gate's delta on this device
  std::optional<double> timing_overhead_median; // [s] empty-kernel cost, when reported
  nlohmann::json to_json() const;
};
// `tasks` is a list of calibrate() results.
aa_summary summarize_aa(const nlohmann::json& tasks, double alpha = 0.05);

} // namespace kb::eval
