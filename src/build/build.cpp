#include "build/build.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include <unistd.h>

namespace kb::build {

std::string to_string(outcome v) {
  return std::string(outcome_names.name(v));
}

nlohmann::json result::to_json() const {
  return {{"status", to_string(status)},
          {"reason", reason},
          {"binary", binary.string()},
          {"flags", flags},
          {"key", key},
          {"source_digest", source_digest},
          {"binary_digest", binary_digest},
          {"cached", cached},
          {"seconds", seconds},
          {"log_tail", log.size() > 4000 ? log.substr(log.size() - 4000) : log}};
}

std::optional<outcome> outcome_from_string(const std::string& s) {
  return outcome_names.parse(s);
}

result result::from_json(const nlohmann::json& j) {
  result r;
  const std::string status = j.at("status").get<std::string>();
  const auto o = outcome_from_string(status);
  if (!o) {
    throw std::invalid_argument("a build with status \"" + status + "\"");
  }
  r.status = *o;
  r.reason = j.at("reason").get<std::string>();
  r.binary = j.at("binary").get<std::string>();
  r.flags = j.at("flags").get<std::vector<std::string>>();
  r.key = j.at("key").get<std::string>();
  r.source_digest = j.at("source_digest").get<std::string>();
  r.binary_digest = j.at("binary_digest").get<std::string>();
  r.cached = j.at("cached").get<bool>();
  r.seconds = j.at("seconds").get<double>();
  r.log = j.at("log_tail").get<std::string>();
  return r;
}

namespace {

std::optional<fs::path> which(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) {
    return std::nullopt;
  }
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const fs::path candidate =
        fs::path(p.substr(start, end == std::string::npos ? std::string::npos : end - start)) /
        name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return std::nullopt;
}

} // namespace

toolchain detect_toolchain(const std::optional<std::string>& arch) {
  toolchain tc;
  tc.arch = arch.value_or("sm_90a");
  if (!std::regex_match(tc.arch, std::regex("sm_[0-9]+a?"))) {
    fail_input("--arch {}: expected sm_NN or sm_NNa (e.g. sm_90a)", tc.arch);
  }
  if (const char* env = std::getenv("KBLASTER_NVCC"); env != nullptr && *env != '\0') {
    tc.nvcc = env;
  } else if (fs::exists(KBLASTER_NVCC)) {
    tc.nvcc = KBLASTER_NVCC;
  } else if (auto found = which("nvcc")) {
    tc.nvcc = *found;
  } else if (fs::exists("/usr/local/cuda/bin/nvcc")) {
    tc.nvcc = "/usr/local/cuda/bin/nvcc";
  } else {
    fail("nvcc not found (set KBLASTER_NVCC or put nvcc on PATH)");
  }
  process_spec spec;
  spec.argv = {tc.nvcc.string(), "--version"};
  spec.timeout = std::chrono::seconds(30);
  const auto r = run_process(spec);
  std::smatch m;
  if (!r.ok() || !std::regex_search(r.output, m, std::regex("release [0-9.]+, V([0-9.]+)"))) {
    fail("{} --version failed ({}): {}", tc.nvcc.string(), r.describe(), r.output);
  }
  tc.version = m[1];
  return tc;
}

std::vector<std::string> gencode_flags(const std::string& arch) {
  const std::string digits = arch.substr(3);
  return {"-gencode", fmt::format("arch=compute_{},code=sm_{}", digits, digits)};
}

compiler::compiler(toolchain tc, fs::path cache_dir, process_wrapper wrap)
    : m_tools(std::move(tc)), m_cache_dir(std::move(cache_dir)), m_wrap(std::move(wrap)) {}

