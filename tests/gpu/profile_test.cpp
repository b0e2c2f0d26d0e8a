// On the GPU: the profiler's states on kernels whose bottleneck is known by construction (a
// streaming copy, an FMA loop, a dependent chain, one small block), CUPTI against Nsight Compute on
// their shared metrics, every Core 10 baseline against its roofline, the cost of a CUPTI profile,
// and the fallbacks. The candidates here are the project's own, so they run without the sandbox
// (what is tested is the profiler); one test runs inside it.
#include "gpu_test_support.hpp"

#include "common/sha256.hpp"
#include "profile/profile.hpp"
#include "task/task.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

namespace kb::gpu_test {
namespace {

using nlohmann::json;
using profile::plan;
using profile::state;

profile::report profile_of(const std::string& task_id, const fs::path& source,
                           const std::string& shape, std::vector<plan> plans,
                           profile::counter_source from = profile::counter_source::ncu,
                           bool sandboxed = false) {
  const auto c = task::find_task(root, task_id);
  profile::request r;
  r.options = base_options();
  r.options.ceilings = device_ceilings();
  r.options.shape = shape;
  r.options.no_sandbox = !sandboxed;
  r.plans = std::move(plans);
  r.source = from;
  const eval::candidate_input cand{read_file(source), source.filename().string(), "candidate"};
  return profile::run(root, c, cand, r, {});
}

std::string why(const profile::report& r) {
  return fmt::format("{} ({}): {} | access: {}", profile::to_string(r.outcome), r.reason,
                     r.bottleneck.sentence, r.counter_access.reason);
}

double number(const profile::report& r, const char* key) {
  return r.bottleneck.numbers.value(key, std::nan(""));
}

const fs::path relu_stream = root / "portfolio" / "core10" / "019_relu.cu";
const fs::path fma_loop = root / "tests" / "data" / "profile" / "fma_loop_relu.cu";
const fs::path dependent_chain = root / "tests" / "data" / "profile" / "dependent_chain_relu.cu";

TEST(profile, streaming_copy_is_memory_bound_near_the_ceiling) {
  const auto r = profile_of("019", relu_stream, "official", {plan::triage, plan::memory});
  keep("profile_streaming_copy", r.to_json());
  ASSERT_EQ(r.outcome, profile::status::profiled) << why(r);
  // Against the device's measured ceilings, never the conservative default.
  ASSERT_TRUE(device_ceilings().measured) << device_ceilings().source;
  EXPECT_EQ(r.bottleneck.numbers.value("ceilings_source", ""), device_ceilings().source);
  EXPECT_EQ(r.bottleneck.result, state::memory_bound) << why(r);
  EXPECT_GE(number(r, "bandwidth_fraction"), 0.85) << why(r);
  ASSERT_TRUE(r.measured && r.measured->memory_throughput);
  EXPECT_GE(*r.measured->memory_throughput, 70.0) << why(r);
  ASSERT_EQ(r.raw.size(), 2u);
  for (const auto& raw : r.raw) {
    EXPECT_EQ(raw.sha256, sha256_hex(raw.csv));
    EXPECT_EQ(profile::parse_ncu_output(raw.csv).kernels.size(),
              static_cast<size_t>(r.measured->kernels));
  }
}

TEST(profile, fma_loop_is_compute_bound) {
  const auto r = profile_of("019", fma_loop, "official", {plan::triage});
  keep("profile_fma_loop", r.to_json());
  ASSERT_EQ(r.outcome, profile::status::profiled) << why(r);
  EXPECT_EQ(r.bottleneck.result, state::compute_bound) << why(r);
  ASSERT_TRUE(r.measured && r.measured->sm_throughput);
  EXPECT_GE(*r.measured->sm_throughput, 80.0) << why(r);
}

TEST(profile, dependent_chain_is_latency_bound) {
  const auto r = profile_of("019", dependent_chain, "official", {plan::triage, plan::scheduler});
  keep("profile_dependent_chain", r.to_json());
  ASSERT_EQ(r.outcome, profile::status::profiled) << why(r);
  EXPECT_EQ(r.bottleneck.result, state::latency_bound) << why(r);
  ASSERT_TRUE(r.measured);
  ASSERT_TRUE(r.measured->waves_per_sm);
  EXPECT_GE(*r.measured->waves_per_sm, 1.0) << "the chain's grid is meant to fill whole waves";
  ASSERT_FALSE(r.measured->stalls.empty()) << why(r);
  EXPECT_EQ(r.measured->stalls.front().reason, "long_scoreboard") << why(r);
}

TEST(profile, one_row_rmsnorm_is_a_small_grid) {
  const auto c = task::find_task(root, "101");
  const auto r = profile_of("101", c.baseline, "t1-h4096", {plan::triage});
  keep("profile_rmsnorm_one_row", r.to_json());
  ASSERT_EQ(r.outcome, profile::status::profiled) << why(r);
  EXPECT_EQ(r.bottleneck.result, state::small_grid) << why(r);
}

// Shared metrics agree when they differ by at most 5% of the larger value (or by one point for
// percentages near zero, where 5% of the value is below the counters' resolution).
bool agree(double a, double b, bool percentage) {
  const double diff = std::abs(a - b);
  return diff <= 0.05 * std::max(std::abs(a), std::abs(b)) || (percentage && diff <= 1.0);
}

TEST(profile, cupti_and_ncu_agree_on_their_shared_metrics) {
  const auto ncu = profile_of("019", relu_stream, "official", {plan::triage, plan::memory});
  const auto cupti = profile_of("019", relu_stream, "official", {}, profile::counter_source::cupti);
  ASSERT_EQ(ncu.outcome, profile::status::profiled) << why(ncu);
  ASSERT_EQ(cupti.outcome, profile::status::profiled) << why(cupti);
  const auto& a = *ncu.measured;
  const auto& b = *cupti.measured;
  json table = json::array();
  int compared = 0;
  for (const auto& [name, x, y, percentage] :
       std::vector<std::tuple<std::string, std::optional<double>, std::optional<double>, bool>>{
           {"duration_s", a.duration, b.duration, false},
           {"sm_throughput_pct", a.sm_throughput, b.sm_throughput, true},
           {"memory_throughput_pct", a.memory_throughput, b.memory_throughput, true},
           {"dram_bandwidth_bytes_per_s", a.dram_bandwidth, b.dram_bandwidth, false},
           {"achieved_occupancy_pct", a.achieved_occupancy, b.achieved_occupancy, true},
           {"l1_hit_rate_pct", a.l1_hit_rate, b.l1_hit_rate, true},
           {"l2_hit_rate_pct", a.l2_hit_rate, b.l2_hit_rate, true}}) {
    json row{{"metric", name}};
    if (x && y) {
      row["ncu"] = *x;
      row["cupti"] = *y;
      row["agree"] = agree(*x, *y, percentage);
      EXPECT_TRUE(agree(*x, *y, percentage)) << name << ": ncu " << *x << ", cupti " << *y;
      ++compared;
    } else {
      row["missing"] = !x ? "ncu" : "cupti";
    }
    table.push_back(row);
  }
  keep("profile_cupti_vs_ncu",
       {{"metrics", table}, {"ncu", ncu.to_json()}, {"cupti", cupti.to_json()}});
  EXPECT_GE(compared, 6) << table.dump(2);
}

TEST(profile, a_cupti_profile_costs_under_two_seconds) {
  const auto r = profile_of("019", relu_stream, "official", {}, profile::counter_source::cupti);
  ASSERT_EQ(r.outcome, profile::status::profiled) << why(r);
  const auto& run = r.detail.at("runs").at(0);
  const double collection =
      run.at("cupti").value("seconds", 0.0); // [s] in the worker: set-up, passes, decoding
  keep("profile_cupti_cost", {{"cupti_collection_seconds", collection},
                              {"cupti_passes", run.at("cupti").value("passes", 0)},
                              {"probe_seconds", r.counter_access.seconds},
                              {"worker_seconds", run.value("seconds", 0.0)},
                              {"profile_seconds", r.seconds},
                              {"report", r.to_json()}});
  EXPECT_GT(collection, 0.0);
  EXPECT_LT(collection, 2.0);
}

TEST(profile, core10_baselines_get_states_consistent_with_their_rooflines) {
  json record = json::array();
  for (const auto& c : task::load_suite(root, "core10")) {
    const auto r = profile_of(c.id, c.baseline, "official", {plan::triage});
    auto entry = r.to_json();
    entry["task"] = c.id;
    record.push_back(entry);
    if (r.outcome != profile::status::profiled) {
      ADD_FAILURE() << c.id << ": " << why(r);
      continue;
    }
    const state s = r.bottleneck.result;
    const double bw = number(r, "bandwidth_fraction");
    const double cf = number(r, "compute_fraction");
    const auto& m = *r.measured;
    std::printf("%-4s %-16s %-14s bw %5.1f%% fp32 %5.1f%%  SM %5.1f%% mem %5.1f%%  %s\n",
                c.id.c_str(), c.name.c_str(), profile::to_string(s).c_str(), 100 * bw, 100 * cf,
                m.sm_throughput.value_or(-1), m.memory_throughput.value_or(-1),
                r.bottleneck.sentence.c_str());
    EXPECT_NE(s, state::unknown) << c.id << ": " << why(r);
    // What the roofline proves holds: at 80% of a measured ceiling, that ceiling is the bound.
    if (bw >= 0.8) {
      EXPECT_EQ(s, state::memory_bound) << c.id << ": " << why(r);
    }
    if (cf >= 0.8) {
      EXPECT_EQ(s, state::compute_bound) << c.id << ": " << why(r);
    }
    // Otherwise the state rests on the counters.
    if (s == state::memory_bound && bw < 0.8) {
      EXPECT_GE(m.memory_throughput.value_or(0), 60.0) << c.id << ": " << why(r);
    }
    if (s == state::compute_bound && cf < 0.8) {
      EXPECT_GE(m.sm_throughput.value_or(0), 60.0) << c.id << ": " << why(r);
    }
    if (s == state::latency_bound || s == state::small_grid) {
      EXPECT_LT(m.sm_throughput.value_or(100), 60.0) << c.id;
      EXPECT_LT(m.memory_throughput.value_or(100), 60.0) << c.id;
    }
    // Both measure the same call: the kernels' duration under Nsight Compute against CUDA events.
    if (!m.duration || !r.bottleneck.numbers.contains("seconds")) {
      ADD_FAILURE() << c.id << ": no duration or no event time";
      continue;
    }
    EXPECT_NEAR(*m.duration / number(r, "seconds"), 1.0, 0.25)
        << c.id << ": ncu " << *m.duration << " s, events " << number(r, "seconds");
  }
  keep("profile_core10_baselines", {{"profiles", record}});
}

TEST(profile, without_ncu_it_falls_back_to_events_only) {
  ::setenv("KBLASTER_NCU", "/nonexistent/ncu", 1);
  const auto r = profile_of("019", relu_stream, "official", {plan::triage});
  ::unsetenv("KBLASTER_NCU");
  keep("profile_events_only", r.to_json());
  ASSERT_EQ(r.outcome, profile::status::events_only) << why(r);
  EXPECT_TRUE(r.bottleneck.events_only);
  EXPECT_EQ(r.bottleneck.sentence.rfind("events only (Nsight Compute (ncu) not found", 0), 0u)
      << r.bottleneck.sentence;
  EXPECT_GT(number(r, "seconds"), 0.0);
  // A streaming copy near the ceiling is memory-bound on the roofline alone.
  EXPECT_EQ(r.bottleneck.result, state::memory_bound) << why(r);
  EXPECT_TRUE(r.raw.empty());
}

TEST(profile, a_profiler_that_fails_in_the_sandbox_is_the_tools_failure) {
  // The candidate passes and runs without a profiler; Nsight Compute (a stand-in that works for
  // the counter probe outside the sandbox and exits 1 inside it) then ends the worker. That is
  // the tool's failure: events only, with the tool's words, never the candidate's rejection.
  const auto ncu = profile::find_ncu();
  if (!ncu) {
    GTEST_SKIP() << "no Nsight Compute here";
  }
  const fs::path stand_in = root / "tests" / "data" / "profile" / "ncu_outside_the_sandbox.sh";
  ::setenv("KBLASTER_PROFILE_TEST_NCU", ncu->c_str(), 1);
  ::setenv("KBLASTER_NCU", stand_in.c_str(), 1);
  const auto r = profile_of("019", relu_stream, "official", {plan::triage},
                            profile::counter_source::ncu, true);
  ::unsetenv("KBLASTER_NCU");
  ::unsetenv("KBLASTER_PROFILE_TEST_NCU");
  keep("profile_tool_fails_in_sandbox", r.to_json());
  ASSERT_TRUE(r.counter_access.available) << r.counter_access.reason;
  ASSERT_EQ(r.outcome, profile::status::events_only) << why(r);
  EXPECT_NE(r.bottleneck.events_only_reason.find("Nsight Compute ended the worker"),
            std::string::npos)
      << r.bottleneck.events_only_reason;
  EXPECT_NE(r.bottleneck.events_only_reason.find("nsight-compute directory is not found"),
            std::string::npos)
      << r.bottleneck.events_only_reason;
  EXPECT_GT(number(r, "seconds"), 0.0);
  EXPECT_EQ(r.bottleneck.result, state::memory_bound) << why(r);
}

TEST(profile, sandboxed_profiles_read_counters_or_say_why) {
  const auto r = profile_of("019", relu_stream, "official", {plan::triage},
                            profile::counter_source::ncu, true);
  keep("profile_sandboxed", r.to_json());
  ASSERT_TRUE(r.outcome == profile::status::profiled || r.outcome == profile::status::events_only)
      << why(r);
  if (r.outcome == profile::status::events_only) {
    EXPECT_FALSE(r.bottleneck.events_only_reason.empty());
  }
  EXPECT_NE(r.bottleneck.result, state::unknown) << why(r);
}

} // namespace
} // namespace kb::gpu_test
