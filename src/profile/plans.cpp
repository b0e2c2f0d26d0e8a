// The fixed Nsight Compute plans and where ncu is.
#include "profile/profile.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace kb::profile {

std::string to_string(plan v) {
  return std::string(plan_names.name(v));
}

std::optional<plan> plan_from_string(const std::string& s) {
  return plan_names.parse(s);
}

std::vector<std::string> plan_sections(plan p) {
  switch (p) {
  case plan::triage:
    return {"SpeedOfLight", "LaunchStats", "Occupancy"};
  case plan::memory:
    return {"MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables"};
  case plan::scheduler:
    return {"SchedulerStats", "WarpStateStats"};
  }
  return {};
}

namespace {

// What every run shares. Clocks stay as the driver sets them: ncu's default locks them to base,
// which is not allowed on a shared machine and would not match the timed runs either.
std::vector<std::string> common_flags(const std::string& ncu, int launches) {
  return {ncu,
          "--csv",
          "--page",
          "raw",
          "--print-units",
          "base",
          "--clock-control",
          "none",
          "--cache-control",
          "all",
          "--replay-mode",
          "kernel",
          "--kernel-name-base",
          "demangled",
          "--nvtx",
          "--nvtx-include",
          std::string(nvtx_range) + "/",
          "--launch-count",
          std::to_string(launches)};
}

} // namespace

std::vector<std::string> ncu_command(const std::string& ncu, plan p) {
  auto argv = common_flags(ncu, max_profiled_kernels);
  for (const auto& s : plan_sections(p)) {
    argv.push_back("--section");
    argv.push_back(s);
  }
  return argv;
}

std::vector<std::string> ncu_probe_command(const std::string& ncu) {
  auto argv = common_flags(ncu, 1);
  argv.push_back("--metrics");
  argv.push_back("gpu__time_duration.sum");
  return argv;
}

std::optional<std::string> find_ncu() {
  if (const char* env = std::getenv("KBLASTER_NCU"); env != nullptr && *env != '\0') {
    return std::filesystem::exists(env) ? std::optional<std::string>(env) : std::nullopt;
  }
  if (std::filesystem::exists("/usr/local/cuda/bin/ncu")) {
    return "/usr/local/cuda/bin/ncu";
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const auto candidate = std::filesystem::path(dir) / "ncu";
      if (!dir.empty() && std::filesystem::exists(candidate)) {
        return candidate.string();
      }
    }
  }
  return std::nullopt;
}

std::vector<std::filesystem::path> ncu_installation(const std::string& ncu) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  const auto add = [&dirs](const fs::path& p) {
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (!ec && fs::is_directory(real, ec) &&
        std::find(dirs.begin(), dirs.end(), real) == dirs.end()) {
      dirs.push_back(real);
    }
  };
  std::error_code ec;
  const fs::path tool = fs::canonical(ncu, ec);
  if (ec) {
    return dirs;
  }
  add(tool.parent_path());
  for (const auto& entry : fs::directory_iterator(tool.parent_path().parent_path(), ec)) {
    if (entry.path().filename().string().starts_with("nsight-compute")) {
      add(entry.path());
    }
  }
  add("/opt/nvidia/nsight-compute");
  return dirs;
}

} // namespace kb::profile
