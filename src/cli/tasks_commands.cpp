#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

namespace kb::cli {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}", b, units[u]);
}

std::string dims_text(const task::shape_case& s) {
  std::string out;
  for (const auto& [k, v] : s.dims) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  }
  return out;
}

} // namespace

void add_tasks_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* tasks = app.add_subcommand("tasks", "list and show task contracts");
  tasks->require_subcommand(1);

  auto* list = tasks->add_subcommand("list", "list the tasks");
  static std::string suite;
  static bool as_json = false;
  list->add_option("--suite", suite, "only this suite");
  list->add_flag("--json", as_json, "print JSON");
  list->callback([&globals, result] {
    const auto root = find_project_root(globals.root);
    const auto all = suite.empty() ? task::load_all(root) : task::load_suite(root, suite);
    const task::ceilings ceil;
    if (as_json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& c : all) {
        j.push_back(task::to_json(c));
      }
      fmt::print("{}\n", j.dump(2));
      *result = exit_code::ok;
      return;
    }
    fmt::print("{:<6} {:<7} {:<16} {:<12} {:<34} {:>10} {:>10}\n", "id", "suite", "name", "family",
               "official shape", "bytes", "floor");
    for (const auto& c : all) {
      const auto& s = c.official();
      fmt::print("{:<6} {:<7} {:<16} {:<12} {:<34} {:>10} {:>8.3f}ms\n", c.id, c.suite, c.name,
                 task::to_string(c.fam), dims_text(s), human_bytes(task::roofline_bytes(c, s)),
                 1e3 * task::floor_seconds(c, s, ceil));
    }
    *result = exit_code::ok;
  });

  auto* show = tasks->add_subcommand("show", "show one task contract");
  static std::string id;
  show->add_option("id", id, "task id (e.g. 023), suite/folder or folder name")->required();
  show->add_flag("--json", as_json, "print JSON");
  show->callback([&globals, result] {
    const auto root = find_project_root(globals.root);
    const auto c = task::find_task(root, id);
    if (as_json) {
      fmt::print("{}\n", task::to_json(c).dump(2));
      *result = exit_code::ok;
      return;
    }
    const task::ceilings ceil;
    fmt::print("task {} ({}): {}\n", c.id, c.suite, c.title);
    fmt::print("  file        {}\n  family      {}\n", c.file.string(), task::to_string(c.fam));
    if (!c.reduce_dims.empty()) {
      fmt::print("  reduce dims {}\n", fmt::join(c.reduce_dims, ", "));
    }
    fmt::print("  pytorch     {}\n", c.pytorch);
    if (!c.kernelbench.empty()) {
      fmt::print("  kernelbench {}\n", c.kernelbench);
    }
    fmt::print("  math        {}\n  baseline    {}\n  digest      {}\n", c.math.string(),
               c.baseline.string(), c.digest);
    for (const auto& p : c.params) {
      fmt::print("  param       {} = {}\n", p.name, p.value);
    }
    for (const auto& t : c.inputs) {
      std::vector<std::string> dists;
      for (const auto& d : t.distributions) {
        dists.push_back(d.label);
      }
      fmt::print("  input       {} [{}] {} ({}) role={} distributions: {}\n", t.name,
                 fmt::join(t.shape, ", "), task::to_string(t.type), t.layout, t.role,
                 fmt::join(dists, ", "));
    }
    for (const auto& t : c.outputs) {
      fmt::print("  output      {} [{}] {}\n", t.name, fmt::join(t.shape, ", "),
                 task::to_string(t.type));
    }
    fmt::print("  tolerance   atol={} (x RMS of reference) rtol={} rel_l2={} deterministic={}\n",
               c.tol.atol, c.tol.rtol, c.tol.rel_l2, c.tol.deterministic);
    fmt::print("  roofline    bytes = {}   flops = {}\n", c.roof.bytes_expr, c.roof.flops_expr);
    for (const auto& s : c.shapes) {
      fmt::print("  shape       {:<14} {:<8} {:<36} bytes {:>9}  floor {:.4f} ms\n", s.name, s.role,
                 dims_text(s), human_bytes(task::roofline_bytes(c, s)),
                 1e3 * task::floor_seconds(c, s, ceil));
    }
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
