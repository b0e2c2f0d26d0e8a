// The bottleneck classifier: Nsight Compute's speed-of-light rule, refined with occupancy, the top
// warp stall and the analytic roofline; the same thresholds on the roofline alone without counters.
#include "profile/profile.hpp"

#include <fmt/format.h>

#include <cmath>

namespace kb::profile {

using nlohmann::json;

std::string to_string(state v) {
  return std::string(state_names.name(v));
}

std::optional<state> state_from_string(const std::string& s) {
  return state_names.parse(s);
}

json assessment::to_json() const {
  return {{"state", to_string(result)},
          {"events_only", events_only},
          {"events_only_reason", events_only_reason},
          {"rule", rule},
          {"findings", findings},
          {"numbers", numbers},
          {"sentence", sentence}};
}

namespace {

// Nsight Compute's thresholds, in percent of peak.
constexpr double bound_at = 80;
constexpr double idle_below = 60;
constexpr double distinct_by = 10;

std::string pct(double v) {
  return std::abs(v) < 9.95 ? fmt::format("{:.1f}%", v) : fmt::format("{:.0f}%", v);
}

std::string stall_words(const std::string& reason) {
  static const std::map<std::string, std::string> words{
      {"long_scoreboard", "waiting on global or local memory"},
      {"short_scoreboard", "waiting on shared memory or special functions"},
      {"wait", "fixed-latency dependencies"},
      {"barrier", "waiting at a block barrier"},
      {"membar", "waiting on a memory barrier"},
      {"math_pipe_throttle", "math pipe busy"},
      {"mio_throttle", "shared-memory instruction queue full"},
      {"lg_throttle", "global-memory instruction queue full"},
      {"tex_throttle", "texture unit busy"},
      {"not_selected", "eligible but not selected: issue-bound"},
      {"dispatch_stall", "dispatch stall"},
      {"drain", "draining stores at exit"},
      {"imc_miss", "constant cache miss"},
      {"branch_resolving", "resolving branches"},
      {"no_instruction", "instruction fetch"},
      {"sleeping", "sleeping"},
      {"misc", "miscellaneous"}};
  const auto it = words.find(reason);
  return it != words.end() ? it->second : reason;
}

std::string load_phrase(double sectors) {
  if (sectors <= 6) {
    return fmt::format("16-byte loads absent ({:.1f} sectors per load request)", sectors);
  }
  if (sectors < 12) {
    return fmt::format("8-byte loads ({:.1f} sectors per load request)", sectors);
  }
  if (sectors <= 17) {
    return fmt::format("16-byte loads ({:.1f} sectors per load request)", sectors);
  }
  return fmt::format("scattered loads ({:.1f} sectors per load request)", sectors);
}

std::string occupancy_phrase(const counters& c) {
  std::string s = "occupancy " + pct(*c.achieved_occupancy);
  if (c.theoretical_occupancy && *c.achieved_occupancy < *c.theoretical_occupancy - distinct_by) {
    s += " of " + pct(*c.theoretical_occupancy) + " theoretical";
  }
  if (c.theoretical_occupancy && *c.theoretical_occupancy < 99.5 && !c.occupancy_limiter.empty()) {
    s +=
        fmt::format(" (theoretical {} limited by {})", pct(*c.theoretical_occupancy),
                    c.occupancy_limiter == "shared_memory" ? "shared memory" : c.occupancy_limiter);
  }
  return s;
}

// Whether the grid fills less than one wave of the device; nullopt when the counters cannot say.
std::optional<bool> under_one_wave(const counters& c) {
  if (c.waves_per_sm) {
    return *c.waves_per_sm < 1.0;
  }
  if (c.grid_blocks && c.sm_count) {
    // Fewer blocks than SMs is certainly under a wave; more may still be, but cannot be told.
    return *c.grid_blocks < *c.sm_count ? std::optional<bool>(true) : std::nullopt;
  }
  return std::nullopt;
}

} // namespace

assessment classify(const observation& o) {
  assessment a;
  json& n = a.numbers;
  n["bytes"] = o.bytes;
  n["flops"] = o.flops;
  n["bandwidth_ceiling_bytes_per_s"] = o.ceilings.bandwidth;
  n["fp32_ceiling_flops_per_s"] = o.ceilings.fp32_flops;
  n["ceilings_source"] = o.ceilings.source;
  a.events_only = !o.measured.has_value();
  if (a.events_only) {
    a.events_only_reason = o.events_only_reason.empty() ? "no counters" : o.events_only_reason;
  }

  // The call's time: CUDA events when there are any, else the counters' duration.
  std::optional<double> seconds;
  if (o.seconds && *o.seconds > 0) {
    seconds = o.seconds;
    n["time_source"] = "events";
  } else if (o.measured && o.measured->duration && *o.measured->duration > 0) {
    seconds = o.measured->duration;
    n["time_source"] = o.measured->source;
  }
  std::optional<double> bandwidth_fraction;
  std::optional<double> compute_fraction;
  if (seconds) {
    n["seconds"] = *seconds;
    n["achieved_bandwidth_bytes_per_s"] = o.bytes / *seconds;
    n["achieved_flops_per_s"] = o.flops / *seconds;
    bandwidth_fraction = o.bytes / *seconds / o.ceilings.bandwidth;
    compute_fraction = o.flops / *seconds / o.ceilings.fp32_flops;
    n["bandwidth_fraction"] = *bandwidth_fraction;
    n["compute_fraction"] = *compute_fraction;
  }

  const counters* c = o.measured ? &*o.measured : nullptr;
  const bool speed_of_light = c != nullptr && c->sm_throughput && c->memory_throughput;
  double sm = 0;
  double memory = 0;
  if (speed_of_light) {
    sm = *c->sm_throughput;
    memory = *c->memory_throughput;
    n["basis"] = "counters";
  } else if (bandwidth_fraction) {
    sm = 100 * *compute_fraction;
    memory = 100 * *bandwidth_fraction;
    n["basis"] = "roofline";
  } else {
    n["basis"] = "none";
  }
  n["sm_pct"] = sm;
  n["memory_pct"] = memory;
  const std::string of_bandwidth =
      bandwidth_fraction ? pct(100 * *bandwidth_fraction) + " of measured bandwidth" : "";
  const std::string of_fp32 =
      compute_fraction ? pct(100 * *compute_fraction) + " of FP32 peak" : "";
  const std::string units = fmt::format("SM {} and memory {} of peak", pct(sm), pct(memory));

  std::string head;
  if (!speed_of_light && !bandwidth_fraction) {
    a.result = state::unknown;
    a.rule = "no time and no throughput counters";
    head = "unknown: no time and no throughput counters";
  } else if (speed_of_light && bandwidth_fraction &&
             (*bandwidth_fraction >= bound_at / 100 || *compute_fraction >= bound_at / 100)) {
    // Measured ceilings are reachable; the counters' peaks may not be. At 80% of one, the
    // roofline itself proves the bound.
    a.result =
        *bandwidth_fraction >= *compute_fraction ? state::memory_bound : state::compute_bound;
    a.rule = fmt::format("roofline at >= {:.0f}% of the measured {} ceiling", bound_at,
                         a.result == state::memory_bound ? "bandwidth" : "FP32");
  } else if (sm >= bound_at || memory >= bound_at) {
    a.result = memory >= sm ? state::memory_bound : state::compute_bound;
    a.rule = fmt::format("{} at >= {:.0f}% of peak", memory >= sm ? "memory" : "SM", bound_at);
  } else if (sm < idle_below && memory < idle_below) {
    if (!speed_of_light) {
      a.result = state::unknown;
      a.rule = fmt::format("roofline below {:.0f}% of both ceilings", idle_below);
      head = fmt::format("unknown: {} and {}, below {:.0f}% of both; counters are needed to tell "
                         "latency from extra traffic",
                         of_bandwidth, of_fp32, idle_below);
    } else {
      const auto small = under_one_wave(*c);
      a.result = small.value_or(false) ? state::small_grid : state::latency_bound;
      a.rule = small.value_or(false)
                   ? fmt::format("both below {:.0f}% of peak, grid under one wave", idle_below)
                   : fmt::format("both below {:.0f}% of peak{}", idle_below,
                                 small ? "" : ", grid size unknown");
    }
  } else if (std::abs(sm - memory) >= distinct_by) {
    a.result = memory > sm ? state::memory_bound : state::compute_bound;
    a.rule = fmt::format("the larger, {:.0f} or more points ahead", distinct_by);
  } else {
    a.result = state::balanced;
    a.rule = fmt::format("within {:.0f} points of each other", distinct_by);
  }

  if (head.empty()) {
    switch (a.result) {
    case state::memory_bound:
      head =
          bandwidth_fraction ? "memory-bound at " + of_bandwidth : "memory-bound (" + units + ")";
      break;
    case state::compute_bound:
      head = speed_of_light ? fmt::format("compute-bound: SM at {} of peak{}", pct(sm),
                                          of_fp32.empty() ? "" : ", " + of_fp32)
                            : "compute-bound at " + of_fp32;
      break;
    case state::latency_bound:
      head = "latency-bound: " + units;
      break;
    case state::small_grid: {
      std::string grid;
      if (c->grid_blocks) {
        grid = fmt::format("{:.0f} block{}", *c->grid_blocks, *c->grid_blocks == 1 ? "" : "s");
        if (c->block_threads) {
          grid += fmt::format(" of {:.0f} threads", *c->block_threads);
        }
      }
      if (c->waves_per_sm) {
        grid += fmt::format("{}{:.2g} waves", grid.empty() ? "" : ", ", *c->waves_per_sm);
      }
      if (c->sm_count) {
        grid += fmt::format(" on {:.0f} SMs", *c->sm_count);
      }
      head = "small grid" + (grid.empty() ? "" : " (" + grid + ")") + ": " + units;
      break;
    }
    case state::balanced:
      head =
          speed_of_light ? "balanced: " + units : "balanced at " + of_bandwidth + " and " + of_fp32;
      break;
    case state::unknown:
      break;
    }
  }

  if (c != nullptr) {
    if (c->dram_bandwidth && c->duration && o.bytes > 0) {
      const double dram_bytes = *c->dram_bandwidth * *c->duration;
      const double ratio = dram_bytes / o.bytes;
      n["dram_bytes"] = dram_bytes;
      n["traffic_ratio"] = ratio;
      if (ratio > 1.25) {
        a.findings.push_back(fmt::format("moves {:.1f}x the task's minimum bytes", ratio));
      } else if (ratio < 0.75) {
        a.findings.push_back(fmt::format(
            "DRAM traffic {} of the task's minimum (the rest served from L2)", pct(100 * ratio)));
      }
    }
    if (a.result == state::memory_bound && speed_of_light && bandwidth_fraction &&
        *bandwidth_fraction < 0.5) {
      a.findings.push_back("memory units busy yet far from the bandwidth roofline: extra traffic "
                           "or an on-chip unit (L1, shared memory) limits");
    }
    if (c->sectors_per_load_request) {
      a.findings.push_back(load_phrase(*c->sectors_per_load_request));
    }
    if (c->achieved_occupancy) {
      a.findings.push_back(occupancy_phrase(*c));
    }
    if (!c->stalls.empty() && c->stalls.front().cycles_per_issue > 0) {
      const auto& top = c->stalls.front();
      a.findings.push_back(fmt::format("top stall {} ({}, {:.1f} cycles per instruction)",
                                       top.reason, stall_words(top.reason), top.cycles_per_issue));
      n["top_stall"] = top.reason;
    }
    if (c->truncated) {
      a.findings.push_back(
          fmt::format("only the first {} kernels of the call were profiled", c->kernels));
    }
  }

  a.sentence = head;
  for (const auto& f : a.findings) {
    a.sentence += "; " + f;
  }
  if (a.events_only) {
    a.sentence = "events only (" + a.events_only_reason + "): " + a.sentence;
  }
  return a;
}

} // namespace kb::profile
