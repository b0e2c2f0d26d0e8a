#include "sandbox/sandbox.hpp"

#include "common/error.hpp"
#include "sandbox/detail/sandbox_detail.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

#include <sys/stat.h>
#include <unistd.h>

extern char** environ;

namespace kb::sandbox {

namespace {

// The CUDA toolkit the project was built with (its bin/ holds nvcc).
fs::path toolkit_dir() {
  return fs::path(KBLASTER_NVCC).parent_path().parent_path();
}

fs::path absolute_normal(const fs::path& p) {
  return fs::absolute(p).lexically_normal();
}

bool is_within(const fs::path& path, const fs::path& folder) {
  auto [f, p] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  return f == folder.end() || (std::next(f) == folder.end() && f->empty());
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string_view::npos) {
      vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  return vars;
}

bool is_executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

fs::path find_bwrap(const policy& rules) {
  if (!rules.bwrap.empty()) {
    if (!is_executable_file(rules.bwrap)) {
      fail("bwrap not found at {}", rules.bwrap.string());
    }
    return rules.bwrap;
  }
  if (const char* env = std::getenv("KBLASTER_BWRAP"); env != nullptr && *env != '\0') {
    if (!is_executable_file(env)) {
      fail("bwrap not found at {} ($KBLASTER_BWRAP)", env);
    }
    return env;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
    if (!dir.empty() && is_executable_file(fs::path(dir) / "bwrap")) {
      return fs::path(dir) / "bwrap";
    }
  }
  fail("bwrap not found on PATH: install bubblewrap, or set KBLASTER_BWRAP to its path");
}

// One mount of the sandbox's file system view.
struct mount_entry {
  enum kind { read_only, writable, device, link } type;
  fs::path path;
  fs::path link_target; // for links
};

std::vector<mount_entry> file_system_view(const policy& rules) {
  std::vector<mount_entry> view;
  const auto covered = [&view](const fs::path& p) {
    return std::any_of(view.begin(), view.end(), [&p](const mount_entry& m) {
      return m.type != mount_entry::device && is_within(p, m.path);
    });
  };
  for (const auto& raw : rules.system) {
    const fs::path p = absolute_normal(raw);
    std::error_code ec;
    const auto status = fs::symlink_status(p, ec);
    if (ec || !fs::exists(status) || covered(p)) {
      continue;
    }
    if (fs::is_symlink(status)) {
      view.push_back({mount_entry::link, p, fs::read_symlink(p)});
    } else {
      view.push_back({mount_entry::read_only, p, {}});
    }
  }
  if (rules.gpu) {
    for (const auto& dev : detail::gpu_device_files("/dev")) {
      view.push_back({mount_entry::device, dev, {}});
    }
    if (!covered("/sys")) {
      view.push_back({mount_entry::read_only, "/sys", {}});
    }
  }
  // Inputs and outputs, parents before children, so that an output inside an input folder is
  // mounted on top of it.
  std::vector<mount_entry> binds;
  for (const auto& raw : rules.read_only) {
    const fs::path p = absolute_normal(raw);
    if (!covered(p)) {
      binds.push_back({mount_entry::read_only, p, {}});
    }
  }
  for (const auto& raw : rules.writable) {
    binds.push_back({mount_entry::writable, absolute_normal(raw), {}});
  }
  std::stable_sort(binds.begin(), binds.end(), [](const mount_entry& a, const mount_entry& b) {
    return std::distance(a.path.begin(), a.path.end()) <
           std::distance(b.path.begin(), b.path.end());
  });
  view.insert(view.end(), binds.begin(), binds.end());
  return view;
}

resource_limits merged_limits(const resource_limits& wanted, const resource_limits& defaults) {
  return {wanted.cpu_time ? wanted.cpu_time : defaults.cpu_time,
          wanted.file_size ? wanted.file_size : defaults.file_size,
          wanted.processes ? wanted.processes : defaults.processes,
          wanted.open_files ? wanted.open_files : defaults.open_files,
          wanted.core_size ? wanted.core_size : defaults.core_size};
}

// The process limit on top of what `uid` already runs, since the kernel counts per user.
void count_from_now(resource_limits& limits, uid_t uid) {
  if (limits.processes && uid != 0) {
    *limits.processes += detail::count_tasks_of(uid);
  }
}

void require_root(identity who) {
  if (geteuid() != 0) {
    fail("the sandbox mode '{}' needs root; without root the mode is 'caller'", to_string(who));
  }
}

// Under `nobody` bwrap itself runs as uid 65534, so everything it binds must be reachable.
void check_reachable_by_nobody(const fs::path& bwrap, const policy& rules) {
  std::vector<std::string> problems;
  const auto check = [&problems](const fs::path& p, bool write) {
    if (auto why = detail::unreachable_for_sandbox_user(p, write)) {
      problems.push_back(*why);
    }
  };
  check(bwrap, false);
  for (const auto& m : file_system_view(rules)) {
    if (m.type == mount_entry::read_only || m.type == mount_entry::writable) {
      check(m.path, m.type == mount_entry::writable);
    }
  }
  if (!problems.empty()) {
    fail("the sandbox user (uid {}) cannot reach what it needs: {}; make those folders "
         "world-searchable (chmod o+x) and the files world-readable, create outputs with "
         "make_output_dir, or run as a non-root user",
         sandbox_uid, fmt::join(problems, "; "));
  }
}

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  const auto nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

} // namespace

std::string to_string(identity who) {
  const auto name = identity_names.name(who);
  if (name == "?") {
    fail("unknown sandbox identity {}", static_cast<int>(who));
  }
  return std::string(name);
}

identity identity_from_string(std::string_view text) {
  if (auto who = identity_names.parse(text)) {
    return *who;
  }
  fail_input("unknown sandbox identity '{}'", text);
}

std::string to_string(isolation level) {
  const auto name = isolation_names.name(level);
  if (name == "?") {
    fail("unknown isolation level {}", static_cast<int>(level));
  }
  return std::string(name);
}

isolation isolation_from_string(std::string_view text) {
  if (auto level = isolation_names.parse(text)) {
    return *level;
  }
  fail_input("unknown isolation level '{}'", text);
}

std::vector<fs::path> policy::default_system_paths() {
  // The dynamic loader needs ld.so.cache; the compiler driver finds cc and c++ through
  // /etc/alternatives. Nothing else of /etc: it holds accounts, hosts and credentials.
  std::vector<fs::path> paths{"/usr",
                              "/bin",
                              "/sbin",
                              "/lib",
                              "/lib64",
                              "/lib32",
                              "/libx32",
                              "/etc/ld.so.cache",
                              "/etc/ld.so.conf",
                              "/etc/ld.so.conf.d",
                              "/etc/alternatives",
                              toolkit_dir()};
  std::error_code ec;
  if (const auto real = fs::canonical(toolkit_dir(), ec); !ec && real != toolkit_dir()) {
    paths.push_back(real);
  }
  return paths;
}

resource_limits policy::default_limits() {
  resource_limits limits;
  limits.cpu_time = 1800;        // a timing session spins on the CPU while it waits for the GPU
  limits.file_size = 1ull << 30; // a compiled module or a log is far smaller
  limits.processes = 256;        // nvcc runs a handful at a time; the CUDA runtime a few threads
  limits.open_files = 1024;
  limits.core_size = 0;
  return limits;
}

std::vector<std::string> policy::default_env_allow() {
  return {"LANG",
          "LC_ALL",
          "LC_CTYPE",
          "LC_MESSAGES",
          "TZ",
          "CUDA_VISIBLE_DEVICES",
          "CUDA_DEVICE_ORDER",
          "CUDA_MODULE_LOADING",
          "CUDA_LAUNCH_BLOCKING",
          "CUDA_CACHE_DISABLE",
          "CUDA_CACHE_MAXSIZE",
          "CUDA_DEVICE_MAX_CONNECTIONS"};
}

namespace detail {

bool is_secret_name(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  static const std::array<std::string_view, 10> parts{
      "API_KEY", "APIKEY",   "ACCESS_KEY", "PRIVATE_KEY", "TOKEN",
      "SECRET",  "PASSWORD", "PASSWD",     "CREDENTIAL",  "AUTH"};
  for (const auto part : parts) {
    if (upper.find(part) != std::string::npos) {
      return true;
    }
  }
  return upper == "PROXY" || upper.ends_with("_PROXY");
}

std::map<std::string, std::string> sandbox_environment(const process_spec& spec,
                                                       const policy& rules) {
  const auto source = spec.env ? *spec.env : current_environment();
  std::map<std::string, std::string> vars;
  for (const auto& name : rules.env_allow) {
    const auto it = source.find(name);
    if (it != source.end() && !is_secret_name(name)) {
      vars[name] = it->second;
    }
  }
  vars["PATH"] = (toolkit_dir() / "bin").string() + ":/usr/bin:/bin";
  vars["HOME"] = std::string(work_dir);
  vars["TMPDIR"] = std::string(work_dir);
  vars.try_emplace("LANG", "C.UTF-8");
  for (const auto& [name, value] : spec.env_overrides) {
    if (!is_secret_name(name)) {
      vars[name] = value;
    }
  }
  return vars;
}

std::vector<fs::path> gpu_device_files(const fs::path& dev) {
  static const std::regex device_name(
      R"(nvidia[0-9]+|nvidiactl|nvidia-uvm|nvidia-uvm-tools|nvidia-caps)");
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dev, ec)) {
    if (std::regex_match(entry.path().filename().string(), device_name)) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

identity resolve(identity who) {
  if (who != identity::automatic) {
    return who;
  }
  return geteuid() == 0 ? identity::nobody : identity::caller;
}

std::vector<std::string> bwrap_arguments(const process_spec& spec, const policy& rules,
                                         identity who) {
  std::vector<std::string> args;
  const auto add = [&args](std::initializer_list<std::string> more) {
    args.insert(args.end(), more);
  };
  if (who == identity::root) {
    add({"--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
         "--unshare-cgroup-try"});
  } else {
    add({"--unshare-all", "--unshare-user", "--disable-userns", "--uid",
         std::to_string(sandbox_uid), "--gid", std::to_string(sandbox_gid)});
  }
  add({"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"});
  for (const auto& [name, value] : sandbox_environment(spec, rules)) {
    add({"--setenv", name, value});
  }
  add({"--proc", "/proc", "--dev", "/dev", "--size", std::to_string(rules.shm_size), "--tmpfs",
       "/dev/shm", "--size", std::to_string(rules.work_size), "--tmpfs", std::string(work_dir)});
  for (const auto& m : file_system_view(rules)) {
    switch (m.type) {
    case mount_entry::read_only:
      add({"--ro-bind", m.path.string(), m.path.string()});
      break;
    case mount_entry::writable:
      add({"--bind", m.path.string(), m.path.string()});
      break;
    case mount_entry::device:
      add({"--dev-bind", m.path.string(), m.path.string()});
      break;
    case mount_entry::link:
      add({"--symlink", m.link_target.string(), m.path.string()});
      break;
    }
  }
  // The root and /dev are tmpfs without a size limit: nothing may be written there.
  add({"--remount-ro", "/dev", "--remount-ro", "/", "--chdir",
       spec.cwd ? spec.cwd->string() : std::string(work_dir), "--"});
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  return args;
}

std::optional<std::string> unreachable_for_sandbox_user(const fs::path& path, bool write) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) {
    return fmt::format("{} ({})", path.string(), ec.message());
  }
  const auto allows = [](const struct stat& st, unsigned bits) {
    // bits: 4 read, 2 write, 1 search, in the owner, group or other class that applies.
    const unsigned shift = st.st_uid == sandbox_uid ? 6 : st.st_gid == sandbox_gid ? 3 : 0;
    return ((st.st_mode >> shift) & bits) == bits;
  };
  fs::path prefix;
  for (auto it = real.begin(); it != real.end(); ++it) {
    prefix /= *it;
    struct stat st {};
    if (stat(prefix.c_str(), &st) != 0) {
      return fmt::format("{} ({})", prefix.string(), std::strerror(errno));
    }
    const bool last = std::next(it) == real.end();
    const unsigned bits = !last ? 1u : (write ? 2u : 4u) | (S_ISDIR(st.st_mode) ? 1u : 0u);
    if (!allows(st, bits)) {
      return fmt::format("{} (mode {:o}, owner {})", prefix.string(), st.st_mode & 07777,
                         st.st_uid);
    }
  }
  return std::nullopt;
}

