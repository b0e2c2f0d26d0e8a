// The parent side of an evaluation: compile, run worker sessions, attribute failures, apply the
// statistical gate and assemble the record.
#include "eval/eval.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "eval/detail/isolation.hpp"
#include "eval/detail/sanitizer.hpp"
#include "eval/session.hpp"
#include "gpu/protocol.hpp"
#include "sandbox/sandbox.hpp"
#include "stats/stats.hpp"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <random>

namespace kb::eval {

using nlohmann::json;

gate_summary gate_summary::of_medians(double baseline_s, double candidate_s) {
  gate_summary g;
  g.median_baseline_s = baseline_s;
  g.median_candidate_s = candidate_s;
  g.median_baseline_low_s = g.median_baseline_high_s = baseline_s;
  g.median_candidate_low_s = g.median_candidate_high_s = candidate_s;
  g.speedup = g.speedup_low = g.speedup_high = baseline_s / candidate_s;
  g.ratio = g.ratio_low = g.ratio_high = candidate_s / baseline_s;
  return g;
}

std::string to_string(profile_mode v) {
  return std::string(profile_mode_names.name(v));
}

std::optional<profile_mode> profile_mode_from_string(const std::string& s) {
  return profile_mode_names.parse(s);
}

device_probe probe_device() {
  device_probe p;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    p.reason = e != cudaSuccess ? fmt::format("no usable CUDA device: {} ({})", cudaGetErrorName(e),
                                              cudaGetErrorString(e))
                                : "no CUDA device present";
    cudaGetLastError();
    return p;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    p.reason = "cannot read the properties of device 0";
    return p;
  }
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  p.available = true;
  std::string uuid = "GPU";
  for (int i = 0; i < 16; ++i) {
    uuid += fmt::format("{}{:02x}", (i == 4 || i == 6 || i == 8 || i == 10 || i == 0) ? "-" : "",
                        static_cast<unsigned char>(prop.uuid.bytes[i]));
  }
  p.info = {{"name", prop.name},
            {"uuid", uuid},
            {"compute_capability", fmt::format("{}.{}", prop.major, prop.minor)},
            {"arch", prop.major == 9 && prop.minor == 0
                         ? "sm_90a"
                         : fmt::format("sm_{}{}", prop.major, prop.minor)},
            {"sm_count", prop.multiProcessorCount},
            {"memory_bytes", prop.totalGlobalMem},
            {"l2_bytes", prop.l2CacheSize},
            {"devices", count},
            {"cuda_driver_api", driver},
            {"cuda_runtime", runtime}};
  return p;
}

bool dispatches_on_host(const task::contract& c, const candidate_input& in) {
  return c.kind == task::task_kind::pytorch && !c.baseline.empty() && fs::exists(c.baseline) &&
         in.source == read_file(c.baseline);
}

namespace {

using clock_type = std::chrono::steady_clock;

// The task's own baseline file, byte for byte: the one source compiled outside the sandbox.
bool is_task_baseline(const task::contract& c, const candidate_input& in) {
  return !c.baseline.empty() && fs::exists(c.baseline) && in.source == read_file(c.baseline);
}

gpu::protocol::distribution distribution_of(const task::distribution& d,
                                            const task::shape_case& s) {
  double b = d.b;
  if (!d.b_expr.empty()) {
    b = static_cast<double>(task::eval_expr(d.b_expr, s.dims));
  }
  return {static_cast<int>(d.k), d.a, b, d.label};
}

gpu::protocol::shape shape_of(const task::contract& c, const task::shape_case& s) {
  gpu::protocol::shape j{s.name, s.role, {}, {}};
  const auto ins = task::concrete_inputs(c, s);
  for (size_t i = 0; i < ins.size(); ++i) {
    gpu::protocol::tensor t{ins[i].name, task::abi_dtype(ins[i].type), ins[i].shape, {}};
    for (const auto& d : c.inputs[i].distributions) {
      t.dists.push_back(distribution_of(d, s));
    }
    j.inputs.push_back(std::move(t));
  }
  for (const auto& o : task::concrete_outputs(c, s)) {
    j.outputs.push_back({o.name, task::abi_dtype(o.type), o.shape, {}});
  }
  return j;
}

std::vector<uint64_t> seeds_for(const options& opt) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < opt.seeds; ++i) {
    seeds.push_back(opt.seed_base * 1000003ull + static_cast<uint64_t>(i));
  }
  return seeds;
}

// The job every session shares; callers add what differs.
gpu::protocol::job base_job(const task::contract& c, const options& opt, const fs::path& oracle) {
  gpu::protocol::job job;
  job.task = c.id;
  job.oracle = oracle.string();
  job.timing_shape = opt.shape;
  for (const auto* s : c.shapes_with_role("check")) {
    job.shapes.push_back(shape_of(c, *s));
  }
  const auto& timed = c.shape(opt.shape);
  if (timed.role != "check") {
    job.shapes.push_back(shape_of(c, timed));
  }
  for (const auto& p : c.params) {
    job.scalars.push_back(p.value);
  }
  job.tol = {c.tol.atol, c.tol.rtol, c.tol.rel_l2, c.tol.deterministic};
  job.seeds = seeds_for(opt);
  job.determinism_runs = opt.determinism_runs;
  return job;
}

