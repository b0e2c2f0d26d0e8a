// The executor's data at its edges: requests and results through JSON, the queue key, and what
// Slurm's job states mean.
#include "common/error.hpp"
#include "search/executor.hpp"

#include <gtest/gtest.h>

namespace kb::search {
namespace {

eval_request sample_request() {
  eval_request r;
  r.project_root = "/project";
  r.task_file = "/project/tasks/core10/019/task.toml";
  r.candidate = {"__global__ void k() {}", "cand.cu", "proposer", "tile", {{"block", 128}}};
  r.baseline = {"// baseline", "baseline.cu", "baseline"};
  r.options.sessions = 2;
  r.options.arch = "sm_90a";
  r.options.timing.target_rsd = 0.0042;
  r.options.hang_timeout = std::chrono::seconds(17);
  r.options.cache_dir = "/cache/a";
  return r;
}

TEST(executor, a_request_round_trips_through_json) {
  const auto r = sample_request();
  const auto back = eval_request_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(to_json(back), to_json(r));
  EXPECT_EQ(back.candidate.params.at("block"), 128);
  EXPECT_EQ(*back.options.arch, "sm_90a");
  EXPECT_EQ(back.options.hang_timeout.count(), 17);
  EXPECT_DOUBLE_EQ(back.options.timing.target_rsd, 0.0042);
}

TEST(executor, a_result_round_trips_and_an_unknown_verdict_is_refused) {
  eval::result r;
  r.final = eval::verdict::improved;
  r.reason = "timing.improved";
  r.message = "faster";
  r.detail = {{"speedup", 1.25}};
  r.seconds = 3.5;
  eval::gate_summary g;
  g.n_baseline = 300;
  g.median_baseline_s = 2e-3;
  g.median_candidate_s = 1.6e-3;
  g.speedup = 1.25;
  g.speedup_low = 1.2;
  g.speedup_high = 1.3;
  g.p = 1e-9;
  g.p_between = 2e-9;
  g.session_medians = {{2.0e-3, 1.6e-3}, {2.1e-3, 1.7e-3}};
  r.gate = g;
  r.worker_seconds = 4.25;
  gpu::protocol::device dev;
  dev.name = "NVIDIA H200";
  dev.uuid = "GPU-1";
  dev.sm_count = 132;
  dev.record = {{"pci_bus_id", "0000:00:06.0"}};
  r.context.device = dev;
  r.context.toolkit = "13.0.88";
  r.context.isolation = "sandboxed";
  r.context.shape = "official";
  r.context.ceilings.bandwidth = 4.1e12;
  build::result b;
  b.status = build::outcome::compile_error;
  b.reason = "build.compile_error";
  b.log = "error: x";
  r.builds["candidate"] = b;
  gpu::protocol::library_result l;
  l.role = "candidate";
  l.accepted = true;
  l.digests = {{0, 0xffffffffffffffffull}};
  r.verification = {l};
  gpu::protocol::session_timing t;
  t.samples["baseline"] = {{2e-3, 1, 7, 1980.0}};
  t.overhead_s = 2.9e-4;
  r.timing = {t};
  r.counters = eval::counters_run{eval::verdict::same,   "verify.passed", "", 2.0,
                                  {{"available", true}}, 1.5e-3};
  const auto back = eval_result_from_json(nlohmann::json::parse(eval::to_json(r).dump()));
  EXPECT_EQ(back.final, r.final);
  EXPECT_EQ(back.detail, r.detail);
  EXPECT_EQ(eval::to_json(back), eval::to_json(r));
  ASSERT_TRUE(back.gate);
  EXPECT_EQ(*back.gate->p_between, 2e-9);
  EXPECT_FALSE(back.gate->p_within);
  ASSERT_EQ(back.gate->session_medians.size(), 2u);
  EXPECT_DOUBLE_EQ(back.gate->session_medians[1].candidate_s, 1.7e-3);
  // A gate written before the session medians travelled reads with none.
  auto no_sessions = eval::to_json(r);
  no_sessions["gate"].erase("session_medians");
  EXPECT_TRUE(eval_result_from_json(no_sessions).gate->session_medians.empty());
  EXPECT_EQ(back.context.device->record.at("pci_bus_id"), "0000:00:06.0");
  EXPECT_DOUBLE_EQ(back.context.ceilings.bandwidth, 4.1e12);
  EXPECT_EQ(back.builds.at("candidate").status, build::outcome::compile_error);
  EXPECT_EQ(back.builds.at("candidate").log, "error: x");
  EXPECT_EQ(back.verification.at(0).digests.at(0), 0xffffffffffffffffull);
  EXPECT_EQ(back.timing.at(0).samples.at("baseline").at(0).round, 7);
  EXPECT_DOUBLE_EQ(back.timing.at(0).overhead_s, 2.9e-4);
  EXPECT_DOUBLE_EQ(*back.counters->event_median_s, 1.5e-3);
  // A result queued before the typed fields travelled (schema 2, its oldest form) reads with its
  // record alone.
  auto old = eval::to_json(r);
  for (const char* k :
       {"schema", "gate", "worker_seconds", "context", "builds", "verification", "checker_selftest",
        "timing", "counters", "task", "candidate", "baseline", "floor_s", "sanitize"}) {
    old.erase(k);
  }
  const auto legacy = eval_result_from_json(old);
  EXPECT_EQ(legacy.final, r.final);
  EXPECT_FALSE(legacy.gate);
  auto bad = eval::to_json(r);
  bad["verdict"] = "great";
  EXPECT_THROW(eval_result_from_json(bad), kb::error);
}

TEST(executor, the_queue_key_changes_with_what_decides_the_result_only) {
  task::contract c;
  c.id = "019";
  c.digest = "contract-1";
  const auto r = sample_request();
  const auto key = job_key_of(c, r);
  EXPECT_EQ(key.task, "019");
  auto moved_cache = r;
  moved_cache.options.cache_dir = "/elsewhere";
  EXPECT_EQ(job_key_of(c, moved_cache).protocol, key.protocol);
  auto other_baseline = r;
  other_baseline.baseline.source += " ";
  EXPECT_NE(job_key_of(c, other_baseline).protocol, key.protocol);
  auto other_sessions = r;
  other_sessions.options.sessions = 3;
  EXPECT_NE(job_key_of(c, other_sessions).protocol, key.protocol);
  auto other_candidate = r;
  other_candidate.candidate.source += " ";
  EXPECT_NE(job_key_of(c, other_candidate).candidate_digest, key.candidate_digest);
  c.digest = "contract-2";
  EXPECT_NE(job_key_of(c, r).protocol, key.protocol);
}

TEST(executor, the_ceilings_travel_with_the_request_and_are_part_of_the_key) {
  task::contract c;
  c.id = "019";
  c.digest = "contract-1";
  auto r = sample_request();
  r.options.ceilings.bandwidth = 4.1e12;
  r.options.ceilings.peak_bandwidth = 4.6e12;
  r.options.ceilings.measured = true;
  r.options.ceilings.source = "measured on GPU-1";
  const auto back = eval_request_from_json(nlohmann::json::parse(to_json(r).dump()));
  // The worker judges against the submitter's ceilings (the physical limit rejects).
  EXPECT_DOUBLE_EQ(back.options.ceilings.bandwidth, 4.1e12);
  EXPECT_DOUBLE_EQ(back.options.ceilings.peak_bandwidth, 4.6e12);
  EXPECT_TRUE(back.options.ceilings.measured);
  EXPECT_EQ(back.options.ceilings.source, "measured on GPU-1");
  auto other = r;
  other.options.ceilings.peak_bandwidth = 5e12;
  EXPECT_NE(job_key_of(c, other).protocol, job_key_of(c, r).protocol);
  // A request queued before the ceilings travelled still reads, with the default ones.
  auto old = to_json(r);
  old["options"].erase("ceilings");
  const auto read = eval_request_from_json(old);
  EXPECT_FALSE(read.options.ceilings.measured);
  EXPECT_DOUBLE_EQ(read.options.ceilings.bandwidth, task::ceilings{}.bandwidth);
}

TEST(executor, the_profile_mode_travels_and_a_request_without_one_keeps_its_key) {
  task::contract c;
  c.id = "019";
  c.digest = "contract-1";
  auto r = sample_request();
  const auto plain = job_key_of(c, r);
  EXPECT_FALSE(to_json(r)["options"].contains("profile")); // the keys of earlier jobs stand
  r.options.profile = eval::profile_mode::improved;
  const auto back = eval_request_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.options.profile, eval::profile_mode::improved);
  EXPECT_NE(job_key_of(c, r).protocol, plain.protocol);
  auto bad = to_json(r);
  bad["options"]["profile"] = "sometimes";
  EXPECT_THROW(eval_request_from_json(bad), kb::error);
  for (auto m :
       {eval::profile_mode::none, eval::profile_mode::improved, eval::profile_mode::always}) {
    EXPECT_EQ(eval::profile_mode_from_string(eval::to_string(m)), m);
  }
}

TEST(executor, gpus_are_all_a_count_or_a_list_of_indices_and_uuids) {
  EXPECT_TRUE(parse_gpu_spec("all").all);
  EXPECT_EQ(parse_gpu_spec("2").count, 2u);
  EXPECT_TRUE(parse_gpu_spec("2").items.empty());
  EXPECT_EQ(parse_gpu_spec("0,2").items, (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(parse_gpu_spec("1,").items, std::vector<std::string>{"1"}); // GPU 1, not a count
  EXPECT_EQ(parse_gpu_spec("GPU-8f1e,3").items, (std::vector<std::string>{"GPU-8f1e", "3"}));
  for (const auto* bad :
       {"", "none", "0", "-1", "1.5", "0,0", "a,b", ",", "GPU-", "all,1", "12345", "GPU-x,GPU-x"}) {
    EXPECT_THROW(parse_gpu_spec(bad), kb::input_error) << bad;
  }
}

TEST(executor, slurm_states_map_to_what_becomes_of_the_job) {
  EXPECT_EQ(slurm_fate("PENDING"), cluster_fate::waiting);
  EXPECT_EQ(slurm_fate("RUNNING"), cluster_fate::running);
  EXPECT_EQ(slurm_fate("COMPLETED"), cluster_fate::finished);
  EXPECT_EQ(slurm_fate("PREEMPTED"), cluster_fate::lost);
  EXPECT_EQ(slurm_fate("NODE_FAIL"), cluster_fate::lost);
  EXPECT_EQ(slurm_fate("CANCELLED by 0"), cluster_fate::lost);
  EXPECT_EQ(slurm_fate("TIMEOUT"), cluster_fate::timeout);
  EXPECT_EQ(slurm_fate("FAILED"), cluster_fate::failed);
  EXPECT_EQ(slurm_fate("SOMETHING_NEW"), cluster_fate::failed);
  EXPECT_EQ(to_string(cluster_fate::lost), "lost");
}

TEST(executor, a_drawn_placement_is_the_default_and_the_fixed_one_keeps_earlier_keys) {
  task::contract c;
  c.id = "019";
  c.digest = "contract-1";
  auto r = sample_request();
  // Drawn is the default, and it travels: a request without the field is a fixed one.
  EXPECT_EQ(r.options.timing.placement, gpu::protocol::placement::drawn);
  const auto back = eval_request_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.options.timing.placement, gpu::protocol::placement::drawn);
  EXPECT_EQ(to_json(r)["options"]["placement"], "drawn");
  auto fixed = r;
  fixed.options.timing.placement = gpu::protocol::placement::fixed;
  EXPECT_FALSE(to_json(fixed)["options"].contains("placement"));
  auto legacy = to_json(r);
  legacy["options"].erase("placement");
  EXPECT_EQ(eval_request_from_json(legacy).options.timing.placement,
            gpu::protocol::placement::fixed);
  EXPECT_NE(job_key_of(c, r).protocol, job_key_of(c, fixed).protocol);
  auto bad = to_json(r);
  bad["options"]["placement"] = "anywhere";
  EXPECT_THROW(eval_request_from_json(bad), kb::error);
}

} // namespace
} // namespace kb::search
