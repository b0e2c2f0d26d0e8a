#include "eval/session.hpp"

#include "common/environment.hpp"
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

std::string to_string(worker_failure f) {
  switch (f) {
  case worker_failure::none:
    return "";
  case worker_failure::crash:
    return "crash";
  case worker_failure::hang:
    return "hang";
  case worker_failure::exit:
    return "exit";
  case worker_failure::error:
    return "error";
  case worker_failure::sticky:
    return "sticky";
  case worker_failure::blocked:
    return "blocked";
  }
  return "?";
}

started_worker start_worker(const worker_launch& launch) {
  process_spec spec;
  spec.argv = launch.prefix;
  spec.argv.push_back(worker_executable().string());
  spec.argv.push_back("worker");
  // The judge embeds a pytorch task's oracle, which runs the task's module: it gets an explicit
  // environment, so that the model's API key or another credential never reaches it.
  spec.env = module_environment();
  const process_spec run = launch.wrap ? launch.wrap(spec) : spec;
  return {std::make_unique<child_process>(run, launch.log_path, "KBLASTER_RESULT_FD")};
}

worker_outcome run_worker_job(const gpu::protocol::job& job, const worker_launch& launch,
                              const event_handlers& on_event) {
  return run_worker_job(start_worker(launch), job, launch, on_event);
}

worker_outcome run_worker_job(started_worker worker, const gpu::protocol::job& job,
                              const worker_launch& launch, const event_handlers& on_event) {
  worker_outcome out;
  if (!worker.child) {
    fail("run_worker_job: the worker was not started");
  }
  child_process& child = *worker.child;
  const auto start = std::chrono::steady_clock::now();
  child.write_line(nlohmann::json(job).dump());
  gpu::protocol::job exit;
  exit.what = gpu::protocol::op::exit;
  child.write_line(nlohmann::json(exit).dump());
  // What the judge's error event said it was blocked by, if it sent one.
  std::optional<gpu::protocol::blocked_by> blocked;
  while (true) {
    bool timed_out = false;
    auto line = child.read_line(launch.hang_timeout, &timed_out);
    if (timed_out) {
      child.kill();
      out.failure = worker_failure::hang;
      out.failure_detail = fmt::format("no progress for {} s", launch.hang_timeout.count());
      break;
    }
    if (!line) {
      // A sandboxed worker's signal arrives as bwrap's exit status 128 + N; workers never exit
      // with such codes themselves.
      const auto status = sandbox::unwrap(child.wait(std::chrono::seconds(10)));
      out.exit_code = status.exit_code;
      if (!out.result && out.failure == worker_failure::none) {
        if (status.signal != 0) {
          out.failure = worker_failure::crash;
          out.failure_detail = signal_name(status.signal);
        } else {
          out.failure = worker_failure::exit;
          out.failure_detail = status.describe();
        }
      } else if (!out.result && out.failure == worker_failure::error && blocked &&
                 status.signal == 0 && status.exit_code == exit_code::blocked) {
        // The judge's blocked ends: another judge held its device (gpu/detail/device_lock.hpp),
        // or the device cannot hold a shape's lane (its error says which; a judge that names
        // none is the device lock's, as before the reason travelled).
        out.failure = worker_failure::blocked;
        out.failure_reason = gpu::protocol::to_string(
            *blocked == gpu::protocol::blocked_by::none ? gpu::protocol::blocked_by::device_busy
                                                        : *blocked);
      } else if (out.result && (status.signal != 0 || status.exit_code != 0)) {
        // Results arrived; a non-zero exit afterwards (a sanitizer's error exit code) is kept.
        out.failure_detail = status.describe();
      }
      break;
    }
    // Only the judge writes here (its result descriptor; no candidate code runs in it). A line
    // that is not an event of the protocol is a fault of the judge itself.
    try {
      const auto event = nlohmann::json::parse(*line);
      const auto kind = gpu::protocol::kind_of(event);
      if (!kind) {
        throw std::invalid_argument("not an event");
      }
      switch (*kind) {
      case gpu::protocol::event_kind::step:
        out.last_step = event.get<gpu::protocol::step>();
        break;
      case gpu::protocol::event_kind::progress:
        if (on_event.progress) {
          on_event.progress(event.get<gpu::protocol::progress>());
        }
        break;
      case gpu::protocol::event_kind::rejected:
        out.rejections.push_back(event.get<gpu::protocol::rejected>());
        if (on_event.rejected) {
          on_event.rejected(out.rejections.back());
        }
        break;
      case gpu::protocol::event_kind::result:
        out.result = event.get<gpu::protocol::result>();
        break;
      case gpu::protocol::event_kind::error: {
        const auto e = event.get<gpu::protocol::error>();
        out.failure = e.sticky ? worker_failure::sticky : worker_failure::error;
        out.failure_detail = e.message;
        blocked = e.blocked;
        break;
      }
      }
    } catch (const std::exception& e) {
      out.failure = worker_failure::error;
      out.failure_detail =
          fmt::format("the judge wrote a line that is not a protocol event ({}): {}", e.what(),
                      line->substr(0, 200));
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