// One session's share of the measurement: min_time and max_samples are per side over all
// sessions, so each of `sessions` sessions measures its part (min_samples stays per session).
gpu::protocol::timing timing_of(const timing_options& t, uint64_t order_seed, int sessions) {
  const int n = std::max(1, sessions);
  gpu::protocol::timing j;
  j.min_samples = t.min_samples;
  j.max_samples = std::max(t.min_samples, t.max_samples / n);
  j.min_time = t.min_time / n;
  j.target_rsd = t.target_rsd;
  j.max_wall = t.max_wall;
  j.input_sets = t.input_sets;
  j.check_every = t.check_every;
  j.cold_l2 = t.cold_l2;
  j.block_launches = t.block_launches;
  j.order_seed = order_seed;
  j.where = t.placement;
  j.throttle_fraction = t.throttle_fraction;
  return j;
}

// The runner's command for a job: `prefix` (a sanitizer, a profiler) and `kblaster runner`, made
// to run in the sandbox by `wrap`. The judge starts it once per candidate, as it is.
gpu::protocol::runner_command
runner_of(const std::function<process_spec(const process_spec&)>& wrap,
          const std::vector<std::string>& prefix, bool exact) {
  process_spec spec;
  spec.argv = prefix;
  spec.argv.push_back(kb::worker_executable().string());
  spec.argv.push_back("runner");
  // Modules load with the candidate, not at its first launch (which waits for the judge's GO).
  spec.env_overrides["CUDA_MODULE_LOADING"] = "EAGER";
  spec.env_overrides["KBLASTER_RUNNER_FD"] = std::to_string(child_process::passed_fd);
  const process_spec w = wrap(spec);
  gpu::protocol::runner_command r;
  r.exact = exact;
  r.argv = w.argv;
  r.env = w.env;
  r.env_overrides = w.env_overrides;
  if (w.cwd) {
    r.cwd = w.cwd->string();
  }
  r.cpu_time = w.rlimits.cpu_time;
  r.file_size = w.rlimits.file_size;
  r.processes = w.rlimits.processes;
  r.open_files = w.rlimits.open_files;
  r.core_size = w.rlimits.core_size;
  if (w.run_as) {
    r.uid = w.run_as->uid;
    r.gid = w.run_as->gid;
  }
  return r;
}

// Fills what every job needs to start its runners.
void add_runner(gpu::protocol::job& job,
                const std::function<process_spec(const process_spec&)>& wrap,
                const std::vector<std::string>& prefix, const fs::path& log_dir,
                std::chrono::seconds hang_timeout, bool exact = false) {
  job.runner = runner_of(wrap, prefix, exact);
  job.runner_log_dir = log_dir.string();
  job.hang_timeout_ms = hang_timeout.count() * 1000;
  uint64_t judge_seed = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&judge_seed), sizeof judge_seed);
  job.judge_seed = judge_seed;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

// What a worker's end means for each candidate.
struct attribution {
  std::string who;    // "candidate", "baseline", or "" when the harness itself failed
  std::string reason; // crash.sigsegv, hang.timeout, worker.exit
  std::string message;
};

attribution attribute(const detail::worker_outcome& w) {
  using detail::worker_failure;
  attribution a;
  const std::string& who = w.last_step.who;
  const std::string& stage = w.last_step.stage;
  const std::string& what = w.last_step.what;
  a.who = (who == "candidate" || who == "baseline") ? who : "";
  if (w.failure == worker_failure::crash) {
    a.reason = "crash." + lower(w.failure_detail);
    a.message =
        fmt::format("the process died with {} during {} ({})", w.failure_detail, stage, what);
  } else if (w.failure == worker_failure::hang) {
    a.reason = "hang.timeout";
    a.message = fmt::format("no progress for the hang limit during {} ({})", stage, what);
  } else if (w.failure == worker_failure::sticky && !a.who.empty()) {
    // Asynchronous faults can surface in the next CUDA call after the candidate's; the context is
    // lost either way, and the candidate was the last code that ran on it.
    a.reason = "launch.cuda_error";
    a.message = fmt::format("a context-corrupting CUDA error surfaced after {} ({}): {}", stage,
                            what, w.failure_detail);
  } else if (w.failure == worker_failure::exit) {
    a.reason = "crash.exit";
    a.message = fmt::format("the process ended ({}) during {} ({})", w.failure_detail, stage, what);
  } else {
    a.reason = "harness.error";
    a.message = w.failure_detail;
    a.who = "";
  }
  return a;
}

// One session's unthrottled samples of a role, labelled for the structured gate.
std::vector<stats::timed_sample> labelled_samples(const gpu::protocol::session_timing& timing,
                                                  const std::string& role, int session,
                                                  double throttle_fraction, size_t* dropped) {
  std::vector<stats::timed_sample> out;
  const auto it = timing.samples.find(role);
  if (it == timing.samples.end()) {
    return out;
  }
  for (const auto& s : it->second) {
    if (stats::throttled(s.clock_mhz, timing.default_sm_clock_mhz, throttle_fraction)) {
      ++*dropped;
      continue;
    }
    out.push_back({s.t, session, s.set, s.round});
  }
  return out;
}

std::vector<double> times_of(const std::vector<stats::timed_sample>& x) {
  std::vector<double> t;
  for (const auto& s : x) {
    t.push_back(s.t);
  }
  return t;
}

std::string compute_sanitizer_path() {
  for (const char* p : {"/usr/local/cuda/bin/compute-sanitizer",
                        "/usr/local/cuda/compute-sanitizer/compute-sanitizer"}) {
    if (fs::exists(p)) {
      return p;
    }
  }
  return "compute-sanitizer";
}

// Everything a GPU job needs before it starts: the sandbox decision, the compiled oracle module
// and candidates, and copies of them where the sandbox user can read them. `early` is set when
// the job ends before any GPU work (blocked, or a compile failure).
struct early_end {
  verdict final;
  std::string reason;
  std::string message;
};

