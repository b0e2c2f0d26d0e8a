// The config file: TOML with one table per module that reads one ([llm], [slurm]). Where it is:
// --config FILE, else $KBLASTER_CONFIG, else $XDG_CONFIG_HOME/kblaster/config.toml, else
// ~/.config/kblaster/config.toml. Each module reads its own table and refuses a key it does not
// know; the file as a whole holds only those tables.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
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

} // namespace kb