uint64_t count_tasks_of(uid_t uid) {
  uint64_t tasks = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(),
                                     [](unsigned char c) { return std::isdigit(c) != 0; })) {
      continue;
    }
    std::ifstream status(entry.path() / "status");
    std::string line;
    bool mine = false;
    while (std::getline(status, line)) {
      if (line.starts_with("Uid:")) {
        mine = std::strtoul(line.c_str() + 4, nullptr, 10) == uid;
      } else if (line.starts_with("Threads:") && mine) {
        tasks += std::strtoull(line.c_str() + 8, nullptr, 10);
      }
    }
  }
  return tasks;
}

} // namespace detail

policy candidate_policy(const fs::path& project_root, const fs::path& task_dir) {
  policy rules;
  const fs::path exe = self_executable();
  rules.read_only = {project_root / "include", task_dir, exe};
  std::error_code ec;
  if (fs::is_directory(exe.parent_path() / "lib", ec)) {
    rules.read_only.push_back(exe.parent_path() / "lib");
  }
  return rules;
}

process_spec wrap(const process_spec& spec, const policy& rules) {
  const identity who = detail::resolve(rules.who);
  if (who == identity::nobody || who == identity::root_mapped || who == identity::root) {
    require_root(who);
  }
  const fs::path bwrap = find_bwrap(rules);
  // A missing bind would make bwrap fail, and that failure would read like the candidate's.
  for (const auto* paths : {&rules.read_only, &rules.writable}) {
    for (const auto& p : *paths) {
      std::error_code ec;
      if (!fs::exists(p, ec)) {
        fail("cannot bind {} into the sandbox: it does not exist", p.string());
      }
    }
  }
  if (who == identity::nobody) {
    check_reachable_by_nobody(bwrap, rules);
  }
  process_spec out;
  out.argv.push_back(bwrap.string());
  const auto args = detail::bwrap_arguments(spec, rules, who);
  out.argv.insert(out.argv.end(), args.begin(), args.end());
  // bwrap's own environment is visible inside as /proc/1/environ: give it none.
  out.env = std::map<std::string, std::string>{};
  out.cwd = "/";
  out.stdin_data = spec.stdin_data;
  out.timeout = spec.timeout;
  out.output_limit = spec.output_limit;
  out.rlimits = merged_limits(spec.rlimits, rules.limits);
  if (who == identity::nobody) {
    out.run_as = process_credentials{sandbox_uid, sandbox_gid};
    count_from_now(out.rlimits, sandbox_uid);
  } else if (who == identity::caller) {
    count_from_now(out.rlimits, getuid());
  }
  return out;
}

