// Where optimize and bench evaluate, end to end on any machine: --gpus is checked while parsing
// (a usage error), the Slurm settings come from the config file under the command line's, a bad
// config file stops the command before any work (exit 65, naming the file and the key), and
// without a usable GPU both commands end blocked whatever --gpus says. CUDA_VISIBLE_DEVICES=""
// hides any GPU, so the answers are the same on a GPU machine.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"

#include <gtest/gtest.h>

#include <map>

namespace kb {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

class executor_cli : public ::testing::Test {
protected:
  void SetUp() override { m_dir = std::make_unique<temp_dir>("kb-executor-cli"); }

  // kblaster with a private store and HOME (no config file of the machine's user is read).
  process_result run(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {KBLASTER_BINARY, "--root", root.string(), "--store",
                               (m_dir->path() / "store").string()});
    env.emplace("CUDA_VISIBLE_DEVICES", "");
    env.emplace("HOME", m_dir->path().string());
    env.emplace("XDG_CONFIG_HOME", (m_dir->path() / "xdg").string());
    for (const auto* name :
         {"KBLASTER_CONFIG", "KBLASTER_GPUS", "KBLASTER_EXECUTOR", "KBLASTER_SLURM_PARTITION",
          "KBLASTER_SLURM_ACCOUNT", "KBLASTER_SLURM_GRES", "KBLASTER_SLURM_TIME"}) {
      env.emplace(name, "");
    }
    return run_process({.argv = args, .env_overrides = env, .timeout = std::chrono::seconds(120)});
  }

  fs::path config(const std::string& text, const std::string& name = "config.toml") {
    const auto file = m_dir->path() / name;
    write_file_atomic(file, text);
    return file;
  }

  std::vector<std::string> bench() const {
    return {"bench", "--task", "019", "--out", (m_dir->path() / "bench").string()};
  }

  std::unique_ptr<temp_dir> m_dir;
};

// The line that says where evaluations run.
std::string executor_line(const std::string& output) {
  const auto at = output.find("executor  ");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

TEST_F(executor_cli, gpus_that_are_not_all_a_count_or_a_list_are_a_usage_error) {
  for (const auto* bad : {"foo", "0", "0,0", "1.5", "GPU-", "-2"}) {
    for (const auto& command : {bench(), std::vector<std::string>{"optimize", "--task", "019"}}) {
      auto args = command;
      args.push_back(std::string("--gpus=") + bad);
      const auto r = run(args);
      EXPECT_EQ(r.exit_code, exit_code::usage) << args[0] << " --gpus " << bad << "\n" << r.output;
      EXPECT_NE(r.output.find("--gpus"), std::string::npos) << r.output;
    }
  }
  // From the environment too.
  const auto r = run(bench(), {{"KBLASTER_GPUS", "some"}});
  EXPECT_EQ(r.exit_code, exit_code::usage) << r.output;
  // --gpus is for one host.
  auto args = bench();
  args.insert(args.end(), {"--gpus", "all", "--executor", "slurm"});
  EXPECT_EQ(run(args).exit_code, exit_code::input);
}

TEST_F(executor_cli, without_a_gpu_bench_is_blocked_the_same_way_whatever_gpus_says) {
  const auto plain = run(bench());
  ASSERT_EQ(plain.exit_code, exit_code::blocked) << plain.output;
  const auto blocked_line = [](const std::string& out) {
    const auto at = out.find("bench: GPU stages BLOCKED: ");
    return at == std::string::npos ? std::string("(none)")
                                   : out.substr(at, out.find('\n', at) - at);
  };
  ASSERT_NE(blocked_line(plain.output), "(none)") << plain.output;
  for (const auto* gpus : {"all", "2", "0,1", "1,", "GPU-00000000-0000-0000-0000-000000000000"}) {
    auto args = bench();
    args.insert(args.end(), {"--gpus", gpus});
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, exit_code::blocked) << gpus << "\n" << r.output;
    EXPECT_EQ(blocked_line(r.output), blocked_line(plain.output)) << gpus;
    EXPECT_NE(executor_line(r.output).find(std::string("--gpus ") + gpus), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(m_dir->path() / "bench" / "bench.json"));
  }
  // optimize too.
  const auto opt = run({"optimize", "--task", "019", "--budget", "5s", "--gpus", "all"});
  EXPECT_EQ(opt.exit_code, exit_code::blocked) << opt.output;
  EXPECT_NE(opt.output.find("GPU stages BLOCKED"), std::string::npos) << opt.output;
}

