// Profiling a candidate: probe counter access, run the worker under the chosen source, fall back to
// events only when counters cannot be read, and classify.
#include "profile/detail/probe_kernel.hpp"
#include "profile/profile.hpp"

#include "common/error.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>

namespace kb::profile {

using nlohmann::json;

std::string to_string(counter_source v) {
  return std::string(counter_source_names.name(v));
}

std::optional<counter_source> counter_source_from_string(const std::string& s) {
  return counter_source_names.parse(s);
}

std::string to_string(status v) {
  return std::string(status_names.name(v));
}

std::optional<status> status_from_string(const std::string& s) {
  return status_names.parse(s);
}

json access::to_json() const {
  return {{"source", to_string(source)},
          {"available", available},
          {"reason", reason},
          {"tool", tool},
          {"seconds", seconds}};
}

json report::to_json() const {
  json raws = json::array();
  for (const auto& r : raw) {
    raws.push_back({{"plan", to_string(r.which)}, {"sha256", r.sha256}, {"bytes", r.csv.size()}});
  }
  return {{"status", to_string(outcome)},
          {"reason", reason},
          {"message", message},
          {"bottleneck", bottleneck.to_json()},
          {"counters", measured ? measured->to_json() : json(nullptr)},
          {"raw_reports", raws},
          {"access", counter_access.to_json()},
          {"detail", detail},
          {"seconds", seconds}};
}

namespace {

std::string last_lines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  std::string out;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : " | ") + lines[i];
  }
  return out;
}

// Why Nsight Compute's output holds no counters, or "" when it does.
std::string ncu_failure(const ncu_output& out, const std::string& whole) {
  if (out.permission_denied) {
    return "ERR_NVGPUCTRPERM: this user may not read GPU performance counters; see "
           "https://developer.nvidia.com/ERR_NVGPUCTRPERM";
  }
  if (!out.kernels.empty()) {
    return "";
  }
  if (!out.errors.empty()) {
    return "Nsight Compute failed: " + out.errors.front();
  }
  return "Nsight Compute profiled no kernel" +
         (whole.empty() ? std::string() : ": " + last_lines(whole, 3));
}

access probe_ncu() {
  access a;
  a.source = counter_source::ncu;
  const auto ncu = find_ncu();
  if (!ncu) {
    a.reason = "Nsight Compute (ncu) not found: install it or set KBLASTER_NCU";
    return a;
  }
  process_spec version;
  version.argv = {*ncu, "--version"};
  version.timeout = std::chrono::seconds(60);
  const auto v = run_process(version);
  a.tool = *ncu;
  std::stringstream lines(v.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("Version") != std::string::npos) {
      a.tool += " (" + line + ")";
    }
  }
  if (!v.ok()) {
    a.reason = fmt::format("{} --version: {}: {}", *ncu, v.describe(), last_lines(v.output, 3));
    return a;
  }
  process_spec probe;
  probe.argv = ncu_probe_command(*ncu);
  // The kblaster executable, also under a test binary: the probe is its `profile-probe` command.
  probe.argv.push_back(worker_executable().string());
  probe.argv.push_back("profile-probe");
  probe.timeout = std::chrono::seconds(180);
  const auto r = run_process(probe);
  const auto out = parse_ncu_output(r.output);
  a.reason = ncu_failure(out, r.output);
  if (a.reason.empty() && !out.kernels.front().number("gpu__time_duration.sum")) {
    a.reason = "Nsight Compute's probe profile holds no duration: " + last_lines(r.output, 3);
  }
  if (a.reason.empty() && !r.ok()) {
    a.reason = fmt::format("Nsight Compute's probe profile ended badly ({}): {}", r.describe(),
                           last_lines(r.output, 3));
  }
  a.available = a.reason.empty();
  return a;
}

