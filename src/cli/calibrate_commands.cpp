// `kblaster calibrate`: the device's limits (bandwidths, FMA and tensor-core rates) and the timing
// gate's behaviour under A/A (false-positive rate, spread, the delta it sets), both stored in the
// store under the device's UUID and used by eval, optimize and bench. Also the hidden
// `device-limits-probe`, the child that runs the measuring kernels.
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <memory>

#include <fmt/format.h>

namespace kb::cli {

namespace {

using nlohmann::json;

void print_limits(const store::device_limits& x) {
  const auto rate = [](const std::optional<double>& r) {
    return r ? fmt::format("{:.1f} TFLOP/s", *r / 1e12) : std::string("none");
  };
  fmt::print("device    {} {} (driver {}, toolkit {})\n", x.gpu_name, x.gpu_uuid, x.driver,
             x.toolkit);
  fmt::print("limits    copy {:.3f} TB/s (read + write), read {:.3f} TB/s, fp32 FMA {:.2f} "
             "TFLOP/s\n",
             x.copy_bandwidth / 1e12, x.read_bandwidth / 1e12, x.fp32_flops / 1e12);
  fmt::print("tensor    fp16 {}, bf16 {}, tf32 {} (mma.sync, fp32 accumulate)\n",
             rate(x.fp16_tensor_flops), rate(x.bf16_tensor_flops), rate(x.tf32_tensor_flops));
  // Each bandwidth is the best of several streaming kernels: each one's rate.
  for (const char* kind : {"copy_methods", "read_methods"}) {
    if (!x.detail.is_object() || !x.detail.contains(kind) || !x.detail[kind].is_array()) {
      continue;
    }
    for (const auto& m : x.detail[kind]) {
      fmt::print("  {:<5} {:.3f} TB/s  {}\n", std::string(kind).substr(0, 4),
                 m.value("bandwidth", 0.0) / 1e12, m.value("method", std::string()));
    }
  }
}

void print_summary(const eval::aa_summary& summary) {
  fmt::print("A/A over {} comparisons ({} failed): false-positive rate {:.1f}% [{:.1f}%, {:.1f}%] "
             "(p < 0.05; pooled Mann-Whitney would say {:.1f}%), verdict not `same` in {:.1f}%\n",
             summary.comparisons, summary.failed, 100 * summary.false_positive_rate,
             100 * summary.false_positive_low, 100 * summary.false_positive_high,
             100 * summary.pooled_false_positive_rate, 100 * summary.not_same_rate);
  fmt::print("p values  uniform under A/A as a calibrated test's are: Kolmogorov-Smirnov D = "
             "{:.3f}, p = {:.2g}{}\n",
             summary.p_uniformity_d, summary.p_uniformity_p,
             summary.p_uniformity_p < 0.05 ? " (NOT uniform: the gate's p is miscalibrated)" : "");
  fmt::print("spread    p95 |ratio - 1| {:.3f}%, median interval half-width {:.3f}%, reach "
             "{:.3f}%\n",
             100 * summary.ratio_p95, 100 * summary.half_width_median, 100 * summary.spread);
  if (summary.timing_overhead_median) {
    fmt::print("overhead  timing an empty kernel: {:.2f} us (median)\n",
               1e6 * *summary.timing_overhead_median);
  } else {
    fmt::print("overhead  not reported by this evaluation protocol\n");
  }
}

} // namespace

std::string_view no_gate_calibration_note() {
  return "default 1% (this device has no A/A calibration: run `kblaster calibrate`)";
}

void apply_device_calibration(eval::options& o, store::store& st, const global_options& globals) {
  const auto dev = eval::probe_device();
  const auto say = [&](const std::string& line) {
    if (!globals.quiet) {
      fmt::print("{}\n", line);
    }
  };
  if (!dev.available) {
    o.ceilings = task::ceilings::conservative_default();
    return;
  }
  const auto resolved = eval::resolve_ceilings(st, dev, true, say);
  o.ceilings = resolved.ceilings;
  say("ceilings  " + resolved.note);
  const std::string uuid = dev.info.value("uuid", "");
  if (const auto cal = st.find_gate_calibration(uuid)) {
    o.delta = cal->delta;
    o.delta_source = fmt::format("A/A calibration of {} ({}; {} comparisons, false-positive rate "
                                 "{:.1f}%, spread {:.3f}%)",
                                 uuid, cal->created, cal->comparisons,
                                 100 * cal->false_positive_rate, 100 * cal->spread);
  } else {
    o.delta = 0.01;
    o.delta_source = std::string(no_gate_calibration_note());
  }
  say(fmt::format("gate      delta {:.2f}% from {}", 100 * o.delta, o.delta_source));
}

void add_calibrate_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::string probe_out;
    std::vector<std::string> cal_tasks;
    std::string cal_suite = "core10";
    int repeats = 3;
    std::string cal_json;
    bool device_only = false;
    std::vector<std::string> summarize_from;
    std::string placement = "drawn";
  };
  const auto opts = std::make_shared<options>();

  auto* probe = app.add_subcommand("device-limits-probe",
                                   "measure the device's limits (started by kblaster itself)");
  probe->group("");
  probe->add_option("--out", opts->probe_out, "write the measured limits here")->required();
  probe->callback([result, opts] {
    const auto limits = eval::measure_device_limits();
    write_file_atomic(opts->probe_out, eval::to_json(limits).dump(2) + "\n");
    *result = exit_code::ok;
  });

  auto* cal = app.add_subcommand(
      "calibrate", "measure this device's limits and the timing gate's A/A behaviour");
  cal->add_option("--task", opts->cal_tasks, "only these tasks (default: every task of the suite)");
  cal->add_option("--suite", opts->cal_suite, "suite whose baselines are compared with themselves");
  cal->add_option("--repeats", opts->repeats, "independent A/A evaluations per task")
      ->check(CLI::Range(1, 50));
  cal->add_option("--json", opts->cal_json, "also write the calibration here");
  cal->add_option("--placement", opts->placement,
                  "where each timing session's buffers land (as eval --placement)")
      ->check(CLI::IsMember({"fixed", "drawn"}));
  cal->add_flag("--device", opts->device_only,
                "measure the device's limits now (and store them); no A/A comparisons");
  cal->add_option("--summarize", opts->summarize_from,
                  "summarize the A/A comparisons of a calibration's JSON again, or of several "
                  "pooled (no GPU, nothing stored); --json writes the new summary with them")
      ->expected(1, -1);
  cal->callback([&globals, result, opts] {
    if (!opts->summarize_from.empty()) {
      // One file, or several calibrations pooled (their comparisons counted together, each
      // file's device named).
      json doc;
      json tasks = json::array();
      json sources = json::array();
      for (const auto& file : opts->summarize_from) {
        json one;
        try {
          one = json::parse(read_file(file));
        } catch (const std::exception& e) {
          fmt::print(stderr, "calibrate: {}: {}\n", file, e.what());
          *result = exit_code::input;
          return;
        }
        if (!one.is_object() || !one.contains("tasks") || !one["tasks"].is_array()) {
          fmt::print(stderr, "calibrate: {} holds no calibration (no `tasks` list)\n", file);
          *result = exit_code::input;
          return;
        }
        for (const auto& t : one["tasks"]) {
          tasks.push_back(t);
        }
        const json dev = one.value("device", json::object());
        sources.push_back({{"file", file},
                           {"device", dev.is_object() ? dev.value("name", "") : ""},
                           {"uuid", dev.is_object() ? dev.value("uuid", "") : ""},
                           {"tasks", one["tasks"].size()}});
        if (doc.is_null()) {
          doc = one;
        }
      }
      if (opts->summarize_from.size() > 1) {
        for (const auto& src : sources) {
          fmt::print("pooled    {} ({} {}, {} tasks)\n", src["file"].get<std::string>(),
                     src["device"].get<std::string>(), src["uuid"].get<std::string>(),
                     src["tasks"].get<size_t>());
        }
        doc["tasks"] = tasks;
        doc["pooled_from"] = sources;
      }
      const auto summary = eval::summarize_aa(doc["tasks"]);
      print_summary(summary);
      doc["summary"] = summary.to_json();
      if (!opts->cal_json.empty()) {
        write_file_atomic(opts->cal_json, doc.dump(2) + "\n");
      }
      *result = exit_code::ok;
      return;
    }
    const auto root = find_project_root(globals.root);
    const auto dev = eval::probe_device();
    if (!dev.available) {
      fmt::print("calibrate: blocked: {}\n", dev.reason);
      *result = exit_code::blocked;
      return;
    }
    auto st = open_store(globals);
    const std::string uuid = dev.info.at("uuid");
    json out{{"device", dev.info}};
    if (opts->device_only) {
      const int64_t run = st.begin_run("calibrate", {{"device", true}});
      std::string error;
      const auto limits = eval::run_limits_probe(&error);
      if (!limits) {
        st.finish_run(run, store::run_status::finished, "error", "calibrate.device_failed");
        fmt::print("calibrate: {}\n", error);
        *result = exit_code::tool;
        return;
      }
      st.record_device_limits(*limits);
      const auto stored = st.find_device_limits(limits->gpu_uuid, limits->driver, limits->toolkit);
      print_limits(*stored);
      const auto ceil = eval::ceilings_from(stored);
      fmt::print("ceilings  {}\n", ceil.source);
      out["limits"] = eval::to_json(*stored);
      out["ceilings"] = task::to_json(ceil);
      st.finish_run(run, store::run_status::finished, "finished", "");
      if (!opts->cal_json.empty()) {
        write_file_atomic(opts->cal_json, out.dump(2) + "\n");
      }
      *result = exit_code::ok;
      return;
    }
    std::vector<task::contract> tasks;
    if (opts->cal_tasks.empty()) {
      tasks = task::load_suite(root, opts->cal_suite);
    } else {
      for (const auto& id : opts->cal_tasks) {
        tasks.push_back(task::find_task(root, id));
      }
    }
    eval::options o;
    o.cache_dir = default_cache_dir();
    apply_device_calibration(o, st, globals);
    o.timing.placement = *gpu::protocol::placement_from_string(opts->placement);
    // A/A comparisons are judged with the default delta, not with an earlier calibration's.
    o.delta = 0.01;
    o.delta_source = std::string(no_gate_calibration_note());
    const int64_t run = st.begin_run("calibrate", {{"suite", opts->cal_suite},
                                                   {"tasks", opts->cal_tasks},
                                                   {"repeats", opts->repeats},
                                                   {"placement", opts->placement}});
    json per_task = json::array();
    for (const auto& c : tasks) {
      eval::progress_fn progress;
      if (!globals.quiet) {
        progress = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
      }
      const auto j = eval::calibrate(root, c, opts->repeats, o, progress);
      int significant = 0;
      std::string verdicts;
      for (const auto& e : j["evaluations"]) {
        significant += e.value("p", 1.0) < 0.05 ? 1 : 0;
        verdicts += (verdicts.empty() ? "" : " ") + e.value("verdict", std::string("?"));
      }
      fmt::print("calibrate {} {}: {} A/A evaluations, {} with p < 0.05; verdicts {}\n", c.id,
                 c.name, j["evaluations"].size(), significant, verdicts);
      per_task.push_back(j);
    }
    const auto summary = eval::summarize_aa(per_task);
    out["tasks"] = per_task;
    out["placement"] = opts->placement;
    out["summary"] = summary.to_json();
    out["ceilings"] = task::to_json(o.ceilings);
    store::gate_calibration g;
    g.gpu_uuid = uuid;
    g.run = run;
    g.comparisons = summary.comparisons;
    g.false_positive_rate = summary.false_positive_rate;
    g.not_same_rate = summary.not_same_rate;
    g.spread = summary.spread;
    g.delta = summary.delta;
    g.detail = out;
    st.record_gate_calibration(g);
    st.finish_run(run, store::run_status::finished, "finished", "");
    if (!opts->cal_json.empty()) {
      write_file_atomic(opts->cal_json, out.dump(2) + "\n");
    }
    print_summary(summary);
    fmt::print("gate      delta {:.3f}% for {} (stored; used by eval, optimize and bench)\n",
               100 * summary.delta, uuid);
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
