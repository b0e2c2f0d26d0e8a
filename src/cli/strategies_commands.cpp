#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <cctype>
#include <memory>

namespace kb::cli {

namespace {

using nlohmann::json;

// A task by id or folder name, or by the path of its folder or task.toml (for tasks outside
// tasks/). An imported task with an op graph is lowered onto its family.
task::contract load_task(const fs::path& root, const std::string& ref) {
  const fs::path p(ref);
  if (fs::is_regular_file(p)) {
    return lowered_contract(root, task::load_contract(p), false);
  }
  if (fs::is_regular_file(p / "task.toml")) {
    return lowered_contract(root, task::load_contract(p / "task.toml"), false);
  }
  return lowered_contract(root, task::find_task(root, ref), false);
}

json strategy_json(const search::strategy& s) {
  json space = json::array();
  for (const auto& a : s.space) {
    space.push_back({{"name", a.name}, {"values", a.values}, {"description", a.description}});
  }
  return {{"name", s.name},
          {"family", task::to_string(s.fam)},
          {"description", s.description},
          {"applies_to", s.applies_to},
          {"rationale", s.rationale},
          {"space", space},
          {"defaults", s.defaults},
          {"space_size", s.space_size()},
          {"workspace", s.has_workspace}};
}

// "name=value": an integer when the value is one, else a name.
json parse_params(const std::vector<std::string>& items) {
  json params = json::object();
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      fail_input("--param {}: expected name=value", item);
    }
    const std::string name = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    const bool integer = std::all_of(value.begin() + (value[0] == '-' ? 1 : 0), value.end(),
                                     [](unsigned char ch) { return std::isdigit(ch); });
    params[name] = integer ? json(std::stoll(value)) : json(value);
  }
  return params;
}

} // namespace

void add_strategies_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    std::string task_ref;
    bool as_json = false;
    std::string name;
    std::string gen_task;
    std::string gen_strategy;
    std::vector<std::string> gen_params;
    std::string gen_out;
  };
  const auto opts = std::make_shared<options>();

  auto* cmd = app.add_subcommand("strategies",
                                 "the built-in strategy library: list, show, generate candidates");
  cmd->require_subcommand(1);

  auto* list =
      cmd->add_subcommand("list", "list the strategies (those offered for a task with --task)");
  list->add_option("--task", opts->task_ref, "task id, folder or task.toml");
  list->add_flag("--json", opts->as_json, "print JSON");
  list->callback([&globals, result, opts] {
    std::vector<const search::strategy*> chosen;
    if (opts->task_ref.empty()) {
      for (const auto& s : search::all_strategies()) {
        chosen.push_back(&s);
      }
    } else {
      chosen = search::strategies_for(load_task(find_project_root(globals.root), opts->task_ref));
    }
    if (opts->as_json) {
      json j = json::array();
      for (const auto* s : chosen) {
        j.push_back(strategy_json(*s));
      }
      fmt::print("{}\n", j.dump(2));
    } else {
      for (const auto* s : chosen) {
        fmt::print("{:<28} {:>6} points  {}\n", s->name, s->space_size(), s->applies_to);
      }
    }
    *result = exit_code::ok;
  });

  auto* show = cmd->add_subcommand(
      "show", "show one strategy: what it does, where it applies, its parameter space");
  show->add_option("name", opts->name, "strategy name (e.g. normalize.block_row)")->required();
  show->add_flag("--json", opts->as_json, "print JSON");
  show->callback([result, opts] {
    const auto& s = search::find_strategy(opts->name);
    if (opts->as_json) {
      fmt::print("{}\n", strategy_json(s).dump(2));
      *result = exit_code::ok;
      return;
    }
    fmt::print("{} (family {})\n  {}\n  applies to: {}\n  why: {}\n  parameters ({} points):\n",
               s.name, task::to_string(s.fam), s.description, s.applies_to, s.rationale,
               s.space_size());
    for (const auto& a : s.space) {
      std::vector<std::string> values;
      for (const auto& v : a.values) {
        values.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      }
      const auto& d = s.defaults.at(a.name);
      fmt::print("    {:<18} {{{}}} default {}: {}\n", a.name, fmt::join(values, ", "),
                 d.is_string() ? d.get<std::string>() : d.dump(), a.description);
    }
    *result = exit_code::ok;
  });

  auto* gen =
      cmd->add_subcommand("generate", "write the candidate source of a strategy for a task");
  gen->add_option("--task", opts->gen_task, "task id, folder or task.toml")->required();
  gen->add_option("--strategy", opts->gen_strategy, "strategy name")->required();
  gen->add_option("--param", opts->gen_params, "name=value (repeatable; the rest at their defaults)");
  gen->add_option("-o,--output", opts->gen_out, "write here instead of standard output");
  gen->callback([&globals, result, opts] {
    const auto c = load_task(find_project_root(globals.root), opts->gen_task);
    const auto& s = search::find_strategy(opts->gen_strategy);
    if (!search::applies(s, c, c.official())) {
      fmt::print(stderr,
                 "kblaster: note: {} is not offered for task {} at its official shape (generated "
                 "anyway)\n",
                 s.name, c.id);
    }
    const std::string source = search::generate(c, s, parse_params(opts->gen_params));
    if (opts->gen_out.empty()) {
      fmt::print("{}", source);
    } else {
      write_file_atomic(opts->gen_out, source);
    }
    *result = exit_code::ok;
  });
}

} // namespace kb::cli
