#include "cli/commands.hpp"

#include "common/error.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace kb::cli {

std::string command_help(const std::vector<std::string>& words) {
  // The entries of docs/cli.md's command list: a line indented by two spaces starts one, deeper
  // lines continue it. An entry belongs to the command when its first words are the command's.
  const std::string_view text = help_text();
  std::istringstream in{std::string(text)};
  std::string line;
  std::string out;
  bool in_list = false;
  bool taking = false;
  while (std::getline(in, line)) {
    if (line == "Commands:") {
      in_list = true;
      continue;
    }
    if (!in_list) {
      continue;
    }
    if (line.empty()) {
      break;
    }
    const bool starts = line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ';
    if (starts) {
      std::istringstream w(line);
      std::vector<std::string> first;
      std::string word;
      while (first.size() < words.size() && w >> word) {
        first.push_back(word);
      }
      taking = !words.empty() && first.front() == words.front() &&
               (words.size() < 2 || first.size() < 2 || first[1] == words[1] ||
                first[1].rfind("-", 0) == 0 || first[1] == "...");
    }
    if (taking) {
      out += line + "\n";
    }
  }
  return out;
}

namespace {

// `kblaster [globals] <command> [<sub>] ... --help`: that command's entries of docs/cli.md.
// Checked before parsing, so a command's required options do not hide its help.
std::optional<std::string> requested_command_help(int argc, char** argv) {
  std::vector<std::string> words;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--root" || a == "--store" || a == "--tasks") {
      ++i; // the global option's value
    } else if (a.rfind("-", 0) != 0 && words.size() < 2 && (words.empty() || help == false)) {
      words.push_back(a);
    }
  }
  if (words.size() > 1 && words.front() == "help") { // `kblaster help eval`
    words.erase(words.begin());
    help = true;
  }
  if (!help || words.empty() || words.front() == "help") {
    return std::nullopt;
  }
  auto text = command_help(words);
  if (text.empty() && words.size() > 1) {
    text = command_help({words.front()});
  }
  if (text.empty()) {
    return std::nullopt;
  }
  return "Usage: kblaster [--root DIR] [--store DIR] [--tasks DIR]... " + words.front() +
         " ...\n\n" + text;
}

std::vector<std::filesystem::path> split_path_list(const std::string& list) {
  std::vector<std::filesystem::path> out;
  std::string part;
  std::istringstream in(list);
  while (std::getline(in, part, ':')) {
    if (!part.empty()) {
      out.emplace_back(part);
    }
  }
  return out;
}

} // namespace

void add_config_option(CLI::App& command, std::optional<std::filesystem::path>& config) {
  command.add_option("--config", config,
                     "config file (TOML: [llm], [slurm]); else $KBLASTER_CONFIG, else "
                     "~/.config/kblaster/config.toml");
}

store::store open_store(const global_options& globals) {
  return store::store(store::resolve_dir(globals.store));
}

int exit_for_bench(const std::vector<eval::verdict>& verdicts) {
  const auto any = [&](eval::verdict v) {
    return std::find(verdicts.begin(), verdicts.end(), v) != verdicts.end();
  };
  if (any(eval::verdict::rejected) || any(eval::verdict::error)) {
    return exit_code::task_failed;
  }
  if (any(eval::verdict::blocked)) {
    return exit_code::blocked;
  }
  return exit_code::ok;
}

int run(int argc, char** argv) {
  CLI::App app{"KernelBlaster: faster CUDA kernels, verified and measured"};
  app.set_help_flag();
  app.require_subcommand(0, 1);
  global_options globals;
  app.add_option("--root", globals.root, "project folder holding tasks/ and include/kblaster");
  app.add_option(
      "--store", globals.store,
      "store folder or postgresql:// URL (else $KBLASTER_STORE, else $KBLASTER_HOME, else "
      "~/.local/share/kblaster)");
  app.add_flag("-q,--quiet", globals.quiet, "no progress output");
  app.add_option("--tasks", globals.task_dirs,
                 "another folder of tasks, searched after the project's tasks/ (repeatable; also "
                 "$KBLASTER_TASKS=dir1:dir2)")
      ->allow_extra_args(false);
  app.set_version_flag("--version",
                       fmt::format("kblaster {}\njudge protocol {}\ncommit {}", KBLASTER_VERSION,
                                   eval::judge_protocol_version, KBLASTER_COMMIT),
                       "print the version, the judge protocol's version and the commit");
  bool want_help = false;
  app.add_flag("-h,--help", want_help, "show help");
  app.add_subcommand("help", "show help")->callback([&] { want_help = true; });

  int result = exit_code::ok;
  add_tasks_commands(app, globals, &result);
  add_lower_commands(app, globals, &result);
  add_eval_commands(app, globals, &result);
  add_bench_commands(app, globals, &result);
  add_preflight_commands(app, globals, &result);
  add_optimize_commands(app, globals, &result);
  add_check_commands(app, globals, &result);
  add_llm_commands(app, globals, &result);
  add_store_commands(app, globals, &result);
  add_strategies_commands(app, globals, &result);
  add_profile_commands(app, globals, &result);
  add_experiment_commands(app, globals, &result);
  add_calibrate_commands(app, globals, &result);
  add_serve_commands(app, globals, &result);
  add_queue_commands(app, globals, &result);

  if (const auto help = requested_command_help(argc, argv)) {
    fmt::print("{}", *help);
    return exit_code::ok;
  }
  // The extra task folders are known before any command's callback loads a task.
  app.parse_complete_callback([&globals] {
    std::vector<std::filesystem::path> dirs;
    if (const char* env = std::getenv("KBLASTER_TASKS"); env != nullptr && *env != '\0') {
      dirs = split_path_list(env);
    }
    dirs.insert(dirs.end(), globals.task_dirs.begin(), globals.task_dirs.end());
    task::set_extra_task_dirs(std::move(dirs));
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      if (dynamic_cast<const CLI::CallForVersion*>(&e) != nullptr) {
        fmt::print("{}\n", e.what());
      }
      return 0;
    }
    fmt::print(stderr, "kblaster: {}\n", e.what());
    return exit_code::usage;
  }
  if (want_help || app.get_subcommands().empty()) {
    fmt::print("{}", help_text());
    return exit_code::ok;
  }
  return result;
}

} // namespace kb::cli
