// `kblaster tasks lower`, and the lowering of imported tasks before the search and the strategy
// commands see them (src/graph/lower.hpp).
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "graph/lower.hpp"
#include "pytorch/pytorch.hpp"
#include "task/task.hpp"

#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kb::cli {

task::contract lowered_contract(const fs::path& root, const task::contract& c, bool describe) {
  if (c.kind != task::task_kind::pytorch || !fs::is_regular_file(c.dir / "graph.json")) {
    return c;
  }
  task::contract ready = c;
  if (describe && !c.resolved && pytorch::probe(root).available) {
    // The module's state and outputs from running it (pytorch_oracle.py describe), so that the
    // lowered contract names them as the evaluation will; where that fails the search's own
    // make_ready reports it.
    if (!pytorch::make_ready(root, ready).ok) {
      ready = c;
    }
  }
  return graph::lower_task(ready).c;
}

void add_lower_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::string suite;
    std::vector<std::string> ids;
    std::string json_out;
  };
  const auto opts = std::make_shared<options>();

  auto* tasks = app.get_subcommand("tasks");
  auto* low = tasks->add_subcommand(
      "lower", "lower imported pytorch tasks onto op families (their graph.json), or say why not");
  low->add_option("--suite", opts->suite, "every task of a suite");
  low->add_option("--task", opts->ids, "one task (repeatable)");
  low->add_option("--json", opts->json_out, "write the per-task results as JSON here");
  low->callback([&globals, result, opts] {
    const auto root = find_project_root(globals.root);
    std::vector<task::contract> all;
    for (const auto& id : opts->ids) {
      all.push_back(task::find_task(root, id));
    }
    if (opts->ids.empty()) {
      all = opts->suite.empty() ? task::load_all(root) : task::load_suite(root, opts->suite);
    }
    nlohmann::json out = nlohmann::json::array();
    int lowered = 0;
    int not_lowered = 0;
    for (const auto& c : all) {
      if (c.kind != task::task_kind::pytorch) {
        continue;
      }
      const auto r = graph::lower_task(c);
      nlohmann::json j{{"task", c.id}, {"kernelbench", c.kernelbench}};
      if (!r.has_graph) {
        j["status"] = "no_graph";
        fmt::print("{:<10} {:<12} {}\n", c.id, "no_graph", "no graph.json: import it again");
      } else if (r.result.ok()) {
        ++lowered;
        j["status"] = "lowered";
        j["rule"] = r.c.lowering;
        j["family"] = task::to_string(r.c.fam);
        j["reduce_dims"] = r.c.reduce_dims;
        j["math"] = r.c.math.string();
        fmt::print("{:<10} {:<12} {:<12} {}\n", c.id, "lowered", task::to_string(r.c.fam),
                   r.c.lowering);
      } else {
        ++not_lowered;
        j["status"] = "not_lowered";
        j["unsupported_ops"] = r.result.unsupported_ops();
        j["reasons"] = r.c.not_lowered;
        fmt::print("{:<10} {:<12} {}\n", c.id, "not_lowered", r.result.message());
      }
      out.push_back(j);
    }
    fmt::print("\n{} lowered, {} not lowered\n", lowered, not_lowered);
    if (!opts->json_out.empty()) {
      write_file_atomic(opts->json_out, out.dump(2) + "\n");
    }
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
