// Device calibration without a GPU: the stored limits and gate calibrations (round trip, lookup by
// device UUID, driver and toolkit, newest first), the ceilings they give (with the limit's
// headroom and tensor cores only where the contract allows them), the conservative default and
// its label when nothing was measured, the A/A summary, and the CLI's exit status where no GPU is
// present.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "eval/eval.hpp"
#include "store/store.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

namespace kb::eval {
namespace {

using nlohmann::json;
const fs::path root = KBLASTER_SOURCE_DIR;

store::device_limits sample_limits(const std::string& uuid = "GPU-1234") {
  store::device_limits x;
  x.gpu_uuid = uuid;
  x.gpu_name = "Test GPU";
  x.driver = "13000";
  x.toolkit = "13000";
  x.copy_bandwidth = 4.0e12;
  x.read_bandwidth = 4.4e12;
  x.fp32_flops = 60e12;
  x.fp16_tensor_flops = 500e12;
  x.bf16_tensor_flops = 480e12;
  x.tf32_tensor_flops = 250e12;
  x.detail = {{"buffer_bytes", 1 << 30}, {"method_version", limits_method_version}};
  return x;
}

// A measurement without the method's version (one copy kernel, below what streaming kernels
// reach on the H200) or by an older version is not used: the device is measured again.
TEST(calibration, limits_of_an_older_method_are_measured_again) {
  auto x = sample_limits();
  EXPECT_TRUE(measured_by_current_method(x));
  x.detail.erase("method_version");
  EXPECT_FALSE(measured_by_current_method(x));
  x.detail["method_version"] = limits_method_version - 1;
  EXPECT_FALSE(measured_by_current_method(x));
  x.detail["method_version"] = limits_method_version;
  EXPECT_TRUE(measured_by_current_method(x));
  x.detail = nullptr;
  EXPECT_FALSE(measured_by_current_method(x));
}

TEST(calibration, device_limits_round_trip_through_the_store_by_uuid_driver_and_toolkit) {
  temp_dir dir("kb-calibration-test");
  store::store st(dir.path() / "store");
  EXPECT_FALSE(st.find_device_limits("GPU-1234", "13000", "13000"));
  st.record_device_limits(sample_limits());
  auto newer = sample_limits();
  newer.copy_bandwidth = 4.1e12;
  newer.tf32_tensor_flops.reset();
  st.record_device_limits(newer);
  st.record_device_limits(sample_limits("GPU-other"));
  const auto found = st.find_device_limits("GPU-1234", "13000", "13000");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->copy_bandwidth, 4.1e12); // the newest row wins
  EXPECT_EQ(found->read_bandwidth, 4.4e12);
  EXPECT_EQ(found->fp16_tensor_flops, 500e12);
  EXPECT_FALSE(found->tf32_tensor_flops);
  EXPECT_EQ(found->detail["buffer_bytes"], 1 << 30);
  EXPECT_FALSE(found->created.empty());
  // Another driver or toolkit is another calibration.
  EXPECT_FALSE(st.find_device_limits("GPU-1234", "12080", "13000"));
  EXPECT_FALSE(st.find_device_limits("GPU-1234", "13000", "12080"));
  EXPECT_FALSE(st.find_device_limits("GPU-none", "13000", "13000"));
  // The JSON mapping of the child's answer is the inverse of itself.
  const auto back = device_limits_from_json(to_json(*found));
  EXPECT_EQ(back.gpu_uuid, found->gpu_uuid);
  EXPECT_EQ(back.copy_bandwidth, found->copy_bandwidth);
  EXPECT_EQ(back.fp16_tensor_flops, found->fp16_tensor_flops);
  EXPECT_EQ(back.tf32_tensor_flops, found->tf32_tensor_flops);
  // Nonsense is refused.
  auto bad = sample_limits();
  bad.copy_bandwidth = 0;
  EXPECT_THROW(st.record_device_limits(bad), kb::error);
  bad = sample_limits("");
  EXPECT_THROW(st.record_device_limits(bad), kb::error);
}

TEST(calibration, gate_calibrations_round_trip_newest_first) {
  temp_dir dir("kb-calibration-test");
  store::store st(dir.path() / "store");
  EXPECT_FALSE(st.find_gate_calibration("GPU-1234"));
  store::gate_calibration g;
  g.gpu_uuid = "GPU-1234";
  g.comparisons = 26;
  g.false_positive_rate = 0.0385;
  g.not_same_rate = 0;
  g.spread = 0.004;
  g.delta = 0.01;
  g.detail = {{"summary", {{"comparisons", 26}}}};
  st.record_gate_calibration(g);
  g.spread = 0.02;
  g.delta = 0.02;
  st.record_gate_calibration(g);
  const auto found = st.find_gate_calibration("GPU-1234");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->delta, 0.02);
  EXPECT_EQ(found->comparisons, 26);
  EXPECT_DOUBLE_EQ(found->false_positive_rate, 0.0385);
  EXPECT_FALSE(st.find_gate_calibration("GPU-other"));
  g.delta = 0;
  EXPECT_THROW(st.record_gate_calibration(g), kb::error);
}

