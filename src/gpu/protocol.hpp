// The judge's protocol: the job eval::evaluate sends one judge process (`kblaster worker`,
// src/gpu/judge.cpp) on its standard input, the events the judge writes on its result
// descriptor, and the result the parent reads from them: typed structs, each with its one JSON
// mapping (protocol.cpp), which is the wire format. Both ends use these types; neither reads the
// other's JSON by key. What the judge keeps only as evidence (each check, the calibration, the
// rules' tallies) travels inside them as a JSON `record` that is stored as it is; whatever a
// decision reads is a typed field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::gpu::protocol {

// ---- The job ---------------------------------------------------------------------------------

struct distribution {
  int kind = 0; // include/kblaster/device/generator.cuh's distribution kind
  double a = 0;
  double b = 0;
  std::string label;
};

struct tensor {
  std::string name;
  int dtype = 0; // kb_dtype
  std::vector<int64_t> shape;
  std::vector<distribution> dists; // inputs only
};

struct shape {
  std::string name;
  std::string role; // check | official | bench
  std::vector<tensor> inputs;
  std::vector<tensor> outputs;
};

struct tolerance {
  double atol = 0;
  double rtol = 0;
  double rel_l2 = 0;
  bool deterministic = true;
};

// Where a timing session's buffers land in device memory. `fixed`: the lanes are allocated in
// order, lane 0 first, so fresh processes that allocate alike get the same placement in every
// session. `drawn`: a pad of drawn size (0 to 254 MiB, in 2 MiB steps) before each buffer and the
// buffers in a drawn order, from the judge's generator, so that each session's placement is a
// draw of its own and the sessions replicate it. `drawn` is the default: with `fixed` the lanes'
// difference repeats in every session and the between-session test cannot see it as a bias.
enum class placement { fixed, drawn };
std::string to_string(placement p);
std::optional<placement> placement_from_string(const std::string& s);

// One session's share of the measurement (eval::timing_options, divided among the sessions).
struct timing {
  int min_samples = 10;
  int max_samples = 2000;
  double min_time = 0.5; // [s]
  double target_rsd = 0.005;
  double max_wall = 6.0; // [s]
  int input_sets = 3;
  int check_every = 4;
  bool cold_l2 = true;
  bool block_launches = true;
  uint64_t order_seed = 1;
  double throttle_fraction = 0.75; // samples below this fraction of the default SM clock drop
  placement where = placement::drawn;
};

struct library {
  std::string role; // baseline | candidate
  std::string path; // the staged shared object
  // The task's own generated eager-PyTorch baseline (byte for byte): trusted code whose
  // kb_launch dispatches from the host (the interpreter, PyTorch's dispatcher), so the rule that
  // a call's host time stays near the empty call's does not apply to it. Never set for other code.
  bool host_dispatch = false;
};

// How the judge starts each runner, as the parent resolved it (sandbox, limits, user).
struct runner_command {
  std::vector<std::string> argv;
  std::optional<std::map<std::string, std::string>> env; // the whole environment, when set
  std::map<std::string, std::string> env_overrides;
  std::optional<std::string> cwd;
  std::optional<uint64_t> cpu_time;   // [s]
  std::optional<uint64_t> file_size;  // [bytes]
  std::optional<uint64_t> processes;  // RLIMIT_NPROC
  std::optional<uint64_t> open_files; // RLIMIT_NOFILE
  std::optional<uint64_t> core_size;  // [bytes]
  std::optional<uint32_t> uid;        // run as, with gid
  std::optional<uint32_t> gid;
  // Under a sanitizer: the judge tells the runner (in its load request, not its environment) to
  // give every tensor an exact allocation of its own.
  bool exact = false;
};

// The mappings of the job's parts.
void to_json(nlohmann::json& j, const distribution& x);
void from_json(const nlohmann::json& j, distribution& x);
void to_json(nlohmann::json& j, const tensor& x);
void from_json(const nlohmann::json& j, tensor& x);
void to_json(nlohmann::json& j, const shape& x);
void from_json(const nlohmann::json& j, shape& x);
void to_json(nlohmann::json& j, const tolerance& x);
void from_json(const nlohmann::json& j, tolerance& x);
void to_json(nlohmann::json& j, const timing& x);
void from_json(const nlohmann::json& j, timing& x);
void to_json(nlohmann::json& j, const library& x);
void from_json(const nlohmann::json& j, library& x);
void to_json(nlohmann::json& j, const runner_command& x);
void from_json(const nlohmann::json& j, runner_command& x);

