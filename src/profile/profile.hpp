// The profiler explains where a verified candidate's time goes; it never ranks (ranking is the
// evaluation's statistical gate). Evidence comes from one of three sources, richest first:
//   - Nsight Compute under fixed plans (no free-form arguments), run as a prefix of the
//     evaluation worker, which calls the candidate once inside the NVTX range "kb_candidate";
//   - CUPTI's range profiler inside the worker, around one call (libcupti loaded at run time);
//   - events only: the call's time under CUDA events against the task's analytic roofline.
// The classifier turns whatever evidence there is into a small stable state, the numbers behind
// it and one sentence for prompts and people. Counters that cannot be read (no ncu, no CUPTI,
// ERR_NVGPUCTRPERM) mean events only, said in every output; they never fail a run.
#pragma once

#include "common/names.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kb::profile {

namespace fs = std::filesystem;

// The NVTX push/pop range (default domain) around the one call Nsight Compute profiles.
inline constexpr const char* nvtx_range = "kb_candidate";

// ---- Nsight Compute plans
// ------------------------------------------------------------------------

// Stored, so names round-trip through strings.
enum class plan {
  triage,    // SpeedOfLight, LaunchStats, Occupancy
  memory,    // MemoryWorkloadAnalysis (and its tables: sectors per request)
  scheduler, // SchedulerStats, WarpStateStats
};
inline constexpr auto plan_names = name_table<plan>(
    {{plan::triage, "triage"}, {plan::memory, "memory"}, {plan::scheduler, "scheduler"}});
static_assert(plan_names.well_formed());
std::string to_string(plan p);
std::optional<plan> plan_from_string(const std::string& s);
std::vector<std::string> plan_sections(plan p);

// Kernels of the one profiled call beyond this many are not profiled (and the report says so).
inline constexpr int max_profiled_kernels = 32;

// The Nsight Compute command line of a plan, to put in front of the worker: the sections, clocks
// left alone (--clock-control none), caches flushed before every replay pass, kernels selected by
// the NVTX range, raw page as CSV in base units.
std::vector<std::string> ncu_command(const std::string& ncu, plan p);
// The tiny profile that tells whether counters can be read: one metric, one kernel.
std::vector<std::string> ncu_probe_command(const std::string& ncu);
// $KBLASTER_NCU, else /usr/local/cuda/bin/ncu, else ncu on PATH.
std::optional<std::string> find_ncu();
// The folders Nsight Compute reads when started as `ncu`, for the sandbox: the folder of the
// file itself (links resolved) and the installation CUDA's `bin/ncu` script hands over to,
// nsight-compute* beside the toolkit's bin/ or /opt/nvidia/nsight-compute (links resolved).
std::vector<std::filesystem::path> ncu_installation(const std::string& ncu);

// ---- Nsight Compute output (--csv --page raw --print-units base)
// ---------------------------------

// "1,234,567.5" -> 1234567.5 (thousands separators in groups of three); anything else -> nullopt.
std::optional<double> parse_number(std::string_view text);
// The factor that takes a value printed in `unit` to SI units, and the SI unit:
// "nsecond" -> (1e-9, "second"), "Gbyte/second" -> (1e9, "byte/second"), "%" -> (1, "%").
std::pair<double, std::string> si_scale(std::string_view unit);

struct metric {
  std::string text;            // as printed
  std::string unit;            // from the units row
  std::optional<double> value; // when the text is a number, in `unit`
  std::optional<double> si() const;
};

// One profiled kernel launch: a row of the raw page, every column by its header.
struct kernel_row {
  std::map<std::string, metric> columns;
  std::string kernel_name() const;
  const metric* find(const std::string& name) const;
  std::optional<double> number(const std::string& name) const; // in SI units
};

struct ncu_output {
  std::string csv; // the report: header, units row and kernel rows, exactly as printed
  std::vector<std::string> columns;
  std::vector<kernel_row> kernels;
  std::vector<std::string> errors;   // "==ERROR==" lines
  std::vector<std::string> warnings; // "==WARNING==" lines
  bool permission_denied = false;    // ERR_NVGPUCTRPERM anywhere in the output
};
// Reads Nsight Compute's output mixed with whatever else the process printed: only lines that
// parse as CSV rows of the header's width count.
ncu_output parse_ncu_output(std::string_view text);

// ---- Counters: one source's figures over the candidate's kernels
// ---------------------------------

