// `kblaster profile` end to end where counters cannot be read: the run goes on without them and
// says why (events only with a GPU, blocked without one); a bad plan is a usage error. The
// counter probe starts kblaster's own probe, also from a program that embeds the library.
#include "common/fs.hpp"
#include "common/process.hpp"
#include "profile/profile.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

namespace kb {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

process_result run_profile(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env = {}) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY, "--root", root.string(), "-q", "profile"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env_overrides = env;
  spec.timeout = std::chrono::seconds(600);
  return run_process(spec);
}

TEST(profile_cli, the_cupti_probe_runs_kblaster_not_the_program_that_asks) {
  // This test binary sets KBLASTER_WORKER_EXE to kblaster. Started with `profile-probe`, the test
  // binary itself would run its whole suite again (and probe again from there).
  ASSERT_EQ(worker_executable(), fs::path(KBLASTER_BINARY));
  const auto a = profile::probe_access(profile::counter_source::cupti);
  EXPECT_LT(a.seconds, 60.0);
  if (!a.available) {
    // kblaster's probe answered: on a machine without a usable GPU its kernel cannot run, and
    // the reason says so (not "the probe gave no answer").
    EXPECT_NE(a.reason.find("the CUPTI probe"), std::string::npos) << a.reason;
    EXPECT_EQ(a.reason.find("gave no answer"), std::string::npos) << a.reason;
  }
}

TEST(profile_cli, without_ncu_the_run_falls_back_and_says_why) {
  kb::temp_dir out("profile-cli");
  const auto json_path = out.path() / "report.json";
  const auto r = run_profile(
      {"--task", "019", "--candidate", (root / "tasks/core10/019_relu/baseline.cu").string(),
       "--no-sandbox", "--json", json_path.string(), "--raw", (out.path() / "raw.csv").string()},
      {{"KBLASTER_NCU", "/nonexistent/ncu"}});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.describe() << "\n" << r.output;
  const auto j = nlohmann::json::parse(read_file(json_path));
  EXPECT_EQ(j["access"]["available"], false);
  EXPECT_NE(j["access"]["reason"].get<std::string>().find("ncu"), std::string::npos)
      << j["access"].dump();
  EXPECT_FALSE(fs::exists(out.path() / "raw.csv")); // no counters, no raw report
  EXPECT_TRUE(j["raw_reports"].empty());
  if (r.exit_code == 3) {
    EXPECT_EQ(j["status"], "blocked") << j.dump(2); // no GPU here: the evaluation stage is blocked
    EXPECT_NE(r.output.find("status    blocked"), std::string::npos) << r.output;
  } else {
    EXPECT_EQ(j["status"], "events_only") << j.dump(2);
    EXPECT_EQ(j["bottleneck"]["events_only"], true);
    EXPECT_EQ(j["bottleneck"]["sentence"].get<std::string>().rfind(
                  "events only (Nsight Compute (ncu) not found", 0),
              0u)
        << j.dump(2);
    EXPECT_NE(r.output.find("events only"), std::string::npos) << r.output;
  }
}

TEST(profile_cli, plans_and_sources_are_fixed) {
  const auto candidate = (root / "tasks/core10/019_relu/baseline.cu").string();
  auto r = run_profile({"--task", "019", "--candidate", candidate, "--plan", "full"});
  EXPECT_EQ(r.exit_code, 64) << r.output;
  r = run_profile({"--task", "019", "--candidate", candidate, "--counters", "nsys"});
  EXPECT_EQ(r.exit_code, 64) << r.output;
  r = run_profile(
      {"--task", "019", "--candidate", candidate, "--plan", "triage", "--", "--set", "full"});
  EXPECT_EQ(r.exit_code, 64) << r.output;
}

} // namespace
} // namespace kb
