// The judge's typed job crosses the process boundary as JSON: what the parent sets is what the
// judge reads, the per-library host-dispatch flag included (only the generated eager baseline of
// a pytorch task has it).
#include "gpu/protocol.hpp"

#include <gtest/gtest.h>

namespace kb::gpu::protocol {
namespace {

TEST(eval_protocol, a_job_keeps_each_librarys_role_path_and_host_dispatch_flag) {
  job j;
  j.task = "L1_019";
  j.oracle = "/stage/oracle.so";
  j.timing_shape = "official";
  j.seeds = {7, 8};
  j.candidates = {{"baseline", "/stage/baseline.so", true}, {"candidate", "/stage/c.so", false}};
  nlohmann::json wire = j;
  const auto back = wire.get<job>();
  ASSERT_EQ(back.candidates.size(), 2U);
  EXPECT_EQ(back.candidates[0].role, "baseline");
  EXPECT_EQ(back.candidates[0].path, "/stage/baseline.so");
  EXPECT_TRUE(back.candidates[0].host_dispatch);
  EXPECT_EQ(back.candidates[1].role, "candidate");
  EXPECT_FALSE(back.candidates[1].host_dispatch);
  // A library entry without the flag is not a job this judge reads.
  wire["candidates"][1].erase("host_dispatch");
  EXPECT_THROW(wire.get<job>(), nlohmann::json::exception);
}

} // namespace
} // namespace kb::gpu::protocol