struct stall {
  std::string reason;          // long_scoreboard, barrier, math_pipe_throttle, ...
  double cycles_per_issue = 0; // [cycles] per issued instruction
};

struct counters {
  std::string source;     // "ncu" or "cupti"
  int kernels = 0;        // kernels (ncu) or ranges (cupti) the figures cover
  bool truncated = false; // the call launched more kernels than were profiled
  // Over all kernels: durations summed, the rest weighted by duration.
  std::optional<double> duration;              // [s]
  std::optional<double> sm_throughput;         // [% of peak]
  std::optional<double> memory_throughput;     // [% of peak]
  std::optional<double> dram_throughput;       // [% of peak]
  std::optional<double> dram_bandwidth;        // [bytes/s]
  std::optional<double> achieved_occupancy;    // [%]
  std::optional<double> theoretical_occupancy; // [%]
  std::optional<double> l1_hit_rate;           // [%]
  std::optional<double> l2_hit_rate;           // [%]
  // Of the longest kernel:
  std::optional<double> waves_per_sm;
  std::optional<double> grid_blocks;
  std::optional<double> block_threads;
  std::optional<double> sm_count;
  std::optional<double> registers_per_thread;
  std::optional<double> sectors_per_load_request;       // 4: coalesced 4-byte loads, 16: 16-byte
  std::string occupancy_limiter;                        // registers, shared_memory, warps, blocks
  std::vector<stall> stalls;                            // largest first
  nlohmann::json kernel_list = nlohmann::json::array(); // name, duration and throughputs per kernel

  // Fills what this one lacks from `other` (another plan of the same call).
  void merge(const counters& other);
  nlohmann::json to_json() const;
};

counters counters_from_ncu(const std::vector<kernel_row>& kernels);

// ---- CUPTI range profiler, in the worker --------------------------------------------------------

// The metrics asked of CUPTI (Nsight Compute's names); those the device does not know are dropped.
const std::vector<std::string>& cupti_metrics();

struct cupti_values {
  bool available = false;
  std::string reason; // why not, when unavailable ("ERR_NVGPUCTRPERM: ...", "libcupti.so.13 not
                      // found: ...")
  std::map<std::string, std::pair<double, std::string>> values; // metric -> value, unit
  std::vector<std::string> unsupported;
  int passes = 0;
  double seconds = 0; // [s] wall time of the whole collection
  nlohmann::json to_json() const;
  static cupti_values from_json(const nlohmann::json& j);
};

// CUPTI's counters of one range around `call`, replayed as many passes as the metrics need;
// `prepare` runs before each pass (cold L2). `call` returns "" or what went wrong. CUPTI's own
// failures (no library, no support, no permission) are the answer, with their reason, never an
// exception; what `prepare` throws passes through.
cupti_values collect_cupti(const std::function<void()>& prepare,
                           const std::function<std::string()>& call);

counters counters_from_cupti(const cupti_values& v);

// What the evaluation worker runs for the profiler once the candidate passed its check:
// untimed calls for at least `warmup_seconds` and `min_warmup_calls` (at most
// `max_warmup_calls`), `samples` calls timed with CUDA events (each enqueued behind its
// flush, so no launch latency or idle gap is timed), one call inside the NVTX range Nsight Compute
// selects and, with `counters`, CUPTI's counters around one more. `prepare` enqueues the L2 flush
// on `stream` (a cudaStream_t) without waiting; `launch` enqueues one call there and returns
// kb_launch's code. A failed call ends it: the result then holds `failed` and `context_lost`.
inline constexpr double warmup_seconds = 0.2;
inline constexpr int min_warmup_calls = 2;
inline constexpr int max_warmup_calls = 10000;
gpu::protocol::profile_calls worker_calls(const std::function<void()>& prepare,
                                          const std::function<int()>& launch, void* stream,
                                          bool counters, int samples = 5);

// ---- Bottleneck classifier
// -------------------------------------------------------------------------

// Stored, so names round-trip through strings.
enum class state { memory_bound, compute_bound, latency_bound, small_grid, balanced, unknown };
inline constexpr auto state_names = name_table<state>({{state::memory_bound, "memory_bound"},
                                                       {state::compute_bound, "compute_bound"},
                                                       {state::latency_bound, "latency_bound"},
                                                       {state::small_grid, "small_grid"},
                                                       {state::balanced, "balanced"},
                                                       {state::unknown, "unknown"}});
