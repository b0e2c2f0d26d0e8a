#include "cli/commands.hpp"
#include "cli/llm_options.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "sandbox/sandbox.hpp"
#include "cli/preflight.hpp"

#include <fmt/format.h>

namespace kb::cli {

std::optional<cli::preflight_report> run_preflight(const global_options& globals,
                                                      bool no_sandbox,
                                                      const std::optional<llm::client_config>& llm,
                                                      store::store& st) {
  cli::preflight_options po;
  po.root = find_project_root(globals.root);
  po.cache_dir = default_cache_dir();
  po.no_sandbox = no_sandbox;
  po.llm = llm;
  const auto report = cli::preflight(st, po, [&](const cli::preflight_check& c) {
    if (!globals.quiet) {
      fmt::print("preflight {:<9} {:<9} {}\n", c.name, c.status, c.detail);
    }
  });
  if (!globals.quiet) {
    fmt::print("preflight mode: {}{}\n", report.mode,
               report.reason.empty() ? "" : " (" + report.reason + ")");
  }
  return report;
}

void add_preflight_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* pre = app.add_subcommand(
      "preflight",
      "ordered capability checks: store, device, compiler, sandbox, timing, counters, LLM");
  static bool no_sandbox = false;
  static std::string proposer = "builtin";
  static std::string json_out;
  static llm_options llm_opts;
  sandbox::add_no_sandbox_flag(*pre, &no_sandbox);
  pre->add_option("--proposer", proposer, "builtin or llm (llm also checks the provider)")
      ->check(CLI::IsMember({"builtin", "llm"}));
  pre->add_option("--json", json_out, "write the report as JSON here");
  add_llm_options(*pre, llm_opts);
  pre->callback([&globals, result] {
    auto st = open_store(globals);
    std::optional<llm::client_config> llm;
    if (proposer == "llm") {
      llm = resolve_llm_options(llm_opts).client;
    }
    const auto report = run_preflight(globals, no_sandbox, llm, st);
    if (!json_out.empty()) {
      write_file_atomic(json_out, report->to_json().dump(2) + "\n");
    }
    *result = report->usable() ? exit_code::ok : exit_code::blocked;
  });
}

} // namespace kb::cli
