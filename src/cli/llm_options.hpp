// The LLM options every command that talks to a model shares (`llm check`, and the search's
// `--proposer llm`): flags override the environment, which overrides the config file.
#pragma once

#include "llm/llm.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace kb::cli {

struct llm_options {
  std::optional<std::string> base_url;
  std::optional<std::string> model;
  std::optional<std::string> api_key_env;
  std::optional<std::filesystem::path> config; // else $KBLASTER_CONFIG, else the default file
};

// --llm-base-url, --llm-model, --llm-api-key-env, --config.
void add_llm_options(CLI::App& command, llm_options& options);

struct llm_setup {
  llm::client_config client;
  llm::proposer_config proposer;
  std::optional<std::filesystem::path> config_file; // the file read, if any
};

// Defaults, then the [llm] table of the config file, then KBLASTER_LLM_* variables, then the
// flags; validated (kb::input_error saying where each missing setting can be given).
llm_setup resolve_llm_options(const llm_options& options);

} // namespace kb::cli