process_result unwrap(process_result result) {
  constexpr int signal_base = 128;
  if (!result.timed_out && result.signal == 0 && result.exit_code > signal_base &&
      result.exit_code < signal_base + NSIG) {
    result.signal = result.exit_code - signal_base;
    result.exit_code = -1;
  }
  return result;
}

process_spec wrap_unprotected(const process_spec& spec, const policy& rules) {
  process_spec out = spec;
  out.env = detail::sandbox_environment(spec, rules);
  out.env_overrides.clear();
  out.rlimits = merged_limits(spec.rlimits, rules.limits);
  count_from_now(out.rlimits, getuid());
  return out;
}

void make_output_dir(const fs::path& dir, identity who) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fail("cannot create {}: {}", dir.string(), ec.message());
  }
  if (detail::resolve(who) == identity::nobody) {
    if (chown(dir.c_str(), sandbox_uid, sandbox_gid) != 0 || chmod(dir.c_str(), 0700) != 0) {
      fail("cannot hand {} to the sandbox user: {}", dir.string(), std::strerror(errno));
    }
  }
}

std::string probe_result::describe() const {
  if (!available) {
    return fmt::format("sandbox unavailable: {}", reason);
  }
  std::string text = fmt::format("sandbox available: {} ({}), runs as {}, start-up {:.3f} s",
                                 bwrap_version, bwrap, to_string(who), startup_seconds);
  if (!process_limit_enforced) {
    text += "; the process limit is not enforced for uid 0";
  }
  for (const auto& note : notes) {
    text += fmt::format("; {}", note);
  }
  return text;
}

