#include "cli/commands.hpp"
#include "cli/llm_options.hpp"
#include "cli/preflight.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "sandbox/sandbox.hpp"

#include <memory>

#include <fmt/format.h>

namespace kb::cli {

std::optional<cli::preflight_report> run_preflight(const global_options& globals, bool no_sandbox,
                                                   const std::optional<llm::client_config>& llm,
                                                   store::store& st,
                                                   std::chrono::seconds reuse_within) {
  cli::preflight_options po;
  po.root = find_project_root(globals.root);
  po.cache_dir = default_cache_dir();
  po.no_sandbox = no_sandbox;
  po.llm = llm;
  po.reuse_within = reuse_within;
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
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    bool no_sandbox = false;
    std::string proposer = "builtin";
    std::string json_out;
    llm_options llm_opts;
  };
  const auto opts = std::make_shared<options>();

  auto* pre = app.add_subcommand(
      "preflight",
      "ordered capability checks: store, device, compiler, sandbox, timing, counters, LLM");
  sandbox::add_no_sandbox_flag(*pre, &opts->no_sandbox);
  pre->add_option("--proposer", opts->proposer, "builtin or llm (llm also checks the provider)")
      ->check(CLI::IsMember({"builtin", "llm"}));
  pre->add_option("--json", opts->json_out, "write the report as JSON here");
  add_llm_options(*pre, opts->llm_opts);
  pre->callback([&globals, result, opts] {
    auto st = open_store(globals);
    std::optional<llm::client_config> llm;
    if (opts->proposer == "llm") {
      llm = resolve_llm_options(opts->llm_opts).client;
    }
    const auto report = run_preflight(globals, opts->no_sandbox, llm, st);
    if (!opts->json_out.empty()) {
      write_file_atomic(opts->json_out, report->to_json().dump(2) + "\n");
    }
    *result = report->usable() ? exit_code::ok : exit_code::blocked;
  });
}

} // namespace kb::cli
