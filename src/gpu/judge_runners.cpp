// The judge's runners: each started with its GO and DONE mapped and its load request sent, its
// ready frame and load answer awaited, its failures (an exit, a signal, silence, a reply that is
// not the protocol's) turned into the candidate's rejection, and its end recorded.
#include "gpu/detail/worker.hpp"

namespace kb::gpu::detail {

auto worker::launch_runner(candidate_lib& lib) -> std::optional<rejection> {
  lib.go = std::make_unique<shared_memory>(8, /*runner_read_only=*/true);
  lib.done = std::make_unique<shared_memory>(8);
  cuda_check(cudaMemset(lib.go->data(), 0, 8), "flags");
  cuda_check(cudaMemset(lib.done->data(), 0, 8), "flags");
  cuda_check(cudaDeviceSynchronize(), "flags");
  const auto log = std::filesystem::path(m_log_dir) / fmt::format("runner-{}.log", lib.role);
  lib.runner = std::make_unique<runner_client>(m_runner_spec, log);
  const load_request load{lib.path, lib.go->id(), lib.done->id(), m_job.runner.exact};
  if (!lib.runner->map(*lib.go) || !lib.runner->map(*lib.done) ||
      !lib.runner->send(message::load, json(load))) {
    not_started(lib, false); // its socket closed before it read anything
  }
  return std::nullopt;
}

auto worker::await_runner(candidate_lib& lib) -> std::optional<rejection> {
  bool timed_out = false;
  const auto ready = lib.runner->reply(m_hang_ms, &timed_out);
  if (!ready || !reply_as<ready_reply>(*ready)) {
    not_started(lib, timed_out);
  }
  const auto r = lib.runner->reply(m_hang_ms, &timed_out);
  if (!r) {
    return runner_failure(lib, timed_out, "load");
  }
  const auto parsed = reply_as<load_reply>(*r);
  if (!parsed) {
    return malformed_reply(lib, "load");
  }
  const load_reply& l = *parsed;
  lib.info = l.info;
  lib.has_workspace = l.has_workspace;
  if (!l.ok) {
    return rejection{l.reason, l.message};
  }
  return std::nullopt;
}

auto worker::stop_runner(candidate_lib& lib, bool kill) -> void {
  if (!lib.runner || lib.runner_exit) {
    return;
  }
  const auto st = sandbox::unwrap(lib.runner->finish(kill, std::chrono::seconds(30)));
  lib.runner_exit = proto::runner_end{st.describe(), st.exit_code,
                                      st.signal != 0 ? signal_name(st.signal) : ""};
  lib.output = lib.runner->output();
}

auto worker::runner_failure(candidate_lib& lib, bool hung, const std::string& what) -> rejection {
  stop_runner(lib, hung);
  if (hung) {
    return rejection{"hang.timeout",
                     fmt::format("no answer for {} ms during {}", m_hang_ms, what)};
  }
  const proto::runner_end end = lib.runner_exit.value_or(proto::runner_end{});
  if (!end.signal.empty()) {
    std::string name = end.signal;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return rejection{"crash." + name,
                     fmt::format("the runner died with {} during {}", end.signal, what)};
  }
  return rejection{"crash.exit",
                   fmt::format("the runner ended ({}) during {}", end.status, what)};
}

auto worker::malformed_reply(candidate_lib& lib, const std::string& what) -> rejection {
  stop_runner(lib, true);
  return rejection{"crash.bad_reply",
                   fmt::format("the runner's reply to {} is not the protocol's answer", what)};
}

auto worker::not_started(candidate_lib& lib, bool timed_out) -> void {
  stop_runner(lib, true);
  const std::string said = lib.runner->output_text();
  fail("the {} runner did not start ({}{}): {}", lib.role,
       timed_out ? fmt::format("no word for {} ms, ", m_hang_ms) : std::string(),
       lib.runner_exit ? lib.runner_exit->status : std::string("no exit status"),
       said.empty() ? std::string("it printed nothing") : last_line(said));
}

} // namespace kb::gpu::detail
