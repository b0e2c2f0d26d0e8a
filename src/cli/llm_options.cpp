#include "cli/llm_options.hpp"
#include "common/error.hpp"

namespace kb::cli {

void add_llm_options(CLI::App& command, llm_options& options) {
  command.add_option("--llm-base-url", options.base_url,
                     "OpenAI-compatible API base URL, e.g. http://localhost:8000/v1 (else "
                     "$KBLASTER_LLM_BASE_URL, else [llm] base_url)");
  command.add_option("--llm-model", options.model,
                     "model name (else $KBLASTER_LLM_MODEL, else [llm] model)");
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

} // namespace kb::cli