TEST_F(executor_cli, slurm_settings_come_from_the_file_under_the_environment_and_the_flags) {
  const auto file = config(R"([slurm]
partition = "file-partition"
account = "file-account"
time = "10:00"
sbatch_args = ["--qos=low"]
)");
  auto args = bench();
  args.insert(args.end(), {"--executor", "slurm", "--config", file.string()});
  auto r = run(args);
  EXPECT_EQ(r.exit_code, exit_code::blocked) << r.output; // no GPU: blocked before any job
  EXPECT_EQ(executor_line(r.output),
            "executor  slurm: partition file-partition, account file-account, gres gpu:1, time "
            "10:00, 64 jobs at once, 3 resubmits, sbatch --qos=low (settings from " +
                file.string() + " and the command line)");
  // The environment and the flags beat the file; what they leave unset stays the file's.
  args.insert(args.end(), {"--slurm-account", "flag-account", "--slurm-gres", "",
                           "--slurm-sbatch-arg=--qos=high", "--slurm-max-jobs", "8"});
  r = run(args, {{"KBLASTER_SLURM_TIME", "5:00"}});
  EXPECT_EQ(r.exit_code, exit_code::blocked) << r.output;
  EXPECT_EQ(executor_line(r.output),
            "executor  slurm: partition file-partition, account flag-account, gres (none), time "
            "5:00, 8 jobs at once, 3 resubmits, sbatch --qos=high (settings from " +
                file.string() + " and the command line)");
  // $KBLASTER_CONFIG names the file when --config does not; optimize reads it the same way.
  r = run({"optimize", "--task", "019", "--executor", "slurm"},
          {{"KBLASTER_CONFIG", file.string()}, {"KBLASTER_SLURM_PARTITION", "env-partition"}});
  EXPECT_EQ(r.exit_code, exit_code::blocked) << r.output;
  EXPECT_NE(executor_line(r.output).find("partition env-partition, account file-account"),
            std::string::npos)
      << r.output;
  // The default file, when neither names one.
  const auto xdg = m_dir->path() / "xdg" / "kblaster";
  fs::create_directories(xdg);
  write_file_atomic(xdg / "config.toml", "[slurm]\npartition = \"default-file\"\n");
  r = run({"optimize", "--task", "019", "--executor", "slurm"});
  EXPECT_NE(executor_line(r.output).find("partition default-file"), std::string::npos) << r.output;
}

TEST_F(executor_cli, a_bad_config_file_stops_the_command_naming_the_file_and_the_key) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"[slurm]\npartiton = \"gpu\"\n", "[slurm] has no setting partiton"},
      {"[slurm]\nmax_jobs = \"all\"\n", "[slurm] max_jobs must be an integer"},
      {"[slurm]\nsbatch_args = [\"--output=x\"]\n", "the executor sets --output"},
      {"[slurm]\npartition = \"gpu\n", ":2: "},
      {"[slurm]\npartition = \"gpu\"\n[cluster]\nname = \"x\"\n", "cluster is not a table"},
  };
  for (const auto& [text, expected] : cases) {
    const auto file = config(text, "bad.toml");
    auto args = bench();
    args.insert(args.end(), {"--executor", "slurm", "--config", file.string()});
    const auto from_flag = run(args);
    EXPECT_EQ(from_flag.exit_code, exit_code::input) << text << "\n" << from_flag.output;
    EXPECT_NE(from_flag.output.find(file.string()), std::string::npos) << from_flag.output;
    EXPECT_NE(from_flag.output.find(expected), std::string::npos) << text << "\n"
                                                                  << from_flag.output;
    EXPECT_EQ(from_flag.output.find("preflight"), std::string::npos) << "work started:\n"
                                                                     << from_flag.output;
    const auto r = run({"optimize", "--task", "019", "--executor", "slurm"},
                       {{"KBLASTER_CONFIG", file.string()}});
    EXPECT_EQ(r.exit_code, exit_code::input) << text << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << text << "\n" << r.output;
  }
  // A file that is named but not there.
  auto r = run({"optimize", "--task", "019", "--executor", "slurm", "--config",
                (m_dir->path() / "none.toml").string()});
  EXPECT_EQ(r.exit_code, exit_code::input) << r.output;
  EXPECT_NE(r.output.find("none.toml (--config) does not exist"), std::string::npos) << r.output;
  r = run({"optimize", "--task", "019", "--executor", "slurm"},
          {{"KBLASTER_CONFIG", (m_dir->path() / "none.toml").string()}});
  EXPECT_EQ(r.exit_code, exit_code::input) << r.output;
  EXPECT_NE(r.output.find("($KBLASTER_CONFIG) does not exist"), std::string::npos) << r.output;
  // A bad extra sbatch argument on the command line is a usage error.
  auto args = bench();
  args.insert(args.end(), {"--executor", "slurm", "--slurm-sbatch-arg=--wrap=true"});
  EXPECT_EQ(run(args).exit_code, exit_code::usage);
  // The local executor does not read [slurm].
  const auto file = config("[slurm]\npartiton = \"gpu\"\n", "bad.toml");
  args = bench();
  args.insert(args.end(), {"--config", file.string()});
  EXPECT_EQ(run(args).exit_code, exit_code::blocked);
}

TEST_F(executor_cli, the_llm_settings_come_from_the_file_kblaster_config_names) {
  // Nothing listens on port 9: the check gets as far as the network, so the file was read.
  const auto file = config("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n");
  auto r = run({"llm", "check"}, {{"KBLASTER_CONFIG", file.string()}});
  EXPECT_EQ(r.exit_code, exit_code::blocked) << r.output;
  EXPECT_NE(r.output.find("unreachable"), std::string::npos) << r.output;
  r = run({"llm", "check"});
  EXPECT_EQ(r.exit_code, exit_code::input) << r.output;
  EXPECT_NE(r.output.find("no LLM endpoint"), std::string::npos) << r.output;
}

} // namespace
} // namespace kb
