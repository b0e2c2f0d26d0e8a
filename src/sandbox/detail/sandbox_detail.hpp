// Pieces of the sandbox that tests check one by one.
#pragma once

#include "sandbox/sandbox.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::sandbox::detail {

// True for names that may hold a credential or route traffic (API keys, tokens, secrets,
// passwords, proxies); such variables never enter the sandbox.
bool is_secret_name(std::string_view name);

// The environment of the sandboxed command: the allowed variables of the caller's environment
// (spec.env when set), then PATH, HOME, TMPDIR and LANG, then spec.env_overrides, all without
// secret names.
std::map<std::string, std::string> sandbox_environment(const process_spec& spec,
                                                       const policy& rules);

// The NVIDIA device files under `dev` that CUDA opens: nvidia0.., nvidiactl, nvidia-uvm,
// nvidia-uvm-tools and the nvidia-caps folder.
std::vector<fs::path> gpu_device_files(const fs::path& dev);

// `automatic` resolved for this process: `nobody` when root, else `caller`.
identity resolve(identity who);

// bwrap's arguments (without the binary) for running `spec` under `rules` as `who`.
std::vector<std::string> bwrap_arguments(const process_spec& spec, const policy& rules,
                                         identity who);

// Why uid/gid 65534 cannot use `path`, or nullopt when it can: every folder above must be
// searchable, and `path` itself readable (searchable too, for a folder) or, when `write`,
// writable.
std::optional<std::string> unreachable_for_sandbox_user(const fs::path& path, bool write);

// Processes and threads the user `uid` runs now (what RLIMIT_NPROC counts).
uint64_t count_tasks_of(uid_t uid);

} // namespace kb::sandbox::detail
