#include "cli/llm_options.hpp"
#include "cli/commands.hpp"
#include "common/config.hpp"
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
  add_config_option(command, options.config);
}

llm_setup resolve_llm_options(const llm_options& options) {
  llm_setup setup;
  setup.config_file = find_config_file(options.config);
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
