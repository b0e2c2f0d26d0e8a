// The judge's end of a runner (runner_client.hpp).
#include "gpu/detail/runner_client.hpp"

#include "gpu/detail/capture.hpp"
#include "gpu/detail/channel.hpp"

#include "common/error.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kb::gpu::detail {

namespace proto = gpu::protocol;
using nlohmann::json;

// The runner's command, as the parent built it (sandboxed, or wrapped without isolation).
process_spec runner_spec(const proto::runner_command& c) {
  process_spec p;
  p.argv = c.argv;
  p.env = c.env;
  p.env_overrides = c.env_overrides;
  if (c.cwd) {
    p.cwd = *c.cwd;
  }
  p.rlimits.cpu_time = c.cpu_time;
  p.rlimits.file_size = c.file_size;
  p.rlimits.processes = c.processes;
  p.rlimits.open_files = c.open_files;
  p.rlimits.core_size = c.core_size;
  if (c.uid && c.gid) {
    p.run_as = process_credentials{static_cast<uid_t>(*c.uid), static_cast<gid_t>(*c.gid)};
  }
  return p;
}

// One sandboxed runner process and the judge's end of its socket.
runner_client::runner_client(const process_spec& spec, const std::filesystem::path& log_path)
    : m_log(log_path) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    fail("socketpair: {}", std::strerror(errno));
  }
  // The child's end must survive exec: a copy without close-on-exec, closed here afterwards.
  const int child_end = ::fcntl(sv[1], F_DUPFD, 10);
  ::close(sv[1]);
  process_spec with_fd = spec;
  with_fd.env_overrides["KBLASTER_RUNNER_FD"] = std::to_string(child_process::passed_fd);
  m_child =
      std::make_unique<child_process>(with_fd, log_path, "KBLASTER_RUNNER_RESULT_FD", child_end);
  ::close(child_end);
  m_sock = sv[0];
}

runner_client::~runner_client() {
  if (m_sock >= 0) {
    ::close(m_sock);
  }
}

bool runner_client::map(const shared_memory& m) {
  if (m_mapped.count(m.id()) != 0) {
    return true;
  }
  const map_request r{m.id(), m.bytes(), m.runner_read_only(), m.granularity()};
  if (!send_frame(m_sock, static_cast<uint32_t>(message::map), json(r).dump(), {m.fd()})) {
    return false;
  }
  m_mapped.insert(m.id());
  return true;
}

bool runner_client::send(message type, const json& body) {
  return send_frame(m_sock, static_cast<uint32_t>(type), body.dump());
}

std::optional<json> runner_client::reply(int timeout_ms, bool* timed_out) {
  frame f;
  const auto st = receive_frame(m_sock, f, timeout_ms, message_spin_us);
  for (int fd : f.fds) {
    ::close(fd);
  }
  if (timed_out != nullptr) {
    *timed_out = st == recv_status::timeout;
  }
  if (st != recv_status::ok || f.type != static_cast<uint32_t>(message::reply)) {
    return std::nullopt;
  }
  try {
    return json::parse(f.payload);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

process_result runner_client::finish(bool kill, std::chrono::milliseconds timeout) {
  if (m_finished) {
    return m_status;
  }
  if (kill) {
    m_child->kill();
  } else {
    send(message::exit, json::object());
  }
  m_status = m_child->wait(timeout);
  if (m_status.timed_out) {
    m_child->kill();
    m_status = m_child->wait(std::chrono::seconds(5));
  }
  m_finished = true;
  return m_status;
}

proto::runner_output runner_client::output() const {
  const auto c = capture_tail(m_log);
  return {c.total, base64(c.tail), printable_text(c.tail)};
}

std::string runner_client::output_text() const {
  return printable_text(capture_tail(m_log).tail);
}

} // namespace kb::gpu::detail
