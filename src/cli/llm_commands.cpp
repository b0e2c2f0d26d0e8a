#include "cli/commands.hpp"
#include "cli/llm_options.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

namespace kb::cli {

void add_llm_options(CLI::App& command, llm_options& options) {
  command.add_option("--llm-base-url", options.base_url,
                     "OpenAI-compatible API base URL, e.g. http://localhost:8000/v1 (else "
                     "$KBLASTER_LLM_BASE_URL, else [llm] base_url)");
  command.add_option("--llm-model", options.model, "model name (else $KBLASTER_LLM_MODEL, else [llm] model)");
  command.add_option("--llm-api-key-env", options.api_key_env,
                     "environment variable holding the API key (default KBLASTER_LLM_API_KEY, "
                     "falling back to OPENAI_API_KEY)");
  command.add_option("--config", options.config,
                     "config file (TOML, [llm] table; default ~/.config/kblaster/config.toml)");
}

llm_setup resolve_llm_options(const llm_options& options) {
  llm_setup setup;
  if (options.config) {
    if (!std::filesystem::exists(*options.config)) {
      fail_input("config file {} does not exist", options.config->string());
    }
    setup.config_file = *options.config;
  } else if (const auto file = llm::default_config_file(); std::filesystem::exists(file)) {
    setup.config_file = file;
  }
  llm::settings flags;
  flags.base_url = options.base_url;
  flags.model = options.model;
  flags.api_key_env = options.api_key_env;
  std::vector<llm::settings> layers;
  if (setup.config_file) {
    layers.push_back(llm::settings_from_toml(*setup.config_file));
  }
  layers.push_back(llm::settings_from_env());
  layers.push_back(flags);
  for (const auto& layer : layers) {
    llm::apply(layer, setup.client);
    llm::apply(layer, setup.proposer);
  }
  llm::validate(setup.client);
  return setup;
}

void add_llm_commands(CLI::App& app, const global_options& globals, int* result) {
  auto* llm = app.add_subcommand("llm", "check the LLM endpoint");
  llm->require_subcommand(1);

  auto* check = llm->add_subcommand("check", "send one tiny request: do the endpoint, key and model work?");
  static llm_options options;
  static bool as_json = false;
  add_llm_options(*check, options);
  check->add_flag("--json", as_json, "print JSON");
  check->callback([&globals, result] {
    auto setup = resolve_llm_options(options);
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
    if (as_json) {
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
      fmt::print("{}: {} ({:.2f} s)\n", llm::to_string(outcome.code), client.redact(outcome.message),
                 outcome.seconds);
    }
    *result = outcome.ok() ? exit_code::ok : exit_code::blocked;
  });
}

} // namespace kb::cli