access probe_cupti() {
  access a;
  a.source = counter_source::cupti;
  process_spec probe;
  probe.argv = {worker_executable().string(), "profile-probe", "--cupti"};
  probe.timeout = std::chrono::seconds(120);
  const auto r = run_process(probe);
  // The probe prints one JSON line last; the CUDA runtime may print before it.
  std::optional<gpu::protocol::profile_calls> result;
  std::stringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.front() == '{') {
      try {
        result = json::parse(line).get<gpu::protocol::profile_calls>();
      } catch (const std::exception&) {
      }
    }
  }
  if (!result) {
    a.reason = fmt::format("the CUPTI probe gave no answer ({}): {}", r.describe(),
                           last_lines(r.output, 3));
    return a;
  }
  if (result->failed) {
    a.reason = "the CUPTI probe's kernel failed: " + *result->failed;
    return a;
  }
  const auto v = cupti_values::from_json(result->counters.value_or(json::object()));
  a.available = v.available;
  a.reason = v.available ? "" : v.reason;
  a.tool = "libcupti (range profiler)";
  return a;
}

status status_of(eval::verdict v) {
  switch (v) {
  case eval::verdict::rejected:
    return status::rejected;
  case eval::verdict::blocked:
    return status::blocked;
  default:
    return status::error;
  }
}

} // namespace

access probe_access(counter_source source) {
  static std::mutex lock;
  static std::map<std::string, access> known; // by source and the ncu found
  const std::lock_guard<std::mutex> guard(lock);
  const std::string key =
      to_string(source) + "|" + (source == counter_source::ncu ? find_ncu().value_or("") : "");
  if (const auto it = known.find(key); it != known.end()) {
    return it->second;
  }
  const auto started = std::chrono::steady_clock::now();
  access a = source == counter_source::ncu ? probe_ncu() : probe_cupti();
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  known[key] = a;
  return a;
}

int probe_target_main(bool cupti) {
  constexpr int n = 4096;
  float* y = nullptr;
  if (const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&y), n * sizeof(float));
      e != cudaSuccess) {
    std::printf("%s\n",
                json{{"failed", fmt::format("no usable CUDA device: {}", cudaGetErrorName(e))}}
                    .dump()
                    .c_str());
    return exit_code::blocked;
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const auto out = worker_calls([] {}, [&] { return detail::launch_probe_kernel(y, n, stream); },
                                stream, cupti, 1);
  std::printf("%s\n", json(out).dump().c_str());
  std::fflush(stdout);
  cudaStreamDestroy(stream);
  cudaFree(y);
  return out.failed ? exit_code::tool : exit_code::ok;
}

