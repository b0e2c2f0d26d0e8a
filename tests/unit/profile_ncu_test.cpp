// The profiler's reading of Nsight Compute output and CUPTI values, on synthetic fixtures in the
// documented format (tests/data/ncu/synthetic_*), and the plans' fixed command lines.
#include "common/fs.hpp"
#include "profile/detail/cupti.hpp"
#include "profile/profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace kb::profile {
namespace {

const fs::path data = fs::path(KBLASTER_SOURCE_DIR) / "tests" / "data" / "ncu";

ncu_output fixture(const std::string& name) {
  return parse_ncu_output(read_file(data / name));
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ncu_number, reads_thousands_separators_and_rejects_text) {
  EXPECT_EQ(parse_number("1,234,567"), 1234567.0);
  EXPECT_EQ(parse_number("3,012,345"), 3012345.0);
  EXPECT_EQ(parse_number("1,234.5"), 1234.5);
  EXPECT_EQ(parse_number("92.87"), 92.87);
  EXPECT_EQ(parse_number(" 0 "), 0.0);
  EXPECT_EQ(parse_number("-3.5"), -3.5);
  EXPECT_EQ(parse_number("1.5e3"), 1500.0);
  EXPECT_EQ(parse_number("999"), 999.0);
  EXPECT_FALSE(parse_number("n/a"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_FALSE(parse_number("(256, 1, 1)"));
  EXPECT_FALSE(parse_number("1,23"));     // not a group of three
  EXPECT_FALSE(parse_number("12,3456"));  // not a group of three
  EXPECT_FALSE(parse_number("1,234,56")); // the last group short
  EXPECT_FALSE(parse_number("CachePreferNone"));
  EXPECT_FALSE(parse_number("nan"));
}

void expect_scale(std::string_view unit, double factor, const std::string& base) {
  const auto [f, b] = si_scale(unit);
  EXPECT_NEAR(f, factor, 1e-12 * factor) << unit;
  EXPECT_EQ(b, base) << unit;
}

TEST(ncu_units, scale_to_si) {
  EXPECT_EQ(si_scale("nsecond"), (std::pair<double, std::string>{1e-9, "second"}));
  EXPECT_EQ(si_scale("usecond"), (std::pair<double, std::string>{1e-6, "second"}));
  EXPECT_EQ(si_scale("msecond"), (std::pair<double, std::string>{1e-3, "second"}));
  EXPECT_EQ(si_scale("second"), (std::pair<double, std::string>{1.0, "second"}));
  EXPECT_EQ(si_scale("byte"), (std::pair<double, std::string>{1.0, "byte"}));
  EXPECT_EQ(si_scale("Kbyte"), (std::pair<double, std::string>{1e3, "byte"}));
  EXPECT_EQ(si_scale("Gbyte/second"), (std::pair<double, std::string>{1e9, "byte/second"}));
  expect_scale("byte/nsecond", 1e9, "byte/second");
  expect_scale("cycle/nsecond", 1e9, "cycle/second");
  EXPECT_EQ(si_scale("GHz"), (std::pair<double, std::string>{1e9, "hz"}));
  EXPECT_EQ(si_scale("%"), (std::pair<double, std::string>{1.0, "%"}));
  EXPECT_EQ(si_scale("register/thread"), (std::pair<double, std::string>{1.0, "register/thread"}));
  EXPECT_EQ(si_scale("warp"), (std::pair<double, std::string>{1.0, "warp"}));
  EXPECT_EQ(si_scale(""), (std::pair<double, std::string>{1.0, ""}));
  EXPECT_EQ(si_scale("ms"), (std::pair<double, std::string>{1e-3, "second"}));
}

TEST(ncu_csv, reads_header_units_row_and_one_kernel) {
  const auto out = fixture("synthetic_triage_stream.csv");
  EXPECT_FALSE(out.permission_denied);
  EXPECT_TRUE(out.errors.empty());
  ASSERT_EQ(out.kernels.size(), 1u);
  const auto& k = out.kernels[0];
  EXPECT_EQ(k.kernel_name(), "void kb::elementwise::naive_kernel<kb_op, float, float, float>(const "
                             "float *, float *, long)");
  // Numbers with separators, in their printed unit and in SI.
  const metric* duration = k.find("gpu__time_duration.sum");
  ASSERT_NE(duration, nullptr);
  EXPECT_EQ(duration->unit, "nsecond");
  EXPECT_EQ(duration->text, "3,012,345");
  EXPECT_EQ(duration->value, 3012345.0);
  EXPECT_DOUBLE_EQ(*k.number("gpu__time_duration.sum"), 3.012345e-3);
  EXPECT_DOUBLE_EQ(*k.number("sm__cycles_elapsed.avg.per_second"), 1755123456.78);
  EXPECT_EQ(k.number("launch__grid_size"), 4224.0);
  EXPECT_EQ(k.find("launch__registers_per_thread")->unit, "register/thread");
  // Text stays text.
  EXPECT_EQ(k.find("Block Size")->text, "(256, 1, 1)");
  EXPECT_FALSE(k.find("Block Size")->value);
  EXPECT_EQ(k.find("launch__func_cache_config")->text, "CachePreferNone");
  EXPECT_EQ(k.find("device__attribute_display_name")->text, "NVIDIA H200");
  EXPECT_EQ(k.find("Kernel Name")->unit, "");
  EXPECT_EQ(k.find("missing__metric"), nullptr);
  EXPECT_FALSE(k.number("missing__metric"));
  // The raw report is the CSV alone: header, units row, the kernel; no ncu messages.
  EXPECT_EQ(std::count(out.csv.begin(), out.csv.end(), '\n'), 3);
  EXPECT_EQ(out.csv.find("==PROF=="), std::string::npos);
  EXPECT_EQ(out.csv.rfind("\"ID\",", 0), 0u);
}

TEST(ncu_csv, skips_what_the_process_printed_and_broken_rows) {
  const auto out = fixture("synthetic_triage_two_kernels.csv");
  ASSERT_EQ(out.kernels.size(), 2u);
  EXPECT_EQ(out.kernels[0].kernel_name(), "partial_sums(const float *, float *, long)");
  EXPECT_EQ(out.kernels[1].kernel_name(), "finish(const float *, float *, long)");
  EXPECT_EQ(out.kernels[1].find("sm__warps_active.avg.pct_of_peak_sustained_active")->text, "n/a");
  EXPECT_FALSE(out.kernels[1].number("sm__warps_active.avg.pct_of_peak_sustained_active"));
  EXPECT_EQ(out.csv.find("candidate: stage one done"), std::string::npos);
  EXPECT_EQ(out.csv.find("broken line"), std::string::npos);
}

TEST(ncu_csv, recognises_the_permission_error) {
  const auto out = fixture("synthetic_permission_denied.txt");
  EXPECT_TRUE(out.permission_denied);
  EXPECT_TRUE(out.kernels.empty());
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_NE(out.errors[0].find("ERR_NVGPUCTRPERM"), std::string::npos);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_NE(out.warnings[0].find("No kernels were profiled"), std::string::npos);
  EXPECT_TRUE(out.csv.empty());
}

TEST(ncu_csv, empty_and_garbage_input_give_no_kernels) {
  EXPECT_TRUE(parse_ncu_output("").kernels.empty());
  EXPECT_TRUE(parse_ncu_output("hello\nworld\n\"just\",\"quoted\"\n").kernels.empty());
  // Rows before any header are not kernels.
  EXPECT_TRUE(parse_ncu_output("\"0\",\"1\"\n\"ID\",\"Kernel Name\"\n").kernels.empty());
  // CRLF line ends are fine, and a header without a units row still gives rows.
  const auto out = parse_ncu_output(
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\r\n\"0\",\"k\",\"1,000\"\r\n");
  ASSERT_EQ(out.kernels.size(), 1u);
  EXPECT_EQ(out.kernels[0].find("gpu__time_duration.sum")->value, 1000.0);
  EXPECT_EQ(out.kernels[0].find("gpu__time_duration.sum")->unit, "");
}

TEST(ncu_counters, one_kernel_of_the_triage_plan) {
  const auto c = counters_from_ncu(fixture("synthetic_triage_stream.csv").kernels);
  EXPECT_EQ(c.source, "ncu");
  EXPECT_EQ(c.kernels, 1);
  EXPECT_FALSE(c.truncated);
  EXPECT_DOUBLE_EQ(*c.duration, 3.012345e-3);
  EXPECT_DOUBLE_EQ(*c.sm_throughput, 14.52);
  EXPECT_DOUBLE_EQ(*c.memory_throughput, 92.87);
  EXPECT_DOUBLE_EQ(*c.dram_throughput, 92.87);
  EXPECT_DOUBLE_EQ(*c.achieved_occupancy, 85.31);
  EXPECT_DOUBLE_EQ(*c.theoretical_occupancy, 100);
  EXPECT_DOUBLE_EQ(*c.waves_per_sm, 4.0);
  EXPECT_DOUBLE_EQ(*c.grid_blocks, 4224);
  EXPECT_DOUBLE_EQ(*c.block_threads, 256);
  EXPECT_DOUBLE_EQ(*c.sm_count, 132);
  EXPECT_DOUBLE_EQ(*c.registers_per_thread, 16);
  EXPECT_EQ(c.occupancy_limiter, "warps"); // 8 blocks by warps, 16 by registers, 32 by the rest
  EXPECT_FALSE(c.l2_hit_rate);
  EXPECT_FALSE(c.dram_bandwidth);
  EXPECT_TRUE(c.stalls.empty());
  ASSERT_EQ(c.kernel_list.size(), 1u);
  EXPECT_DOUBLE_EQ(c.kernel_list[0]["duration_s"].get<double>(), 3.012345e-3);
}

TEST(ncu_counters, kernels_weighted_by_duration_and_the_longest_gives_the_launch) {
  const auto c = counters_from_ncu(fixture("synthetic_triage_two_kernels.csv").kernels);
  EXPECT_EQ(c.kernels, 2);
  EXPECT_DOUBLE_EQ(*c.duration, 4e-6);
  EXPECT_DOUBLE_EQ(*c.sm_throughput, (10.0 * 1 + 50.0 * 3) / 4);
  EXPECT_DOUBLE_EQ(*c.memory_throughput, (90.0 * 1 + 30.0 * 3) / 4);
  // Only the first kernel has an achieved occupancy ("n/a" for the second).
  EXPECT_DOUBLE_EQ(*c.achieved_occupancy, 80.0);
  // The launch figures are the longest kernel's (3,000 ns): one block.
  EXPECT_DOUBLE_EQ(*c.grid_blocks, 1);
  EXPECT_DOUBLE_EQ(*c.waves_per_sm, 0.01);
  ASSERT_EQ(c.kernel_list.size(), 2u);
  EXPECT_EQ(c.kernel_list[1]["name"], "finish(const float *, float *, long)");
}

TEST(ncu_counters, memory_plan_gives_bandwidth_hit_rates_and_load_width) {
  const auto c = counters_from_ncu(fixture("synthetic_memory_stream.csv").kernels);
  EXPECT_DOUBLE_EQ(*c.dram_bandwidth, 4123456789012.0);
  EXPECT_DOUBLE_EQ(*c.l1_hit_rate, 0);
  EXPECT_DOUBLE_EQ(*c.l2_hit_rate, 33.41);
  EXPECT_DOUBLE_EQ(*c.sectors_per_load_request, 4.0);
  EXPECT_FALSE(c.sm_throughput);
}

TEST(ncu_counters, stalls_sorted_without_selected) {
  const auto c = counters_from_ncu(fixture("synthetic_scheduler_chain.csv").kernels);
  ASSERT_EQ(c.stalls.size(), 4u);
  EXPECT_EQ(c.stalls[0].reason, "long_scoreboard");
  EXPECT_DOUBLE_EQ(c.stalls[0].cycles_per_issue, 1204.5);
  EXPECT_EQ(c.stalls[1].reason, "wait");
  for (const auto& s : c.stalls) {
    EXPECT_NE(s.reason, "selected");
  }
}

TEST(ncu_counters, plans_merge_without_overwriting) {
  auto triage = counters_from_ncu(fixture("synthetic_triage_stream.csv").kernels);
  const auto memory = counters_from_ncu(fixture("synthetic_memory_stream.csv").kernels);
  const auto scheduler = counters_from_ncu(fixture("synthetic_scheduler_chain.csv").kernels);
  triage.merge(memory);
  triage.merge(scheduler);
  EXPECT_DOUBLE_EQ(*triage.memory_throughput,
                   92.87); // the triage plan's, not the memory plan's 92.90
  EXPECT_DOUBLE_EQ(*triage.l2_hit_rate, 33.41);
  EXPECT_DOUBLE_EQ(*triage.sectors_per_load_request, 4.0);
  EXPECT_EQ(triage.stalls.front().reason, "long_scoreboard");
  const auto j = triage.to_json();
  EXPECT_EQ(j["source"], "ncu");
  EXPECT_DOUBLE_EQ(j["l2_hit_rate_pct"].get<double>(), 33.41);
  EXPECT_EQ(j["stalls"][0]["reason"], "long_scoreboard");
  EXPECT_FALSE(j.contains("nonexistent"));
}

TEST(ncu_counters, a_call_with_the_kernel_cap_is_marked_truncated) {
  std::string text = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n";
  for (int i = 0; i < max_profiled_kernels; ++i) {
    text += "\"" + std::to_string(i) + "\",\"k\",\"100\"\n";
  }
  const auto c = counters_from_ncu(parse_ncu_output(text).kernels);
  EXPECT_EQ(c.kernels, max_profiled_kernels);
  EXPECT_TRUE(c.truncated);
  EXPECT_DOUBLE_EQ(*c.duration, max_profiled_kernels * 100e-9);
}

TEST(plans, names_round_trip_and_sections_are_fixed) {
  for (plan p : {plan::triage, plan::memory, plan::scheduler}) {
    EXPECT_EQ(plan_from_string(to_string(p)), p);
  }
  EXPECT_FALSE(plan_from_string("full"));
  EXPECT_EQ(plan_sections(plan::triage),
            (std::vector<std::string>{"SpeedOfLight", "LaunchStats", "Occupancy"}));
  EXPECT_TRUE(has(plan_sections(plan::memory), "MemoryWorkloadAnalysis"));
  EXPECT_EQ(plan_sections(plan::scheduler),
            (std::vector<std::string>{"SchedulerStats", "WarpStateStats"}));
}

TEST(plans, command_lines_leave_clocks_alone_and_select_the_nvtx_range) {
  for (plan p : {plan::triage, plan::memory, plan::scheduler}) {
    const auto argv = ncu_command("/opt/ncu", p);
    ASSERT_FALSE(argv.empty());
    EXPECT_EQ(argv[0], "/opt/ncu");
    const auto after = [&](const std::string& flag) {
      const auto it = std::find(argv.begin(), argv.end(), flag);
      return it != argv.end() && it + 1 != argv.end() ? *(it + 1) : std::string("<missing>");
    };
    EXPECT_EQ(after("--clock-control"), "none");
    EXPECT_EQ(after("--page"), "raw");
    EXPECT_EQ(after("--print-units"), "base");
    EXPECT_EQ(after("--nvtx-include"), std::string(nvtx_range) + "/");
    EXPECT_EQ(after("--launch-count"), std::to_string(max_profiled_kernels));
    EXPECT_TRUE(has(argv, "--csv"));
    EXPECT_TRUE(has(argv, "--nvtx"));
    size_t sections = 0;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--section") {
        EXPECT_TRUE(has(plan_sections(p), argv[i + 1]));
        ++sections;
      }
    }
    EXPECT_EQ(sections, plan_sections(p).size());
    EXPECT_FALSE(has(argv, "--set"));
    EXPECT_FALSE(has(argv, "--target-processes"));
  }
  const auto probe = ncu_probe_command("ncu");
  EXPECT_TRUE(has(probe, "gpu__time_duration.sum"));
  EXPECT_FALSE(has(probe, "--section"));
}

TEST(cupti, values_round_trip_through_json_and_convert_to_si) {
  cupti_values v;
  v.available = true;
  v.passes = 7;
  v.seconds = 0.8;
  v.values["gpu__time_duration.sum"] = {1500000, "nsecond"};
  v.values["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = {12.5, "%"};
  v.values["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] = {91.0, "%"};
  v.values["dram__bytes.sum.per_second"] = {4.1, "Tbyte/second"};
  v.values["lts__t_sector_hit_rate.pct"] = {30, "%"};
  v.values["sm__ctas_launched.sum"] = {100, "block"};
  v.unsupported = {"l1tex__t_sector_hit_rate.pct"};
  const auto back = cupti_values::from_json(v.to_json());
  EXPECT_TRUE(back.available);
  EXPECT_EQ(back.passes, 7);
  EXPECT_EQ(back.values, v.values);
  EXPECT_EQ(back.unsupported, v.unsupported);
  const auto c = counters_from_cupti(back);
  EXPECT_EQ(c.source, "cupti");
  EXPECT_EQ(c.kernels, 1);
  EXPECT_DOUBLE_EQ(*c.duration, 1.5e-3);
  EXPECT_DOUBLE_EQ(*c.dram_bandwidth, 4.1e12);
  EXPECT_DOUBLE_EQ(*c.memory_throughput, 91.0);
  EXPECT_DOUBLE_EQ(*c.grid_blocks, 100);
  EXPECT_FALSE(c.l1_hit_rate);
  EXPECT_FALSE(c.waves_per_sm);
}

TEST(cupti, permission_errors_read_as_err_nvgpuctrperm) {
  EXPECT_TRUE(detail::is_permission_error(35));
  EXPECT_TRUE(detail::is_permission_error(40));
  EXPECT_FALSE(detail::is_permission_error(0));
  EXPECT_FALSE(detail::is_permission_error(27));
  EXPECT_EQ(detail::cupti_failure_reason(35, "cuptiRangeProfilerEnable",
                                         "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
                .rfind("ERR_NVGPUCTRPERM", 0),
            0u);
  const auto other =
      detail::cupti_failure_reason(27, "cuptiProfilerHostInitialize", "CUPTI_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(other.find("ERR_NVGPUCTRPERM"), std::string::npos);
  EXPECT_NE(other.find("cuptiProfilerHostInitialize"), std::string::npos);
}

TEST(cupti, default_units_follow_the_metric_names) {
  EXPECT_EQ(detail::default_unit("sm__throughput.avg.pct_of_peak_sustained_elapsed"), "%");
  EXPECT_EQ(detail::default_unit("lts__t_sector_hit_rate.pct"), "%");
  EXPECT_EQ(detail::default_unit("sm__maximum_warps_per_active_cycle_pct"), "%");
  EXPECT_EQ(detail::default_unit("gpu__time_duration.sum"), "nsecond");
  EXPECT_EQ(detail::default_unit("dram__bytes.sum.per_second"), "byte/second");
  EXPECT_EQ(detail::default_unit("sm__ctas_launched.sum"), "");
  for (const auto& m : cupti_metrics()) {
    EXPECT_FALSE(m.empty());
  }
}

TEST(cupti, a_missing_library_is_an_answer_not_an_error) {
  const auto why = detail::cupti_load_error({"/nonexistent/libcupti.so.13"});
  EXPECT_NE(why.find("libcupti.so.13 not found"), std::string::npos) << why;
}

TEST(cupti, the_toolkit_library_has_every_entry_point) {
  const fs::path lib = fs::path(KBLASTER_CUDA_INCLUDE).parent_path() / "lib64" / "libcupti.so.13";
  if (!fs::exists(lib)) {
    GTEST_SKIP() << lib << " is not installed here";
  }
  EXPECT_EQ(detail::cupti_load_error({lib.string()}), "");
}

TEST(cupti, without_a_device_the_collection_says_why) {
  // On a machine without a GPU the answer is "unavailable" with a reason; it never throws.
  const auto v = collect_cupti([] {}, [] { return std::string(); });
  if (v.available) {
    GTEST_SKIP() << "a device with readable counters is present";
  }
  EXPECT_FALSE(v.reason.empty());
  EXPECT_TRUE(v.values.empty());
}

// CUDA's bin/ncu is a script that hands over to the Nsight Compute installation beside the
// toolkit; inside the sandbox both folders must be visible, reached through links as installed.
TEST(ncu_installation, is_the_tools_folder_and_the_installation_it_hands_over_to) {
  kb::temp_dir t("ncu-installation");
  const fs::path real = fs::canonical(t.path());
  const fs::path toolkit = real / "cuda-13.0";
  fs::create_directories(toolkit / "bin");
  write_file_atomic(toolkit / "bin" / "ncu", "#!/bin/sh\n");
  fs::create_directories(real / "opt" / "nsight-compute" / "2025.3.1");
  // The installation as a link beside the toolkit's bin/, and the toolkit itself through a link.
  fs::create_directory_symlink(real / "opt" / "nsight-compute" / "2025.3.1",
                               toolkit / "nsight-compute-2025.3.1");
  fs::create_directory_symlink(toolkit, real / "cuda");
  fs::create_directories(toolkit / "nvvm"); // not Nsight Compute's: not bound
  const auto dirs = ncu_installation((real / "cuda" / "bin" / "ncu").string());
  const auto holds = [&](const fs::path& p) {
    return std::find(dirs.begin(), dirs.end(), p) != dirs.end();
  };
  EXPECT_TRUE(holds(toolkit / "bin"));
  EXPECT_TRUE(holds(real / "opt" / "nsight-compute" / "2025.3.1"));
  EXPECT_FALSE(holds(toolkit / "nvvm"));
  EXPECT_FALSE(holds(toolkit));
  EXPECT_TRUE(ncu_installation((real / "missing" / "ncu").string()).empty());
}

} // namespace
} // namespace kb::profile
