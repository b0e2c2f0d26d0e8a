// What the GPU tests share: where the project, the cache and the evidence folder are, and how a
// test's result is kept as JSON for the record.
#pragma once

#include "common/fs.hpp"
#include "eval/eval.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

namespace kb::gpu_test {

inline const fs::path root = KBLASTER_SOURCE_DIR;

inline fs::path cache_dir() {
  const char* env = std::getenv("KBLASTER_CACHE");
  return env != nullptr ? fs::path(env) : default_cache_dir();
}

// The store the GPU tests record into: $KBLASTER_HOME, else a folder under the cache.
inline store::store open_store() {
  const char* home = std::getenv("KBLASTER_HOME");
  return store::store(home != nullptr ? fs::path(home) : cache_dir() / "store");
}

inline eval::options base_options() {
  eval::options o;
  o.cache_dir = cache_dir();
  return o;
}

// This device's measured ceilings, as `kblaster calibrate --device` stores them: read from the
// tests' store, or measured there once when it has none (a fresh store on a fresh machine).
inline const task::ceilings& device_ceilings() {
  static const task::ceilings measured = [] {
    auto st = open_store();
    return eval::resolve_ceilings(st, eval::probe_device(), /*measure_when_missing=*/true, {})
        .ceilings;
  }();
  return measured;
}

// Writes `j` to $KBLASTER_EVIDENCE_DIR/<name>.json when that variable is set.
inline void keep(const std::string& name, const nlohmann::json& j) {
  const char* dir = std::getenv("KBLASTER_EVIDENCE_DIR");
  if (dir == nullptr) {
    return;
  }
  fs::create_directories(dir);
  write_file_atomic(fs::path(dir) / (name + ".json"), j.dump(2) + "\n");
}

inline nlohmann::json summary(const eval::result& r) {
  return {
      {"verdict", eval::to_string(r.final)},
      {"reason", r.reason},
      {"message", r.message},
      {"seconds", r.seconds},
      {"statistics", r.gate ? nlohmann::json(*r.gate) : nlohmann::json::object()},
      {"checker_selftest",
       r.checker_selftest ? nlohmann::json(*r.checker_selftest) : nlohmann::json::object()},
      {"device", r.context.device ? nlohmann::json(*r.context.device) : nlohmann::json::object()},
      {"isolation",
       {{"level", r.context.isolation},
        {"detail", r.context.isolation_detail},
        {"probe", r.context.isolation_probe}}},
      {"sessions", r.detail.value("sessions", nlohmann::json::array())}};
}

} // namespace kb::gpu_test
