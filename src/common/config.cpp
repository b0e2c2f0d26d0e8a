#include "common/config.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
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

config_table_reader::config_table_reader(std::filesystem::path file, std::string table)
    : m_file(std::move(file)), m_table(std::move(table)) {}

void config_table_reader::bad(const std::string& key, const std::string& what) const {
  fail_input("{}: [{}] {} must be {}", m_file.string(), m_table, key, what);
}

config_table_reader& config_table_reader::bind(const std::string& key, setter s) {
  m_setters[key] = std::move(s);
  return *this;
}

config_table_reader& config_table_reader::text(const std::string& key,
                                               std::optional<std::string>& field) {
  return bind(key, [this, key, &field](const toml::node& n) {
    if (!n.is_string()) {
      bad(key, "a string");
    }
    field = *n.value<std::string>();
  });
}

config_table_reader& config_table_reader::number(const std::string& key,
                                                 std::optional<double>& field) {
  return bind(key, [this, key, &field](const toml::node& n) {
    if (!n.is_integer() && !n.is_floating_point()) {
      bad(key, "a number");
    }
    field = *n.value<double>();
  });
}

config_table_reader& config_table_reader::flag(const std::string& key, std::optional<bool>& field) {
  return bind(key, [this, key, &field](const toml::node& n) {
    if (!n.is_boolean()) {
      bad(key, "true or false");
    }
    field = *n.value<bool>();
  });
}

config_table_reader& config_table_reader::integer(const std::string& key,
                                                  std::optional<int64_t>& field) {
  return bind(key, [this, key, &field](const toml::node& n) {
    if (!n.is_integer()) {
      bad(key, "an integer");
    }
    field = *n.value<int64_t>();
  });
}

config_table_reader& config_table_reader::integer(const std::string& key,
                                                  std::optional<int>& field) {
  return bind(key, [this, key, &field](const toml::node& n) {
    const int64_t v = n.is_integer() ? *n.value<int64_t>() : 0;
    if (!n.is_integer() || v < INT32_MIN || v > INT32_MAX) {
      bad(key, "an integer");
    }
    field = static_cast<int>(v);
  });
}

config_table_reader& config_table_reader::integer(const std::string& key, std::optional<int>& field,
                                                  int low, int high) {
  return bind(key, [this, key, &field, low, high](const toml::node& n) {
    const auto what = fmt::format("an integer from {} to {}", low, high);
    if (!n.is_integer()) {
      bad(key, what);
    }
    const int64_t v = *n.value<int64_t>();
    if (v < low || v > high) {
      bad(key, what + fmt::format(", not {}", v));
    }
    field = static_cast<int>(v);
  });
}

config_table_reader&
config_table_reader::texts(const std::string& key, std::optional<std::vector<std::string>>& field,
                           const std::string& what,
                           std::function<std::string(const std::string&)> problem) {
  return bind(key, [this, key, &field, what, problem](const toml::node& n) {
    const toml::array* a = n.as_array();
    if (a == nullptr) {
      bad(key, what);
    }
    std::vector<std::string> items;
    for (const auto& item : *a) {
      if (!item.is_string()) {
        bad(key, what);
      }
      items.push_back(*item.value<std::string>());
      if (problem) {
        if (const auto why = problem(items.back()); !why.empty()) {
          fail_input("{}: [{}] {}: {}", m_file.string(), m_table, key, why);
        }
      }
    }
    field = std::move(items);
  });
}

config_table_reader& config_table_reader::refuse(const std::string& key, std::string why) {
  m_refused[key] = std::move(why);
  return *this;
}

void config_table_reader::read() const {
  const toml::table root = read_config_file(m_file);
  const toml::table* table = root[m_table].as_table();
  if (table == nullptr) {
    return;
  }
  for (const auto& [key, node] : *table) {
    const std::string name(key.str());
    if (const auto r = m_refused.find(name); r != m_refused.end()) {
      fail_input("{}: [{}] {}: {}", m_file.string(), m_table, name, r->second);
    }
    const auto it = m_setters.find(name);
    if (it == m_setters.end()) {
      std::string known;
      for (const auto& [k, unused] : m_setters) {
        known += (known.empty() ? "" : ", ") + k;
      }
      fail_input("{}: [{}] has no setting {} (known: {})", m_file.string(), m_table, name, known);
    }
    it->second(node);
  }
}

} // namespace kb
