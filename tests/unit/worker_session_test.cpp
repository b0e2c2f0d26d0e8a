// How the parent reads a judge's end: a judge that reports an error and exits exit_code::blocked
// found its device held by another judge (gpu/detail/device_lock.hpp), which ends the evaluation
// blocked.device_busy, or the reason its error names (blocked.device_memory: the device too small
// for the job); the same error with any other exit is the judge's own failure. The judge
// here is a shell script speaking the protocol, so no GPU is needed.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/session.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kb::eval::detail {
namespace {

// `blocked`: the error's blocked field, or empty for an error without one (as a judge wrote it
// before the field existed).
worker_outcome run_fake_judge(int exit_status, const fs::path& log,
                              const std::string& message = "another judge held the device",
                              const std::string& blocked = "") {
  worker_launch launch;
  launch.log_path = log;
  launch.hang_timeout = std::chrono::seconds(20);
  const std::string event =
      "{\"event\":\"error\",\"message\":\"" + message + "\",\"sticky\":false" +
      (blocked.empty() ? "" : ",\"blocked\":\"" + blocked + "\"") + "}";
  launch.wrap = [exit_status, event](const process_spec& spec) {
    process_spec s = spec;
    // It reads the job and the exit line the parent writes, then answers with the error.
    s.argv = {"sh", "-c",
              "read -r job; read -r bye; printf '%s\\n' '" + event +
                  "' >&\"$KBLASTER_RESULT_FD\"; exit " + std::to_string(exit_status)};
    return s;
  };
  gpu::protocol::job job;
  job.task = "019";
  return run_worker_job(job, launch, {});
}

TEST(WorkerSession, AJudgeThatExitsBlockedFoundItsDeviceBusy) {
  temp_dir logs("kblaster-worker-session");
  const auto busy = run_fake_judge(exit_code::blocked, logs.path() / "busy.log");
  EXPECT_EQ(busy.failure, worker_failure::blocked) << to_string(busy.failure);
  EXPECT_EQ(busy.failure_reason, "blocked.device_busy");
  EXPECT_EQ(busy.failure_detail, "another judge held the device");
  EXPECT_EQ(to_string(busy.failure), "blocked");
  EXPECT_FALSE(busy.result.has_value());
  // Any other exit after an error is the judge's own failure.
  const auto failed = run_fake_judge(exit_code::tool, logs.path() / "tool.log");
  EXPECT_EQ(failed.failure, worker_failure::error) << to_string(failed.failure);
  EXPECT_TRUE(failed.failure_reason.empty());
}

TEST(WorkerSession, AJudgeBlockedByItsDevicesMemorySaysSo) {
  temp_dir logs("kblaster-worker-session");
  const std::string why = "shape official needs 90 GB; the device is too small for this job";
  const auto small = run_fake_judge(exit_code::blocked, logs.path() / "memory.log", why,
                                    "blocked.device_memory");
  EXPECT_EQ(small.failure, worker_failure::blocked) << to_string(small.failure);
  EXPECT_EQ(small.failure_reason, "blocked.device_memory");
  EXPECT_EQ(small.failure_detail, why);
  // The busy device, named: the same end as an error without the field.
  const auto busy = run_fake_judge(exit_code::blocked, logs.path() / "busy.log",
                                   "another judge held the device", "blocked.device_busy");
  EXPECT_EQ(busy.failure_reason, "blocked.device_busy");
  // A blocked reason the parent does not know is a judge that speaks another protocol: its fault.
  const auto odd = run_fake_judge(exit_code::blocked, logs.path() / "odd.log", "?",
                                  "blocked.full_moon");
  EXPECT_EQ(odd.failure, worker_failure::error) << to_string(odd.failure);
  EXPECT_NE(odd.failure_detail.find("not a protocol event"), std::string::npos)
      << odd.failure_detail;
}

} // namespace
} // namespace kb::eval::detail
