#include "cli/commands.hpp"
#include "cli/llm_options.hpp"
#include "common/error.hpp"

#include <memory>

#include <fmt/format.h>

namespace kb::cli {

void add_llm_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    llm_options llm;
    bool as_json = false;
  };
  const auto opts = std::make_shared<options>();

  auto* llm = app.add_subcommand("llm", "check the LLM endpoint");
  llm->require_subcommand(1);

  auto* check =
      llm->add_subcommand("check", "send one tiny request: do the endpoint, key and model work?");
  add_llm_options(*check, opts->llm);
  check->add_flag("--json", opts->as_json, "print JSON");
  check->callback([&globals, result, opts] {
    auto setup = resolve_llm_options(opts->llm);
    // A check answers quickly: at most one retry.
    setup.client.max_retries = std::min(setup.client.max_retries, 1);
    llm::client client(setup.client);
    const auto key = llm::read_api_key(setup.client);
    const auto outcome = llm::preflight(client);
    const std::string key_text =
        key ? fmt::format("${} (set)", key->env)
            : fmt::format("none (${} is unset{})", setup.client.api_key_env,
                          setup.client.api_key_env == llm::default_api_key_env
                              ? fmt::format(", and so is ${}", llm::fallback_api_key_env)
                              : "");
    if (opts->as_json) {
      const nlohmann::json j{{"status", llm::to_string(outcome.code)},
                             {"message", outcome.message},
                             {"http_status", outcome.http_status},
                             {"seconds", outcome.seconds},
                             {"base_url", client.redact(setup.client.base_url)},
                             {"model", setup.client.model},
                             {"api_key_env", key ? key->env : setup.client.api_key_env},
                             {"api_key_set", key.has_value()},
                             {"config_file", setup.config_file ? setup.config_file->string() : ""}};
      fmt::print("{}\n", client.redact(j.dump(2)));
    } else {
      if (!globals.quiet) {
        fmt::print("endpoint  {}\nmodel     {}\napi key   {}\nconfig    {}\n",
                   client.redact(setup.client.base_url), client.redact(setup.client.model),
                   key_text, setup.config_file ? setup.config_file->string() : "none");
      }
      fmt::print("{}: {} ({:.2f} s)\n", llm::to_string(outcome.code),
                 client.redact(outcome.message), outcome.seconds);
    }
    *result = outcome.ok() ? exit_code::ok : exit_code::blocked;
  });
}

} // namespace kb::cli
