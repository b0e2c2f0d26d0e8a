// How untrusted code runs: a candidate's compilation and the worker that loads it go through the
// sandbox (or, with --no-sandbox, through the same environment filter and limits without
// isolation).
#pragma once

#include "build/build.hpp"
#include "common/process.hpp"
#include "eval/session.hpp"
#include "sandbox/sandbox.hpp"
#include "task/task.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kb::eval::detail {

namespace fs = std::filesystem;

// Probed once per process: the answer does not change while it runs.
inline const sandbox::probe_result& sandbox_probe() {
  static const sandbox::probe_result probe = sandbox::probe();
  return probe;
}

// Untrusted code (a candidate's compilation, the worker that loads it) runs through this.
struct isolation {
  sandbox::isolation_decision decision;
  sandbox::identity who = sandbox::identity::automatic;
  fs::path root;
  fs::path task_dir;
  // Folders the task's generated modules read at run time (a pytorch task's Python installation).
  std::vector<fs::path> runtime_paths;

  sandbox::policy policy() const {
    sandbox::policy p = sandbox::candidate_policy(root, task_dir);
    p.read_only.push_back(root / "tasks");
    for (const auto& path : runtime_paths) {
      if (fs::exists(path)) {
        p.read_only.push_back(path);
      }
    }
    // The worker program, when it is not this one (a test binary runs kblaster's workers).
    if (const fs::path exe = worker_executable(); exe != self_executable()) {
      p.read_only.push_back(exe);
      if (fs::is_directory(exe.parent_path() / "lib")) {
        p.read_only.push_back(exe.parent_path() / "lib");
      }
    }
    p.who = who;
    return p;
  }
  process_spec apply(const process_spec& spec, sandbox::policy p) const {
    return decision.level == sandbox::isolation::sandboxed ? sandbox::wrap(spec, p)
                                                           : sandbox::wrap_unprotected(spec, p);
  }
  build::process_wrapper compiler() const {
    return [this](const process_spec& spec) {
      auto p = policy();
      if (spec.cwd) {
        sandbox::make_output_dir(*spec.cwd, who);
        p.writable.push_back(*spec.cwd);
      }
      return apply(spec, p);
    };
  }
  // `tools`: folders of a tool the worker runs under (a profiler), visible inside too.
  std::function<process_spec(const process_spec&)> worker(const fs::path& staging,
                                                          std::vector<fs::path> tools = {}) const {
    return [this, staging, tools](const process_spec& spec) {
      auto p = policy();
      p.gpu = true;
      p.read_only.push_back(staging);
      p.read_only.insert(p.read_only.end(), tools.begin(), tools.end());
      process_spec with_fd = spec;
      with_fd.env_overrides["KBLASTER_RESULT_FD"] = std::to_string(child_process::result_fd);
      return apply(with_fd, p);
    };
  }
};

// How a task's untrusted code runs in this process: through the sandbox when the probe found it
// (its decision says `blocked` when it did not and no_sandbox was not given, or `unprotected`
// with no_sandbox), with the repository, the task's folder and its run-time paths visible.
inline isolation isolation_for(const fs::path& root, const task::contract& c, bool no_sandbox) {
  const auto& probe = sandbox_probe();
  return isolation{sandbox::decide(probe, no_sandbox), probe.who, root, c.dir, c.runtime_paths};
}

// The shared objects a worker loads, copied where the sandbox user can read them.
inline fs::path stage_binary(const fs::path& staging, const fs::path& binary,
                             const std::string& name) {
  const fs::path to = staging / name;
  fs::copy_file(binary, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                          fs::perms::others_read);
  return to;
}

} // namespace kb::eval::detail