static_assert(state_names.well_formed());
std::string to_string(state s);
std::optional<state> state_from_string(const std::string& s);

struct observation {
  std::optional<counters> measured; // nullopt: events only
  std::string events_only_reason;   // why there are no counters
  std::optional<double> seconds;    // [s] the call under CUDA events, cold L2
  double bytes = 0;                 // [bytes] the task's minimum traffic at the shape
  double flops = 0;                 // [FLOP]
  task::ceilings ceilings;
};

struct assessment {
  state result = state::unknown;
  bool events_only = true;
  std::string events_only_reason;
  std::string rule;                                  // the branch of the rule that decided
  std::vector<std::string> findings;                 // refinements, short phrases
  nlohmann::json numbers = nlohmann::json::object(); // every figure behind the state
  std::string sentence; // "memory-bound at 61% of measured bandwidth; ..."
  nlohmann::json to_json() const;
};

// Nsight Compute's rule: SM or memory throughput >= 80% of peak: bound by that unit; both < 60%:
// latency-bound, or small grid when the grid is under one wave; otherwise the larger when they
// differ by 10 points, else balanced. Refined with occupancy, the top stall and the roofline.
// Without counters the same thresholds apply to the roofline fractions (which are lower bounds
// of the real use): below 60% of both ceilings says nothing, so the state is unknown.
assessment classify(const observation& o);

// ---- Access and fallbacks
// --------------------------------------------------------------------------

enum class counter_source { ncu, cupti };
inline constexpr auto counter_source_names =
    name_table<counter_source>({{counter_source::ncu, "ncu"}, {counter_source::cupti, "cupti"}});
static_assert(counter_source_names.well_formed());
std::string to_string(counter_source s);
std::optional<counter_source> counter_source_from_string(const std::string& s);

struct access {
  counter_source source = counter_source::ncu;
  bool available = false;
  std::string reason; // why not
  std::string tool;   // ncu's path and version, or the CUPTI library
  double seconds = 0; // [s] the probe's wall time
  nlohmann::json to_json() const;
};
// Whether counters can be read, from a tiny profile of a built-in kernel (in a child process).
// Probed once per process, source and ncu binary.
access probe_access(counter_source source);
// `kblaster profile-probe [--cupti]`: the probe's target. Prints its profile_calls as one JSON
// line.
int probe_target_main(bool cupti);

// ---- Profiling a candidate
// -------------------------------------------------------------------------

struct request {
  std::vector<plan> plans{plan::triage}; // each runs in its own worker under Nsight Compute
  counter_source source = counter_source::ncu;
  eval::options options; // shape, cache, sandbox, timeouts and the device's ceilings
};

// Stored, so names round-trip through strings.
enum class status { profiled, events_only, rejected, error, blocked };
inline constexpr auto status_names = name_table<status>({{status::profiled, "profiled"},
                                                         {status::events_only, "events_only"},
                                                         {status::rejected, "rejected"},
                                                         {status::error, "error"},
                                                         {status::blocked, "blocked"}});
static_assert(status_names.well_formed());
std::string to_string(status s);
std::optional<status> status_from_string(const std::string& s);

// A raw report for the store: the bytes as Nsight Compute printed them, and their SHA-256.
struct raw_report {
  plan which = plan::triage;
  std::string csv;
  std::string sha256;
};

struct report {
  status outcome = status::error;
  std::string reason; // reason code: profile.counters, profile.events_only, or the evaluation's
  std::string message;
  assessment bottleneck;
  std::optional<counters> measured;
  std::vector<raw_report> raw;
  access counter_access;
  std::string shape;                                // the shape profiled
  eval::source_ref candidate;                       // what was profiled
  std::optional<gpu::protocol::device> device;      // once a worker ran
  nlohmann::json detail = nlohmann::json::object(); // task, shape, runs, device, events
  double seconds = 0;                               // [s] wall time of the whole profile
  nlohmann::json to_json() const;
};

// Verifies the candidate on one check at the shape, then profiles one call. Never throws for the
// candidate or for counters that cannot be read; throws kb::error only when the tool cannot go on.
report run(const fs::path& project_root, const task::contract& c,
           const eval::candidate_input& candidate, const request& r,
           const eval::progress_fn& progress);

} // namespace kb::profile
