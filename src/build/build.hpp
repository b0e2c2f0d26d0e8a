// The nvcc driver: compiles a candidate (or a task's oracle module) into a shared object for one
// architecture, with a time limit and the compiler log kept, and caches the result under a key
// made of the digests of everything that decides the binary.
#pragma once

#include "common/names.hpp"
#include "common/process.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kb::build {

namespace fs = std::filesystem;

struct toolchain {
  fs::path nvcc;
  std::string version; // "13.0.88"
  std::string arch;    // "sm_90a"
};

// Finds nvcc ($KBLASTER_NVCC, else the one the project was built with, else PATH) and reads its
// version. `arch` defaults to sm_90a (the H200); callers pass the device's when one is present.
toolchain detect_toolchain(const std::optional<std::string>& arch = std::nullopt);

// "-gencode arch=compute_90a,code=sm_90a" for "sm_90a".
std::vector<std::string> gencode_flags(const std::string& arch);

enum class outcome { ok, compile_error, timeout, crashed, unavailable };
inline constexpr auto outcome_names =
    name_table<outcome>({{outcome::ok, "ok"},
                         {outcome::compile_error, "compile_error"},
                         {outcome::timeout, "timeout"},
                         {outcome::crashed, "crashed"},
                         {outcome::unavailable, "unavailable"}});
static_assert(outcome_names.well_formed());
std::string to_string(outcome o);
std::optional<outcome> outcome_from_string(const std::string& s);

struct request {
  std::string source; // the .cu text
  std::string source_name = "candidate.cu";
  std::vector<fs::path> include_dirs;
  std::vector<std::string> defines; // NAME=VALUE
  std::vector<std::string> extra_flags;
  // Files written beside the source (name, text): a task's generated math header, which the
  // sandboxed compiler could not read where it was generated.
  std::vector<std::pair<std::string, std::string>> files;
  std::string headers_digest; // digest of every header the source may include
  std::chrono::seconds timeout{120};
};

struct result {
  outcome status = outcome::unavailable;
  std::string reason;             // reason code: build.ok, build.compile_error, build.timeout, ...
  fs::path binary;                // the shared object, when ok
  std::string log;                // nvcc's output
  std::vector<std::string> flags; // the full command line after nvcc
  std::string key;                // cache key
  std::string source_digest;
  std::string binary_digest;
  bool cached = false;
  double seconds = 0; // [s] compile wall time (0 when cached)

  bool ok() const { return status == outcome::ok; }
  // Its JSON (the log kept as its last 4000 bytes, `log_tail`), and back: a document that is not
  // one throws nlohmann::json's exceptions, or std::invalid_argument for an unknown status.
  nlohmann::json to_json() const;
  static result from_json(const nlohmann::json& j);
};

// Lets the caller run the compiler inside a sandbox: receives the plain command and returns the
// one to run. The identity when absent.
using process_wrapper = std::function<process_spec(const process_spec&)>;

class compiler {
public:
  compiler(toolchain tc, fs::path cache_dir, process_wrapper wrap = {});

  // Compiles, or returns the cached binary for the same key. Never throws for a bad candidate:
  // its failure is in the result.
  result compile(const request& req);

  const toolchain& tools() const { return m_tools; }

private:
  toolchain m_tools;
  fs::path m_cache_dir;
  process_wrapper m_wrap;
};

// What every candidate of a task is compiled with: the project's include folder, the task folder,
// KB_TASK_MATH naming the task's math header, and the headers digest over all of them.
request candidate_request(const fs::path& project_root, const task::contract& c, std::string source,
                          std::string source_name);

// The task's oracle module (float64 oracles bound to the task's math).
request oracle_request(const fs::path& project_root, const task::contract& c);

} // namespace kb::build
