// The config file's [slurm] table: what it may hold, how its settings combine with the command
// line's, and the errors for a table that cannot work.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "search/executor.hpp"

#include "config_test_support.hpp"

#include <gtest/gtest.h>

namespace kb::search {
namespace {

using testing::input_error_of;
using testing::write_config;

TEST(slurm_settings, every_key_of_the_table_is_read) {
  temp_dir dir("kb-config");
  const auto file = write_config(dir, "config.toml", R"([llm]
model = "m"

[slurm]
partition = "h200"
account = "proj42"
gres = "gpu:h200:1"
time = "30:00"
max_jobs = 16
resubmits = 5
sbatch_args = ["--qos=high", "--constraint=nvlink"]
setup = "module load cuda/13.0"
)");
  const auto s = slurm_settings_from_toml(file);
  EXPECT_EQ(s.partition, "h200");
  EXPECT_EQ(s.account, "proj42");
  EXPECT_EQ(s.gres, "gpu:h200:1");
  EXPECT_EQ(s.time, "30:00");
  EXPECT_EQ(s.max_jobs, 16);
  EXPECT_EQ(s.resubmits, 5);
  ASSERT_TRUE(s.sbatch_args);
  EXPECT_EQ(*s.sbatch_args, (std::vector<std::string>{"--qos=high", "--constraint=nvlink"}));
  EXPECT_EQ(s.setup, "module load cuda/13.0");
  // A file without the table sets nothing.
  const auto none =
      slurm_settings_from_toml(write_config(dir, "llm.toml", "[llm]\nmodel = \"m\"\n"));
  EXPECT_FALSE(none.partition || none.account || none.gres || none.time || none.max_jobs ||
               none.resubmits || none.sbatch_args || none.setup);
}

TEST(slurm_settings, a_bad_key_or_value_is_an_input_error_naming_the_file_and_the_key) {
  temp_dir dir("kb-config");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"partiton = \"gpu\"", "no setting partiton"},
      {"partition = 3", "partition must be a string"},
      {"setup = [\"module load cuda\"]", "setup must be a string"},
      {"max_jobs = \"many\"", "max_jobs must be an integer"},
      {"max_jobs = 0", "max_jobs must be an integer from 1 to 100000, not 0"},
      {"resubmits = -1", "resubmits must be an integer from 0"},
      {"sbatch_args = \"--qos=high\"", "sbatch_args must be an array of strings"},
      {"sbatch_args = [1]", "sbatch_args must be an array of strings"},
      {"sbatch_args = [\"--wrap=true\"]", "sbatch_args: --wrap=true: the executor sets --wrap"},
      {"sbatch_args = [\"--qos\", \"high\"]", "\"high\" is not an sbatch option"},
  };
  for (const auto& [line, expected] : cases) {
    const auto file = write_config(dir, "config.toml", "[slurm]\n" + line + "\n");
    const auto why = input_error_of([&] { slurm_settings_from_toml(file); });
    EXPECT_NE(why.find(file.string() + ": [slurm] "), std::string::npos) << line << ": " << why;
    EXPECT_NE(why.find(expected), std::string::npos) << line << ": " << why;
  }
  // The unknown key's message lists the known ones.
  const auto file = write_config(dir, "config.toml", "[slurm]\nqueue = \"x\"\n");
  const auto why = input_error_of([&] { slurm_settings_from_toml(file); });
  EXPECT_NE(
      why.find("known: account, gres, max_jobs, partition, resubmits, sbatch_args, setup, time"),
      std::string::npos)
      << why;
}

TEST(slurm_settings, the_command_line_overrides_the_file_which_overrides_the_defaults) {
  temp_dir dir("kb-config");
  const auto file = write_config(dir, "config.toml", R"([slurm]
partition = "from-file"
account = "file-account"
time = "10:00"
sbatch_args = ["--qos=low"]
)");
  slurm_options o;
  apply(slurm_settings_from_toml(file), o);
  slurm_settings line;
  line.account = "flag-account";
  line.gres = ""; // "" is a value: no --gres at all
  line.max_jobs = 8;
  apply(line, o);
  EXPECT_EQ(o.partition, "from-file");
  EXPECT_EQ(o.account, "flag-account");
  EXPECT_EQ(o.gres, "");
  EXPECT_EQ(o.time_limit, "10:00");
  EXPECT_EQ(o.max_jobs, 8);
  EXPECT_EQ(o.resubmits, slurm_options{}.resubmits);
  EXPECT_EQ(o.extra, std::vector<std::string>{"--qos=low"});
  line.sbatch_args = std::vector<std::string>{"--qos=high", "--exclusive"};
  apply(line, o);
  EXPECT_EQ(o.extra, (std::vector<std::string>{"--qos=high", "--exclusive"})); // replaced
  line.setup = "source /opt/env.sh";
  apply(line, o);
  EXPECT_EQ(o.setup, "source /opt/env.sh");
  EXPECT_EQ(describe(o), "partition from-file, account flag-account, gres (none), time 10:00, 8 "
                         "jobs at once, 3 resubmits, sbatch --qos=high --exclusive, setup "
                         "`source /opt/env.sh`");
  EXPECT_EQ(describe(slurm_options{}), "partition (default), account (default), gres gpu:1, time "
                                       "(default), 64 jobs at once, 3 resubmits");
}

TEST(slurm_settings, extra_sbatch_arguments_are_options_the_executor_does_not_set) {
  for (const auto* ok : {"--qos=high", "--exclusive", "-N1", "--ntasks-per-node=1", "-C", "-p"}) {
    EXPECT_EQ(sbatch_arg_problem(ok), "") << ok;
  }
  for (const auto* taken : {"--wrap=x", "--parsable", "--job-name=x", "--output=/tmp/x",
                            "--ntasks=2", "--array=1-4", "-Jx", "-o", "-n4", "-a1-3"}) {
    EXPECT_NE(sbatch_arg_problem(taken).find("the executor sets"), std::string::npos) << taken;
  }
  for (const auto* word : {"high", "", "-"}) {
    EXPECT_NE(sbatch_arg_problem(word).find("is not an sbatch option"), std::string::npos) << word;
  }
}

} // namespace
} // namespace kb::search