// Output digests of the timing input sets: set index -> digest of every output's bits.
using set_digests = std::map<int, uint64_t>;

enum class op { evaluate, exit };
std::string to_string(op o);

struct job {
  op what = op::evaluate;
  std::string task;
  std::string oracle; // the task's oracle module
  std::string timing_shape;
  std::vector<shape> shapes; // check shapes first, then the timed one
  std::vector<double> scalars;
  tolerance tol;
  std::vector<uint64_t> seeds; // per distribution and shape
  int determinism_runs = 5;
  std::vector<library> candidates;
  // false: a later session; the outputs on the timing sets must have `expected_digests`' bits.
  bool verify = true;
  std::map<std::string, set_digests> expected_digests; // role -> digests
  bool checker_selftest = true;
  bool host_reference = false;         // references on the host (under a sanitizer)
  bool single_check = false;           // the first check only (the profiler's run)
  bool profile = false;                // the profiler's calls after verification
  bool counters = false;               // with CUPTI's counters around one of them
  std::optional<timing> time;          // absent: verification only
  uint64_t fresh_seed = 0xF4E5D6C7ull; // contents of the anti-cache re-check
  runner_command runner;
  std::string runner_log_dir = "/tmp";
  int64_t hang_timeout_ms = 30000;
  uint64_t judge_seed = 1; // the judge's own generator (poison), from the CSPRNG
};

void to_json(nlohmann::json& j, const job& x);
void from_json(const nlohmann::json& j, job& x);

// ---- The result ------------------------------------------------------------------------------

struct device {
  std::string name;
  std::string uuid;
  int sm_count = 0;
  std::string driver_version;
  int cuda_runtime = 0;
  double max_sm_clock_mhz = 0;
  nlohmann::json record = nlohmann::json::object(); // every property the judge read
};

// How a runner ended and what it printed (bounded; any bytes).
struct runner_end {
  std::string status; // "exit 0", "signal SIGSEGV", ...
  int exit_code = 0;
  std::string signal; // "" or SIGSEGV, ...
};
struct runner_output {
  uint64_t bytes = 0;
  std::string tail_base64;
  std::string tail_text; // the tail as valid UTF-8 (invalid bytes replaced)
};

// One library's word from the judge.
struct library_result {
  std::string role;
  bool accepted = false;
  std::string reason; // when rejected
  std::string message;
  set_digests digests;
  std::optional<runner_end> runner_exit;
  runner_output output;
  nlohmann::json record = nlohmann::json::object(); // info, checks and the worst metrics
};

struct timing_sample {
  double t = 0; // [s] the window less the scheme's overhead
  int set = 0;  // input set (in a fresh round, the set whose place the fresh inputs took)
  int round = 0;
  std::optional<double> clock_mhz; // SM clock when the window closed
  // A fresh round's call: inputs the candidate had not seen before (the judge's check of reuse).
  bool fresh = false;
};

// One session's timing: the samples per role, and the judge's whole record of it (calibration,
// phases, the ABI rules' tallies, the stop rule).
struct session_timing {
  std::map<std::string, std::vector<timing_sample>> samples;
  double default_sm_clock_mhz = 0;
  double overhead_s = 0; // [s] the scheme's own cost, an empty kernel's median window
  nlohmann::json record = nlohmann::json::object();
};

// The checker's self-test: trivial outputs (zeros, a copy of the input, a constant) must fail.
struct selftest {
  bool sound = true;
  nlohmann::json record = nlohmann::json::object();
};