probe_result probe(const policy& rules) {
  probe_result result;
  fs::path bwrap;
  try {
    bwrap = find_bwrap(rules);
  } catch (const error& e) {
    result.reason = e.what();
    return result;
  }
  result.bwrap = bwrap.string();
  process_spec version;
  version.argv = {bwrap.string(), "--version"};
  version.timeout = std::chrono::seconds(10);
  result.bwrap_version = last_line(run_process(version).output);

  std::vector<identity> modes{rules.who};
  if (rules.who == identity::automatic) {
    modes = geteuid() == 0 ? std::vector{identity::nobody, identity::root_mapped, identity::root}
                           : std::vector{identity::caller};
  }
  for (const identity who : modes) {
    policy trial = rules;
    trial.who = who;
    process_spec trivial;
    trivial.argv = {"id", "-u"};
    trivial.timeout = std::chrono::seconds(10);
    process_result run;
    try {
      run = run_process(wrap(trivial, trial));
    } catch (const error& e) {
      result.notes.push_back(fmt::format("{}: {}", to_string(who), e.what()));
      continue;
    }
    const std::string expected_uid = std::to_string(who == identity::root ? 0 : sandbox_uid);
    if (run.ok() && last_line(run.output) == expected_uid) {
      result.available = true;
      result.who = who;
      result.process_limit_enforced = who == identity::nobody || who == identity::caller;
      result.startup_seconds = run.wall_seconds;
      return result;
    }
    result.notes.push_back(
        fmt::format("{}: {}: {}", to_string(who), run.describe(),
                    run.ok() ? "unexpected uid " + last_line(run.output) : last_line(run.output)));
  }
  result.reason = fmt::format("no sandbox mode works here ({})", fmt::join(result.notes, "; "));
  result.notes.clear();
  return result;
}

isolation_decision decide(const probe_result& probe, bool no_sandbox) {
  if (no_sandbox) {
    return {isolation::unprotected,
            probe.available ? fmt::format("--no-sandbox given (a sandbox was available: {})",
                                          to_string(probe.who))
                            : fmt::format("--no-sandbox given ({})", probe.reason)};
  }
  if (probe.available) {
    return {isolation::sandboxed,
            probe.process_limit_enforced
                ? to_string(probe.who)
                : fmt::format("{} (process limit not enforced)", to_string(probe.who))};
  }
  return {isolation::blocked, probe.reason};
}

void add_no_sandbox_flag(CLI::App& command, bool* no_sandbox) {
  command.add_flag("--no-sandbox", *no_sandbox,
                   "run candidates without the sandbox (no isolation; recorded with every "
                   "attempt); only for trusted code on a machine without bubblewrap");
}

} // namespace kb::sandbox