struct prepared {
  device_probe dev;
  std::unique_ptr<detail::isolation> iso;
  std::unique_ptr<temp_dir> staging;
  fs::path oracle_so;
  std::map<std::string, fs::path> libs; // role -> staged shared object
  std::map<std::string, build::result> builds;
  std::optional<early_end> early;
};

prepared prepare(const fs::path& root, const task::contract& c,
                 const std::vector<std::pair<std::string, const candidate_input*>>& inputs,
                 const options& opt, result& res,
                 const std::function<void(const std::string&)>& say) {
  json& d = res.detail;
  prepared p;
  p.dev = probe_device();
  d["device_probe"] =
      p.dev.available ? p.dev.info : json{{"available", false}, {"reason", p.dev.reason}};
  const auto& probe = detail::sandbox_probe();
  p.iso = std::make_unique<detail::isolation>(detail::isolation_for(root, c, opt.no_sandbox));
  res.context.isolation = sandbox::to_string(p.iso->decision.level);
  res.context.isolation_detail = p.iso->decision.detail;
  res.context.isolation_probe = probe.describe();
  if (p.iso->decision.level == sandbox::isolation::blocked) {
    p.early = early_end{verdict::blocked, "blocked.no_sandbox",
                        "candidates must not run unprotected and the sandbox is unavailable (" +
                            p.iso->decision.detail +
                            "); pass --no-sandbox to run without it, recorded on the evaluation"};
    return p;
  }
  const std::optional<std::string> arch =
      opt.arch
          ? opt.arch
          : (p.dev.available ? std::optional<std::string>(p.dev.info.at("arch")) : std::nullopt);
  const auto tools = build::detect_toolchain(arch);
  build::compiler trusted(tools, opt.cache_dir);
  build::compiler untrusted(tools, opt.cache_dir, p.iso->compiler());
  res.context.toolkit = tools.version;
  res.context.arch = tools.arch;
  d["toolchain"] = {
      {"nvcc", tools.nvcc.string()}, {"version", tools.version}, {"arch", tools.arch}};
  say("compile: oracle module and candidates");
  // The oracle module and every candidate compile at once (nvcc is mostly single-threaded, and
  // each build is its own process); their results are then read in a fixed order.
  auto oracle_req = build::oracle_request(root, c);
  oracle_req.timeout = opt.compile_timeout;
  auto oracle_build = std::async(std::launch::async,
                                 [&trusted, oracle_req] { return trusted.compile(oracle_req); });
  std::vector<std::future<build::result>> role_builds;
  for (const auto& [role, input] : inputs) {
    auto req = build::candidate_request(root, c, input->source, role + ".cu");
    req.timeout = opt.compile_timeout;
    // The task's own baseline, recognised by its source (never by a name or an origin a caller
    // chose), is trusted; everything else compiles in the sandbox.
    const bool own = is_task_baseline(c, *input);
    d["trusted_builds"][role] = own;
    build::compiler& cc = own ? trusted : untrusted;
    role_builds.push_back(
        std::async(std::launch::async, [&cc, req = std::move(req)] { return cc.compile(req); }));
  }
  const auto oracle = oracle_build.get();
  std::vector<build::result> built;
  for (auto& f : role_builds) {
    built.push_back(f.get());
  }
  res.builds.emplace("oracle", oracle);
  if (!oracle.ok()) {
    p.early = early_end{verdict::error, "task.oracle_compile_error",
                        "the task's oracle module does not compile:\n" + oracle.log};
    return p;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& role = inputs[i].first;
    const auto& b = built[i];
    res.builds.emplace(role, b);
    p.builds.emplace(role, b);
    if (!b.ok()) {
      p.early =
          role == "baseline"
              ? early_end{verdict::error, "baseline." + b.reason,
                          "the baseline does not compile:\n" + b.log}
              : early_end{verdict::rejected, b.reason,
                          "the " + role + " does not compile (see builds." + role + ".log_tail)"};
      return p;
    }
  }
  if (!p.dev.available) {
    p.early = early_end{verdict::blocked, "blocked.no_cuda_device",
                        "GPU stages blocked: " + p.dev.reason};
    return p;
  }
  p.staging = std::make_unique<temp_dir>("kblaster-stage");
  fs::permissions(p.staging->path(), fs::perms::owner_all | fs::perms::group_read |
                                         fs::perms::group_exec | fs::perms::others_read |
                                         fs::perms::others_exec);
  p.oracle_so = detail::stage_binary(p.staging->path(), oracle.binary, "oracle.so");
  for (const auto& [role, b] : p.builds) {
    p.libs[role] = detail::stage_binary(p.staging->path(), b.binary, role + ".so");
  }
  return p;
}

// The candidate's CUPTI counters at the timing shape, from a worker job of its own: what the
// search's classifier reads (search::assess). Whatever happens here is recorded and changes
// nothing of the verdict: counters that cannot be read, or a failed run, leave the state analytic.
counters_run counters_of(const fs::path& root, const task::contract& c,
                         const candidate_input& candidate, const options& opt,
                         const std::function<void(const std::string&)>& say) {
  say("profile: CUPTI counters of the candidate");
  options p = opt;
  p.sanitize = false;
  p.profile = profile_mode::none;
  const auto run = run_instrumented(root, c, candidate, p, {}, {}, /*counters=*/true, {});
  counters_run out;
  out.outcome = run.outcome.final;
  out.reason = run.outcome.reason;
  out.message = run.outcome.message;
  out.seconds = run.outcome.seconds;
  if (run.outcome.final == verdict::same) {
    out.values = run.profile.counters.value_or(json::object());
    out.event_median_s = run.profile.event_median_s;
    if (run.profile.failed) {
      out.message = *run.profile.failed;
    }
  }
  return out;
}

} // namespace

