// Running one job in a worker process and turning what happened to it into data: a result, or a
// crash, hang or error attributed to the candidate that was running at the time.
#pragma once

#include "common/process.hpp"
#include "gpu/protocol.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kb::eval::detail {

struct worker_launch {
  std::vector<std::string> prefix; // e.g. compute-sanitizer and its flags, or the sandbox
  std::chrono::seconds hang_timeout{30};
  std::filesystem::path log_path;
  std::function<process_spec(const process_spec&)> wrap; // sandbox, when enabled
};

// How a worker job ended without a result. Recorded, so names round-trip through strings.
enum class worker_failure {
  none,
  crash,  // the judge died of a signal
  hang,   // no event for the hang limit
  exit,   // it ended without a result
  error,  // it reported an error of its own
  sticky, // a context-corrupting CUDA error surfaced in one of its own calls
  blocked, // it reported an error and exited exit_code::blocked: another judge held its device
           // (failure_reason: blocked.device_busy); nothing of the job ran
};
std::string to_string(worker_failure f);

struct worker_outcome {
  std::optional<gpu::protocol::result> result; // the judge's result
  worker_failure failure = worker_failure::none;
  std::string failure_detail;                 // "SIGSEGV", "exit 1", the error text
  std::string failure_reason;                 // blocked: the stable reason
  gpu::protocol::step last_step;              // the last step announced before the failure
  std::vector<gpu::protocol::rejected> rejections; // as they came
  std::string log_tail; // the worker's stdout/stderr (candidate prints, sanitizer)
  int exit_code = 0;
  double seconds = 0;
};

// What the caller sees while the job runs (either may be empty).
struct event_handlers {
  std::function<void(const gpu::protocol::progress&)> progress;
  std::function<void(const gpu::protocol::rejected&)> rejected;
};

// A judge process started before its job is ready: its process and CUDA context come up while
// the parent still compiles, and the job goes to it when the builds are done.
struct started_worker {
  std::unique_ptr<child_process> child;
};
started_worker start_worker(const worker_launch& launch);

// Runs one job in a worker (started here, or ahead by start_worker with the same launch) and
// ends it. `seconds` counts from the job's sending.
worker_outcome run_worker_job(const gpu::protocol::job& job, const worker_launch& launch,
                              const event_handlers& on_event);
worker_outcome run_worker_job(started_worker worker, const gpu::protocol::job& job,
                              const worker_launch& launch, const event_handlers& on_event);

} // namespace kb::eval::detail
