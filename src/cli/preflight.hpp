// Preflight: ordered capability checks that run before any search or benchmark spends GPU time,
// stopping at the first hard failure. The report says what this machine can do: "unavailable"
// (a hard check failed), "events-only" (no profiler counters: events and the analytic roofline),
// or "full-diagnostics".
#pragma once

#include "llm/llm.hpp"
#include "store/store.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kb::cli {

struct preflight_check {
  std::string name;   // store, device, compiler, sandbox, timing, counters, llm
  std::string status; // ok | failed | degraded | skipped
  std::string detail;
  bool hard = true;   // a failure stops the checks
  double seconds = 0; // [s]
  nlohmann::json data = nlohmann::json::object();
};

struct preflight_report {
  std::vector<preflight_check> checks;
  std::string mode = "unavailable"; // unavailable | events-only | full-diagnostics
  std::string reason;               // the first hard failure, or what degraded the mode
  bool usable() const { return mode != "unavailable"; }
  nlohmann::json to_json() const;
};

struct preflight_options {
  std::filesystem::path root;
  std::filesystem::path cache_dir;
  bool no_sandbox = false;
  std::optional<llm::client_config> llm; // checked when the LLM proposer is configured
  // Take the compiler, sandbox, timing and counter checks from a usable preflight of this store
  // that finished at most this long ago on the same device (UUID) with the same sandbox setting,
  // instead of running them again (0: always run them). The store and device checks always run.
  std::chrono::seconds reuse_within{0};
};

// A usable earlier preflight that `opt.reuse_within` allows on the device `device_uuid` at `now`:
// its run, its age and its report. The newest such run of the store's last 200.
struct reusable_preflight {
  int64_t run = 0;
  double age_s = 0;
  preflight_report report;
};
std::optional<reusable_preflight>
find_reusable_preflight(const store::store& st, const std::string& device_uuid,
                        const preflight_options& opt, std::chrono::system_clock::time_point now);

// Runs the checks in order; the store check writes a blob, and the report is recorded as a
// "preflight" run in `st`.
preflight_report preflight(store::store& st, const preflight_options& opt,
                           const std::function<void(const preflight_check&)>& on_check);

} // namespace kb::cli
