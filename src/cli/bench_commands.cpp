// `kblaster bench`: each portfolio candidate against its task's baseline (full evaluation, in one
// run), PyTorch's methods imported beside them, written as markdown, JSON, CSV and SVG.
#include "cli/commands.hpp"
#include "cli/executor_options.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "report/report.hpp"
#include "stats/stats.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

namespace kb::cli {

namespace {

using nlohmann::json;

std::string ms(double s) {
  return fmt::format("{:.4f}", s * 1e3);
}

// The PyTorch figures of one task and shape: {method: {median_s, correct, ...}}.
json pytorch_for(const json& pytorch, const std::string& task, const std::string& shape) {
  if (pytorch.is_null() || !pytorch.contains("tasks") || !pytorch["tasks"].contains(task)) {
    return json::object();
  }
  const json& t = pytorch["tasks"][task];
  return t.contains(shape) ? t[shape] : json::object();
}

std::string interval_ms(const report::interval& i) {
  return fmt::format("[{}, {}]", ms(i.low), ms(i.high));
}

// A ratio to PyTorch with its interval, or "-".
std::string speedup_cell(const std::optional<report::ratio>& r) {
  return r ? fmt::format("{:.3f}x [{:.3f}, {:.3f}]", r->value, r->range.low, r->range.high) : "-";
}

// The overview's last column: whether our median is resolved (report::resolved).
std::string resolved_cell(const report::task_comparison& cmp) {
  if (!cmp.correct) {
    return "-";
  }
  return report::resolved(cmp) ? "resolved"
                               : fmt::format("below resolution (< {} ms)",
                                             ms(report::resolved_multiple * cmp.resolution_s));
}

// The speedup over the fastest method that a kernel at the task's floor would have
// (report::speedup_at_floor).
std::string at_floor_cell(const report::task_comparison& cmp) {
  const auto f = report::speedup_at_floor(cmp);
  return f ? fmt::format("{:.3f}x", *f) : "-";
}

void add_goals(json& vs, const report::suite_comparison& cmp, double goal_fastest,
               double goal_eager) {
  const auto fastest = report::check_goal_vs_fastest(cmp, goal_fastest);
  const auto eager = report::check_goal_vs_eager(cmp, goal_eager);
  vs["goal_geomean_vs_fastest_pytorch"] = goal_fastest;
  vs["goal_geomean_vs_pytorch_eager"] = goal_eager;
  vs["goal_vs_fastest_met"] = fastest.met;
  vs["goal_vs_eager_met"] = eager.met;
  vs["goal_vs_fastest_met_resolved"] = fastest.met_resolved;
  vs["goal_vs_eager_met_resolved"] = eager.met_resolved;
}

// A bench.json's rows as comparisons: each row's verdict, our median and interval, the timing
// resolution it was judged with and its PyTorch methods. Labels as the report's.
std::vector<report::task_comparison> comparisons_of(const json& bench) {
  std::vector<report::task_comparison> out;
  if (!bench.is_object() || !bench.contains("rows") || !bench["rows"].is_array()) {
    fail("bench.json: no \"rows\" array");
  }
  for (const auto& row : bench["rows"]) {
    const std::string id = row.value("task", std::string());
    const std::string shape = row.value("shape", std::string());
    const std::string label = shape == "official"
                                  ? fmt::format("{} {}", id, row.value("name", std::string()))
                                  : fmt::format("{} {}", id, shape);
    const std::string verdict = row.value("verdict", std::string());
    // The row's statistics are its evaluation's gate, in the gate's one mapping (none: not timed).
    const auto g = eval::gate_of(row.value("statistics", json::object()));
    const bool correct = g && g->median_candidate_s > 0 && verdict != "rejected" &&
                         verdict != "error" && verdict != "blocked";
    report::interval ci;
    if (correct) {
      ci = {g->median_candidate_low_s, g->median_candidate_high_s};
    }
    out.push_back(
        report::compare_task(label, correct, correct ? g->median_candidate_s : 0, ci,
                             g ? g->resolution_s : 0.0, row.value("floor_s", 0.0),
                             report::pytorch_methods_from_json(row.value("pytorch", json()))));
  }
  return out;
}

int rescore(const std::string& file, double goal_fastest, double goal_eager) {
  std::vector<report::task_comparison> tasks;
  try {
    tasks = comparisons_of(json::parse(read_file(file)));
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench: {}: {}\n", file, e.what());
    return exit_code::input;
  }
  report::table t({{"task", report::align::left},
                   {"ours ms", report::align::right},
                   {"fastest PyTorch", report::align::left},
                   {"its ms", report::align::right},
                   {"speedup vs fastest [interval]", report::align::right},
                   {"speedup vs eager", report::align::right},
                   {"at the floor", report::align::right},
                   {"timing", report::align::left}});
  for (const auto& c : tasks) {
    const auto vf = report::speedup_vs_fastest(c);
    const auto ve = report::speedup_vs_eager(c);
    t.add_row({c.task, c.correct ? ms(c.candidate_s) : "-", c.fastest_method.value_or("none"),
               c.fastest_method ? ms(c.fastest_s) : "-", speedup_cell(vf),
               ve ? fmt::format("{:.2f}x", *ve) : "-", at_floor_cell(c), resolved_cell(c)});
  }
  const auto cmp = report::compare_suite(tasks);
  json vs = report::to_json(cmp);
  add_goals(vs, cmp, goal_fastest, goal_eager);
  fmt::print("Rescored {} ({} rows)\n\n{}\n```json\n{}\n```\n", file, tasks.size(),
             report::to_markdown(t), vs.dump(2));
  return exit_code::ok;
}

// Every portfolio kernel at every shape asked for, in the suite's order. The evaluations are
// independent: they go to the executor at once, as many as it has slots (one per GPU with
// --gpus), each taking the next free slot; the report keeps this order whatever order they
// finish in. Each evaluation runs whole on one GPU, so no verdict depends on how many there
// are.
struct bench_item {
  const task::contract* c;
  const task::shape_case* s;
  fs::path file;
};

std::string label_of(const bench_item& it) {
  return it.s->name == "official" ? fmt::format("{} {}", it.c->id, it.c->name)
                                  : fmt::format("{} {}", it.c->id, it.s->name);
}

std::vector<bench_item> bench_items(const fs::path& root, const std::vector<task::contract>& tasks,
                                    const std::vector<std::string>& only, bool all_shapes) {
  std::vector<bench_item> items;
  for (const auto& c : tasks) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.id) == only.end()) {
      continue;
    }
    const auto files = task::portfolio_files(root, c);
    if (files.empty()) {
      fmt::print("{:<4} no portfolio kernel\n", c.id);
      continue;
    }
    items.push_back({&c, &c.official(), files.front()});
    if (all_shapes) {
      for (const auto* s : c.shapes_with_role("bench")) {
        items.push_back({&c, s, files.front()});
      }
    }
  }
  return items;
}

