#include "cli/commands.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

namespace kb::cli {

store::store open_store(const global_options& globals) {
  return store::store(store::resolve_dir(globals.store));
}

int run(int argc, char** argv) {
  CLI::App app{"KernelBlaster: faster CUDA kernels, verified and measured"};
  app.set_help_flag();
  app.require_subcommand(0, 1);
  global_options globals;
  app.add_option("--root", globals.root, "project folder holding tasks/ and include/kblaster");
  app.add_option("--store", globals.store,
                 "store folder (else $KBLASTER_HOME, else ~/.local/share/kblaster)");
  app.add_flag("-q,--quiet", globals.quiet, "no progress output");
  bool want_help = false;
  app.add_flag("-h,--help", want_help, "show help");
  app.add_subcommand("help", "show help")->callback([&] { want_help = true; });

  int result = exit_code::ok;
  add_tasks_commands(app, globals, &result);
  add_eval_commands(app, globals, &result);
  add_bench_commands(app, globals, &result);
  add_preflight_commands(app, globals, &result);
  add_optimize_commands(app, globals, &result);
  add_check_commands(app, globals, &result);
  add_llm_commands(app, globals, &result);
  add_store_commands(app, globals, &result);
  add_strategies_commands(app, globals, &result);
  add_profile_commands(app, globals, &result);
  add_serve_commands(app, globals, &result);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
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
