#include "common/config.hpp"
#include "common/error.hpp"
#include "llm/llm.hpp"

#include <toml++/toml.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <utility>

namespace kb::llm {

namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

} // namespace

std::string to_string(status v) {
  return std::string(status_names.name(v));
}

std::optional<status> status_from_string(std::string_view s) {
  return status_names.parse(s);
}

std::string to_string(token_limit_param v) {
  return std::string(token_limit_param_names.name(v));
}

std::optional<token_limit_param> token_limit_param_from_string(std::string_view s) {
  return token_limit_param_names.parse(s);
}

std::optional<api_key> read_api_key(const client_config& config) {
  if (auto value = env(config.api_key_env.c_str())) {
    return api_key{*value, config.api_key_env};
  }
  if (config.api_key_env == default_api_key_env) {
    const std::string fallback(fallback_api_key_env);
    if (auto value = env(fallback.c_str())) {
      return api_key{*value, fallback};
    }
  }
  return std::nullopt;
}

settings settings_from_toml(const fs::path& file) {
  settings s;
  config_table_reader(file, "llm")
      .text("base_url", s.base_url)
      .text("model", s.model)
      .text("api_key_env", s.api_key_env)
      .text("token_param", s.token_param)
      .number("connect_timeout", s.connect_timeout)
      .number("request_timeout", s.request_timeout)
      .integer("max_retries", s.max_retries)
      .integer("max_in_flight", s.max_in_flight)
      .integer("max_tokens", s.max_tokens)
      .flag("use_n", s.use_n)
      .integer("max_requests", s.max_requests)
      .integer("max_prompt_tokens", s.max_prompt_tokens)
      .integer("max_completion_tokens", s.max_completion_tokens)
      .number("max_wall_seconds", s.max_wall_seconds)
      .number("temperature", s.temperature)
      .integer("repair_turns", s.repair_turns)
      .integer("samples", s.samples)
      .refuse("api_key", fmt::format("the key is never read from a file; put it in the "
                                     "environment variable that api_key_env names (default {})",
                                     default_api_key_env))
      .read();
  return s;
}

settings settings_from_env() {
  settings s;
  s.base_url = env("KBLASTER_LLM_BASE_URL");
  s.model = env("KBLASTER_LLM_MODEL");
  s.api_key_env = env("KBLASTER_LLM_API_KEY_ENV");
  return s;
}

void apply(const settings& layer, client_config& config) {
  const auto set = [](auto& field, const auto& value) {
    if (value) {
      field = *value;
    }
  };
  set(config.base_url, layer.base_url);
  set(config.model, layer.model);
  set(config.api_key_env, layer.api_key_env);
  if (layer.token_param) {
    const auto p = token_limit_param_from_string(*layer.token_param);
    if (!p) {
      fail_input("token_param must be max_tokens or max_completion_tokens, not {}",
                 *layer.token_param);
    }
    config.token_param = *p;
  }
  set(config.connect_timeout, layer.connect_timeout);
  set(config.request_timeout, layer.request_timeout);
  set(config.max_retries, layer.max_retries);
  set(config.max_in_flight, layer.max_in_flight);
  set(config.max_tokens, layer.max_tokens);
  set(config.use_n, layer.use_n);
  if (layer.max_requests) {
    config.limits.requests = layer.max_requests;
  }
  if (layer.max_prompt_tokens) {
    config.limits.prompt_tokens = layer.max_prompt_tokens;
  }
  if (layer.max_completion_tokens) {
    config.limits.completion_tokens = layer.max_completion_tokens;
  }
  if (layer.max_wall_seconds) {
    config.limits.wall_seconds = layer.max_wall_seconds;
  }
}

void validate(const client_config& config) {
  if (config.base_url.empty()) {
    fail_input("no LLM endpoint: give --llm-base-url, set KBLASTER_LLM_BASE_URL or base_url in "
               "the [llm] table of the config file (e.g. https://api.openai.com/v1 or "
               "http://localhost:8000/v1)");
  }
  if (!config.base_url.starts_with("http://") && !config.base_url.starts_with("https://")) {
    fail_input("the LLM base URL must start with http:// or https://");
  }
  if (config.base_url.starts_with("http://")) {
    // Plain HTTP would send the API key in clear: only to this machine.
    std::string host = config.base_url.substr(7);
    host = host.substr(0, host.find_first_of("/?#"));
    if (const auto at = host.rfind('@'); at != std::string::npos) {
      host = host.substr(at + 1);
    }
    if (host.starts_with("[")) {
      host = host.substr(1, host.find(']') - 1);
    } else {
      host = host.substr(0, host.find(':'));
    }
    for (char& ch : host) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    const bool loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
    if (!loopback) {
      fail_input("the LLM base URL http://{} is plain HTTP to another machine, which would send "
                 "the API key in clear: use https:// (http:// is for localhost only)",
                 host);
    }
  }
  if (config.model.empty()) {
    fail_input("no LLM model: give --llm-model, set KBLASTER_LLM_MODEL or model in the [llm] "
               "table of the config file");
  }
  if (config.api_key_env.empty()) {
    fail_input("the name of the API key's environment variable is empty");
  }
  if (!(config.connect_timeout > 0) || !(config.request_timeout > 0)) {
    fail_input("LLM timeouts must be positive (connect {} s, request {} s)", config.connect_timeout,
               config.request_timeout);
  }
  if (config.max_retries < 0 || config.max_in_flight < 1 || config.max_tokens < 1) {
    fail_input("LLM limits out of range: max_retries >= 0, max_in_flight >= 1, max_tokens >= 1");
  }
  if (config.backoff_base < 0 || config.backoff_max < 0 || config.max_retry_after < 0) {
    fail_input("LLM backoff times must not be negative");
  }
}

} // namespace kb::llm
