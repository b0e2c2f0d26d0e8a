// The execution sandbox. Candidates are untrusted code: nvcc runs the preprocessor and the host
// compiler on their text, and the evaluation worker loads the compiled object and calls it. Both
// run inside bubblewrap (bwrap), which gives them fresh namespaces (no network, no other
// processes), a read-only view of only the folders they need, one private size-limited tmpfs as
// the only writable place, no capabilities, a scrubbed environment and resource limits. Results
// leave through the worker's pipe or through an output folder bound explicitly. docs/sandbox.md
// gives the policy and its reasons.
//
// Fail closed: `probe()` says whether the sandbox works here; when it does not, GPU stages are
// blocked unless the user passed --no-sandbox, and that choice is recorded (see `decide`).
#pragma once

#include "common/names.hpp"
#include "common/process.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace CLI {
class App;
}

namespace kb::sandbox {

namespace fs = std::filesystem;

// Who the sandboxed code runs as, from the strongest isolation to the weakest. Stored as text.
enum class identity {
  automatic,   // the strongest this caller can ask for: `nobody` when root, else `caller`
  nobody,      // a root caller becomes uid/gid 65534 before bwrap; a user namespace keeps it so
  caller,      // a non-root caller, seen as uid 65534 through a user namespace
  root_mapped, // root with a user namespace: uid 65534 inside is uid 0 outside, so the kernel
               // does not enforce the process limit
  root,        // root without a user namespace: uid 0 without capabilities, no process limit
};
inline constexpr auto identity_names = name_table<identity>({{identity::automatic, "automatic"},
                                                             {identity::nobody, "nobody"},
                                                             {identity::caller, "caller"},
                                                             {identity::root_mapped, "root-mapped"},
                                                             {identity::root, "root"}});
static_assert(identity_names.well_formed());
std::string to_string(identity who);
identity identity_from_string(std::string_view text); // throws kb::input_error

inline constexpr uid_t sandbox_uid = 65534; // "nobody"
inline constexpr gid_t sandbox_gid = 65534;

// The private tmpfs: working folder, $HOME and $TMPDIR of the sandboxed command.
inline constexpr std::string_view work_dir = "/tmp";

struct policy {
  // Read-only system folders and files, at the same path inside; missing ones are skipped and a
  // host path that is a symbolic link (merged /usr: /bin -> usr/bin) becomes the same link.
  std::vector<fs::path> system = default_system_paths();
  std::vector<fs::path> read_only; // inputs: files or folders, at the same path inside
  std::vector<fs::path> writable;  // outputs: existing files or folders, at the same path inside
  bool gpu = false;                // pass the NVIDIA device files and a read-only /sys
  uint64_t work_size = 1ull << 30; // [bytes] of the tmpfs at work_dir
  uint64_t shm_size = 64ull << 20; // [bytes] of the tmpfs at /dev/shm
  // RLIMIT_NPROC counts every process and thread of a user, so `limits.processes` is added to
  // the number the sandbox's user already runs when the command starts.
  resource_limits limits = default_limits();
  // Variables passed in from the caller's environment, by exact name. Variables the caller sets
  // in process_spec::env_overrides pass too. Names that look like secrets or proxies never pass.
  std::vector<std::string> env_allow = default_env_allow();
  identity who = identity::automatic;
  fs::path bwrap; // empty: $KBLASTER_BWRAP, else bwrap on PATH

  static std::vector<fs::path> default_system_paths();
  static resource_limits default_limits();
  static std::vector<std::string> default_env_allow();
};

// The policy for building or running one candidate: the system folders, the CUDA toolkit, the
// project's include/ folder, the task's folder, and the running kblaster executable with the
// lib/ folder beside it (the worker is kblaster itself).
policy candidate_policy(const fs::path& project_root, const fs::path& task_dir);

// `spec` made to run inside the sandbox: argv becomes bwrap's, the environment is filtered,
// `rules.limits` fill the rlimits `spec` leaves unset, and a root caller in `nobody` mode drops
// to uid 65534 before bwrap. `spec.cwd`, when set, must be visible inside (default: work_dir).
// Throws kb::error when bwrap cannot be found, an input or output does not exist or, in `nobody`
// mode, a bound path cannot be reached by uid 65534 (its folders must be world-searchable; see
// make_output_dir for outputs). Run the result with run_process or child_process, then read its
// status through `unwrap`.
// For a child_process, put its result-descriptor variable in spec.env_overrides
// (child_process::result_fd): the variable child_process adds itself goes to bwrap, which clears
// its environment.
process_spec wrap(const process_spec& spec, const policy& rules);

// bwrap reports a command killed by signal N as exit status 128 + N; this turns such a status
// back into the signal, so that "killed by SIGXCPU" reads as it should. (A command that exits
// with 128 + N itself reads the same; for a candidate either is a failure.)
process_result unwrap(process_result result);

// For --no-sandbox: the same environment filter and limits, and no isolation at all.
process_spec wrap_unprotected(const process_spec& spec, const policy& rules);

// Creates `dir` (and its parents) as an output folder the sandboxed code of `who` can write:
// under `nobody` it is owned by uid 65534 and closed to others.
void make_output_dir(const fs::path& dir, identity who);

struct probe_result {
  bool available = false;
  std::string reason;                  // why not, when unavailable
  identity who = identity::automatic;  // the mode that works: set it in the policy
  bool process_limit_enforced = false; // false for root_mapped and root
  std::string bwrap;                   // path of the binary used
  std::string bwrap_version;           // "bubblewrap 0.8.0"
  std::vector<std::string> notes;      // stronger modes that failed, and why
  double startup_seconds = 0;          // [seconds] wall time of the trivial command inside

  std::string describe() const;
};

// Runs a trivial command inside the sandbox described by `rules`. With `rules.who` automatic,
// tries the modes from the strongest down and reports the first that works; otherwise only the
// given one. Never throws for a sandbox that does not work: that is the answer.
probe_result probe(const policy& rules = {});

// How a run treats candidates, decided once from the probe and the --no-sandbox flag, and
// recorded with every attempt. Stored as text.
enum class isolation {
  sandboxed,   // candidates run in the sandbox
  unprotected, // the user passed --no-sandbox: candidates run with limits but no isolation
  blocked,     // no sandbox and no --no-sandbox: GPU stages must not run
};
inline constexpr auto isolation_names =
    name_table<isolation>({{isolation::sandboxed, "sandboxed"},
                           {isolation::unprotected, "unprotected"},
                           {isolation::blocked, "blocked"}});
static_assert(isolation_names.well_formed());
std::string to_string(isolation level);
isolation isolation_from_string(std::string_view text); // throws kb::input_error

struct isolation_decision {
  isolation level = isolation::blocked;
  std::string detail; // the identity used, or why the sandbox is unavailable
};

isolation_decision decide(const probe_result& probe, bool no_sandbox);

// Adds --no-sandbox to a command; `*no_sandbox` becomes true when it is given.
void add_no_sandbox_flag(CLI::App& command, bool* no_sandbox);

} // namespace kb::sandbox
