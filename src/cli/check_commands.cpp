#include "build/build.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "pytorch/pytorch.hpp"
#include "task/task.hpp"

#include <memory>

#include <fmt/format.h>

namespace kb::cli {

namespace {

using nlohmann::json;

} // namespace

void add_check_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::string suite;
    std::vector<std::string> task_ids;
    std::string json_out;
  };
  const auto opts = std::make_shared<options>();

  auto* check = app.add_subcommand(
      "check", "validate tasks, compile every candidate, run the CPU oracles, then the GPU stages");
  check->add_option("--suite", opts->suite, "only this suite (default: all)");
  check->add_option("--task", opts->task_ids, "only this task (repeatable)")->allow_extra_args(false);
  check->add_option("--json", opts->json_out, "write the report as JSON here");
  check->callback([&globals, result, opts] {
    const auto root = find_project_root(globals.root);
    std::vector<task::contract> all;
    if (!opts->task_ids.empty()) {
      for (const auto& id : opts->task_ids) {
        all.push_back(task::find_task(root, id));
      }
    } else {
      all = opts->suite.empty() ? task::load_all(root) : task::load_suite(root, opts->suite);
    }
    // A task whose reference is a PyTorch module is checked like a native one where PyTorch and
    // a shared libpython are installed (its oracle module embeds the interpreter); elsewhere it
    // is listed with the reason it is not checked.
    std::vector<task::contract> tasks;
    std::vector<std::pair<task::contract, pytorch::readiness>> pytorch_tasks;
    for (auto& c : all) {
      if (auto ready = pytorch::make_ready(root, c); ready.ok) {
        tasks.push_back(std::move(c));
      } else {
        pytorch_tasks.emplace_back(std::move(c), std::move(ready));
      }
    }
    bool math_error = false;
    eval::options o;
    o.cache_dir = default_cache_dir();
    json report{{"tasks", json::array()}};
    bool all_ok = true;
    fmt::print("{} task contracts valid\n", tasks.size());
    fmt::print("{:<6} {:<16} {:<9} {:<9} {:<7} {:<10} {}\n", "task", "name", "oracle", "baseline",
               "checks", "portfolio", "checker self-test (CPU)");
    for (const auto& c : tasks) {
      json t = eval::check_task_without_gpu(root, c, o);
      build::compiler comp(build::detect_toolchain(o.arch), o.cache_dir);
      int compiled = 0;
      int total = 0;
      for (const auto& p : task::portfolio_files(root, c)) {
        ++total;
        const auto b =
            comp.compile(build::candidate_request(root, c, read_file(p), p.filename().string()));
        t["portfolio"].push_back(
            {{"file", fs::relative(p, root).string()}, {"build", b.to_json()}});
        compiled += b.ok() ? 1 : 0;
        if (!b.ok()) {
          fmt::print(stderr, "{}: does not compile:\n{}\n", p.string(), b.log);
        }
      }
      if (t["oracle_build"].value("status", "") != "ok") {
        // The task's math does not compile: the author needs the compiler's words.
        math_error = true;
        fmt::print(stderr, "task {} ({}): the math {} does not compile:\n{}\n", c.id,
                   c.file.string(), c.math.string(), t["oracle_build"].value("log_tail", ""));
      } else if (t["baseline_build"].value("status", "") != "ok") {
        math_error = true;
        fmt::print(stderr, "task {} ({}): the baseline {} does not compile:\n{}\n", c.id,
                   c.file.string(), c.baseline.string(), t["baseline_build"].value("log_tail", ""));
      }
      const auto& st = t.value("checker_selftest", json::object());
      fmt::print("{:<6} {:<16} {:<9} {:<9} {:<7} {:<10} {}\n", c.id, c.name,
                 t["oracle_build"].value("status", ""), t["baseline_build"].value("status", ""),
                 t.value("checks", 0), fmt::format("{}/{}", compiled, total),
                 t.value("ok", false) ? fmt::format("rejects zeros {}x, copy {}x, constant {}x",
                                                    st.value("zeros_rejected_by", 0),
                                                    st.value("copy_of_input_rejected_by", 0),
                                                    st.value("constant_rejected_by", 0))
                                      : t.value("message", std::string("failed")));
      all_ok = all_ok && t.value("ok", false) && compiled == total;
      report["tasks"].push_back(t);
    }
    for (const auto& [c, ready] : pytorch_tasks) {
      const bool blocked = ready.reason.starts_with("blocked.");
      fmt::print("{:<6} {:<16} pytorch task: {} ({})\n", c.id, c.name, ready.reason, ready.message);
      report["tasks"].push_back({{"task", c.id},
                                 {"kind", "pytorch"},
                                 {"status", blocked ? "blocked" : "failed"},
                                 {"reason", ready.reason},
                                 {"message", ready.message},
                                 {"degenerate", c.degenerate}});
      math_error = math_error || !blocked;
    }
    if (math_error) {
      if (!opts->json_out.empty()) {
        write_file_atomic(opts->json_out, report.dump(2) + "\n");
      }
      *result = exit_code::input;
      return;
    }
    const auto dev = eval::probe_device();
    report["device"] =
        dev.available ? dev.info : json{{"available", false}, {"reason", dev.reason}};
    if (!dev.available) {
      fmt::print("\nGPU stages BLOCKED: {}.\nNot run: GPU oracles, candidate verification and "
                 "timing. Nothing above was measured on a GPU.\n",
                 dev.reason);
      report["gpu_stages"] = {{"status", "blocked"}, {"reason", dev.reason}};
      *result = all_ok ? exit_code::blocked : exit_code::tool;
    } else {
      fmt::print("\nGPU: {} — verifying each task's baseline against itself (A/A)\n",
                 dev.info.value("name", ""));
      json gpu = json::array();
      for (const auto& c : tasks) {
        const eval::candidate_input base{read_file(c.baseline), c.baseline.filename().string(),
                                         "baseline"};
        const auto r = eval::evaluate(root, c, base, base, o, {});
        const eval::gate_summary g = r.gate.value_or(eval::gate_summary{});
        const double floor = g.floor_fraction * g.median_candidate_s;
        fmt::print("{:<6} {:<16} {:<12} baseline {:>10.4f} ms  A/A speedup {:.3f}x  floor fraction "
                   "{:.1f}%\n",
                   c.id, c.name, eval::to_string(r.final), 1e3 * g.median_baseline_s, g.speedup,
                   g.median_baseline_s > 0 ? 100 * floor / g.median_baseline_s : 0.0);
        all_ok = all_ok && r.final == eval::verdict::same;
        gpu.push_back(eval::to_json(r));
      }
      report["gpu_stages"] = {{"status", "ran"}, {"evaluations", gpu}};
      *result = all_ok ? exit_code::ok : exit_code::tool;
    }
    if (!opts->json_out.empty()) {
      write_file_atomic(opts->json_out, report.dump(2) + "\n");
    }
  });
}

} // namespace kb::cli