build::result compile_candidate(const fs::path& root, const task::contract& c,
                                const candidate_input& candidate, const options& opt) {
  const detail::isolation iso = detail::isolation_for(root, c, opt.no_sandbox);
  if (iso.decision.level == sandbox::isolation::blocked) {
    build::result r;
    r.status = build::outcome::unavailable;
    r.reason = "blocked.no_sandbox";
    return r;
  }
  const device_probe dev = probe_device();
  const auto arch =
      opt.arch ? opt.arch
               : (dev.available ? std::optional<std::string>(dev.info.at("arch")) : std::nullopt);
  build::compiler untrusted(build::detect_toolchain(arch), opt.cache_dir, iso.compiler());
  auto req = build::candidate_request(root, c, candidate.source, "candidate.cu");
  req.timeout = opt.compile_timeout;
  return untrusted.compile(req);
}

namespace {

using say_fn = std::function<void(const std::string&)>;

// The record's description of an evaluation before anything runs: the task and its shape, the
// protocol, and the two sources compared.
void describe_evaluation(result& res, const task::contract& c, const task::shape_case& shape,
                         const options& opt, const candidate_input& candidate,
                         const candidate_input& baseline) {
  json& d = res.detail;
  const task::ceilings& ceil = opt.ceilings;
  res.task = {c.id, c.suite, task::to_string(c.fam), c.digest};
  d["shape"] = {{"name", shape.name}, {"dims", shape.dims}};
  res.context.shape = shape.name;
  res.floor_s = task::floor_seconds(c, shape, ceil);
  res.context.ceilings = ceil;
  d["protocol"] = {{"seeds", opt.seeds},
                   {"seed_base", opt.seed_base},
                   {"determinism_runs", opt.determinism_runs},
                   {"sessions", opt.sessions},
                   {"timing", json(timing_of(opt.timing, 0, opt.sessions))},
                   {"delta", opt.delta},
                   {"delta_source", opt.delta_source},
                   {"sanitize", opt.sanitize},
                   {"profile", to_string(opt.profile)},
                   {"hang_timeout_s", opt.hang_timeout.count()}};
  res.candidate = {candidate.name, candidate.origin, sha256_hex(candidate.source)};
  res.baseline = {baseline.name, baseline.origin, sha256_hex(baseline.source)};
}

// The verdict, reason and message into `res`, with the time taken and the provenance.
result finish_evaluation(result& res, clock_type::time_point started, early_end end) {
  res.final = end.final;
  res.reason = std::move(end.reason);
  res.message = std::move(end.message);
  res.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  // Which tool, judge and device produced this result (a queue result travels between hosts).
  res.detail["provenance"] = {{"kblaster", KBLASTER_VERSION},
                              {"judge_protocol", judge_protocol_version},
                              {"device_uuid", res.context.device ? res.context.device->uuid : ""}};
  return res;
}

// The workers' events as progress lines.
detail::event_handlers progress_printer(const say_fn& say) {
  detail::event_handlers printer;
  printer.progress = [say](const gpu::protocol::progress& e) {
    if (e.stage == "verify") {
      say(fmt::format("verify: {}/{} {}", e.done + 1, e.total, e.what));
    } else if (e.stage == "time") {
      say(fmt::format("time: round {} samples {}", e.round, json(e.samples).dump()));
    }
  };
  printer.rejected = [say](const gpu::protocol::rejected& e) {
    say(fmt::format("{} rejected: {} {}", e.who, e.reason, e.message));
  };
  return printer;
}

// What the worker jobs of one evaluation share, once everything is compiled and staged.
struct session_plan {
  const task::contract& c;
  const options& opt;
  const fs::path& oracle_so;
  std::vector<std::pair<std::string, fs::path>> libs; // baseline, candidate
  std::map<std::string, bool> host_dispatch;          // role -> dispatches on the host
  std::function<process_spec(const process_spec&)> worker_wrap;
  fs::path log_dir;
  detail::event_handlers events;
  const say_fn& say;