// Evaluates every item through the plan's executor, as many at once as it has slots, recording
// each result in the store as it comes; the results in the items' order.
std::vector<eval::result> evaluate_items(const global_options& globals, const executor_plan& plan,
                                         const fs::path& root, store::store& st, int64_t run,
                                         const std::vector<bench_item>& items,
                                         const eval::options& o) {
  std::mutex lock; // the store, the output and the first error
  const auto say = [&](const std::string& line) {
    if (!globals.quiet) {
      std::lock_guard g(lock);
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
  };
  const auto exec = make_executor(globals, plan, root, st, run, say);
  std::vector<eval::result> results(items.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  const auto work = [&] {
    try {
      for (size_t i = next++; i < items.size(); i = next++) {
        const auto& it = items[i];
        eval::options oi = o;
        oi.shape = it.s->name;
        // The inputs' seed is drawn here rather than inside the evaluation: it is part of the
        // queue's key, so a bench through workers measures afresh, as one in this process
        // does, instead of reusing an earlier run's result from a shared store.
        oi.seed_base = eval::evaluation_seed(0);
        const eval::candidate_input cand{read_file(it.file), it.file.filename().string(),
                                         "portfolio"};
        const eval::candidate_input base{read_file(it.c->baseline), "baseline.cu", "baseline"};
        auto r = exec->evaluate(*it.c, cand, base, oi);
        std::lock_guard g(lock);
        eval::record(st, run, *it.c, cand, base, r);
        fmt::print("{:<28} {:<12} {}\n", label_of(it), eval::to_string(r.final), r.message);
        std::fflush(stdout);
        results[i] = std::move(r);
      }
    } catch (...) {
      std::lock_guard g(lock);
      if (!failure) {
        failure = std::current_exception();
      }
      next = items.size(); // no more evaluations start
    }
  };
  const size_t width = std::min(items.size(), static_cast<size_t>(std::max(1, exec->slots())));
  if (width <= 1) {
    work();
  } else {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < width; ++t) {
      threads.emplace_back(work);
    }
    for (auto& t : threads) {
      t.join();
    }
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  return results;
}

// A row's facts for bench.csv.
struct csv_line {
  std::string task;
  std::string shape;
  eval::verdict verdict = eval::verdict::error;
  double floor_s = 0;
  std::optional<eval::gate_summary> gate;
};

// The report as the results come in: the rows of bench.json, the tables, the figures and the
// markdown's per-task sections.
struct bench_report {
  std::vector<eval::verdict> verdicts;
  json rows = json::array();
  std::vector<csv_line> lines;                 // each row's
  std::optional<gpu::protocol::device> device; // the first evaluation's
  std::vector<stats::task_outcome> vs_baseline;
  std::vector<report::task_comparison> vs_pytorch;
  report::table overview{{{"task", report::align::left},
                          {"ours ms [95%]", report::align::right},
                          {"fastest PyTorch", report::align::left},
                          {"its ms [95%]", report::align::right},
                          {"speedup vs fastest [interval]", report::align::right},
                          {"speedup vs eager", report::align::right},
                          {"distance to target", report::align::right},
                          {"our floor fraction", report::align::right},
                          {"at the floor", report::align::right},
                          {"timing", report::align::left}}};
  report::table provider{{{"task", report::align::left},
                          {"method", report::align::left},
                          {"compile status", report::align::left},
                          {"graphs", report::align::right},
                          {"graph breaks", report::align::right},
                          {"queued ms", report::align::right},
                          {"unqueued ms", report::align::right},
                          {"check", report::align::left}}};
  report::bar_chart bars;
  report::roofline_chart roof;
  std::string md;
};

bench_report start_report(const std::string& suite, const json& pytorch,
                          const task::ceilings& ceil) {
  bench_report rep;
  report::bar_chart& bars = rep.bars;
  report::roofline_chart& roof = rep.roof;
  bars.title = fmt::format("{}: portfolio speedup over {}", suite,
                           pytorch.is_null() ? "the baseline" : "the fastest PyTorch method");
  roof.title = fmt::format("{}: kernels against the device's ceilings{}", suite,
                           ceil.measured ? "" : " (conservative default, not measured)");
  roof.bandwidth.push_back(
      {fmt::format("copy bandwidth {:.2f} TB/s", ceil.bandwidth / 1e12), ceil.bandwidth});
  roof.compute.push_back(
      {fmt::format("fp32 FMA {:.1f} TFLOP/s", ceil.fp32_flops / 1e12), ceil.fp32_flops});
  rep.md = fmt::format("# Benchmark: suite {}\n\n", suite);
  return rep;
}

// The PyTorch provider's table: one row per method of the task.
void add_provider_rows(report::table& provider, const std::string& label,
                       const std::vector<report::pytorch_method>& pm) {
  for (const auto& m : pm) {
    provider.add_row(
        {label, m.name, std::string(report::to_string(m.compile)),
         m.compile == report::compile_status::eager ? "-" : std::to_string(m.graphs),
         m.compile == report::compile_status::eager ? "-" : std::to_string(m.graph_breaks),
         m.median_s ? ms(*m.median_s) : "-", m.unqueued_median_s ? ms(*m.unqueued_median_s) : "-",
         m.correct ? (m.stable ? "correct" : "unstable") : "incorrect: " + m.reason});
  }
}

// A correct kernel's speedups in its row, the bar and roofline figures and the suite's outcome
// against the baseline.
void add_comparison(const task::contract& c, const task::shape_case* s, const eval::result& r,
                    const report::task_comparison& cmp, const std::string& label, json& row,
                    std::vector<stats::task_outcome>& vs_baseline, report::bar_chart& bars,
                    report::roofline_chart& roof) {
  const std::optional<eval::gate_summary>& g = r.gate;
  if (cmp.correct) {
    const double cand_t = g->median_candidate_s;
    const double base_t = g->median_baseline_s;
    row["resolved"] = report::resolved(cmp);
    vs_baseline.push_back({label, true, r.final == eval::verdict::improved, base_t / cand_t});
    const auto vf = report::speedup_vs_fastest(cmp);
    if (vf) {
      row["speedup_vs_fastest_pytorch"] = {{"method", *cmp.fastest_method},
                                           {"speedup", vf->value},
                                           {"interval", {vf->range.low, vf->range.high}},
                                           {"target_s", cmp.fastest_s},
                                           {"distance_s", cand_t - cmp.fastest_s}};
    }
    if (const auto ve = report::speedup_vs_eager(cmp)) {
      row["speedup_vs_pytorch_eager"] = *ve;
    }
    const double speed = vf ? vf->value : base_t / cand_t;
    bars.bars.push_back({label, speed, std::nullopt});
    bars.bars.back().range = vf ? vf->range : report::interval{g->speedup_low, g->speedup_high};
    const double flops = task::roofline_flops(c, *s);
    const double bytes = task::roofline_bytes(c, *s);
    if (flops > 0 && bytes > 0) {
      roof.points.push_back({label + " portfolio", flops / bytes, flops / cand_t});
      roof.points.push_back({label + " baseline", flops / bytes, flops / base_t});
    }
  } else {
    vs_baseline.push_back({label, false, false, 0});
  }
}

// The overview's row of one task: ours against the fastest PyTorch method.
void add_overview_row(report::table& overview, const std::string& label,
                      const report::task_comparison& cmp, const eval::result& r, double floor) {
  const auto vf = report::speedup_vs_fastest(cmp);
  const auto ve = report::speedup_vs_eager(cmp);
  overview.add_row(
      {label,
       cmp.correct ? fmt::format("{} {}", ms(cmp.candidate_s), interval_ms(cmp.candidate_ci))
                   : eval::to_string(r.final) + ": " + r.reason,
       cmp.fastest_method.value_or("none"),
       cmp.fastest_method ? fmt::format("{} {}", ms(cmp.fastest_s), interval_ms(cmp.fastest_ci))
                          : "-",
       speedup_cell(vf), ve ? fmt::format("{:.2f}x", *ve) : "-",
       vf ? fmt::format("{:+.4f} ms ({:+.1f}%){}", 1e3 * (cmp.candidate_s - cmp.fastest_s),
                        100 * (cmp.candidate_s / cmp.fastest_s - 1), vf->value >= 1.0 ? " met" : "")
          : "-",
       cmp.correct ? fmt::format("{:.1f}%", 100 * floor / cmp.candidate_s) : "-",
       at_floor_cell(cmp), resolved_cell(cmp)});
}

// Per task: every method with its median and interval, speedups and fraction of the floor.
std::string task_section(const task::contract& c, const task::shape_case* s,
                         const std::optional<fs::path>& file, const eval::result& r,
                         const json& methods, double floor) {
  const std::optional<eval::gate_summary>& g = r.gate;
  report::table t({{"method", report::align::left},
                   {"median ms", report::align::right},
                   {"95% interval ms", report::align::right},
                   {"speedup vs baseline", report::align::right},
                   {"verdict", report::align::left},
                   {"floor fraction", report::align::right}});
  if (g) {
    t.add_row({"baseline (plain kernel)", ms(g->median_baseline_s),
               fmt::format("[{}, {}]", ms(g->median_baseline_low_s), ms(g->median_baseline_high_s)),
               "1.000x", "-", fmt::format("{:.1f}%", 100 * floor / g->median_baseline_s)});
  }
  for (const auto& [name, m] : methods.items()) {
    const bool ok = m.value("correct", false);
    t.add_row(
        {"PyTorch " + name, m.contains("median_s") ? ms(m["median_s"]) : "-",
         m.contains("ci_s") ? fmt::format("[{}, {}]", ms(m["ci_s"][0]), ms(m["ci_s"][1])) : "-",
         g && m.contains("median_s")
             ? fmt::format("{:.3f}x", g->median_baseline_s / m["median_s"].get<double>())
             : "-",
         (ok ? (m.value("stable", true) ? "correct" : "unstable")
             : "incorrect: " + m.value("reason", std::string("?"))) +
             (m.contains("compile") && m["compile"].is_object()
                  ? fmt::format(" ({}, {} graphs, {} breaks)",
                                m["compile"].value("status", std::string("?")),
                                m["compile"].value("graphs", 0),
                                m["compile"].value("graph_breaks", 0))
                  : std::string()),
         m.contains("median_s") ? fmt::format("{:.1f}%", 100 * floor / m["median_s"].get<double>())
                                : "-"});
  }
  if (g) {
    t.add_row(
        {"portfolio " + fs::path(*file).filename().string(), ms(g->median_candidate_s),
         fmt::format("[{}, {}]", ms(g->median_candidate_low_s), ms(g->median_candidate_high_s)),
         fmt::format("{:.3f}x [{:.3f}, {:.3f}]", g->speedup, g->speedup_low, g->speedup_high),
         eval::to_string(r.final), fmt::format("{:.1f}%", 100 * g->floor_fraction)});
  } else {
    t.add_row({"portfolio " + fs::path(*file).filename().string(), "-", "-", "-",
               eval::to_string(r.final) + ": " + r.reason, "-"});
  }
  return fmt::format("## {} ({}) at {}\n\nFloor {} ms ({} bytes, {} FLOP). {}\n\n{}\n", c.id,
                     c.title, s->name, ms(floor), task::roofline_bytes(c, *s),
                     task::roofline_flops(c, *s), r.message, report::to_markdown(t));
}

// One evaluation's row, its comparison with PyTorch, its table rows and its section.
void add_result(bench_report& rep, const bench_item& item, const eval::result& r,
                const json& pytorch, const eval::options& o, const task::ceilings& ceil,
                const fs::path& root) {
  const task::contract& c = *item.c;
  const task::shape_case* s = item.s;
  const std::optional<fs::path> file = item.file;
  rep.verdicts.push_back(r.final);
  const std::optional<eval::gate_summary>& g = r.gate;
  const bool correct = r.final != eval::verdict::rejected && r.final != eval::verdict::error &&
                       r.final != eval::verdict::blocked;
  const double floor = task::floor_seconds(c, *s, ceil);
  json row{{"task", c.id},
           {"name", c.name},
           {"shape", s->name},
           {"dims", s->dims},
           {"file", fs::relative(*file, root).string()},
           {"verdict", eval::to_string(r.final)},
           {"reason", r.reason},
           {"message", r.message},
           {"floor_s", floor},
           {"statistics", g ? json(*g) : json::object()},
           {"timing", r.timing},
           {"device", r.context.device ? json(*r.context.device) : json::object()}};
  const json methods = pytorch_for(pytorch, c.id, s->name);
  row["pytorch"] = methods;
  const auto pm = report::pytorch_methods_from_json(methods);
  const std::string label = label_of(item);
  const double resolution = g ? g->resolution_s : o.resolution_s;
  const report::task_comparison cmp = report::compare_task(
      label, correct && g.has_value(), g ? g->median_candidate_s : 0,
      g ? report::interval{g->median_candidate_low_s, g->median_candidate_high_s}
        : report::interval{},
      resolution, floor, pm);
  add_provider_rows(rep.provider, label, pm);
  add_comparison(c, s, r, cmp, label, row, rep.vs_baseline, rep.bars, rep.roof);
  add_overview_row(rep.overview, label, cmp, r, floor);
  rep.vs_pytorch.push_back(cmp);
  rep.md += task_section(c, s, file, r, methods, floor);
  rep.rows.push_back(row);
  rep.lines.push_back({c.id, s->name, r.final, floor, g});
  if (!rep.device && r.context.device) {
    rep.device = r.context.device;
  }
}

// The suite's figures against the baseline and, with PyTorch figures, against PyTorch.
json summary_of(const bench_report& rep, const json& pytorch, double goal_fastest,
                double goal_eager) {
  const auto& vs_baseline = rep.vs_baseline;
  const auto& vs_pytorch = rep.vs_pytorch;
  const auto fig = stats::summarize_suite(vs_baseline);
  json summary{{"tasks", fig.tasks},
               {"correct", fig.correct},
               {"improved", fig.improved},
               {"strict_geomean_vs_baseline", fig.strict_geomean},
               {"attempted_geomean_vs_baseline",
                fig.attempted_geomean ? json(*fig.attempted_geomean) : json(nullptr)},
               {"fast_1_0_vs_baseline", fig.fast_1_0},
               {"fast_1_5_vs_baseline", fig.fast_1_5}};
  if (!pytorch.is_null()) {
    const auto cmp = report::compare_suite(vs_pytorch);
    summary["vs_pytorch"] = report::to_json(cmp);
    add_goals(summary["vs_pytorch"], cmp, goal_fastest, goal_eager);
  }
  return summary;
}

// The report's opening paragraph: how it was measured, on which device, under which protocol.
std::string report_head(const std::string& suite, int64_t run,
                        const std::optional<gpu::protocol::device>& dev, const eval::options& o,
                        const task::ceilings& ceil, const json& pytorch,
                        const std::string& pytorch_file) {
  std::string head =
      fmt::format("Measured by `kblaster bench --suite {}` (store run {}).", suite, run);
  if (dev) {
    head += fmt::format(" Device {} (driver {}, CUDA runtime {}). Protocol: cold L2, events on "
                        "the given stream, launches queued behind a "
                        "blocking kernel, baseline and candidate interleaved in {} sessions; "
                        "verdicts from a test on blocks of rounds and on sessions and a "
                        "10,000-resample hierarchical bootstrap of the ratio of medians "
                        "(delta {:.2f}%: {}). Ceilings: {}.",
                        dev->name, dev->driver_version, dev->cuda_runtime, o.sessions,
                        100 * o.delta, o.delta_source, ceil.source);
  }
  if (!pytorch.is_null()) {
    head += fmt::format(
        " PyTorch figures from {} ({}), measured by scripts/pytorch_baselines.py with the "
        "same cold-L2 event protocol, launches queued behind a blocking kernel.",
        pytorch_file, pytorch.value("torch", std::string("?")));
  }
  return head;
}

// The sections against the fastest PyTorch method and on PyTorch's methods (none without
// PyTorch figures).
std::string versus_sections(const bench_report& rep, const json& pytorch, const eval::options& o) {
  const auto& overview = rep.overview;
  const auto& provider = rep.provider;
  std::string versus;
  if (!pytorch.is_null()) {
    versus = fmt::format(
        "## Against the fastest PyTorch method\n\nPer task, the fastest PyTorch method that is "
        "correct and really compiled (a compiled method with no graph or a graph break is "
        "`not_compiled` and does not count; an `unstable` one, whose samples scatter, counts). "
        "The speedup's interval combines the two medians' "
        "95% intervals; the target is the fastest method's median, the distance our median "
        "minus it. `at the floor` is the speedup a kernel running at the task's floor would "
        "have (fastest / floor): what is left to win there; the summary's `_at_floor` "
        "geometric means are the most the suite's could reach. fast_p counts every task (an "
        "incorrect kernel or a task without PyTorch figures is not fast). Timing: a sample is "
        "the window less the scheme's calibrated "
        "overhead, so a median is known to about the scheme's resolution ({:g} us) in absolute "
        "terms; a median under {:g} times it is `below resolution`: its ratio is shown but "
        "left out of the `_resolved` geometric means, and the goals over every task are not "
        "met while any task is below it (the summary's `goal_*_met_resolved` judge the "
        "resolved tasks alone).\n\n{}\n## PyTorch provider: methods, graphs and launch "
        "overhead\n\nQueued: launches behind a blocking kernel, as for our kernels; "
        "unqueued: one call from Python on an idle GPU, host launch overhead included.\n\n{}\n",
        1e6 * o.resolution_s, report::resolved_multiple, report::to_markdown(overview),
        report::to_markdown(provider));
  }
  return versus;
}

// bench.csv: one line per row, its statistics as recorded.
report::table csv_of(const std::vector<csv_line>& lines) {
  report::table csv({{"task"},
                     {"shape"},
                     {"verdict"},
                     {"baseline_s"},
                     {"candidate_s"},
                     {"speedup"},
                     {"speedup_low"},
                     {"speedup_high"},
                     {"floor_s"},
                     {"floor_fraction"}});
  for (const auto& line : lines) {
    const auto& g = line.gate;
    const auto num = [&](double v, const char* format) {
      return g ? fmt::format(fmt::runtime(format), v) : std::string();
    };
    csv.add_row({line.task, line.shape, eval::to_string(line.verdict),
                 num(g ? g->median_baseline_s : 0, "{:.9g}"),
                 num(g ? g->median_candidate_s : 0, "{:.9g}"), num(g ? g->speedup : 0, "{:.9g}"),
                 num(g ? g->speedup_low : 0, "{:.6g}"), num(g ? g->speedup_high : 0, "{:.6g}"),
                 fmt::format("{:.9g}", line.floor_s), num(g ? g->floor_fraction : 0, "{:.9g}")});
  }
  return csv;
}

// report.md, bench.json, bench.csv and the two figures, in the output folder.
void write_outputs(const std::string& out_dir, std::string md, const std::string& head,
                   const std::string& versus, const json& summary, const bench_report& rep,
                   int64_t run, const json& pytorch) {
  const json& rows = rep.rows;
  const report::bar_chart& bars = rep.bars;
  const report::roofline_chart& roof = rep.roof;
  md = md.substr(0, md.find('\n') + 1) + "\n" + head + "\n\n## Summary\n\n" +
       fmt::format("```json\n{}\n```\n\n", summary.dump(2)) + versus +
       "![speedup](speedup.svg)\n![roofline](roofline.svg)\n\n" + md.substr(md.find('\n') + 2);
  fs::create_directories(out_dir);
  write_file_atomic(fs::path(out_dir) / "report.md", md);
  write_file_atomic(
      fs::path(out_dir) / "bench.json",
      json{{"summary", summary}, {"rows", rows}, {"run", run}, {"pytorch", pytorch}}.dump(1) +
          "\n");
  write_file_atomic(fs::path(out_dir) / "bench.csv", report::to_csv(csv_of(rep.lines)));
  write_file_atomic(fs::path(out_dir) / "speedup.svg", report::to_svg(bars));
  write_file_atomic(fs::path(out_dir) / "roofline.svg", report::to_svg(roof));
}

} // namespace

void add_bench_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::string suite = "core10";
    std::string out_dir = "out/bench";
    std::string pytorch_file;
    std::vector<std::string> only;
    bool all_shapes = false;
    bool no_sandbox = false;
    double goal_fastest = 1.15;
    double goal_eager = 2.5;
    bool no_sanitize = false;
    std::optional<std::filesystem::path> config;
    std::string rescore_file;
    executor_options exec_opts;
  };
  const auto opts = std::make_shared<options>();

  auto* bench = app.add_subcommand(
      "bench", "portfolio candidates against baselines and PyTorch, as a report");
  bench->add_option("--suite", opts->suite, "suite to run");
  bench->add_option("--out", opts->out_dir,
                    "folder for report.md, bench.json, bench.csv and the SVG figures");
  bench->add_option("--pytorch", opts->pytorch_file,
                    "PyTorch timings written by scripts/pytorch_baselines.py");
  bench->add_option("--task", opts->only, "only these tasks");
  bench->add_flag("--all-shapes", opts->all_shapes,
                  "also the tasks' bench shapes (the RMSNorm deep case)");
  bench->add_flag("--no-sandbox", opts->no_sandbox, "run candidates without the sandbox (recorded)");
  bench->add_option("--goal-vs-fastest", opts->goal_fastest,
                    "geometric-mean speedup over the fastest PyTorch method to report against");
  bench->add_option("--goal-vs-eager", opts->goal_eager,
                    "geometric-mean speedup over PyTorch eager to report against");
  bench->add_flag("--no-sanitize", opts->no_sanitize,
                  "do not run the sanitizers on each kernel before timing it (recorded)");
  bench->add_option("--rescore", opts->rescore_file,
                    "no GPU: recompute the comparison with PyTorch from an earlier bench.json "
                    "(its medians, intervals, timing resolution and PyTorch figures) under "
                    "this build's rules, and print it");
  add_executor_options(*bench, opts->exec_opts);
  add_config_option(*bench, opts->config);
  bench->callback([&globals, result, opts] {
    if (!opts->rescore_file.empty()) {
      *result = rescore(opts->rescore_file, opts->goal_fastest, opts->goal_eager);
      return;
    }
    const auto root = find_project_root(globals.root);
    // Where evaluations run, with the config file's [slurm] settings: checked before any work.
    const auto plan = plan_executor(opts->exec_opts, opts->config);
    if (plan.kind != "local" && !globals.quiet) {
      fmt::print("executor  {}\n", plan.describe());
    }
    const auto tasks = task::load_suite(root, opts->suite);
    json pytorch;
    if (!opts->pytorch_file.empty()) {
      pytorch = json::parse(read_file(opts->pytorch_file));
    }
    eval::options o;
    o.cache_dir = default_cache_dir();
    o.no_sandbox = opts->no_sandbox;
    // Each kernel passes the four sanitizers at the check shapes before it is timed and may be
    // reported as improved; a finding rejects it (sanitize.<tool>).
    o.sanitize = !opts->no_sanitize;
    auto st = open_store(globals);
    if (const auto report = run_preflight(globals, opts->no_sandbox, std::nullopt, st);
        !report->usable()) {
      fmt::print("bench: GPU stages BLOCKED: {}\n", report->reason);
      *result = exit_code::blocked;
      return;
    }
    apply_device_calibration(o, st, globals);
    const int64_t run = st.begin_run("bench", {{"suite", opts->suite},
                                               {"pytorch", opts->pytorch_file},
                                               {"all_shapes", opts->all_shapes},
                                               {"no_sanitize", opts->no_sanitize},
                                               {"executor", plan.kind},
                                               {"gpus", plan.gpus},
                                               {"delta", o.delta},
                                               {"delta_source", o.delta_source},
                                               {"ceilings", task::to_json(o.ceilings)}});
    const task::ceilings& ceil = o.ceilings;
    std::vector<bench_item> items = bench_items(root, tasks, opts->only, opts->all_shapes);
    const std::vector<eval::result> results =
        evaluate_items(globals, plan, root, st, run, items, o);
    bench_report rep = start_report(opts->suite, pytorch, ceil);
    for (size_t i = 0; i < items.size(); ++i) {
      add_result(rep, items[i], results[i], pytorch, o, ceil, root);
    }
    const json summary = summary_of(rep, pytorch, opts->goal_fastest, opts->goal_eager);
    st.finish_run(run, store::run_status::finished, "finished", "");
    const std::string head = report_head(opts->suite, run, rep.device, o, ceil, pytorch, opts->pytorch_file);
    const std::string versus = versus_sections(rep, pytorch, o);
    write_outputs(opts->out_dir, rep.md, head, versus, summary, rep, run, pytorch);
    fmt::print("{}\nwrote {}/report.md, bench.json, bench.csv, speedup.svg, roofline.svg\n",
               summary.dump(2), opts->out_dir);
    *result = exit_for_bench(rep.verdicts);
  });
}

} // namespace kb::cli