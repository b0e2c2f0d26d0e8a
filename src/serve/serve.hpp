// The dashboard's data: read-only views of the store (runs, a run's tasks, a search, a candidate,
// a task's roofline, the suite against PyTorch), each one JSON document served by `kblaster serve`
// (the HTTP layer is src/serve/http/, a separate executable; docs/serve.md). Nothing here writes
// to the store.
#pragma once

#include "store/store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace kb::serve {

namespace fs = std::filesystem;

// A page asked for something the store does not hold (HTTP 404).
class not_found : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Filters of the runs list; empty strings match everything. Dates compare as ISO 8601 prefixes
// ("2026-11-30" matches every time of that day).
struct run_filter {
  std::string task;    // a task id the run evaluated or has an outcome for
  std::string outcome; // the run's outcome, or any of its tasks' outcomes
  std::string kind;    // eval, bench, optimize, ...
  std::string status;  // running, finished, interrupted
  std::string since;   // started on or after [UTC, ISO 8601 date or time]
  std::string until;   // started on or before
  int limit = 200;
};

struct dashboard_options {
  // Project folder with tasks/ (for the roofline's bytes and FLOPs); none: no roofline.
  std::optional<fs::path> project_root;
  // A bench.json written by `kblaster bench` (e.g. evidence/h200/core10/bench.json), shown on the
  // suite page when no bench run in the store names readable PyTorch timings.
  std::optional<fs::path> bench_json;
};

class dashboard {
public:
  dashboard(const store::store& st, dashboard_options options);

  nlohmann::json runs(const run_filter& filter) const;
  // The run, and per task: outcome, speedup with interval, floor fraction, evaluations, time.
  nlohmann::json run(int64_t run) const;
  // One task's search in a run: best-so-far curve, every candidate with verdict and reason, the
  // memory's steps (bottleneck state, strategy, prediction) and its ranking of strategies.
  nlohmann::json search(int64_t run, const std::string& task) const;
  // One evaluation: sources (candidate, task baseline, the candidate it was compared with),
  // build, verification per check, timing samples and per-session medians, sanitizer, profiler.
  nlohmann::json evaluation(int64_t run, int64_t evaluation) const;
  // The task's roofline (ceilings, ridge) with every timed candidate of the run placed on it.
  nlohmann::json roofline(int64_t run, const std::string& task) const;
  // Speedups of a bench run's kernels over the baseline and over each PyTorch method.
  nlohmann::json suite(std::optional<int64_t> run) const;
  // Changes whenever a run starts or finishes or an evaluation is recorded: pages poll it.
  std::string version() const;

private:
  const store::store& m_store;
  dashboard_options m_options;
};

// A folder as an uncompressed POSIX tar (ustar) archive whose entries start with `prefix/`.
// Regular files and folders only; anything else is refused (kb::error).
std::string tar_folder(const fs::path& dir, const std::string& prefix);

// Exports a run's evidence (store::export_evidence) and returns it as a tar archive named
// run-<id>-evidence/; refuses (kb::error) when the export reports problems.
std::string evidence_archive(const store::store& st, int64_t run);

// Seconds between two UTC ISO 8601 timestamps ("2026-11-30T21:00:00.123Z"); nullopt when either
// does not parse.
std::optional<double> seconds_between(const std::string& from, const std::string& to);

} // namespace kb::serve