report run(const fs::path& root, const task::contract& c, const eval::candidate_input& candidate,
           const request& r, const eval::progress_fn& progress) {
  const auto started = std::chrono::steady_clock::now();
  report rep;
  const auto& shape = c.shape(r.options.shape);
  observation obs;
  obs.bytes = task::roofline_bytes(c, shape);
  obs.flops = task::roofline_flops(c, shape);
  obs.ceilings = r.options.ceilings;
  rep.detail["task"] = {{"id", c.id}, {"name", c.name}, {"suite", c.suite}, {"digest", c.digest}};
  rep.detail["shape"] = {{"name", shape.name}, {"dims", shape.dims}};
  rep.detail["candidate"] = {{"name", candidate.name},
                             {"origin", candidate.origin},
                             {"source_digest", sha256_hex(candidate.source)}};
  rep.detail["source"] = to_string(r.source);
  rep.shape = shape.name;
  rep.candidate = {candidate.name, candidate.origin, sha256_hex(candidate.source)};
  const auto say = [&](const std::string& s) {
    if (progress) {
      progress(s);
    }
  };
  const auto finish = [&]() {
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return rep;
  };

  say(fmt::format("profile: probing {} counter access", to_string(r.source)));
  rep.counter_access = probe_access(r.source);
  std::string unavailable = rep.counter_access.available ? "" : rep.counter_access.reason;
  std::optional<counters> measured;
  std::optional<gpu::protocol::device> device;
  json runs = json::array();
  // Under Nsight Compute: first a worker with no profiler attached, whose CUDA events time the
  // call (ncu intercepts every launch, so events taken under it hold its overhead), then one
  // worker per plan for the counters. A single worker otherwise.
  std::vector<std::optional<plan>> passes;
  if (unavailable.empty() && r.source == counter_source::ncu) {
    passes.emplace_back(std::nullopt);
    for (plan p : r.plans) {
      passes.emplace_back(p);
    }
    if (passes.size() == 1) {
      passes.emplace_back(plan::triage);
    }
  } else {
    passes.emplace_back(std::nullopt);
  }
  const std::string ncu_path = find_ncu().value_or("ncu");
  for (const auto& p : passes) {
    const bool under_ncu = p.has_value() && unavailable.empty();
    const bool cupti = !p && unavailable.empty() && r.source == counter_source::cupti;
    const auto prefix = under_ncu ? ncu_command(ncu_path, *p) : std::vector<std::string>{};
    if (p && !under_ncu) {
      continue; // an earlier plan found that counters cannot be read; its events stand
    }
    say(under_ncu ? "profile: plan " + to_string(*p)
                  : (cupti ? "profile: CUPTI counters" : "profile: events only"));
    auto run = eval::run_instrumented(root, c, candidate, r.options, prefix,
                                      under_ncu ? ncu_installation(ncu_path)
                                                : std::vector<std::filesystem::path>{},
                                      cupti, progress);
    json entry{{"plan", p ? json(to_string(*p)) : json(nullptr)},
               {"verdict", eval::to_string(run.outcome.final)},
               {"reason", run.outcome.reason},
               {"seconds", run.outcome.seconds},
               {"profile", run.profile}};
    if (run.outcome.context.device) {
      device = run.outcome.context.device;
      rep.device = device;
      rep.detail["device"] = *device;
    }
    // The candidate already passed its check and ran in the first worker, with no profiler
    // attached. A worker that then dies, stops answering or never starts under Nsight Compute
    // (the tool exits before it runs the worker: a harness error) was ended by the tool (an
    // installation the sandbox cannot reach, a device it does not support), not by the
    // candidate: the events stand, and the report says why there are no counters.
    const bool ended_by_tool =
        (run.outcome.final == eval::verdict::rejected &&
         (run.outcome.reason.starts_with("crash.") || run.outcome.reason.starts_with("hang."))) ||
        (run.outcome.final == eval::verdict::error && run.outcome.reason == "harness.error");
    if (under_ncu && obs.seconds && ended_by_tool) {
      unavailable = fmt::format("Nsight Compute ended the worker that ran cleanly without it "
                                "({}: {})",
                                run.outcome.reason, run.outcome.message);
      if (!run.log.empty()) {
        unavailable += ": " + last_lines(run.log, 3);
      }
      runs.push_back(entry);
      continue;
    }
    if (run.outcome.final != eval::verdict::same) {
      runs.push_back(entry);
      rep.detail["runs"] = runs;
      rep.detail["evaluation"] = eval::to_json(run.outcome);
      rep.outcome = status_of(run.outcome.final);
      rep.reason = run.outcome.reason;
      rep.message = run.outcome.message;
      rep.bottleneck.events_only = true;
      rep.bottleneck.sentence = "not profiled: " + run.outcome.message;
      return finish();
    }
    if (!obs.seconds) {
      obs.seconds = run.profile.event_median_s;
    }
    if (under_ncu) {
      const auto out = parse_ncu_output(run.log);
      entry["ncu"] = {
          {"kernels", out.kernels.size()}, {"errors", out.errors}, {"warnings", out.warnings}};
      const std::string why = ncu_failure(out, run.log);
      if (!why.empty()) {
        unavailable = why;
      } else {
        rep.raw.push_back({*p, out.csv, sha256_hex(out.csv)});
        auto figures = counters_from_ncu(out.kernels);
        if (measured) {
          measured->merge(figures);
        } else {
          measured = figures;
        }
      }
    } else if (cupti) {
      const auto v = cupti_values::from_json(run.profile.counters.value_or(json::object()));
      entry["cupti"] = v.to_json();
      if (v.available) {
        measured = counters_from_cupti(v);
      } else {
        unavailable = v.reason;
      }
    }
    runs.push_back(entry);
  }
  rep.detail["runs"] = runs;
  if (measured && !measured->sm_count && device) {
    measured->sm_count = device->sm_count;
  }
  obs.measured = measured;
  obs.events_only_reason = unavailable;
  rep.measured = measured;
  rep.bottleneck = classify(obs);
  rep.outcome = measured ? status::profiled : status::events_only;
  rep.reason = measured ? "profile.counters" : "profile.events_only";
  rep.message = rep.bottleneck.sentence;
  return finish();
}

} // namespace kb::profile
