#include "common/config.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstdlib>

namespace kb {

namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

std::string known_tables() {
  std::string known;
  for (const auto& t : config_tables()) {
    known += (known.empty() ? "[" : ", [") + t + "]";
  }
  return known;
}

} // namespace

const std::vector<std::string>& config_tables() {
  static const std::vector<std::string> tables{"llm", "slurm"};
  return tables;
}

std::filesystem::path default_config_file() {
  if (auto xdg = env("XDG_CONFIG_HOME")) {
    return std::filesystem::path(*xdg) / "kblaster" / "config.toml";
  }
  if (auto home = env("HOME")) {
    return std::filesystem::path(*home) / ".config" / "kblaster" / "config.toml";
  }
  return std::filesystem::path(".config") / "kblaster" / "config.toml";
}

std::optional<std::filesystem::path>
find_config_file(const std::optional<std::filesystem::path>& given) {
  if (given) {
    if (!std::filesystem::is_regular_file(*given)) {
      fail_input("config file {} (--config) does not exist", given->string());
    }
    return *given;
  }
  if (auto named = env("KBLASTER_CONFIG")) {
    if (!std::filesystem::is_regular_file(*named)) {
      fail_input("config file {} ($KBLASTER_CONFIG) does not exist", *named);
    }
    return std::filesystem::path(*named);
  }
  if (auto file = default_config_file(); std::filesystem::is_regular_file(file)) {
    return file;
  }
  return std::nullopt;
}

toml::table read_config_file(const std::filesystem::path& file) {
  toml::table root;
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}: {}", file.string(), e.source().begin.line, e.description());
  }
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    const auto& tables = config_tables();
    if (std::find(tables.begin(), tables.end(), name) == tables.end()) {
      fail_input("{}: {} is not a table of the config file (known: {})", file.string(), name,
                 known_tables());
    }
    if (!node.is_table()) {
      fail_input("{}: {} must be a table ([{}])", file.string(), name, name);
    }
  }
  return root;
}

} // namespace kb
