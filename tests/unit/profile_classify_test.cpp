// The bottleneck classifier: Nsight Compute's rule at and around its thresholds, the refinements,
// the events-only mode, and the stored names.
#include "common/fs.hpp"
#include "profile/profile.hpp"

#include <gtest/gtest.h>

namespace kb::profile {
namespace {

// 1 GB moved and 1 GFLOP done in 1 ms against 1 TB/s and 1 TFLOP/s: 100% of both ceilings; tests
// scale the time to place the roofline fractions.
observation base(double bandwidth_fraction, double compute_fraction = 0.01) {
  observation o;
  o.ceilings.bandwidth = 1e12;
  o.ceilings.fp32_flops = 1e12;
  o.ceilings.source = "test ceilings";
  o.seconds = 1e-3;
  o.bytes = 1e9 * bandwidth_fraction;
  o.flops = 1e9 * compute_fraction;
  return o;
}

counters sol(double sm, double memory) {
  counters c;
  c.source = "ncu";
  c.kernels = 1;
  c.sm_throughput = sm;
  c.memory_throughput = memory;
  c.waves_per_sm = 4;
  return c;
}

state classify_sol(double sm, double memory, double waves = 4) {
  auto o = base(0.5);
  auto c = sol(sm, memory);
  c.waves_per_sm = waves;
  o.measured = c;
  return classify(o).result;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(state_names, round_trip) {
  for (state s : {state::memory_bound, state::compute_bound, state::latency_bound,
                  state::small_grid, state::balanced, state::unknown}) {
    EXPECT_EQ(state_from_string(to_string(s)), s);
  }
  EXPECT_EQ(to_string(state::memory_bound), "memory_bound");
  EXPECT_EQ(to_string(state::small_grid), "small_grid");
  EXPECT_FALSE(state_from_string("memory-bound"));
  EXPECT_FALSE(state_from_string(""));
  for (status s :
       {status::profiled, status::events_only, status::rejected, status::error, status::blocked}) {
    EXPECT_EQ(status_from_string(to_string(s)), s);
  }
  EXPECT_FALSE(status_from_string("ok"));
  EXPECT_EQ(counter_source_from_string("ncu"), counter_source::ncu);
  EXPECT_EQ(counter_source_from_string("cupti"), counter_source::cupti);
  EXPECT_FALSE(counter_source_from_string("nsys"));
}

TEST(rule, a_unit_at_80_percent_bounds) {
  EXPECT_EQ(classify_sol(14.5, 92.9), state::memory_bound);
  EXPECT_EQ(classify_sol(91.0, 20.0), state::compute_bound);
  EXPECT_EQ(classify_sol(50.0, 80.0), state::memory_bound);
  EXPECT_EQ(classify_sol(80.0, 79.0),
            state::compute_bound); // 80 is bound even when the other is close
  EXPECT_EQ(classify_sol(85.0, 95.0), state::memory_bound); // both high: the larger
  EXPECT_EQ(classify_sol(95.0, 85.0), state::compute_bound);
}

TEST(rule, both_under_60_is_latency_or_small_grid) {
  EXPECT_EQ(classify_sol(10.0, 20.0, 4.0), state::latency_bound);
  EXPECT_EQ(classify_sol(59.9, 59.9, 1.0),
            state::latency_bound); // exactly one wave is not under one
  EXPECT_EQ(classify_sol(10.0, 20.0, 0.99), state::small_grid);
  EXPECT_EQ(classify_sol(0.5, 0.1, 0.0076), state::small_grid);
}

TEST(rule, between_60_and_80_the_larger_by_ten_points_else_balanced) {
  EXPECT_EQ(classify_sol(60.0, 45.0), state::compute_bound); // 60 is not "under 60"
  EXPECT_EQ(classify_sol(45.0, 60.0), state::memory_bound);
  EXPECT_EQ(classify_sol(79.9, 50.0), state::compute_bound);
  EXPECT_EQ(classify_sol(50.0, 79.9), state::memory_bound);
  EXPECT_EQ(classify_sol(70.0, 60.0), state::compute_bound); // exactly 10 points
  EXPECT_EQ(classify_sol(69.9, 60.0), state::balanced);
  EXPECT_EQ(classify_sol(65.0, 58.0), state::balanced);
  EXPECT_EQ(classify_sol(79.9, 75.0), state::balanced);
}

TEST(rule, the_roofline_at_80_percent_of_a_measured_ceiling_proves_the_bound) {
  // The counters' peak can sit above what the device reaches (DRAM peak against a measured copy):
  // 85% of the measured bandwidth is memory-bound even when the counters read 55%.
  auto o = base(0.85);
  o.measured = sol(20, 55);
  auto a = classify(o);
  EXPECT_EQ(a.result, state::memory_bound);
  EXPECT_TRUE(contains(a.rule, "roofline")) << a.rule;
  o = base(0.1, 0.9);
  o.measured = sol(70, 75);
  a = classify(o);
  EXPECT_EQ(a.result, state::compute_bound);
  EXPECT_TRUE(contains(a.rule, "FP32")) << a.rule;
  // Under 80% the counters decide.
  o = base(0.79);
  o.measured = sol(20, 55);
  EXPECT_EQ(classify(o).result, state::latency_bound);
}

TEST(rule, the_wave_count_falls_back_to_blocks_against_sms) {
  auto o = base(0.1);
  auto c = sol(5, 5);
  c.waves_per_sm.reset();
  c.grid_blocks = 1;
  c.block_threads = 1024;
  c.sm_count = 132;
  o.measured = c;
  auto a = classify(o);
  EXPECT_EQ(a.result, state::small_grid);
  EXPECT_TRUE(contains(a.sentence, "small grid (1 block of 1024 threads on 132 SMs)"))
      << a.sentence;
  // More blocks than SMs may or may not fill a wave: without the wave count it is latency.
  c.grid_blocks = 500;
  o.measured = c;
  a = classify(o);
  EXPECT_EQ(a.result, state::latency_bound);
  EXPECT_TRUE(contains(a.rule, "grid size unknown")) << a.rule;
}

TEST(sentence, memory_bound_reads_like_the_documented_example) {
  auto o = base(0.61);
  auto c = sol(12.0, 91.0);
  c.sectors_per_load_request = 4.0;
  c.achieved_occupancy = 98.0;
  c.theoretical_occupancy = 100.0;
  o.measured = c;
  const auto a = classify(o);
  EXPECT_EQ(a.result, state::memory_bound);
  EXPECT_FALSE(a.events_only);
  EXPECT_EQ(a.sentence, "memory-bound at 61% of measured bandwidth; 16-byte loads absent (4.0 "
                        "sectors per load request); occupancy 98%");
  EXPECT_NEAR(a.numbers["bandwidth_fraction"].get<double>(), 0.61, 1e-12);
  EXPECT_EQ(a.numbers["basis"], "counters");
  EXPECT_EQ(a.numbers["time_source"], "events");
}

TEST(sentence, compute_bound_names_the_sm_and_the_fp32_fraction) {
  auto o = base(0.05, 0.85);
  o.measured = sol(93.0, 20.0);
  const auto a = classify(o);
  EXPECT_EQ(a.result, state::compute_bound);
  EXPECT_EQ(a.sentence, "compute-bound: SM at 93% of peak, 85% of FP32 peak");
}

TEST(sentence, latency_bound_with_low_occupancy_and_the_top_stall) {
  auto o = base(0.16);
  auto c = sol(3.0, 18.0);
  c.waves_per_sm = 2.0;
  c.achieved_occupancy = 6.1;
  c.theoretical_occupancy = 6.3;
  c.occupancy_limiter = "shared_memory";
  c.stalls = {{"long_scoreboard", 1204.5}, {"wait", 4.1}};
  o.measured = c;
  const auto a = classify(o);
  EXPECT_EQ(a.result, state::latency_bound);
  EXPECT_EQ(a.numbers["top_stall"], "long_scoreboard");
  EXPECT_TRUE(contains(a.sentence, "latency-bound: SM 3.0% and memory 18% of peak")) << a.sentence;
  EXPECT_TRUE(contains(a.sentence, "occupancy 6.1% (theoretical 6.3% limited by shared memory)"))
      << a.sentence;
  EXPECT_TRUE(contains(a.sentence, "top stall long_scoreboard (waiting on global or local memory, "
                                   "1204.5 cycles per instruction)"))
      << a.sentence;
}

TEST(refinements, occupancy_below_theoretical_is_said) {
  auto o = base(0.5);
  auto c = sol(40, 70);
  c.achieved_occupancy = 40;
  c.theoretical_occupancy = 100;
  o.measured = c;
  EXPECT_TRUE(contains(classify(o).sentence, "occupancy 40% of 100% theoretical"));
  c.achieved_occupancy = 95;
  o.measured = c;
  EXPECT_FALSE(contains(classify(o).sentence, "theoretical"));
}

TEST(refinements, traffic_against_the_tasks_minimum) {
  auto o = base(0.4);
  auto c = sol(10, 90);
  c.duration = 1e-3;
  c.dram_bandwidth = 0.8e12; // 0.8 GB in 1 ms against the minimum 0.4 GB
  o.measured = c;
  auto a = classify(o);
  EXPECT_NEAR(a.numbers["traffic_ratio"].get<double>(), 2.0, 1e-12);
  EXPECT_TRUE(contains(a.sentence, "moves 2.0x the task's minimum bytes")) << a.sentence;
  EXPECT_TRUE(contains(a.sentence, "far from the bandwidth roofline")) << a.sentence;
  c.dram_bandwidth = 0.2e12; // half the minimum: the rest came from L2
  o.measured = c;
  a = classify(o);
  EXPECT_TRUE(contains(a.sentence, "DRAM traffic 50% of the task's minimum")) << a.sentence;
  c.dram_bandwidth = 0.4e12;
  o.measured = c;
  a = classify(o);
  EXPECT_FALSE(contains(a.sentence, "minimum")) << a.sentence;
}

TEST(refinements, load_width_from_sectors_per_request) {
  auto o = base(0.9);
  auto c = sol(10, 90);
  for (const auto& [sectors, phrase] :
       std::vector<std::pair<double, std::string>>{{4.0, "16-byte loads absent"},
                                                   {8.0, "8-byte loads"},
                                                   {16.0, "16-byte loads (16.0"},
                                                   {32.0, "scattered loads"}}) {
    c.sectors_per_load_request = sectors;
    o.measured = c;
    EXPECT_TRUE(contains(classify(o).sentence, phrase)) << sectors << ": " << classify(o).sentence;
  }
}

TEST(refinements, truncated_calls_are_said) {
  auto o = base(0.9);
  auto c = sol(10, 90);
  c.kernels = max_profiled_kernels;
  c.truncated = true;
  o.measured = c;
  EXPECT_TRUE(contains(classify(o).sentence, "only the first 32 kernels"));
}

TEST(events_only, the_roofline_decides_only_what_it_proves) {
  observation o = base(0.9);
  o.events_only_reason = "ERR_NVGPUCTRPERM: no permission";
  auto a = classify(o);
  EXPECT_EQ(a.result, state::memory_bound);
  EXPECT_TRUE(a.events_only);
  EXPECT_EQ(a.numbers["basis"], "roofline");
  EXPECT_EQ(
      a.sentence,
      "events only (ERR_NVGPUCTRPERM: no permission): memory-bound at 90% of measured bandwidth");

  a = classify(base(0.05, 0.85));
  EXPECT_EQ(a.result, state::compute_bound);
  EXPECT_TRUE(contains(a.sentence, "compute-bound at 85% of FP32 peak")) << a.sentence;

  a = classify(base(0.7, 0.1));
  EXPECT_EQ(a.result, state::memory_bound);
  a = classify(base(0.7, 0.65));
  EXPECT_EQ(a.result, state::balanced);
  // Far from both ceilings: latency or wasted traffic, which events cannot tell apart.
  a = classify(base(0.3, 0.01));
  EXPECT_EQ(a.result, state::unknown);
  EXPECT_TRUE(contains(a.sentence, "counters are needed")) << a.sentence;
}

TEST(events_only, says_so_in_every_output) {
  for (double f : {0.05, 0.3, 0.65, 0.9}) {
    const auto a = classify(base(f, f / 2));
    EXPECT_TRUE(a.events_only);
    EXPECT_EQ(a.sentence.rfind("events only (no counters): ", 0), 0u) << a.sentence;
    const auto j = a.to_json();
    EXPECT_EQ(j["events_only"], true);
    EXPECT_EQ(j["events_only_reason"], "no counters");
  }
}

TEST(events_only, without_a_time_nothing_is_claimed) {
  observation o = base(0.9);
  o.seconds.reset();
  const auto a = classify(o);
  EXPECT_EQ(a.result, state::unknown);
  EXPECT_TRUE(contains(a.sentence, "no time and no throughput counters"));
  EXPECT_FALSE(a.numbers.contains("bandwidth_fraction"));
}

TEST(counters_without_speed_of_light, fall_back_to_the_roofline_but_keep_their_findings) {
  // A memory plan alone: hit rates and load width, no SM or memory throughput.
  auto o = base(0.9);
  counters c;
  c.source = "ncu";
  c.l2_hit_rate = 30;
  c.sectors_per_load_request = 16;
  o.measured = c;
  const auto a = classify(o);
  EXPECT_EQ(a.result, state::memory_bound);
  EXPECT_FALSE(a.events_only);
  EXPECT_EQ(a.numbers["basis"], "roofline");
  EXPECT_TRUE(contains(a.sentence, "16-byte loads (16.0")) << a.sentence;
}

TEST(time, the_counters_duration_stands_in_for_events) {
  auto o = base(0.5);
  o.seconds.reset();
  auto c = sol(10, 90);
  c.duration = 2e-3; // twice as long as the events would have said: half the bandwidth
  o.measured = c;
  const auto a = classify(o);
  EXPECT_EQ(a.numbers["time_source"], "ncu");
  EXPECT_NEAR(a.numbers["bandwidth_fraction"].get<double>(), 0.25, 1e-12);
}

TEST(report, json_names_the_state_and_the_raw_digests) {
  report r;
  r.outcome = status::profiled;
  r.reason = "profile.counters";
  r.bottleneck = classify(base(0.9));
  r.raw.push_back({plan::triage, "\"ID\"\n", "abc"});
  const auto j = r.to_json();
  EXPECT_EQ(j["status"], "profiled");
  EXPECT_EQ(j["bottleneck"]["state"], "memory_bound");
  EXPECT_EQ(j["raw_reports"][0]["plan"], "triage");
  EXPECT_EQ(j["raw_reports"][0]["sha256"], "abc");
  EXPECT_EQ(j["counters"], nullptr);
}

} // namespace
} // namespace kb::profile
