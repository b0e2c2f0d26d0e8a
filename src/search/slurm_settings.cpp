// The Slurm settings of the config file's [slurm] table, and how layers of settings combine.
#include "common/config.hpp"
#include "common/error.hpp"
#include "search/executor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>

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
  static const std::vector<std::string> long_taken{"--wrap",   "--parsable", "--job-name",
                                                   "--output", "--ntasks",   "--array"};
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
  const toml::table root = read_config_file(file);
  slurm_settings s;
  const toml::table* table = root["slurm"].as_table();
  if (table == nullptr) {
    return s;
  }
  const auto bad = [&](const std::string& key, const std::string& what) {
    fail_input("{}: [slurm] {} must be {}", file.string(), key, what);
  };
  using setter = std::function<void(const toml::node&, const std::string&)>;
  const auto text = [&](std::optional<std::string>& field) -> setter {
    return [&, ptr = &field](const toml::node& n, const std::string& k) {
      if (!n.is_string()) {
        bad(k, "a string");
      }
      *ptr = *n.value<std::string>();
    };
  };
  const auto whole = [&](std::optional<int>& field, int low, int high) -> setter {
    return [&, ptr = &field, low, high](const toml::node& n, const std::string& k) {
      const auto what = fmt::format("an integer from {} to {}", low, high);
      if (!n.is_integer()) {
        bad(k, what);
      }
      const int64_t v = *n.value<int64_t>();
      if (v < low || v > high) {
        bad(k, what + fmt::format(", not {}", v));
      }
      *ptr = static_cast<int>(v);
    };
  };
  const std::map<std::string, setter> setters{
      {"partition", text(s.partition)},
      {"account", text(s.account)},
      {"gres", text(s.gres)},
      {"time", text(s.time)},
      {"setup", text(s.setup)},
      {"max_jobs", whole(s.max_jobs, 1, max_jobs_limit)},
      {"resubmits", whole(s.resubmits, 0, resubmits_limit)},
      {"sbatch_args",
       [&](const toml::node& n, const std::string& k) {
         const toml::array* a = n.as_array();
         if (a == nullptr) {
           bad(k, "an array of strings, e.g. [\"--qos=high\"]");
         }
         std::vector<std::string> args;
         for (const auto& item : *a) {
           if (!item.is_string()) {
             bad(k, "an array of strings, e.g. [\"--qos=high\"]");
           }
           args.push_back(*item.value<std::string>());
           if (const auto why = sbatch_arg_problem(args.back()); !why.empty()) {
             fail_input("{}: [slurm] {}: {}", file.string(), k, why);
           }
         }
         s.sbatch_args = std::move(args);
       }},
  };
  for (const auto& [key, node] : *table) {
    const std::string name(key.str());
    const auto it = setters.find(name);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, unused] : setters) {
        known += (known.empty() ? "" : ", ") + k;
      }
      fail_input("{}: [slurm] has no setting {} (known: {})", file.string(), name, known);
    }
    it->second(node, name);
  }
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