TEST(calibration, without_limits_the_conservative_default_applies_and_says_so) {
  const auto c = ceilings_from(std::nullopt);
  EXPECT_FALSE(c.measured);
  EXPECT_NE(c.source.find("conservative default"), std::string::npos) << c.source;
  EXPECT_NE(c.source.find("kblaster calibrate --device"), std::string::npos) << c.source;
  // Generous: above the H200's datasheet figures, so no honest kernel is flagged.
  EXPECT_GT(c.peak_bandwidth, 4.8e12);
  EXPECT_GT(c.peak_fp32_flops, 67e12);
  const auto def = task::ceilings{};
  EXPECT_EQ(def.source, c.source);
  EXPECT_EQ(task::to_json(c)["measured"], false);
}

TEST(calibration, measured_limits_give_floors_and_limits_with_headroom) {
  const auto c = ceilings_from(sample_limits());
  EXPECT_TRUE(c.measured);
  EXPECT_EQ(c.bandwidth, 4.0e12);
  EXPECT_DOUBLE_EQ(c.peak_bandwidth, limit_headroom_bandwidth * 4.4e12);
  EXPECT_EQ(c.fp32_flops, 60e12);
  EXPECT_DOUBLE_EQ(c.peak_fp32_flops, limit_headroom_fp32 * 60e12);
  EXPECT_EQ(c.tensor_flops, 500e12);
  EXPECT_DOUBLE_EQ(c.peak_tensor_flops, limit_headroom_tensor * 500e12);
  EXPECT_NE(c.source.find("measured on Test GPU GPU-1234"), std::string::npos) << c.source;

  // A compute-heavy task: fp32 FMA unless the contract admits tensor cores.
  auto mm = task::find_task(root, "007");
  ASSERT_EQ(mm.fam, task::family::matmul);
  EXPECT_TRUE(mm.roof.tensor_cores); // the default of matmul tasks
  const auto& s = mm.official();
  const double flops = task::roofline_flops(mm, s);
  EXPECT_DOUBLE_EQ(task::flop_ceiling(mm, c), 500e12);
  EXPECT_LE(task::limit_seconds(mm, s, c), flops / (limit_headroom_tensor * 500e12) * 1.0000001 +
                                               task::roofline_bytes(mm, s) / c.peak_bandwidth);
  mm.roof.tensor_cores = false;
  EXPECT_DOUBLE_EQ(task::flop_ceiling(mm, c), 60e12);
  EXPECT_GE(task::limit_seconds(mm, s, c), flops / (limit_headroom_fp32 * 60e12) * 0.9999999);
  // Without tensor-core rates the FLOP ceiling is fp32's even where allowed.
  auto no_tc = sample_limits();
  no_tc.fp16_tensor_flops.reset();
  no_tc.bf16_tensor_flops.reset();
  no_tc.tf32_tensor_flops.reset();
  mm.roof.tensor_cores = true;
  EXPECT_DOUBLE_EQ(task::flop_ceiling(mm, ceilings_from(no_tc)), 60e12);
  // Elementwise tasks do not admit tensor cores by default.
  EXPECT_FALSE(task::find_task(root, "019").roof.tensor_cores);
}

TEST(calibration, resolving_without_a_device_uses_the_labelled_default) {
  temp_dir dir("kb-calibration-test");
  store::store st(dir.path() / "store");
  device_probe none;
  none.available = false;
  const auto r = resolve_ceilings(st, none, true, {});
  EXPECT_FALSE(r.ceilings.measured);
  EXPECT_FALSE(r.limits);
  EXPECT_NE(r.note.find("conservative default"), std::string::npos) << r.note;
  // A device with stored limits: found without measuring.
  st.record_device_limits(sample_limits());
  device_probe dev;
  dev.available = true;
  dev.info = {{"uuid", "GPU-1234"}, {"cuda_driver_api", 13000}, {"cuda_runtime", 13000}};
  const auto found = resolve_ceilings(st, dev, false, {});
  EXPECT_TRUE(found.ceilings.measured);
  EXPECT_FALSE(found.measured_now);
  // Another driver, measuring not allowed: the default, labelled.
  dev.info["cuda_driver_api"] = 12080;
  const auto other = resolve_ceilings(st, dev, false, {});
  EXPECT_FALSE(other.ceilings.measured);
  EXPECT_NE(other.note.find("conservative default"), std::string::npos);
}

