// Running one job in a worker process and turning what happened to it into data: a result, or a
// crash, hang or error attributed to the candidate that was running at the time.
#pragma once

#include "common/process.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
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

struct worker_outcome {
  std::optional<nlohmann::json> result; // the worker's "result" event
  std::string failure;        // "", "crash", "hang", "exit", "error", "sticky" (a context-
                              // corrupting CUDA error that surfaced in a harness call)
  std::string failure_detail; // "SIGSEGV", "exit 1", the error text
  nlohmann::json last_step = nlohmann::json::object(); // the last step announced before the failure
  std::vector<nlohmann::json> rejections;              // "rejected" events as they came
  std::string log_tail; // the worker's stdout/stderr (candidate prints, sanitizer)
  int exit_code = 0;
  double seconds = 0;
};

using event_fn = std::function<void(const nlohmann::json& event)>;

// The program that runs workers: $KBLASTER_WORKER_EXE (for programs that embed the library, such
// as the test binaries), else this executable.
std::filesystem::path worker_executable();

worker_outcome run_worker_job(const nlohmann::json& job, const worker_launch& launch,
                              const event_fn& on_event);

} // namespace kb::eval::detail