  // A job with both libraries, for a session.
  gpu::protocol::job session_job() const {
    gpu::protocol::job job = base_job(c, opt, oracle_so);
    for (const auto& [role, path] : libs) {
      job.candidates.push_back({role, path.string(), host_dispatch.at(role)});
    }
    return job;
  }
};

// One compute-sanitizer tool over the candidate at the check shapes; its word goes into `tools`.
std::optional<early_end> sanitize_with(const session_plan& plan, const char* tool,
                                       std::map<std::string, sanitizer_run>& tools) {
  const options& opt = plan.opt;
  plan.say(fmt::format("sanitize: {}", tool));
  gpu::protocol::job job = base_job(plan.c, opt, plan.oracle_so);
  std::vector<gpu::protocol::shape> shapes;
  for (const auto& s : job.shapes) {
    if (s.role == "check") {
      shapes.push_back(s);
    }
  }
  job.shapes = shapes;
  job.timing_shape = shapes.at(0).name;
  job.seeds = {seeds_for(opt).at(0)};
  job.determinism_runs = 1;
  job.checker_selftest = false;
  job.host_reference = true;
  job.candidates = {{"candidate", plan.libs[1].second.string()}};
  detail::worker_launch tool_launch;
  const std::vector<std::string> sanitizer{compute_sanitizer_path(),
                                           "--tool",
                                           tool,
                                           "--error-exitcode",
                                           "86",
                                           "--print-limit",
                                           "20",
                                           "--nvtx",
                                           "no"};
  // The sanitizer wraps the candidate's runner, never the judge.
  add_runner(job, plan.worker_wrap, sanitizer, plan.log_dir / tool, opt.hang_timeout * 4,
             /*exact=*/true);
  fs::create_directories(plan.log_dir / tool);
  tool_launch.hang_timeout = opt.hang_timeout * 4;
  tool_launch.log_path = plan.log_dir / fmt::format("sanitize-{}.log", tool);
  const auto w = detail::run_worker_job(job, tool_launch, plan.events);
  if (w.failure == detail::worker_failure::blocked) {
    return early_end{verdict::blocked, w.failure_reason, w.failure_detail};
  }
  // The tool's verdict is its own summary line and exit code, in the runner's output.
  std::string runner_log;
  int runner_exit = -1;
  if (w.result) {
    if (const auto* l = w.result->library("candidate"); l != nullptr) {
      runner_log = l->output.tail_text;
      runner_exit = l->runner_exit ? l->runner_exit->exit_code : -1;
    }
  }
  const bool errors = !w.result || detail::sanitizer_found_errors(runner_log, runner_exit, 86);
  const auto summary = detail::parse_sanitizer_summary(runner_log);
  sanitizer_run& t = tools[tool];
  t.exit_code = runner_exit;
  t.errors = errors;
  if (summary) {
    t.summary_errors = summary->errors;
    t.summary_warnings = summary->warnings;
  }
  t.failure = detail::to_string(w.failure);
  t.log_tail = runner_log.substr(runner_log.size() > 6000 ? runner_log.size() - 6000 : 0);
  const bool died =
      w.failure == detail::worker_failure::hang || w.failure == detail::worker_failure::crash;
  if (died || errors) {
    const std::string why =
        died ? attribute(w).message : fmt::format("compute-sanitizer {} reported errors", tool);
    return early_end{verdict::rejected, fmt::format("sanitize.{}", tool), why};
  }
  return std::nullopt;
}

// The optional memory-safety pass at the check shapes, before anything is timed.
std::optional<early_end> sanitize_candidate(const session_plan& plan, result& res) {
  auto& tools = res.sanitize.emplace();
  for (const char* tool : {"memcheck", "racecheck", "initcheck", "synccheck"}) {
    if (auto end = sanitize_with(plan, tool, tools)) {
      return end;
    }
  }
  return std::nullopt;
}

// Session 1's worker: its result, or how the evaluation ends when it gave none.
struct session_one {
  std::optional<early_end> end;
  std::optional<gpu::protocol::result> result;
};

// Session 1: verification of both, then interleaved timing (on the judge started ahead, if any).
session_one run_session_one(const session_plan& plan, detail::started_worker judge,
                            const detail::worker_launch& launch, std::mt19937_64& rng,
                            result& res) {
  const options& opt = plan.opt;
  gpu::protocol::job job = plan.session_job();
  if (!opt.verify_only) {
    job.time = timing_of(opt.timing, rng(), opt.sessions);
    job.fresh_seed = rng();
  }
  add_runner(job, plan.worker_wrap, {}, plan.log_dir, opt.hang_timeout);
  plan.say("verify: starting worker");
  auto w1 = judge.child ? detail::run_worker_job(std::move(judge), job, launch, plan.events)
                        : detail::run_worker_job(job, launch, plan.events);
  res.worker_seconds += w1.seconds;
  res.detail["sessions"].push_back(
      {{"seconds", w1.seconds},
       {"stage_seconds", w1.result ? w1.result->stage_seconds : json()},
       {"failure", detail::to_string(w1.failure)},
       {"failure_detail", w1.failure_detail},
       {"log_tail",
        w1.log_tail.substr(w1.log_tail.size() > 4000 ? w1.log_tail.size() - 4000 : 0)}});
  if (w1.failure == detail::worker_failure::blocked) {
    return {early_end{verdict::blocked, w1.failure_reason, w1.failure_detail}, std::nullopt};
  }
  if (!w1.result) {
    const auto a = attribute(w1);
    if (a.who == "candidate") {
      return {early_end{verdict::rejected, a.reason, a.message}, std::nullopt};
    }
    if (a.who == "baseline") {
      return {
          early_end{verdict::error, "baseline." + a.reason, "the baseline failed: " + a.message},
          std::nullopt};
    }
    return {early_end{verdict::error, a.reason, "the evaluation worker failed: " + a.message},
            std::nullopt};
  }
  return {std::nullopt, std::move(w1.result)};
}

// What session 1 found, into `res`; how the evaluation ends when it ends there (a failed
// verification, a verify-only run, or no timing to go on with).
std::optional<early_end> judge_session_one(const gpu::protocol::result& r1, const options& opt,
                                           result& res) {
  res.context.device = r1.dev;
  res.verification = r1.candidates;
  res.detail["lanes"] = r1.lanes;
  if (r1.time) {
    res.timing = {*r1.time}; // replaced by every session's once all of them ran
  }
  if (r1.checker_selftest) {
    res.checker_selftest = r1.checker_selftest;
    if (!r1.checker_selftest->sound) {
      return early_end{verdict::error, "checker.unsound",
                       "the task's checker accepted a trivial output (zeros, a copy of the input "
                       "or a constant): fix the task's tolerances or distributions"};
    }
  }
  const auto* base_lib = r1.library("baseline");
  const auto* cand_lib = r1.library("candidate");
  if (base_lib == nullptr || cand_lib == nullptr) {
    return early_end{verdict::error, "harness.error",
                     "the worker returned no verdict for a candidate"};
  }
  if (!base_lib->accepted) {
    return early_end{verdict::error, "baseline." + base_lib->reason,
                     "the baseline failed verification: " + base_lib->message};
  }
  if (!cand_lib->accepted) {
    return early_end{verdict::rejected, cand_lib->reason, cand_lib->message};
  }
  if (opt.verify_only) {
    return early_end{verdict::same, "verify.passed",
                     "the candidate passed verification (not timed)"};
  }
  if (!r1.time) {
    return early_end{verdict::error, "harness.error", "the worker returned no timing"};
  }
  return std::nullopt;
}

// A further session `sidx` in a fresh process: the same bits on the timing sets as session 1's
// (`expected`), then timing again, appended to `timings`.
std::optional<early_end>
run_timing_session(const session_plan& plan, int sidx,
                   const std::map<std::string, gpu::protocol::set_digests>& expected,
                   detail::worker_launch& launch, std::mt19937_64& rng, result& res,
                   std::vector<gpu::protocol::session_timing>& timings) {
  const options& opt = plan.opt;
  gpu::protocol::job next = plan.session_job();
  next.verify = false;
  next.expected_digests = expected;
  next.time = timing_of(opt.timing, rng(), opt.sessions);
  next.fresh_seed = rng();
  const fs::path session_logs = plan.log_dir / fmt::format("session-{}", sidx);
  fs::create_directories(session_logs);
  add_runner(next, plan.worker_wrap, {}, session_logs, opt.hang_timeout);
  launch.log_path = plan.log_dir / fmt::format("session-{}.log", sidx);
  plan.say(fmt::format("time: session {} of {}", sidx, opt.sessions));
  const auto w = detail::run_worker_job(next, launch, plan.events);
  res.worker_seconds += w.seconds;
  res.detail["sessions"].push_back({{"seconds", w.seconds},
                                    {"stage_seconds", w.result ? w.result->stage_seconds : json()},
                                    {"failure", detail::to_string(w.failure)},
                                    {"failure_detail", w.failure_detail}});
  if (w.failure == detail::worker_failure::blocked) {
    return early_end{verdict::blocked, w.failure_reason,
                     fmt::format("session {}: {}", sidx, w.failure_detail)};
  }
  if (!w.result) {
    const auto a = attribute(w);
    if (a.who == "candidate") {
      return early_end{verdict::rejected, a.reason, fmt::format("session {}: {}", sidx, a.message)};
    }
    return early_end{verdict::error, a.who.empty() ? a.reason : "baseline." + a.reason,
                     fmt::format("session {}: {}", sidx, a.message)};
  }
  for (const auto& l : w.result->candidates) {
    if (!l.accepted) {
      // The session's timing record stays with the rejection: the ABI rules' calls (round trips
      // against the reference), the interference and reuse checks say why.
      if (w.result->time) {
        res.detail["sessions"].back()["timing"] = w.result->time->record;
      }
      return early_end{l.role == "candidate" ? verdict::rejected : verdict::error,
                       (l.role == "candidate" ? "" : "baseline.") + l.reason,
                       fmt::format("session {}: {}", sidx, l.message)};
    }
  }
  if (!w.result->time) {
    return early_end{verdict::error, "harness.error",
                     fmt::format("session {}: the worker returned no timing", sidx)};
  }
  timings.push_back(*w.result->time);
  return std::nullopt;
}

// The sessions' samples pooled with their labels, throttled ones dropped.
struct pooled_samples {
  std::vector<stats::timed_sample> baseline;
  std::vector<stats::timed_sample> candidate;
  size_t dropped = 0; // throttled samples
  std::vector<gate_summary::session_median> session_medians;
};

pooled_samples pool_sessions(const std::vector<gpu::protocol::session_timing>& timings,
                             double throttle_fraction) {
  pooled_samples out;
  for (size_t sidx = 0; sidx < timings.size(); ++sidx) {
    const auto a = labelled_samples(timings[sidx], "baseline", static_cast<int>(sidx),
                                    throttle_fraction, &out.dropped);
    const auto b = labelled_samples(timings[sidx], "candidate", static_cast<int>(sidx),
                                    throttle_fraction, &out.dropped);
    if (!a.empty() && !b.empty()) {
      out.session_medians.push_back({stats::median(times_of(a)), stats::median(times_of(b))});
    }
    out.baseline.insert(out.baseline.end(), a.begin(), a.end());
    out.candidate.insert(out.candidate.end(), b.begin(), b.end());
  }
  return out;
}

// The gate's comparison in the record's words.
gate_summary summarize_gate(const stats::structured_comparison& structured,
                            const pooled_samples& pooled, double floor, double limit,
                            bool faster_than_physical_limit) {
  const auto& cmp = structured.gate;
  gate_summary g;
  g.n_baseline = static_cast<int>(cmp.n_a);
  g.n_candidate = static_cast<int>(cmp.n_b);
  g.median_baseline_s = cmp.median_a;
  g.median_candidate_s = cmp.median_b;
  // A distribution-free 95% interval of each median from order statistics.
  const auto base_median = stats::median_with_interval(times_of(pooled.baseline));
  const auto cand_median = stats::median_with_interval(times_of(pooled.candidate));
  g.median_baseline_low_s = base_median.low;
  g.median_baseline_high_s = base_median.high;
  g.median_candidate_low_s = cand_median.low;
  g.median_candidate_high_s = cand_median.high;
  g.speedup = cmp.median_a / cmp.median_b;
  g.speedup_low = 1.0 / cmp.interval.high;
  g.speedup_high = 1.0 / cmp.interval.low;
  g.p = structured.block.p;
  g.floor_fraction = floor / cmp.median_b;
  g.ratio = cmp.interval.ratio;
  g.ratio_low = cmp.interval.low;
  g.ratio_high = cmp.interval.high;
  g.delta = cmp.delta;
  g.resolution_s = cmp.resolution_s;
  g.p_within = structured.block.p_within;
  if (structured.block.between_available) {
    g.p_between = structured.block.p_between;
  }
  g.mann_whitney_p = cmp.test.p;
  g.session_medians = pooled.session_medians;
  gate_summary::decision& how = g.decided.emplace();
  how.throttled_dropped = pooled.dropped;
  how.sessions = structured.block.sessions;
  how.blocks = structured.block.blocks;
  how.rounds_per_block = structured.block.rounds_per_block;
  how.mean_log_ratio = structured.block.mean_log_ratio;
  how.p_within = structured.block.p_within;
  if (structured.block.between_available) {
    how.p_between = structured.block.p_between;
  }
  how.p = structured.block.p;
  how.verdict = stats::to_string(cmp.result);
  how.reason = cmp.reason;
  how.baseline_floor_fraction = floor / cmp.median_a;
  how.physical_limit_s = limit;
  how.faster_than_physical_limit = faster_than_physical_limit;
  return g;
}

// The statistical gate's end of an evaluation; `timed`: the gate decided (the candidate may
// then be profiled), rather than too few samples or a time below the physical limit.
struct gate_end {
  early_end end;
  bool timed = false;
};

// The gate over the pooled samples, its summary into `res.gate`.
gate_end apply_gate(const task::contract& c, const task::shape_case& shape, const options& opt,
                    const pooled_samples& pooled, result& res) {
  if (pooled.baseline.size() < 3 || pooled.candidate.size() < 3) {
    return {{verdict::error, "timing.too_few_samples", "too few unthrottled samples to compare"},
            false};
  }
  const task::ceilings& ceil = opt.ceilings;
  stats::structured_options co;
  co.aa_spread = opt.delta > 0.01 ? opt.delta : 0.0;
  co.resolution_s = opt.resolution_s;
  co.bootstrap.resamples = stats::gate_min_resamples;
  co.bootstrap.seed = opt.seed_base;
  const auto structured = stats::compare_structured(pooled.baseline, pooled.candidate, co);
  const auto& cmp = structured.gate;
  const double floor = task::floor_seconds(c, shape, ceil);
  const double limit = task::limit_seconds(c, shape, ceil);
  const auto plaus = stats::check_roofline_floor(cmp.median_b, limit);
  res.gate = summarize_gate(structured, pooled, floor, limit, plaus.flagged);
  if (plaus.flagged) {
    return {{verdict::rejected, "timing.faster_than_physical_limit",
             fmt::format("measured {:.4g} ms is faster than the physical limit {:.4g} ms (the "
                         "task's bytes at the device's peak bandwidth, its FLOPs at its "
                         "peak rate; ceilings: {}): a bug or an exploit",
                         cmp.median_b * 1e3, limit * 1e3, ceil.source)},
            false};
  }
  return {
      {*verdict_from_string(stats::to_string(cmp.result)), "timing." + stats::to_string(cmp.result),
       fmt::format("speedup {:.3f}x [{:.3f}, {:.3f}] over the baseline, p = {:.2g}, delta {:.1f}%",
                   cmp.median_a / cmp.median_b, 1.0 / cmp.interval.high, 1.0 / cmp.interval.low,
                   structured.block.p, 100 * cmp.delta)},
      true};
}

} // namespace

