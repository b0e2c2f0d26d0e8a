// The preflight's reuse rule (optimize --reuse-preflight): a usable preflight of the same store,
// device and sandbox setting, finished within the allowed age, stands for the GPU checks; any
// other does not.
#include "cli/preflight.hpp"
#include "common/fs.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace kb::cli {
namespace {

using nlohmann::json;

// A finished preflight run with its report, as preflight() records one.
int64_t record_preflight(store::store& st, const std::string& uuid, bool no_sandbox,
                         const std::string& mode, const std::string& timing_status = "ok") {
  preflight_report r;
  r.mode = mode;
  r.checks = {{"store", "ok", "", true, 0, json::object()},
              {"device", "ok", "", true, 0, json{{"uuid", uuid}}},
              {"compiler", "ok", "nvcc", true, 5, json::object()},
              {"sandbox", "ok", "sandboxed", true, 5, json::object()},
              {"timing", timing_status, "A/A", true, 5, json::object()},
              {"counters", "degraded", "no ncu", false, 2, json::object()}};
  const int64_t run = st.begin_run("preflight", {{"no_sandbox", no_sandbox}, {"llm", false}});
  st.attach(run, "preflight", st.put(r.to_json().dump()).digest);
  st.finish_run(run, store::run_status::finished, mode, "");
  return run;
}

TEST(preflight_reuse, takes_a_recent_usable_preflight_of_the_same_device_and_sandbox_only) {
  temp_dir dir("kb-preflight-reuse");
  store::store st(dir.path() / "store");
  preflight_options opt;
  opt.reuse_within = std::chrono::seconds(600);
  EXPECT_FALSE(find_reusable_preflight(st, "GPU-a", opt, std::chrono::system_clock::now()))
      << "nothing recorded yet";

  const int64_t usable = record_preflight(st, "GPU-a", false, "events-only");
  // Newer ones that must not be taken: unusable, another device, another sandbox setting.
  record_preflight(st, "GPU-a", false, "unavailable");
  record_preflight(st, "GPU-b", false, "full-diagnostics");
  record_preflight(st, "GPU-a", true, "full-diagnostics");
  const auto now = std::chrono::system_clock::now();
  // A run that finished after the time asked about is not taken.
  EXPECT_FALSE(find_reusable_preflight(st, "GPU-a", opt, now - std::chrono::seconds(30)));

  const auto found = find_reusable_preflight(st, "GPU-a", opt, now);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, usable);
  EXPECT_EQ(found->report.mode, "events-only");
  EXPECT_GE(found->age_s, 0.0);
  EXPECT_LT(found->age_s, 600.0);
  ASSERT_EQ(found->report.checks.size(), 6u);
  EXPECT_EQ(found->report.checks[4].name, "timing");

  EXPECT_FALSE(find_reusable_preflight(st, "GPU-c", opt, now));
  EXPECT_FALSE(find_reusable_preflight(st, "", opt, now));
  // Too old, or reuse off.
  EXPECT_FALSE(find_reusable_preflight(st, "GPU-a", opt, now + std::chrono::seconds(700)));
  preflight_options off = opt;
  off.reuse_within = std::chrono::seconds(0);
  EXPECT_FALSE(find_reusable_preflight(st, "GPU-a", off, now));
  // The sandboxless setting finds its own.
  preflight_options bare = opt;
  bare.no_sandbox = true;
  const auto unsandboxed = find_reusable_preflight(st, "GPU-a", bare, now);
  ASSERT_TRUE(unsandboxed);
  EXPECT_EQ(unsandboxed->report.mode, "full-diagnostics");
}

TEST(preflight_reuse, a_preflight_whose_gpu_checks_did_not_pass_is_not_taken) {
  temp_dir dir("kb-preflight-reuse-failed");
  store::store st(dir.path() / "store");
  preflight_options opt;
  opt.reuse_within = std::chrono::seconds(600);
  record_preflight(st, "GPU-a", false, "events-only", "failed");
  EXPECT_FALSE(find_reusable_preflight(st, "GPU-a", opt, std::chrono::system_clock::now()));
}

} // namespace
} // namespace kb::cli
