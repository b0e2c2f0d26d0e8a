// The evaluation worker starts inside the sandbox with the policy evaluations use (staged shared
// objects under /tmp, the GPU device files when present) and talks to its parent.
#include "common/fs.hpp"
#include "eval/detail/isolation.hpp"
#include "eval/eval.hpp"
#include "eval/session.hpp"
#include "gpu/protocol.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace kb::eval::detail {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

TEST(isolation, the_worker_runs_in_the_sandbox_and_reports_to_its_parent) {
  const auto& probe = sandbox_probe();
  if (!probe.available) {
    GTEST_SKIP() << probe.describe();
  }
  isolation iso{sandbox::decide(probe, false), probe.who, root, root / "tasks/core10/019_relu"};
  temp_dir staging("kblaster-stage");
  fs::permissions(staging.path(), fs::perms::owner_all | fs::perms::group_read |
                                      fs::perms::group_exec | fs::perms::others_read |
                                      fs::perms::others_exec);
  std::ofstream(staging.path() / "source.txt") << "x";
  const fs::path staged = stage_binary(staging.path(), staging.path() / "source.txt", "oracle.so");
  temp_dir logs("kblaster-logs");
  worker_launch launch;
  launch.wrap = iso.worker(staging.path());
  launch.log_path = logs.path() / "worker.log";
  launch.hang_timeout = std::chrono::seconds(60);
  // The job loads the staged file as the oracle module: the worker must see it (it is not a
  // shared object, so loading fails with the loader's message, or the device is missing first).
  gpu::protocol::job job;
  job.task = "019";
  job.oracle = staged.string();
  job.timing_shape = "x";
  job.seeds = {1};
  const auto out = run_worker_job(job, launch, {});
  EXPECT_EQ(out.failure, worker_failure::error)
      << to_string(out.failure) << ": " << out.failure_detail << "\nlog:\n"
      << out.log_tail;
  // The judge read the typed job (a job it could not read fails as "bad job" first).
  EXPECT_EQ(out.failure_detail.find("bad job"), std::string::npos) << out.failure_detail;
  const bool reached = out.failure_detail.find("CUDA") != std::string::npos ||
                       out.failure_detail.find("oracle module") != std::string::npos;
  EXPECT_TRUE(reached) << out.failure_detail << "\nlog:\n" << out.log_tail;
}

// A task with a [loss] table has its math generated under the compile cache, which the sandbox
// does not show: the math travels with the candidate's source (every candidate of such a task,
// the search's included, ended build.compile_error on the H200 before).
TEST(isolation, a_candidate_of_a_task_with_generated_math_compiles_in_the_sandbox) {
  const auto& probe = sandbox_probe();
  if (!probe.available) {
    GTEST_SKIP() << probe.describe();
  }
  temp_dir cache("kblaster-generated-math");
  ::setenv("KBLASTER_CACHE", cache.path().c_str(), 1);
  const auto c = task::load_contract(root / "tests/data/tasks/910_mse_pointwise/task.toml");
  ::unsetenv("KBLASTER_CACHE");
  ASSERT_NE(c.math.parent_path(), c.dir);
  options opt;
  opt.cache_dir = cache.path();
  opt.arch = "sm_90a";
  const candidate_input cand{read_file(c.baseline), "candidate.cu", "candidate"};
  const auto b = compile_candidate(root, c, cand, opt);
  EXPECT_TRUE(b.ok()) << b.reason << "\n" << b.log;
}

} // namespace
} // namespace kb::eval::detail