result evaluate(const fs::path& root, const task::contract& c, const candidate_input& candidate,
                const candidate_input& baseline, const options& given,
                const progress_fn& progress) {
  const auto started = clock_type::now();
  // Inputs, the order of calls and the anti-cache positions come from this seed: drawn from the
  // CSPRNG for every evaluation unless given (`eval --seed N` replays one), always recorded.
  options opt = given;
  opt.seed_base = evaluation_seed(given.seed_base);
  const say_fn say = [&](const std::string& s) {
    if (progress) {
      progress(s);
    }
  };
  result res;
  const auto& shape = c.shape(opt.shape);
  describe_evaluation(res, c, shape, opt, candidate, baseline);
  const auto finish = [&](early_end end) {
    return finish_evaluation(res, started, std::move(end));
  };

  temp_dir logs("kblaster-eval", opt.cache_dir / "logs");
  // Session 1's judge starts now, so that its process and CUDA context come up while the oracle
  // and the candidates compile (it waits for its job; an evaluation that ends before it, or that
  // sanitizes first, has it killed).
  detail::worker_launch launch;
  launch.hang_timeout = opt.hang_timeout;
  launch.log_path = logs.path() / "session-1.log";
  detail::started_worker judge1;
  if (!opt.sanitize) {
    judge1 = detail::start_worker(launch);
  }
  const prepared prep =
      prepare(root, c, {{"baseline", &baseline}, {"candidate", &candidate}}, opt, res, say);
  if (prep.early) {
    return finish(*prep.early);
  }
  const auto& cand_build = prep.builds.at("candidate");
  say(fmt::format("compile: done (candidate {})",
                  cand_build.cached ? "cached" : fmt::format("{:.1f} s", cand_build.seconds)));
  const session_plan plan{
      c,
      opt,
      prep.oracle_so,
      {{"baseline", prep.libs.at("baseline")}, {"candidate", prep.libs.at("candidate")}},
      {{"baseline", dispatches_on_host(c, baseline)},
       {"candidate", dispatches_on_host(c, candidate)}},
      prep.iso->worker(prep.staging->path()),
      logs.path(),
      progress_printer(say),
      say};
  if (opt.sanitize) {
    if (auto end = sanitize_candidate(plan, res)) {
      return finish(std::move(*end));
    }
  }
  std::mt19937_64 rng(opt.seed_base ^ 0x5EED);
  const session_one one = run_session_one(plan, std::move(judge1), launch, rng, res);
  if (one.end) {
    return finish(*one.end);
  }
  const gpu::protocol::result& r1 = *one.result;
  if (auto end = judge_session_one(r1, opt, res)) {
    return finish(std::move(*end));
  }
  // Further sessions in fresh processes: the same bits on the timing sets, then timing again.
  std::vector<gpu::protocol::session_timing> timings{*r1.time};
  const std::map<std::string, gpu::protocol::set_digests> expected = {
      {"baseline", r1.library("baseline")->digests},
      {"candidate", r1.library("candidate")->digests}};
  for (int sidx = 2; sidx <= opt.sessions; ++sidx) {
    if (auto end = run_timing_session(plan, sidx, expected, launch, rng, res, timings)) {
      return finish(std::move(*end));
    }
  }
  res.timing = timings;
  const gate_end gate =
      apply_gate(c, shape, opt, pool_sessions(timings, opt.timing.throttle_fraction), res);
  if (gate.timed &&
      (opt.profile == profile_mode::always ||
       (opt.profile == profile_mode::improved && gate.end.final == verdict::improved))) {
    res.counters = counters_of(root, c, candidate, opt, say);
  }
  return finish(gate.end);
}

