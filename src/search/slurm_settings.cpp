// The Slurm settings of the config file's [slurm] table, and how layers of settings combine.
#include "common/config.hpp"
#include "common/error.hpp"
#include "search/executor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kb::search {

namespace {

constexpr int max_jobs_limit = 100000; // as --slurm-max-jobs
constexpr int resubmits_limit = 100;

} // namespace

std::string sbatch_arg_problem(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') {
    return fmt::format("\"{}\" is not an sbatch option: give each option as one word, e.g. "
                       "--qos=high",
                       arg);
  }
  // What every evaluation job needs as the executor sets it.
  // --export: a job gets an explicit environment, never the submitter's whole one.
  static const std::vector<std::string> long_taken{"--wrap",   "--parsable", "--job-name",
                                                   "--output", "--ntasks",   "--array",
                                                   "--export"};
  static const std::vector<std::string> short_taken{"-J", "-o", "-n", "-a"};
  for (const auto& o : long_taken) {
    if (arg == o || arg.starts_with(o + "=")) {
      return fmt::format("{}: the executor sets {} itself", arg, o);
    }
  }
  if (!arg.starts_with("--")) {
    for (const auto& o : short_taken) {
      if (arg.starts_with(o)) {
        return fmt::format("{}: the executor sets {} itself", arg, o);
      }
    }
  }
  return "";
}

slurm_settings slurm_settings_from_toml(const fs::path& file) {
  slurm_settings s;
  config_table_reader(file, "slurm")
      .text("partition", s.partition)
      .text("account", s.account)
      .text("gres", s.gres)
      .text("time", s.time)
      .text("setup", s.setup)
      .integer("max_jobs", s.max_jobs, 1, max_jobs_limit)
      .integer("resubmits", s.resubmits, 0, resubmits_limit)
      .texts("sbatch_args", s.sbatch_args, "an array of strings, e.g. [\"--qos=high\"]",
             sbatch_arg_problem)
      .read();
  return s;
}

void apply(const slurm_settings& layer, slurm_options& opt) {
  const auto set = [](auto& field, const auto& value) {
    if (value) {
      field = *value;
    }
  };
  set(opt.partition, layer.partition);
  set(opt.account, layer.account);
  set(opt.gres, layer.gres);
  set(opt.time_limit, layer.time);
  set(opt.extra, layer.sbatch_args);
  set(opt.setup, layer.setup);
  set(opt.max_jobs, layer.max_jobs);
  set(opt.resubmits, layer.resubmits);
}

std::string describe(const slurm_options& opt) {
  const auto or_default = [](const std::string& v, const char* none) {
    return v.empty() ? std::string(none) : v;
  };
  std::string out =
      fmt::format("partition {}, account {}, gres {}, time {}, {} jobs at once, {} resubmits",
                  or_default(opt.partition, "(default)"), or_default(opt.account, "(default)"),
                  or_default(opt.gres, "(none)"), or_default(opt.time_limit, "(default)"),
                  opt.max_jobs, opt.resubmits);
  if (!opt.extra.empty()) {
    out += fmt::format(", sbatch {}", fmt::join(opt.extra, " "));
  }
  if (!opt.setup.empty()) {
    out += fmt::format(", setup `{}`", opt.setup);
  }
  return out;
}

} // namespace kb::search