TEST(calibration, aa_summary_counts_false_positives_and_sets_delta) {
  json tasks = json::array();
  json evals = json::array();
  for (int i = 0; i < 20; ++i) {
    evals.push_back({{"verdict", i == 0 ? "inconclusive" : "same"},
                     {"p", i == 0 ? 0.01 : 0.5},
                     {"mann_whitney_p", i < 5 ? 0.01 : 0.5},
                     {"ratio", 1.0 + 0.0001 * i},
                     {"ratio_ci", {0.999, 1.001 + 0.0001 * i}},
                     {"timing_overhead", {{"seconds", 2e-6}}}});
  }
  evals.push_back({{"verdict", "error"}}); // no statistics: counted as failed
  tasks.push_back({{"task", "019"}, {"evaluations", evals}});
  const auto s = summarize_aa(tasks);
  EXPECT_EQ(s.comparisons, 20);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(s.false_positive_rate, 0.05);
  EXPECT_DOUBLE_EQ(s.pooled_false_positive_rate, 0.25);
  EXPECT_DOUBLE_EQ(s.not_same_rate, 0.05);
  EXPECT_GT(s.spread, 0.001);
  EXPECT_DOUBLE_EQ(s.delta, 0.01); // max(1%, spread)
  ASSERT_TRUE(s.timing_overhead_median);
  EXPECT_DOUBLE_EQ(*s.timing_overhead_median, 2e-6);
  // 1 in 20: a wide interval around 5%. Nineteen p values of 0.5 are far from uniform.
  EXPECT_NEAR(s.false_positive_low, 0.00127, 2e-5);
  EXPECT_NEAR(s.false_positive_high, 0.2487, 2e-4);
  EXPECT_GT(s.p_uniformity_d, 0.4);
  EXPECT_LT(s.p_uniformity_p, 0.01);
  EXPECT_THROW(summarize_aa(json::array()), kb::error);
}

// Without a GPU the commands that need one end blocked (3), and say so.
process_result kblaster(const fs::path& store, std::vector<std::string> args) {
  args.insert(args.begin(), {KBLASTER_BINARY, "--root", root.string(), "--store", store.string()});
  return run_process({.argv = args,
                      .env_overrides = {{"CUDA_VISIBLE_DEVICES", ""}},
                      .timeout = std::chrono::seconds(120)});
}

