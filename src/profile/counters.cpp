// One source's figures over the candidate's kernels. Nsight Compute reports each kernel; CUPTI's
// range reports the whole call. Both use Nsight Compute's metric names, so one table of names
// serves both.
#include "profile/profile.hpp"

#include <algorithm>

namespace kb::profile {

namespace {

using nlohmann::json;

// One kernel (or one range): metric values in SI units, by name.
struct figures {
  std::string name;
  std::map<std::string, double> si;
  std::optional<double> get(const std::string& metric) const {
    const auto it = si.find(metric);
    return it != si.end() ? std::optional<double>(it->second) : std::nullopt;
  }
};

namespace name {
const std::string duration = "gpu__time_duration.sum";
const std::string sm = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const std::string memory = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
const std::string dram_pct = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed";
const std::string dram_pct_alt = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const std::string dram_bandwidth = "dram__bytes.sum.per_second";
const std::string achieved = "sm__warps_active.avg.pct_of_peak_sustained_active";
const std::string theoretical = "sm__maximum_warps_per_active_cycle_pct";
const std::string l1_hit = "l1tex__t_sector_hit_rate.pct";
const std::string l2_hit = "lts__t_sector_hit_rate.pct";
const std::string waves = "launch__waves_per_multiprocessor";
const std::string grid = "launch__grid_size";
const std::string ctas = "sm__ctas_launched.sum";
const std::string block = "launch__block_size";
const std::string sms = "device__attribute_multiprocessor_count";
const std::string registers = "launch__registers_per_thread";
const std::string load_sectors = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
const std::string load_requests = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
const std::string stall_prefix = "smsp__average_warps_issue_stalled_";
const std::string stall_suffix = "_per_issue_active.ratio";
} // namespace name

// Blocks per SM each resource allows; the smallest limits occupancy.
const std::vector<std::pair<std::string, std::string>> occupancy_limits{
    {"launch__occupancy_limit_registers", "registers"},
    {"launch__occupancy_limit_shared_mem", "shared_memory"},
    {"launch__occupancy_limit_warps", "warps"},
    {"launch__occupancy_limit_blocks", "blocks"}};

counters aggregate(const std::vector<figures>& ks, const std::string& source) {
  counters c;
  c.source = source;
  c.kernels = static_cast<int>(ks.size());
  if (ks.empty()) {
    return c;
  }
  const bool timed = std::all_of(
      ks.begin(), ks.end(), [](const figures& f) { return f.get(name::duration).has_value(); });
  const auto weight = [&](const figures& f) { return timed ? *f.get(name::duration) : 1.0; };
  if (timed) {
    double total = 0;
    for (const auto& f : ks) {
      total += *f.get(name::duration);
    }
    c.duration = total;
  }
  const auto weighted = [&](const std::string& metric) -> std::optional<double> {
    double sum = 0;
    double weights = 0;
    for (const auto& f : ks) {
      if (const auto v = f.get(metric)) {
        sum += weight(f) * *v;
        weights += weight(f);
      }
    }
    return weights > 0 ? std::optional<double>(sum / weights) : std::nullopt;
  };
  c.sm_throughput = weighted(name::sm);
  c.memory_throughput = weighted(name::memory);
  c.dram_throughput = weighted(name::dram_pct);
  if (!c.dram_throughput) {
    c.dram_throughput = weighted(name::dram_pct_alt);
  }
  c.dram_bandwidth = weighted(name::dram_bandwidth);
  c.achieved_occupancy = weighted(name::achieved);
  c.theoretical_occupancy = weighted(name::theoretical);
  c.l1_hit_rate = weighted(name::l1_hit);
  c.l2_hit_rate = weighted(name::l2_hit);

  const auto& longest =
      *std::max_element(ks.begin(), ks.end(),
                        [&](const figures& a, const figures& b) { return weight(a) < weight(b); });
  c.waves_per_sm = longest.get(name::waves);
  c.grid_blocks = longest.get(name::grid);
  if (!c.grid_blocks) {
    c.grid_blocks = longest.get(name::ctas);
  }
  c.block_threads = longest.get(name::block);
  c.sm_count = longest.get(name::sms);
  c.registers_per_thread = longest.get(name::registers);
  const auto sectors = longest.get(name::load_sectors);
  const auto requests = longest.get(name::load_requests);
  if (sectors && requests && *requests > 0) {
    c.sectors_per_load_request = *sectors / *requests;
  }
  std::optional<double> fewest;
  for (const auto& [metric, limiter] : occupancy_limits) {
    const auto v = longest.get(metric);
    if (v && (!fewest || *v < *fewest)) {
      fewest = v;
      c.occupancy_limiter = limiter;
    }
  }
  for (const auto& [metric, v] : longest.si) {
    if (metric.size() > name::stall_prefix.size() + name::stall_suffix.size() &&
        metric.rfind(name::stall_prefix, 0) == 0 &&
        metric.compare(metric.size() - name::stall_suffix.size(), name::stall_suffix.size(),
                       name::stall_suffix) == 0) {
      std::string reason =
          metric.substr(name::stall_prefix.size(),
                        metric.size() - name::stall_prefix.size() - name::stall_suffix.size());
      // "selected" is the cycle a warp issues, not a stall.
      if (reason != "selected") {
        c.stalls.push_back({reason, v});
      }
    }
  }
  std::stable_sort(c.stalls.begin(), c.stalls.end(), [](const stall& a, const stall& b) {
    return a.cycles_per_issue > b.cycles_per_issue;
  });
  for (const auto& f : ks) {
    json k{{"name", f.name}};
    for (const auto& [key, metric] :
         {std::pair<const char*, const std::string*>{"duration_s", &name::duration},
          {"sm_throughput_pct", &name::sm},
          {"memory_throughput_pct", &name::memory}}) {
      if (const auto v = f.get(*metric)) {
        k[key] = *v;
      }
    }
    c.kernel_list.push_back(k);
  }
  return c;
}

template <class T> void fill(std::optional<T>& mine, const std::optional<T>& theirs) {
  if (!mine && theirs) {
    mine = theirs;
  }
}

void put(json& j, const char* key, const std::optional<double>& v) {
  if (v) {
    j[key] = *v;
  }
}

} // namespace

counters counters_from_ncu(const std::vector<kernel_row>& kernels) {
  std::vector<figures> ks;
  for (const auto& row : kernels) {
    figures f;
    f.name = row.kernel_name();
    for (const auto& [column, m] : row.columns) {
      if (const auto v = m.si()) {
        f.si[column] = *v;
      }
    }
    ks.push_back(std::move(f));
  }
  auto c = aggregate(ks, "ncu");
  c.truncated = static_cast<int>(kernels.size()) >= max_profiled_kernels;
  return c;
}

counters counters_from_cupti(const cupti_values& v) {
  figures f;
  f.name = nvtx_range;
  for (const auto& [metric, value] : v.values) {
    f.si[metric] = value.first * si_scale(value.second).first;
  }
  return aggregate({f}, "cupti");
}

void counters::merge(const counters& o) {
  kernels = std::max(kernels, o.kernels);
  truncated = truncated || o.truncated;
  fill(duration, o.duration);
  fill(sm_throughput, o.sm_throughput);
  fill(memory_throughput, o.memory_throughput);
  fill(dram_throughput, o.dram_throughput);
  fill(dram_bandwidth, o.dram_bandwidth);
  fill(achieved_occupancy, o.achieved_occupancy);
  fill(theoretical_occupancy, o.theoretical_occupancy);
  fill(l1_hit_rate, o.l1_hit_rate);
  fill(l2_hit_rate, o.l2_hit_rate);
  fill(waves_per_sm, o.waves_per_sm);
  fill(grid_blocks, o.grid_blocks);
  fill(block_threads, o.block_threads);
  fill(sm_count, o.sm_count);
  fill(registers_per_thread, o.registers_per_thread);
  fill(sectors_per_load_request, o.sectors_per_load_request);
  if (occupancy_limiter.empty()) {
    occupancy_limiter = o.occupancy_limiter;
  }
  if (stalls.empty()) {
    stalls = o.stalls;
  }
  if (kernel_list.empty()) {
    kernel_list = o.kernel_list;
  }
}

json counters::to_json() const {
  json j{{"source", source}, {"kernels", kernels}, {"truncated", truncated}};
  put(j, "duration_s", duration);
  put(j, "sm_throughput_pct", sm_throughput);
  put(j, "memory_throughput_pct", memory_throughput);
  put(j, "dram_throughput_pct", dram_throughput);
  put(j, "dram_bandwidth_bytes_per_s", dram_bandwidth);
  put(j, "achieved_occupancy_pct", achieved_occupancy);
  put(j, "theoretical_occupancy_pct", theoretical_occupancy);
  put(j, "l1_hit_rate_pct", l1_hit_rate);
  put(j, "l2_hit_rate_pct", l2_hit_rate);
  put(j, "waves_per_sm", waves_per_sm);
  put(j, "grid_blocks", grid_blocks);
  put(j, "block_threads", block_threads);
  put(j, "sm_count", sm_count);
  put(j, "registers_per_thread", registers_per_thread);
  put(j, "sectors_per_load_request", sectors_per_load_request);
  if (!occupancy_limiter.empty()) {
    j["occupancy_limiter"] = occupancy_limiter;
  }
  json s = json::array();
  for (const auto& st : stalls) {
    s.push_back({{"reason", st.reason}, {"cycles_per_issue", st.cycles_per_issue}});
  }
  j["stalls"] = s;
  j["kernel_list"] = kernel_list;
  return j;
}

} // namespace kb::profile
