// The judge protocol's wire format (src/gpu/protocol.hpp): jobs and events round-trip through
// their one JSON mapping, and the result reads what a judge on the H200 wrote (an evaluation
// record committed under evidence/h200/harness/eval-time/, whose verification, timing, device and
// self-test are the judge's result as it arrived).
#include "common/fs.hpp"
#include "gpu/protocol.hpp"

#include <gtest/gtest.h>

namespace kb::gpu::protocol {
namespace {

using nlohmann::json;
const fs::path root = KBLASTER_SOURCE_DIR;

job sample_job() {
  job j;
  j.task = "019";
  j.oracle = "/tmp/stage/oracle.so";
  j.timing_shape = "official";
  j.shapes = {{"odd",
               "check",
               {{"x", 0, {7, 1001}, {{0, 0, 1, "uniform01"}, {1, 0, 1, "normal"}}}},
               {{"y", 0, {7, 1001}, {}}}}};
  j.scalars = {0.5};
  j.tol = {1e-6, 1e-5, 1e-6, false};
  j.seeds = {1000003ull * 12345, 1000003ull * 12345 + 1};
  j.determinism_runs = 3;
  j.candidates = {{"baseline", "/tmp/stage/baseline.so"}, {"candidate", "/tmp/stage/c.so"}};
  j.verify = false;
  j.expected_digests = {{"candidate", {{0, 0xab1d674dc8365e7eull}, {4, 0xffffffffffffffffull}}}};
  j.time = timing{};
  j.time->order_seed = 0xDEADBEEFCAFEull;
  j.time->where = placement::drawn;
  j.fresh_seed = 42;
  j.runner.argv = {"bwrap", "--", "kblaster", "runner"};
  j.runner.env = std::map<std::string, std::string>{{"PATH", "/usr/bin"}};
  j.runner.env_overrides = {{"KBLASTER_RUNNER_FD", "3"}};
  j.runner.file_size = 1ull << 30;
  j.runner.uid = 65534;
  j.runner.gid = 65534;
  j.hang_timeout_ms = 30000;
  j.judge_seed = 0xFFFFFFFFFFFFFFFFull;
  return j;
}

TEST(judge_wire, a_job_round_trips_every_field) {
  const job j = sample_job();
  const json wire = json::parse(json(j).dump());
  const job back = wire.get<job>();
  EXPECT_EQ(json(back), wire);
  EXPECT_EQ(back.expected_digests.at("candidate").at(4), 0xffffffffffffffffull);
  EXPECT_EQ(back.judge_seed, 0xFFFFFFFFFFFFFFFFull);
  ASSERT_TRUE(back.time);
  EXPECT_EQ(back.time->order_seed, 0xDEADBEEFCAFEull);
  EXPECT_EQ(back.time->where, placement::drawn);
  EXPECT_EQ(wire.at("timing").at("placement"), "drawn");
  // A placement the judge does not know is refused, not read as the default.
  json bad_placement = wire;
  bad_placement["timing"]["placement"] = "anywhere";
  EXPECT_THROW(bad_placement.get<job>(), std::exception);
  EXPECT_EQ(placement_from_string("fixed"), placement::fixed);
  EXPECT_FALSE(placement_from_string("Fixed"));
  EXPECT_EQ(*back.runner.uid, 65534u);
  EXPECT_FALSE(back.runner.cwd);
  EXPECT_EQ(back.shapes.at(0).inputs.at(0).dists.at(1).label, "normal");
  // Verification only: no timing on the wire, none read back.
  job v = j;
  v.time.reset();
  EXPECT_FALSE(json(v).get<job>().time);
  // The end of a job stream, and what is not a job.
  job end;
  end.what = op::exit;
  EXPECT_EQ(json(end).dump(), R"({"op":"exit"})");
  EXPECT_EQ(json(end).get<job>().what, op::exit);
  EXPECT_THROW(json({{"op", "format_disk"}}).get<job>(), std::exception);
  json missing = wire;
  missing.erase("seeds");
  EXPECT_THROW(missing.get<job>(), json::exception);
}

TEST(judge_wire, events_round_trip_and_their_kind_is_read_from_the_line) {
  progress verify;
  verify.stage = "verify";
  verify.done = 3;
  verify.total = 27;
  verify.what = "odd normal seed 1";
  const json v = verify;
  EXPECT_EQ(kind_of(v), event_kind::progress);
  EXPECT_EQ(v.get<progress>().what, "odd normal seed 1");
  progress time;
  time.stage = "time";
  time.round = 40;
  time.samples = {{"baseline", 40}, {"candidate", 39}};
  EXPECT_EQ(json(time).get<progress>().samples.at("candidate"), 39);
  EXPECT_EQ(kind_of(json(rejected{"candidate", "timing.stale_output", "x"})), event_kind::rejected);
  EXPECT_EQ(json(rejected{"candidate", "timing.stale_output", "x"}).get<rejected>().reason,
            "timing.stale_output");
  EXPECT_TRUE(json(error{"CUDA error", true}).get<error>().sticky);
  EXPECT_EQ(json(step{"verify", "candidate", "odd"}).get<step>().who, "candidate");
  EXPECT_FALSE(kind_of(json{{"event", "forged"}}));
  EXPECT_FALSE(kind_of(json::array()));
  EXPECT_FALSE(kind_of(json{{"t", 1}}));
}

// The judge's result as it arrived in one H200 evaluation (task 019, the portfolio kernel against
// the baseline; the record keeps it under device, verification, timing and checker_selftest).
json h200_result() {
  const json record =
      json::parse(read_file(root / "evidence/h200/harness/eval-time/019_relu.json"));
  return {{"event", "result"},
          {"device", record.at("device")},
          {"candidates", record.at("verification")},
          {"timing", record.at("timing").at(0)},
          {"checker_selftest", record.at("checker_selftest")},
          {"stage_seconds", record.at("sessions").at(0).at("stage_seconds")},
          {"context_lost", false},
          {"lanes", "per library"},
          {"poison", json::object()}};
}

TEST(judge_wire, the_result_reads_what_a_judge_on_the_h200_wrote) {
  const json wire = h200_result();
  ASSERT_EQ(kind_of(wire), event_kind::result);
  const result r = wire.get<result>();
  EXPECT_EQ(r.dev.name, "NVIDIA H200");
  EXPECT_EQ(r.dev.sm_count, 132);
  EXPECT_EQ(r.dev.driver_version, "580.159.04");
  EXPECT_DOUBLE_EQ(r.dev.max_sm_clock_mhz, 1980.0);
  const auto* cand = r.library("candidate");
  const auto* base = r.library("baseline");
  ASSERT_NE(cand, nullptr);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(r.library("oracle"), nullptr);
  EXPECT_TRUE(cand->accepted);
  EXPECT_EQ(cand->digests.at(0), 0x566a49eb6b6d610full);
  EXPECT_EQ(cand->digests.size(), 9u);
  ASSERT_TRUE(cand->runner_exit);
  EXPECT_EQ(cand->runner_exit->exit_code, 0);
  EXPECT_EQ(cand->output.bytes, 0u);
  EXPECT_TRUE(cand->record.at("checks").is_array()); // the evidence stays whole
  ASSERT_TRUE(r.time);
  EXPECT_EQ(r.time->samples.at("baseline").size(), 81u);
  EXPECT_EQ(r.time->samples.at("candidate").size(), 81u);
  EXPECT_DOUBLE_EQ(r.time->default_sm_clock_mhz, 1980.0);
  const auto& first = r.time->samples.at("baseline").at(0);
  EXPECT_GT(first.t, 0.0);
  ASSERT_TRUE(first.clock_mhz);
  EXPECT_TRUE(r.time->record.contains("calibration"));
  ASSERT_TRUE(r.checker_selftest);
  EXPECT_TRUE(r.checker_selftest->sound);
  EXPECT_FALSE(r.profile);
  // Written again, it is the same document: one mapping, both ways.
  EXPECT_EQ(json(r), wire);
}

TEST(judge_wire, a_rejected_library_carries_its_reason_and_an_accepted_one_none) {
  library_result l;
  l.role = "candidate";
  l.accepted = false;
  l.reason = "timing.host_work";
  l.message = "kb_launch synchronised";
  l.output.tail_text = "\xEF\xBF\xBD"; // U+FFFD: what invalid bytes became
  const json j = l;
  EXPECT_EQ(j.at("runner_exit"), nullptr); // the runner never started
  const auto back = j.get<library_result>();
  EXPECT_EQ(back.reason, "timing.host_work");
  EXPECT_FALSE(back.runner_exit);
  l.accepted = true;
  EXPECT_FALSE(json(l).contains("reason"));
  EXPECT_EQ(json(l).get<library_result>().reason, "");
}

TEST(judge_wire, the_profilers_calls_round_trip_and_a_reply_of_another_shape_is_refused) {
  profile_calls ok;
  ok.event_times_s = {1.5e-3, 1.4e-3, 1.6e-3};
  ok.event_median_s = 1.5e-3;
  ok.nvtx_range = "kblaster.profile";
  ok.counters = json{{"available", true}, {"values", json::object()}};
  const json j = ok;
  EXPECT_FALSE(j.contains("failed")); // a call that did not fail says nothing of failing
  const auto back = j.get<profile_calls>();
  EXPECT_EQ(back.event_times_s, ok.event_times_s);
  EXPECT_EQ(back.event_median_s, ok.event_median_s);
  EXPECT_EQ(back.nvtx_range, ok.nvtx_range);
  EXPECT_EQ(back.counters, ok.counters);
  EXPECT_FALSE(back.failed);
  EXPECT_EQ(json(back), j);

  profile_calls failed;
  failed.failed = "event-timed call 1: cudaErrorIllegalAddress (an illegal memory access)";
  failed.context_lost = true;
  const auto f = json(failed).get<profile_calls>();
  EXPECT_EQ(f.failed, failed.failed);
  EXPECT_TRUE(f.context_lost);
  EXPECT_FALSE(f.event_median_s);

  // What a candidate could write on the runner's socket instead: the judge's typed read fails
  // (and the judge rejects the candidate, crash.bad_reply), it does not read fields by guess.
  EXPECT_THROW(json({{"event_median_s", "fast"}}).get<profile_calls>(), json::exception);
  EXPECT_THROW(json({{"counters", 7}}).get<profile_calls>(), json::exception);
  EXPECT_THROW(json({{"failed", 1}}).get<profile_calls>(), json::exception);

  // Inside the judge's result, the profile is the same typed record.
  result r;
  r.profile = ok;
  json rj = r;
  EXPECT_EQ(rj.at("profile"), j);
  rj["device"] = json(device{});
  EXPECT_EQ(rj.get<result>().profile->event_median_s, ok.event_median_s);
}

} // namespace
} // namespace kb::gpu::protocol
