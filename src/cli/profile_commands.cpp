#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "profile/profile.hpp"
#include "sandbox/sandbox.hpp"
#include "task/task.hpp"

#include <memory>

#include <fmt/format.h>

#include <unistd.h>

namespace kb::cli {

namespace {

using nlohmann::json;

std::string pct(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}%", *v) : "-";
}

void print_report(const task::contract& c, const profile::report& r) {
  fmt::print("task      {} {} ({}) at shape {}\n", c.id, c.name, c.suite, r.shape);
  fmt::print("candidate {} (sha256 {})\n", r.candidate.name,
             r.candidate.source_digest.substr(0, 16));
  if (r.device) {
    fmt::print("device    {} (driver {})\n", r.device->name, r.device->driver_version);
  }
  const auto& acc = r.counter_access;
  if (r.measured) {
    std::string plans;
    for (const auto& raw : r.raw) {
      plans += (plans.empty() ? "" : ", ") + profile::to_string(raw.which) + " (raw sha256 " +
               raw.sha256.substr(0, 16) + ")";
    }
    fmt::print("counters  {} {}{}\n", profile::to_string(acc.source), acc.tool,
               plans.empty() ? "" : "; plans " + plans);
  } else if (r.outcome == profile::status::events_only) {
    fmt::print("counters  unavailable, events only: {}\n", r.bottleneck.events_only_reason);
  }
  if (r.outcome != profile::status::profiled && r.outcome != profile::status::events_only) {
    fmt::print("status    {} ({}) {}\n", profile::to_string(r.outcome), r.reason, r.message);
    fmt::print("elapsed   {:.1f} s\n", r.seconds);
    return;
  }
  const auto& n = r.bottleneck.numbers;
  if (n.contains("seconds")) {
    fmt::print("time      {:.4f} ms ({})\n", 1e3 * n["seconds"].get<double>(),
               n.value("time_source", "") == "events" ? "CUDA events, median of 5 cold-L2 calls"
                                                      : n.value("time_source", ""));
    fmt::print("roofline  {:.3g} GB/s = {:.1f}% of {:.3g} GB/s; {:.3g} GFLOP/s = {:.1f}% of {:.3g} "
               "GFLOP/s ({})\n",
               1e-9 * n.value("achieved_bandwidth_bytes_per_s", 0.0),
               100 * n.value("bandwidth_fraction", 0.0),
               1e-9 * n.value("bandwidth_ceiling_bytes_per_s", 0.0),
               1e-9 * n.value("achieved_flops_per_s", 0.0), 100 * n.value("compute_fraction", 0.0),
               1e-9 * n.value("fp32_ceiling_flops_per_s", 0.0), n.value("ceilings_source", ""));
  }
  if (r.measured) {
    const auto& m = *r.measured;
    fmt::print("SOL       SM {}, memory {}, DRAM {} of peak; duration {}\n", pct(m.sm_throughput),
               pct(m.memory_throughput), pct(m.dram_throughput),
               m.duration ? fmt::format("{:.4f} ms over {} kernel{}", *m.duration * 1e3, m.kernels,
                                        m.kernels == 1 ? "" : "s")
                          : "-");
    fmt::print("occupancy achieved {}, theoretical {}{}{}\n", pct(m.achieved_occupancy),
               pct(m.theoretical_occupancy),
               m.occupancy_limiter.empty() ? "" : " (limit: " + m.occupancy_limiter + ")",
               m.waves_per_sm ? fmt::format("; {:.2f} waves", *m.waves_per_sm) : "");
    if (m.l1_hit_rate || m.l2_hit_rate || m.dram_bandwidth) {
      fmt::print("memory    L1 hit {}, L2 hit {}, DRAM {}\n", pct(m.l1_hit_rate),
                 pct(m.l2_hit_rate),
                 m.dram_bandwidth ? fmt::format("{:.3g} GB/s", *m.dram_bandwidth * 1e-9) : "-");
    }
    if (!m.stalls.empty()) {
      std::string s;
      for (size_t i = 0; i < m.stalls.size() && i < 3; ++i) {
        s += fmt::format("{}{} {:.1f}", i == 0 ? "" : ", ", m.stalls[i].reason,
                         m.stalls[i].cycles_per_issue);
      }
      fmt::print("stalls    {} (cycles per issued instruction)\n", s);
    }
  }
  fmt::print("state     {}\n", profile::to_string(r.bottleneck.result));
  fmt::print("          {}\n", r.bottleneck.sentence);
  fmt::print("elapsed   {:.1f} s\n", r.seconds);
}

int exit_for(profile::status s) {
  switch (s) {
  case profile::status::profiled:
  case profile::status::events_only:
    return exit_code::ok;
  case profile::status::rejected:
    return exit_code::rejected;
  case profile::status::blocked:
    return exit_code::blocked;
  case profile::status::error:
    return exit_code::tool;
  }
  return exit_code::tool;
}

} // namespace

