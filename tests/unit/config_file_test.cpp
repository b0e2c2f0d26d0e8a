// The config file: where it is found (--config, $KBLASTER_CONFIG, the default file) and the
// errors for a file that cannot be read.
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"

#include "config_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

namespace kb {
namespace {

// Sets environment variables for one test and restores them after.
class scoped_env {
public:
  explicit scoped_env(const std::map<std::string, std::optional<std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      m_saved[name] = old ? std::optional<std::string>(old) : std::nullopt;
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ~scoped_env() {
    for (const auto& [name, value] : m_saved) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

private:
  std::map<std::string, std::optional<std::string>> m_saved;
};

using testing::input_error_of;
using testing::write_config;

TEST(config_file, the_flag_beats_the_variable_which_beats_the_default_file) {
  temp_dir dir("kb-config");
  const auto flag = write_config(dir, "flag.toml", "");
  const auto named = write_config(dir, "named.toml", "");
  const auto xdg = dir.path() / "xdg";
  fs::create_directories(xdg / "kblaster");
  const auto fallback = write_config(dir, "xdg/kblaster/config.toml", "");
  {
    scoped_env env({{"KBLASTER_CONFIG", named.string()}, {"XDG_CONFIG_HOME", xdg.string()}});
    EXPECT_EQ(default_config_file(), fallback);
    EXPECT_EQ(find_config_file(flag), flag);
    EXPECT_EQ(find_config_file(std::nullopt), named);
  }
  {
    scoped_env env({{"KBLASTER_CONFIG", std::nullopt}, {"XDG_CONFIG_HOME", xdg.string()}});
    EXPECT_EQ(find_config_file(std::nullopt), fallback);
  }
  {
    // Without XDG_CONFIG_HOME: ~/.config/kblaster/config.toml, and none when it is not there.
    scoped_env env({{"KBLASTER_CONFIG", std::nullopt},
                    {"XDG_CONFIG_HOME", std::nullopt},
                    {"HOME", dir.path().string()}});
    EXPECT_EQ(default_config_file(), dir.path() / ".config" / "kblaster" / "config.toml");
    EXPECT_EQ(find_config_file(std::nullopt), std::nullopt);
  }
}

TEST(config_file, a_file_named_but_missing_is_an_input_error_saying_who_named_it) {
  temp_dir dir("kb-config");
  const auto missing = dir.path() / "missing.toml";
  scoped_env env({{"KBLASTER_CONFIG", missing.string()}});
  auto why = input_error_of([&] { find_config_file(missing); });
  EXPECT_NE(why.find(missing.string()), std::string::npos) << why;
  EXPECT_NE(why.find("--config"), std::string::npos) << why;
  why = input_error_of([&] { find_config_file(std::nullopt); });
  EXPECT_NE(why.find(missing.string()), std::string::npos) << why;
  EXPECT_NE(why.find("$KBLASTER_CONFIG"), std::string::npos) << why;
}

TEST(config_file, syntax_errors_and_unknown_tables_name_the_file) {
  temp_dir dir("kb-config");
  auto file = write_config(dir, "broken.toml", "[slurm]\npartition = \"gpu\n");
  auto why = input_error_of([&] { read_config_file(file); });
  EXPECT_NE(why.find(file.string() + ":2"), std::string::npos) << why;
  file = write_config(dir, "typo.toml", "[slrum]\npartition = \"gpu\"\n");
  why = input_error_of([&] { read_config_file(file); });
  EXPECT_NE(why.find(file.string()), std::string::npos) << why;
  EXPECT_NE(why.find("slrum"), std::string::npos) << why;
  EXPECT_NE(why.find("[slurm]"), std::string::npos) << why; // the known tables are listed
  file = write_config(dir, "flat.toml", "slurm = \"gpu\"\n");
  why = input_error_of([&] { read_config_file(file); });
  EXPECT_NE(why.find("slurm must be a table"), std::string::npos) << why;
  file = write_config(dir, "both.toml", "[llm]\nmodel = \"m\"\n[slurm]\naccount = \"a\"\n");
  EXPECT_NO_THROW(read_config_file(file));
}

} // namespace
} // namespace kb
