// A runner as the judge sees it: the sandboxed process (started from the command the parent
// built) and the judge's end of its socket, over which buffers are mapped, requests sent and
// replies read as frames. It knows nothing of the protocol's rules: the judge decides what a
// reply, a silence or an exit means.
#pragma once

#include "gpu/detail/memory.hpp"
#include "gpu/detail/messages.hpp"

#include "gpu/protocol.hpp"

#include "common/process.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace kb::gpu::detail {

// The runner's command, as the parent built it (sandboxed, or wrapped without isolation).
process_spec runner_spec(const gpu::protocol::runner_command& c);

// One sandboxed runner process and the judge's end of its socket.
class runner_client {
public:
  runner_client(const process_spec& spec, const std::filesystem::path& log_path);
  ~runner_client();
  runner_client(const runner_client&) = delete;
  runner_client& operator=(const runner_client&) = delete;

  int sock() const { return m_sock; }
  // Sends `m` to be mapped (once per buffer); false when the runner is gone.
  bool map(const shared_memory& m);
  bool send(message type, const nlohmann::json& body);
  // The reply, or nullopt when the runner died or said nothing within `timeout_ms`.
  std::optional<nlohmann::json> reply(int timeout_ms, bool* timed_out = nullptr);
  // How the process ended (waits up to `timeout`), killing it first when `kill` is set.
  process_result finish(bool kill, std::chrono::milliseconds timeout);
  // What it printed: the last bytes, raw (base64) and as valid UTF-8 text.
  gpu::protocol::runner_output output() const;
  std::string output_text() const;

private:
  std::filesystem::path m_log;
  std::unique_ptr<child_process> m_child;
  int m_sock = -1;
  std::set<uint32_t> m_mapped;
  bool m_finished = false;
  process_result m_status;
};

} // namespace kb::gpu::detail