TEST(calibration_cli, commands_without_a_device_exit_blocked) {
  temp_dir dir("kb-calibration-cli");
  const auto cal = kblaster(dir.path() / "store", {"calibrate", "--task", "019"});
  EXPECT_EQ(cal.exit_code, exit_code::blocked) << cal.output;
  EXPECT_NE(cal.output.find("blocked"), std::string::npos) << cal.output;
  const auto dev = kblaster(dir.path() / "store", {"calibrate", "--device"});
  EXPECT_EQ(dev.exit_code, exit_code::blocked) << dev.output;
  const auto opt_json = dir.path() / "optimize.json";
  const auto opt = kblaster(dir.path() / "store", {"optimize", "--task", "019", "--budget", "5s",
                                                   "--json", opt_json.string()});
  EXPECT_EQ(opt.exit_code, exit_code::blocked) << opt.output;
  // The run's JSON says so too: each task blocked, with the preflight's reason.
  ASSERT_TRUE(fs::exists(opt_json)) << opt.output;
  const auto j = nlohmann::json::parse(read_file(opt_json));
  EXPECT_GT(j.at("run").get<int>(), 0);
  ASSERT_EQ(j.at("tasks").size(), 1u);
  EXPECT_EQ(j["tasks"][0].at("outcome"), "blocked");
  EXPECT_EQ(j["tasks"][0].at("reason"), "blocked.preflight.device");
  const auto bench = kblaster(dir.path() / "store",
                              {"bench", "--task", "019", "--out", (dir.path() / "b").string()});
  EXPECT_EQ(bench.exit_code, exit_code::blocked) << bench.output;
  // Bad usage stays a usage error.
  EXPECT_EQ(kblaster(dir.path() / "store", {"calibrate", "--repeats", "0"}).exit_code,
            exit_code::usage);
  // The task listing names the ceilings its floors use.
  const auto list = kblaster(dir.path() / "store", {"tasks", "list", "--suite", "core10"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("conservative default"), std::string::npos) << list.output;
}

// An optimize run records its settings as given, and `--resume` continues with the recorded ones
// (not the new command line's); a record written without some settings (an older kblaster) gets
// the defaults for them.
TEST(optimize_cli, a_run_records_its_settings_and_a_resume_reads_them_back) {
  temp_dir dir("kb-optimize-settings");
  const auto opt = kblaster(dir.path() / "store", {"optimize", "--task", "019", "--budget", "5s",
                                                   "--no-screen", "--rollouts", "3", "--seed", "7"});
  EXPECT_EQ(opt.exit_code, exit_code::blocked) << opt.output;
  int64_t id = 0;
  {
    store::store st(dir.path() / "store");
    std::vector<store::run_info> runs;
    for (const auto& r : st.list_runs(10)) {
      if (r.kind == "optimize") {
        runs.push_back(r);
      }
    }
    ASSERT_EQ(runs.size(), 1u);
    id = runs[0].id;
    const auto& a = runs[0].args;
    EXPECT_EQ(a.at("task"), "019");
    EXPECT_EQ(a.at("budget"), "5s");
    EXPECT_EQ(a.at("screen"), false);
    EXPECT_EQ(a.at("rollouts"), 3);
    EXPECT_EQ(a.at("seed"), 7);
    EXPECT_EQ(a.at("steps"), 8);
    EXPECT_EQ(a.at("proposer"), "builtin");
  }
  const auto again = kblaster(dir.path() / "store",
                              {"optimize", "--resume", std::to_string(id), "--rollouts", "5"});
  EXPECT_EQ(again.exit_code, exit_code::blocked) << again.output;
  {
    store::store st(dir.path() / "store");
    const auto run = st.find_run(id);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->args.at("rollouts"), 3);
    // An older record: only the task.
    id = st.begin_run("optimize", nlohmann::json{{"task", "019"}});
  }
  const auto out = dir.path() / "old.json";
  const auto old = kblaster(dir.path() / "store",
                            {"optimize", "--resume", std::to_string(id), "--json", out.string()});
  EXPECT_EQ(old.exit_code, exit_code::blocked) << old.output;
  const auto j = nlohmann::json::parse(read_file(out));
  ASSERT_EQ(j.at("tasks").size(), 1u);
  EXPECT_EQ(j["tasks"][0].at("task"), "019");
  EXPECT_EQ(j["tasks"][0].at("reason"), "blocked.preflight.device");
}