result compiler::compile(const request& req) {
  result res;
  res.source_digest = sha256_hex(req.source);
  res.flags = {"-std=c++17",     "-O3",       "--shared",   "-Xcompiler=-fPIC,-fvisibility=hidden",
               "-cudart=shared", "-lineinfo", "-Xptxas=-v", "--expt-relaxed-constexpr"};
  for (const auto& f : gencode_flags(m_tools.arch)) {
    res.flags.push_back(f);
  }
  for (const auto& d : req.include_dirs) {
    res.flags.push_back("-I" + d.string());
  }
  for (const auto& d : req.defines) {
    res.flags.push_back("-D" + d);
  }
  for (const auto& f : req.extra_flags) {
    res.flags.push_back(f);
  }
  sha256_builder key;
  key.field(res.source_digest).field(m_tools.version).field(m_tools.arch).field(req.headers_digest);
  for (const auto& f : res.flags) {
    key.field(f);
  }
  res.key = key.hex();

  const fs::path final_dir = m_cache_dir / "builds" / res.key.substr(0, 2) / res.key;
  const fs::path meta_path = final_dir / "meta.json";
  if (fs::exists(meta_path)) {
    try {
      const auto meta = nlohmann::json::parse(read_file(meta_path));
      res.status = meta.at("status") == "ok" ? outcome::ok : outcome::compile_error;
      res.reason = meta.at("reason");
      res.log = read_file(final_dir / "build.log");
      res.binary_digest = meta.value("binary_digest", "");
      if (res.ok()) {
        res.binary = final_dir / "candidate.so";
        if (!fs::exists(res.binary) || sha256_file(res.binary) != res.binary_digest) {
          throw error("cached binary does not match its digest");
        }
      }
      res.cached = true;
      return res;
    } catch (const std::exception&) {
      std::error_code ec;
      fs::remove_all(final_dir, ec); // a damaged entry is rebuilt
    }
  }

  // The compiler works in a private folder outside the cache (a sandboxed compiler sees only that
  // folder); the results are then staged into the cache and renamed into place atomically.
  temp_dir work("kblaster-build");
  write_file_atomic(work.path() / req.source_name, req.source);
  for (const auto& [name, text] : req.files) {
    write_file_atomic(work.path() / name, text);
  }
  process_spec spec;
  spec.argv.push_back(m_tools.nvcc.string());
  for (const auto& f : res.flags) {
    spec.argv.push_back(f);
  }
  spec.argv.push_back("-o");
  spec.argv.push_back((work.path() / "candidate.so").string());
  spec.argv.push_back((work.path() / req.source_name).string());
  spec.cwd = work.path();
  spec.timeout = req.timeout;
  const process_spec run = m_wrap ? m_wrap(spec) : spec;
  const auto pr = run_process(run);
  res.seconds = pr.wall_seconds;
  res.log = pr.output;
  if (pr.timed_out) {
    res.status = outcome::timeout;
    res.reason = "build.timeout";
    res.log +=
        fmt::format("\n[kblaster] compile stopped after the {} s limit\n", req.timeout.count());
    return res; // not cached: a limit can be transient
  }
  if (pr.spawn_failed) {
    res.status = outcome::unavailable;
    res.reason = "build.nvcc_unavailable";
    return res;
  }
  if (pr.signal != 0) {
    res.status = outcome::crashed;
    res.reason = "build.compiler_crashed";
    res.log += "\n[kblaster] compiler " + pr.describe() + "\n";
    return res;
  }
  const bool built = pr.exit_code == 0 && fs::exists(work.path() / "candidate.so");
  res.status = built ? outcome::ok : outcome::compile_error;
  res.reason = built ? "build.ok" : "build.compile_error";
  fs::create_directories(m_cache_dir / "builds" / "tmp");
  temp_dir stage("stage", m_cache_dir / "builds" / "tmp");
  if (built) {
    fs::copy_file(work.path() / "candidate.so", stage.path() / "candidate.so");
    res.binary_digest = sha256_file(stage.path() / "candidate.so");
  }
  write_file_atomic(stage.path() / "build.log", res.log);
  write_file_atomic(stage.path() / req.source_name, req.source);
  nlohmann::json meta{{"status", res.ok() ? "ok" : "compile_error"},
                      {"reason", res.reason},
                      {"binary_digest", res.binary_digest},
                      {"source_digest", res.source_digest},
                      {"flags", res.flags},
                      {"nvcc", m_tools.version},
                      {"arch", m_tools.arch},
                      {"seconds", res.seconds}};
  write_file_atomic(stage.path() / "meta.json", meta.dump(2));
  fs::create_directories(final_dir.parent_path());
  std::error_code ec;
  fs::rename(stage.path(), final_dir, ec);
  if (ec && !fs::exists(meta_path)) {
    fail("cannot move the build into the cache at {}: {}", final_dir.string(), ec.message());
  }
  if (!ec) {
    stage.keep();
    fsync_directory(final_dir.parent_path());
  }
  if (res.ok()) {
    res.binary = final_dir / "candidate.so";
  }
  return res;
}

namespace {

// Digest of every header a candidate of this task may include: the project's device headers,
// the shared task headers and the task's own folder.
std::string headers_digest(const fs::path& root, const task::contract& c) {
  std::vector<fs::path> files;
  for (const fs::path& dir : {root / "include" / "kblaster", root / "tasks" / "common", c.dir}) {
    if (!fs::is_directory(dir)) {
      continue;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cuh" || ext == ".hpp")) {
        files.push_back(e.path());
      }
    }
  }
  if (!c.math.empty()) { // a pytorch task has no math header
    files.push_back(c.math);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  sha256_builder b;
  for (const auto& f : files) {
    b.field(fs::relative(f, root).string()).field(sha256_file(f));
  }
  return b.hex();
}

// A source of the task's: its headers, its math, and the digest of what it may include.
request task_request(const fs::path& project_root, const task::contract& c, std::string source,
                     std::string source_name) {
  request r;
  r.source = std::move(source);
  r.source_name = std::move(source_name);
  r.include_dirs = {project_root / "include", c.dir};
  if (!c.math.empty() && c.math.parent_path() != c.dir) {
    // Generated math (a [loss] table) lives under the compile cache, which the sandbox does not
    // show: it travels with the source and is included beside it.
    r.files.emplace_back("kb_task_math.cuh", read_file(c.math));
    r.defines = {"KB_TASK_MATH=\"kb_task_math.cuh\""};
  } else if (!c.math.empty()) {
    r.defines = {fmt::format("KB_TASK_MATH=\"{}\"", c.math.string())};
  }
  r.headers_digest = headers_digest(project_root, c);
  return r;
}

} // namespace

request candidate_request(const fs::path& project_root, const task::contract& c, std::string source,
                          std::string source_name) {
  request r = task_request(project_root, c, std::move(source), std::move(source_name));
  // The task's dtypes: the device headers' dispatch compiles kernels for these only (a candidate
  // is only ever called with the task's tensors), which takes 15% (elementwise) to 60% (a
  // convolution) off a strategy's compile.
  r.defines.push_back(fmt::format("KB_TASK_DTYPES=0x{:x}u", task::abi_dtype_mask(c)));
  return r;
}

// The float64 oracle reads and writes other dtypes than the task's: every dtype is compiled.
request oracle_request(const fs::path& project_root, const task::contract& c) {
  return task_request(project_root, c, task::oracle_module_source(c), "oracle_" + c.id + ".cu");
}

} // namespace kb::build
