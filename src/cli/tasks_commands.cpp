#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "pytorch/pytorch.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <array>
#include <iostream>
#include <memory>

#include <unistd.h>

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

// `tasks list`: one line per task (or every contract as JSON).
struct list_args {
  std::string suite;
  bool as_json = false;
};

void list_tasks(const global_options& globals, const list_args& a) {
  const auto root = find_project_root(globals.root);
  const auto all = a.suite.empty() ? task::load_all(root) : task::load_suite(root, a.suite);
  const task::ceilings ceil;
  if (a.as_json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& c : all) {
      j.push_back(task::to_json(c));
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{:<6} {:<7} {:<16} {:<12} {:<34} {:>10} {:>10}\n", "id", "suite", "name", "family",
             "official shape", "bytes", "floor");
  for (const auto& c : all) {
    const auto& s = c.official();
    fmt::print("{:<6} {:<7} {:<16} {:<12} {:<34} {:>10} {:>8.3f}ms\n", c.id, c.suite, c.name,
               c.kind == task::task_kind::native ? task::to_string(c.fam) : "pytorch", dims_text(s),
               human_bytes(task::roofline_bytes(c, s)), 1e3 * task::floor_seconds(c, s, ceil));
  }
  fmt::print("floors against the {}\n", ceil.source);
}

void add_list_command(CLI::App& tasks, const global_options& globals, int* result) {
  auto a = std::make_shared<list_args>();
  auto* list = tasks.add_subcommand("list", "list the tasks");
  list->add_option("--suite", a->suite, "only this suite");
  list->add_flag("--json", a->as_json, "print JSON");
  list->callback([&globals, result, a] {
    list_tasks(globals, *a);
    *result = exit_code::ok;
  });
}

// `tasks show`: one contract, field by field (or as JSON).
struct show_args {
  std::string id;
  bool as_json = false;
};

void print_contract(const task::contract& c) {
  const task::ceilings ceil;
  fmt::print("task {} ({}): {}\n", c.id, c.suite, c.title);
  fmt::print("  file        {}\n", c.file.string());
  if (c.kind == task::task_kind::native) {
    fmt::print("  family      {}\n", task::to_string(c.fam));
  } else {
    fmt::print("  kind        pytorch: {} in {}, init args {}\n", c.module->class_name,
               c.module->source.string(), c.module->init_args.dump());
  }
  for (const auto& d : c.degenerate) {
    fmt::print("  degenerate  {}\n", d);
  }
  if (!c.reduce_dims.empty()) {
    fmt::print("  reduce dims {}\n", fmt::join(c.reduce_dims, ", "));
  }
  if (!c.pytorch.empty()) {
    fmt::print("  pytorch     {}\n", c.pytorch);
  }
  if (!c.kernelbench.empty()) {
    fmt::print("  kernelbench {}\n", c.kernelbench);
  }
  if (c.kind == task::task_kind::native) {
    fmt::print("  math        {}\n  baseline    {}\n", c.math.string(), c.baseline.string());
  }
  fmt::print("  digest      {}\n", c.digest);
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
  fmt::print("  ceilings    {}\n", ceil.source);
}

void add_show_command(CLI::App& tasks, const global_options& globals, int* result) {
  auto a = std::make_shared<show_args>();
  auto* show = tasks.add_subcommand("show", "show one task contract");
  show->add_option("id", a->id, "task id (e.g. 023), suite/folder or folder name")->required();
  show->add_flag("--json", a->as_json, "print JSON");
  show->callback([&globals, result, a] {
    const auto root = find_project_root(globals.root);
    const auto c = task::find_task(root, a->id);
    if (a->as_json) {
      fmt::print("{}\n", task::to_json(c).dump(2));
    } else {
      print_contract(c);
    }
    *result = exit_code::ok;
  });
}

// `tasks import`: KernelBench problem files into pytorch task contracts.
struct import_args {
  std::vector<std::string> files;
  std::string suite = "kernelbench";
  std::string out_dir;
  std::string analysis;
  bool as_json = false;
  bool trust = false;
};

// The import's results, per file, as a table or JSON. How many of each status (by its value).
std::array<int, 4> print_import_results(const std::vector<pytorch::import_result>& results,
                                        const import_args& a) {
  std::array<int, 4> counts = {0, 0, 0, 0};
  if (a.as_json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results) {
      j.push_back(r.to_json());
    }
    fmt::print("{}\n", j.dump(2));
  }
  for (const auto& r : results) {
    ++counts[static_cast<size_t>(r.status)];
    if (!a.as_json) {
      fmt::print("{:<22} {:<8} {:<40} {}\n", pytorch::to_string(r.status), r.task_id,
                 r.file.filename().string(), r.reason);
    }
  }
  if (!a.as_json) {
    fmt::print("\n{} imported, {} flagged degenerate, {} need GPU evaluation, {} failed; "
               "results in {}\n",
               counts[0], counts[1], counts[2], counts[3],
               (fs::path(a.out_dir) / "import.json").string());
  }
  return counts;
}