// A bench.json scored again without a device: the same ratios, each row marked resolved or
// below the timing resolution, the resolved geometric means and the goals; a file without rows
// is an input error, and nothing is stored.
TEST(bench_cli, rescore_reads_a_bench_json_back_without_a_device) {
  temp_dir dir("kb-bench-rescore");
  const auto row = [](const std::string& shape, double ours, double fastest, double eager) {
    return json{{"task", "101"},
                {"name", "rmsnorm_f32"},
                {"shape", shape},
                {"verdict", "improved"},
                {"statistics",
                 {{"median_candidate_s", ours},
                  {"median_candidate_ci_s", {ours * 0.99, ours * 1.01}},
                  {"resolution_s", 2e-6}}},
                {"pytorch",
                 {{"compile",
                   {{"correct", true},
                    {"median_s", fastest},
                    {"ci_s", {fastest, fastest}},
                    {"compile", {{"status", "compiled"}, {"graphs", 1}, {"graph_breaks", 0}}}}},
                  {"eager", {{"correct", true}, {"median_s", eager}}}}}};
  };
  json bench{{"rows", json::array({row("official", 40e-6, 36e-6, 48e-6),
                                   row("t1-h4096", 1e-6, 4e-6, 8e-6)})}};
  write_file_atomic(dir.path() / "bench.json", bench.dump());
  const auto r =
      kblaster(dir.path() / "store", {"bench", "--rescore", (dir.path() / "bench.json").string(),
                                      "--goal-vs-fastest", "1.3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| 101 rmsnorm_f32 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0.900x"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("below resolution (< 0.0200 ms)"), std::string::npos) << r.output;
  const auto start = r.output.find("```json\n");
  ASSERT_NE(start, std::string::npos) << r.output;
  const auto end = r.output.find("```", start + 8);
  const auto summary = json::parse(r.output.substr(start + 8, end - start - 8));
  EXPECT_EQ(summary.at("tasks_below_resolution"), 1);
  EXPECT_NEAR(summary.at("geomean_vs_fastest_pytorch").get<double>(), std::sqrt(0.9 * 4), 1e-9);
  EXPECT_NEAR(summary.at("geomean_vs_fastest_pytorch_resolved").get<double>(), 0.9, 1e-9);
  EXPECT_EQ(summary.at("goal_vs_fastest_met"), false);
  EXPECT_EQ(summary.at("goal_vs_fastest_met_resolved"), false);
  EXPECT_FALSE(fs::exists(dir.path() / "store")) << "a rescore stores nothing";
  write_file_atomic(dir.path() / "bad.json", "{\"runs\": []}");
  EXPECT_EQ(
      kblaster(dir.path() / "store", {"bench", "--rescore", (dir.path() / "bad.json").string()})
          .exit_code,
      exit_code::input);
}

// A calibration's JSON summarized again, without a device: the same counts, the rate's interval
// and the uniformity of the p values; a file that is no calibration is an input error.
TEST(calibration_cli, summarize_reads_a_calibration_back_without_a_device) {
  temp_dir dir("kb-calibration-summarize");
  json evals = json::array();
  for (int i = 0; i < 30; ++i) {
    evals.push_back({{"verdict", "same"},
                     {"p", (i + 0.5) / 30},
                     {"mann_whitney_p", 0.5},
                     {"ratio", 1.0},
                     {"ratio_ci", {0.999, 1.001}}});
  }
  json doc{{"device", {{"uuid", "GPU-x"}}},
           {"tasks", json::array({{{"task", "019"}, {"evaluations", evals}}})}};
  write_file_atomic(dir.path() / "cal.json", doc.dump());
  const auto out = dir.path() / "again.json";
  const auto r =
      kblaster(dir.path() / "store", {"calibrate", "--summarize",
                                      (dir.path() / "cal.json").string(), "--json", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find("A/A over 30 comparisons (0 failed): false-positive rate 3.3% [0.1%, 17.2%]"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Kolmogorov-Smirnov D = 0.017"), std::string::npos) << r.output;
  const auto again = json::parse(read_file(out));
  EXPECT_EQ(again.at("summary").at("significant"), 1);
  EXPECT_EQ(again.at("device").at("uuid"), "GPU-x");
  EXPECT_FALSE(fs::exists(dir.path() / "store")) << "a summary stores nothing";
  write_file_atomic(dir.path() / "bad.json", "{\"runs\": []}");
  EXPECT_EQ(kblaster(dir.path() / "store",
                     {"calibrate", "--summarize", (dir.path() / "bad.json").string()})
                .exit_code,
            exit_code::input);
  // Two calibrations pooled: 30 + 10 comparisons, each file's device listed; one bad file among
  // them is an input error.
  json second = doc;
  second["device"]["uuid"] = "GPU-y";
  json few = json::array();
  for (int i = 0; i < 10; ++i) {
    few.push_back({{"verdict", "same"},
                   {"p", i < 2 ? 0.01 : (i + 0.5) / 10},
                   {"mann_whitney_p", 0.5},
                   {"ratio", 1.0},
                   {"ratio_ci", {0.999, 1.001}}});
  }
  second["tasks"] = json::array({{{"task", "088"}, {"evaluations", few}}});
  write_file_atomic(dir.path() / "cal2.json", second.dump());
  const auto pooled_out = dir.path() / "pooled.json";
  const auto pooled = kblaster(
      dir.path() / "store", {"calibrate", "--summarize", (dir.path() / "cal.json").string(),
                             (dir.path() / "cal2.json").string(), "--json", pooled_out.string()});
  ASSERT_EQ(pooled.exit_code, 0) << pooled.output;
  EXPECT_NE(pooled.output.find("A/A over 40 comparisons (0 failed): false-positive rate 7.5%"),
            std::string::npos)
      << pooled.output;
  EXPECT_NE(pooled.output.find("GPU-y"), std::string::npos) << pooled.output;
  const auto p = json::parse(read_file(pooled_out));
  EXPECT_EQ(p.at("summary").at("comparisons"), 40);
  EXPECT_EQ(p.at("tasks").size(), 2u);
  EXPECT_EQ(p.at("pooled_from").size(), 2u);
  EXPECT_EQ(kblaster(dir.path() / "store",
                     {"calibrate", "--summarize", (dir.path() / "cal.json").string(),
                      (dir.path() / "bad.json").string()})
                .exit_code,
            exit_code::input);
}

} // namespace
} // namespace kb::eval