void add_profile_commands(CLI::App& app, const global_options& globals, int* result) {
  // The command's options with their defaults; CLI11 writes into them while parsing.
  struct options {
    bool probe_cupti = false;
    std::string task_id;
    std::string candidate;
    std::string shape = "official";
    std::vector<std::string> plans;
    std::string source = "ncu";
    std::string json_out;
    std::string raw_out;
    int hang_timeout = static_cast<int>(eval::options{}.hang_timeout.count());
    bool no_sandbox = false;
  };
  const auto opts = std::make_shared<options>();

  auto* probe = app.add_subcommand(
      "profile-probe", "the counter-access probe's target (started by kblaster itself)");
  probe->group("");
  probe->add_flag("--cupti", opts->probe_cupti, "collect CUPTI counters around the probe kernel");
  probe->callback([result, opts] { *result = profile::probe_target_main(opts->probe_cupti); });

  auto* cmd = app.add_subcommand(
      "profile", "explain where a candidate's time goes (Nsight Compute, CUPTI, or events only)");
  sandbox::add_no_sandbox_flag(*cmd, &opts->no_sandbox);
  cmd->add_option("--task", opts->task_id, "task id")->required();
  cmd->add_option("--candidate", opts->candidate, "candidate .cu file")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--shape", opts->shape, "shape to profile (default official)");
  cmd->add_option("--plan", opts->plans,
                  "Nsight Compute plan: triage (default), memory, scheduler; repeatable")
      ->check(CLI::IsMember({"triage", "memory", "scheduler"}));
  cmd->add_option("--counters", opts->source, "counter source: ncu (default) or cupti")
      ->check(CLI::IsMember({"ncu", "cupti"}));
  cmd->add_option("--json", opts->json_out, "write the report as JSON here");
  cmd->add_option(
      "--raw", opts->raw_out,
      "write Nsight Compute's raw CSV here (one file per plan: NAME-PLAN.csv when several)");
  cmd->add_option("--hang-timeout", opts->hang_timeout,
                  "seconds without progress before a worker is ended");
  cmd->callback([&globals, result, opts] {
    const auto root = find_project_root(globals.root);
    const auto c = task::find_task(root, opts->task_id);
    profile::request req;
    req.options.cache_dir = default_cache_dir();
    req.options.shape = c.shape(opts->shape).name;
    req.options.no_sandbox = opts->no_sandbox;
    req.options.hang_timeout = std::chrono::seconds(opts->hang_timeout);
    // The roofline fractions are against this device's measured ceilings (measured once and
    // stored when the store has none), as in eval and bench.
    auto st = open_store(globals);
    apply_device_calibration(req.options, st, globals);
    req.source = *profile::counter_source_from_string(opts->source);
    req.plans.clear();
    for (const auto& p : opts->plans) {
      req.plans.push_back(*profile::plan_from_string(p));
    }
    if (req.plans.empty()) {
      req.plans.push_back(profile::plan::triage);
    }
    const bool tty = isatty(2) != 0;
    eval::progress_fn progress;
    if (!globals.quiet) {
      progress = [tty](const std::string& line) {
        if (tty) {
          fmt::print(stderr, "\r\033[K{}", line.substr(0, 160));
        } else {
          fmt::print(stderr, "{}\n", line);
        }
      };
    }
    const eval::candidate_input cand{read_file(opts->candidate), fs::path(opts->candidate).filename().string(),
                                     "candidate"};
    const auto r = profile::run(root, c, cand, req, progress);
    if (!globals.quiet && tty) {
      fmt::print(stderr, "\r\033[K");
    }
    print_report(c, r);
    if (!opts->json_out.empty()) {
      write_file_atomic(opts->json_out, r.to_json().dump(2) + "\n");
    }
    if (!opts->raw_out.empty()) {
      const fs::path out(opts->raw_out);
      for (const auto& raw : r.raw) {
        const fs::path to = r.raw.size() == 1 ? out
                                              : out.parent_path() / (out.stem().string() + "-" +
                                                                     profile::to_string(raw.which) +
                                                                     out.extension().string());
        write_file_atomic(to, raw.csv);
      }
    }
    *result = exit_for(r.outcome);
  });
}

} // namespace kb::cli