// The profiler's calls in the runner (profile::worker_calls): CUDA-event times of the call,
// the call inside the NVTX range Nsight Compute selects and, when asked, CUPTI's counters. A
// failed call ends them: `failed` says what went wrong.
struct profile_calls {
  std::optional<std::string> failed;
  bool context_lost = false;         // the failure left the CUDA context unusable
  std::vector<double> event_times_s; // [s] cold L2
  std::optional<double> event_median_s;
  std::string nvtx_range;                 // set when the ranged call ran
  std::optional<nlohmann::json> counters; // CUPTI's values (profile::cupti_values' mapping)
};

// The mappings of the result's parts.
void to_json(nlohmann::json& j, const profile_calls& x);
void from_json(const nlohmann::json& j, profile_calls& x);
void to_json(nlohmann::json& j, const device& x);
void from_json(const nlohmann::json& j, device& x);
void to_json(nlohmann::json& j, const runner_end& x);
void from_json(const nlohmann::json& j, runner_end& x);
void to_json(nlohmann::json& j, const runner_output& x);
void from_json(const nlohmann::json& j, runner_output& x);
void to_json(nlohmann::json& j, const library_result& x);
void from_json(const nlohmann::json& j, library_result& x);
void to_json(nlohmann::json& j, const timing_sample& x);
void from_json(const nlohmann::json& j, timing_sample& x);
void to_json(nlohmann::json& j, const session_timing& x);
void from_json(const nlohmann::json& j, session_timing& x);
void to_json(nlohmann::json& j, const selftest& x);
void from_json(const nlohmann::json& j, selftest& x);

struct result {
  device dev;
  std::vector<library_result> candidates;
  std::optional<session_timing> time;
  std::optional<selftest> checker_selftest;
  std::optional<profile_calls> profile; // the profiler's calls, when the job asked for them
  nlohmann::json stage_seconds = nlohmann::json::object();
  bool context_lost = false;
  std::string lanes;                                // "per library" | "shared (device memory)"
  nlohmann::json poison = nlohmann::json::object(); // this job's patterns, for the record

  const library_result* library(const std::string& role) const; // nullptr when absent
};

void to_json(nlohmann::json& j, const result& x);
void from_json(const nlohmann::json& j, result& x);

// ---- Events on the result descriptor -----------------------------------------------------------
// One JSON object a line, its kind under "event"; a `result` ends the job.

enum class event_kind { step, progress, rejected, result, error };
std::string to_string(event_kind k);
std::optional<event_kind> event_kind_from_string(const std::string& s);
// The kind of an event line, nullopt for anything else.
std::optional<event_kind> kind_of(const nlohmann::json& event);

// What the judge is about to do, so that a crash or hang names the stage and the library.
struct step {
  std::string stage;
  std::string who; // a role, or "" for the judge's own work
  std::string what;
};
void to_json(nlohmann::json& j, const step& x);
void from_json(const nlohmann::json& j, step& x);

// How far verification (done of total checks) or timing (round, samples per role) has come.
struct progress {
  std::string stage; // verify | time
  int done = 0;
  int total = 0;
  std::string what;
  int round = 0;
  std::map<std::string, int> samples;
};
void to_json(nlohmann::json& j, const progress& x);
void from_json(const nlohmann::json& j, progress& x);

// A library rejected during the job (the result repeats it).
struct rejected {
  std::string who;
  std::string reason;
  std::string message;
};
void to_json(nlohmann::json& j, const rejected& x);
void from_json(const nlohmann::json& j, rejected& x);

// Why a judge ran nothing of a job, where that is no fault of its own (it then exits
// exit_code::blocked): another judge held its device, or the device has too little memory for
// one lane of a shape (inputs, outputs, float64 references and the oracle's own allocations)
// with nothing hoarded. Stable names: blocked.device_busy, blocked.device_memory.
enum class blocked_by { none, device_busy, device_memory };
std::string to_string(blocked_by b);
std::optional<blocked_by> blocked_by_from_string(const std::string& s);

// The judge itself failed; `sticky`: a context-corrupting CUDA error surfaced in its own call.
// `blocked`: the job could not run here (see blocked_by); none for the judge's own failures.
struct error {
  std::string message;
  bool sticky = false;
  blocked_by blocked = blocked_by::none;
};
void to_json(nlohmann::json& j, const error& x);
void from_json(const nlohmann::json& j, error& x);

} // namespace kb::gpu::protocol
