#include "eval/session.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "sandbox/sandbox.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>

namespace kb::eval::detail {

namespace {

std::string tail(const std::string& s, size_t n) {
  return s.size() > n ? s.substr(s.size() - n) : s;
}

} // namespace

std::filesystem::path worker_executable() {
  if (const char* env = std::getenv("KBLASTER_WORKER_EXE"); env != nullptr && *env != '\0') {
    return env;
  }
  return self_executable();
}

worker_outcome run_worker_job(const nlohmann::json& job, const worker_launch& launch,
                              const event_fn& on_event) {
  worker_outcome out;
  process_spec spec;
  spec.argv = launch.prefix;
  spec.argv.push_back(worker_executable().string());
  spec.argv.push_back("worker");
  const process_spec run = launch.wrap ? launch.wrap(spec) : spec;
  const auto start = std::chrono::steady_clock::now();
  child_process child(run, launch.log_path, "KBLASTER_RESULT_FD");
  child.write_line(job.dump());
  child.write_line(R"({"op":"exit"})");
  while (true) {
    bool timed_out = false;
    auto line = child.read_line(launch.hang_timeout, &timed_out);
    if (timed_out) {
      child.kill();
      out.failure = "hang";
      out.failure_detail = fmt::format("no progress for {} s", launch.hang_timeout.count());
      break;
    }
    if (!line) {
      // A sandboxed worker's signal arrives as bwrap's exit status 128 + N; workers never exit
      // with such codes themselves.
      const auto status = sandbox::unwrap(child.wait(std::chrono::seconds(10)));
      out.exit_code = status.exit_code;
      if (!out.result && out.failure.empty()) {
        if (status.signal != 0) {
          out.failure = "crash";
          out.failure_detail = signal_name(status.signal);
        } else {
          out.failure = "exit";
          out.failure_detail = status.describe();
        }
      } else if (out.result && (status.signal != 0 || status.exit_code != 0)) {
        // Results arrived; a non-zero exit afterwards (a sanitizer's error exit code) is kept.
        out.failure_detail = status.describe();
      }
      break;
    }
    nlohmann::json event;
    try {
      event = nlohmann::json::parse(*line);
    } catch (const std::exception&) {
      continue; // a candidate cannot write here; ignore anything unparsable defensively
    }
    const std::string kind = event.value("event", "");
    if (kind == "step") {
      out.last_step = event;
    } else if (kind == "rejected") {
      out.rejections.push_back(event);
    } else if (kind == "result") {
      out.result = event;
    } else if (kind == "error") {
      out.failure = event.value("sticky", false) ? "sticky" : "error";
      out.failure_detail = event.value("message", "");
    }
    if (on_event) {
      on_event(event);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  try {
    out.log_tail = tail(read_file(launch.log_path), 20000);
  } catch (const std::exception&) {
  }
  return out;
}

} // namespace kb::eval::detail
