// The config file: TOML with one table per module that reads one ([llm], [slurm]). Where it is:
// --config FILE, else $KBLASTER_CONFIG, else $XDG_CONFIG_HOME/kblaster/config.toml, else
// ~/.config/kblaster/config.toml. Each module reads its own table and refuses a key it does not
// know; the file as a whole holds only those tables.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb {

// The tables a config file may hold.
const std::vector<std::string>& config_tables();

// $XDG_CONFIG_HOME/kblaster/config.toml, else ~/.config/kblaster/config.toml.
std::filesystem::path default_config_file();

// The file to read: `given` (--config), else $KBLASTER_CONFIG, else the default file when it
// exists; nullopt when there is none. A file that --config or $KBLASTER_CONFIG names must exist
// (kb::input_error otherwise).
std::optional<std::filesystem::path>
find_config_file(const std::optional<std::filesystem::path>& given);

// The file parsed. kb::input_error naming the file for a syntax error (with its line) and for a
// top-level key that is not one of config_tables() as a table.
toml::table read_config_file(const std::filesystem::path& file);

// One table of a config file read into typed fields, each key bound to one: a value of the wrong
// type or out of range is kb::input_error "<file>: [<table>] <key> must be <what>", a key bound
// to nothing is refused with the known ones listed, an absent table sets nothing. The fields stay
// unset (nullopt) for keys the table does not hold, so that layers of settings can combine.
class config_table_reader {
public:
  config_table_reader(std::filesystem::path file, std::string table);

  config_table_reader& text(const std::string& key, std::optional<std::string>& field);
  config_table_reader& number(const std::string& key, std::optional<double>& field);
  config_table_reader& flag(const std::string& key, std::optional<bool>& field);
  // An integer; with bounds, the message names them ("an integer from 1 to 100000, not 0").
  config_table_reader& integer(const std::string& key, std::optional<int>& field);
  config_table_reader& integer(const std::string& key, std::optional<int>& field, int low,
                               int high);
  config_table_reader& integer(const std::string& key, std::optional<int64_t>& field);
  // An array of strings, each checked by `problem` ("" when it is fine, else why not).
  config_table_reader& texts(const std::string& key, std::optional<std::vector<std::string>>& field,
                             const std::string& what,
                             std::function<std::string(const std::string&)> problem = {});
  // A key that must never be in the file, with the reason given as the error.
  config_table_reader& refuse(const std::string& key, std::string why);

  // Reads the table into the bound fields.
  void read() const;

private:
  using setter = std::function<void(const toml::node&)>;
  [[noreturn]] void bad(const std::string& key, const std::string& what) const;
  config_table_reader& bind(const std::string& key, setter s);

  std::filesystem::path m_file;
  std::string m_table;
  std::map<std::string, setter> m_setters;
  std::map<std::string, std::string> m_refused;
};

} // namespace kb