// ---- the profiler's run
// ----------------------------------------------------------------------------

instrumented_run run_instrumented(const fs::path& root, const task::contract& c,
                                  const candidate_input& candidate, const options& opt,
                                  const std::vector<std::string>& prefix,
                                  const std::vector<fs::path>& tool_dirs, bool counters,
                                  const progress_fn& progress) {
  const auto started = clock_type::now();
  instrumented_run run;
  result& res = run.outcome;
  json& d = res.detail;
  const auto finish = [&](verdict v, std::string reason, std::string message) {
    res.final = v;
    res.reason = std::move(reason);
    res.message = std::move(message);
    res.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    return run;
  };
  const auto say = [&](const std::string& s) {
    if (progress) {
      progress(s);
    }
  };
  res.candidate = {candidate.name, candidate.origin, sha256_hex(candidate.source)};
  const prepared prep = prepare(root, c, {{"candidate", &candidate}}, opt, res, say);
  if (prep.early) {
    return finish(prep.early->final, prep.early->reason, prep.early->message);
  }
  temp_dir logs("kblaster-profile", opt.cache_dir / "logs");
  const fs::path& oracle_so = prep.oracle_so;
  const fs::path& cand_so = prep.libs.at("candidate");
  gpu::protocol::job job = base_job(c, opt, oracle_so);
  std::vector<gpu::protocol::shape> shapes;
  for (const auto& s : job.shapes) {
    if (s.name == opt.shape) {
      shapes.push_back(s);
    }
  }
  job.shapes = shapes;
  job.seeds = {seeds_for(opt).at(0)};
  job.determinism_runs = 1;
  job.checker_selftest = false;
  job.single_check = true;
  job.profile = true;
  job.counters = counters;
  job.candidates = {{"candidate", cand_so.string(), dispatches_on_host(c, candidate)}};
  detail::worker_launch launch;
  add_runner(job, prep.iso->worker(prep.staging->path(), tool_dirs), prefix, logs.path(),
             prefix.empty() ? opt.hang_timeout : opt.hang_timeout * 4);
  launch.hang_timeout = prefix.empty() ? opt.hang_timeout : opt.hang_timeout * 4;
  launch.log_path = logs.path() / "profile.log";
  say(prefix.empty() ? "profile: starting worker"
                     : "profile: starting worker under " + fs::path(prefix[0]).filename().string());
  const auto w = detail::run_worker_job(job, launch, {});
  try {
    // The profiler prints in the runner's output.
    run.log = read_file(launch.log_path);
    if (fs::exists(logs.path() / "runner-candidate.log")) {
      run.log += read_file(logs.path() / "runner-candidate.log");
    }
  } catch (const std::exception&) {
    run.log = w.log_tail;
  }
  d["session"] = {{"seconds", w.seconds},
                  {"failure", detail::to_string(w.failure)},
                  {"failure_detail", w.failure_detail},
                  {"exit_code", w.exit_code}};
  if (w.failure == detail::worker_failure::blocked) {
    return finish(verdict::blocked, w.failure_reason, w.failure_detail);
  }
  if (!w.result) {
    const auto a = attribute(w);
    if (a.who == "candidate") {
      return finish(verdict::rejected, a.reason, a.message);
    }
    return finish(verdict::error, a.reason, "the profiling worker failed: " + a.message);
  }
  res.context.device = w.result->dev;
  res.verification = w.result->candidates;
  const auto* lib = w.result->library("candidate");
  if (lib == nullptr) {
    return finish(verdict::error, "harness.error",
                  "the worker returned no verdict for the candidate");
  }
  if (!lib->accepted) {
    return finish(verdict::rejected, lib->reason, lib->message);
  }
  run.profile = w.result->profile.value_or(gpu::protocol::profile_calls{});
  return finish(verdict::same, "verify.passed",
                "the candidate passed its check and ran instrumented");
}

} // namespace kb::eval