// Importing reads the files; checking, evaluating or optimizing a task runs its model.py as
// Python with the user's rights. Each file's bytes are trusted once: asked here on a terminal,
// given with --trust, or later with `tasks trust`.
void trust_imported_modules(const std::vector<pytorch::import_result>& results, bool trust_all) {
  std::vector<std::pair<fs::path, fs::path>> untrusted; // the written module, its source
  for (const auto& r : results) {
    const fs::path module = r.task_dir / "model.py";
    if (r.task_dir.empty() || !fs::is_regular_file(module)) {
      continue;
    }
    if (trust_all) {
      pytorch::trust_module(module);
    } else if (!pytorch::is_trusted(module)) {
      untrusted.emplace_back(module, r.file);
    }
  }
  if (!untrusted.empty() && isatty(0) != 0 && isatty(2) != 0) {
    std::vector<std::pair<fs::path, fs::path>> still;
    for (const auto& [module, source] : untrusted) {
      fmt::print(stderr,
                 "{} (imported from {}) runs as Python with your rights when a command "
                 "checks, evaluates or optimizes its task. Trust it? [y/N] ",
                 module.string(), source.string());
      std::string answer;
      if (!std::getline(std::cin, answer)) {
        still.emplace_back(module, source);
        continue;
      }
      if (answer == "y" || answer == "Y" || answer == "yes") {
        pytorch::trust_module(module);
      } else {
        still.emplace_back(module, source);
      }
    }
    untrusted = std::move(still);
  }
  if (!untrusted.empty()) {
    fmt::print(stderr,
               "{} imported model.py file(s) are not trusted to run; their tasks end {} until "
               "you read them and run `kblaster tasks trust FILE...` (or import with --trust)\n",
               untrusted.size(), pytorch::untrusted_reason);
  }
}

// The exit code: input when a file failed to import.
int import_tasks(const global_options& globals, const import_args& a) {
  const auto root = find_project_root(globals.root);
  pytorch::import_options o;
  o.suite = a.suite;
  o.out = a.out_dir;
  if (!a.analysis.empty()) {
    o.analysis = fs::path(a.analysis);
  }
  std::vector<fs::path> paths(a.files.begin(), a.files.end());
  const auto results = pytorch::import_files(root, paths, o);
  const auto counts = print_import_results(results, a);
  trust_imported_modules(results, a.trust);
  return counts[3] > 0 ? exit_code::input : exit_code::ok;
}

void add_import_command(CLI::App& tasks, const global_options& globals, int* result) {
  auto a = std::make_shared<import_args>();
  auto* imp = tasks.add_subcommand(
      "import", "write pytorch task contracts for KernelBench problem files (read, not run; "
                "asks once per file whether to trust it to run later)");
  imp->add_option("files", a->files, "KernelBench problem files (FILE.py...)");
  imp->add_flag("--trust", a->trust,
                "trust every imported model.py to run (batch and CI use); without it the "
                "command asks once per file on a terminal");
  imp->add_option("--suite", a->suite, "suite of the imported tasks (default kernelbench)");
  imp->add_option("--out", a->out_dir, "folder the task folders are written to")->required();
  imp->add_option("--analysis", a->analysis,
                  "use this problem analysis (scripts/pytorch_oracle.py resolve) instead of "
                  "reading the files");
  imp->add_flag("--json", a->as_json, "print the per-file results as JSON");
  imp->callback([&globals, result, a] { *result = import_tasks(globals, *a); });
}

// `tasks trust`: model.py files (or the task folders holding them) trusted to run.
void add_trust_command(CLI::App& tasks, int* result) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* trust = tasks.add_subcommand(
      "trust", "trust a pytorch task's model.py to run (by the SHA-256 of its bytes)");
  trust->add_option("paths", *paths, "model.py files, or task folders holding one")->required();
  trust->callback([result, paths] {
    for (const auto& given : *paths) {
      fs::path module = given;
      if (fs::is_directory(module)) {
        module = fs::is_regular_file(module / "task.toml")
                     ? pytorch::module_file(task::load_contract(module / "task.toml"))
                     : module / "model.py";
      }
      if (!fs::is_regular_file(module)) {
        fail_input("tasks trust: {} is not a module file or a task folder with one", given);
      }
      const std::string digest = pytorch::trust_module(module);
      fmt::print("trusted   {}  {}\n", digest, module.string());
    }
    fmt::print("trust file {}\n", pytorch::trust_file().string());
    *result = exit_code::ok;
  });
}

} // namespace

void add_tasks_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* tasks = app.add_subcommand("tasks", "list, show and import task contracts");
  tasks->require_subcommand(1);
  add_list_command(*tasks, globals, result);
  add_show_command(*tasks, globals, result);
  add_import_command(*tasks, globals, result);
  add_trust_command(*tasks, result);
}

} // namespace kb::cli
