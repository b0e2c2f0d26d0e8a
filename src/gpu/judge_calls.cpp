// Calls and their checks: one call through the window (wake, call, early-output sample, START,
// GO, DONE, STOP, the whole-output check behind STOP, the runner's sync), a checked call's guard
// bands, and every timed call's whole checks (guard bands, poison, keyed digest, late writes).
#include "gpu/detail/worker.hpp"

namespace kb::gpu::detail {

auto worker::windowed_call(candidate_lib& lib, shape_buffers& b, bool sample_outputs,
                              const std::string& stage, const std::string& what) -> window_result {
  window_result w;
  if (!lib.runner || lib.runner_exit) {
    w.failed = rejection{"crash.exit", "the runner is gone"};
    return w;
  }
  const call_request base = request_for(lib, b);
  const uint32_t seq = ++lib.seq;
  call_request c = base;
  c.seq = seq;
  m_out.step(stage, lib.role, what);
  // The runner is woken first, off the clock: one that slept while the other runners' calls
  // ran (a round of a baseline's multi-millisecond calls outlasts the 20 ms it polls its
  // socket) answers, and the call then finds it polling as the calibration's empty call does, so
  // the round trip holds the call and not the scheduler's wake-up. What the call is (its
  // inputs, outputs, sequence number) is sent only after, on the clock.
  {
    bool wake_timed_out = false;
    if (!lib.runner->send(message::wake, json::object())) {
      w.failed = runner_failure(lib, false, what);
      return w;
    }
    const auto woke = lib.runner->reply(m_hang_ms, &wake_timed_out);
    if (!woke) {
      w.failed = runner_failure(lib, wake_timed_out, what);
      return w;
    }
    if (!reply_as<wake_reply>(*woke)) {
      w.failed = malformed_reply(lib, what);
      return w;
    }
  }
  // The judge's context stays idle while the runner prepares the call, so that the round trip
  // measures the runner alone.
  const auto t0 = clock_type::now();
  if (!lib.runner->send(message::call, json(c))) {
    w.failed = runner_failure(lib, false, what);
    return w;
  }
  bool timed_out = false;
  const auto r = lib.runner->reply(m_hang_ms, &timed_out);
  w.round_trip_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t0).count();
  if (!r) {
    w.failed = runner_failure(lib, timed_out, what);
    return w;
  }
  const auto parsed = reply_as<call_reply>(*r);
  if (!parsed) {
    w.failed = malformed_reply(lib, what);
    return w;
  }
  const call_reply& reply = *parsed;
  w.rc = reply.rc;
  w.launch_error = reply.launch_error;
  w.host_ns = reply.host_ns;
  w.graph_ns = reply.graph_ns;
  w.instantiated = reply.instantiated;
  w.outside_ns = reply.outside_ns;
  w.prepare_ns = reply.prepare_ns;
  w.launch_ns = reply.launch_ns;
  if (!reply.capture_error.empty()) {
    w.failed = rejection{"timing.host_work",
                         fmt::format("{}: kb_launch synchronised with or queried its stream "
                                     "({}): it may only enqueue work on it",
                                     what, reply.capture_error)};
    return w;
  }
  if (!reply.sync_error.empty()) {
    stop_runner(lib, true);
    rejection rj{"launch.cuda_error", fmt::format("{}: {}", what, reply.sync_error)};
    if (reply.sync_error == "cudaErrorMemoryAllocation") {
      rj.reason = "launch.out_of_memory";
    }
    w.failed = rj;
    return w;
  }
  // The call's stream work waits behind GO, which only the judge's stream writes: an output
  // that is not poison now was written outside the window.
  if (sample_outputs) {
    w.early_output = outputs_written_early(b);
  }
  const auto J = reinterpret_cast<CUstream>(m_stream);
  const CUdeviceptr go = reinterpret_cast<CUdeviceptr>(lib.go->data());
  const CUdeviceptr done = reinterpret_cast<CUdeviceptr>(lib.done->data());
  cuda_check(cudaEventRecord(m_start, m_stream), "event");
  driver_check(KB_CU(cuStreamWriteValue32)(J, go, seq, 0), "GO");
  driver_check(KB_CU(cuStreamWaitValue32)(J, done, seq, CU_STREAM_WAIT_VALUE_GEQ), "DONE");
  cuda_check(cudaEventRecord(m_stop, m_stream), "event");
  // Right behind STOP on the judge's stream, every output whole: its keyed digest and the
  // elements still holding poison. Every kernel of the call's graph has ended before the
  // runner's DONE, which STOP waits for, so an honest call's outputs are complete here; what a
  // call leaves to after its DONE (a candidate that writes DONE itself before its work ends)
  // shows here as poison or a digest that differs from the one taken once the runner is idle.
  const bool check_at_stop = sample_outputs && &lib != &m_empty;
  if (check_at_stop) {
    queue_output_check(b, m_stream);
  }
  const auto unblock = [&] {
    // DONE in the runner's place, so that the judge's stream goes on.
    driver_check(
        KB_CU(cuStreamWriteValue32)(reinterpret_cast<CUstream>(m_aux), done, seq, 0), "DONE");
    cudaStreamSynchronize(m_aux);
  };
  // The runner synchronises its device: a fault of the candidate's surfaces here.
  std::optional<json> sr;
  timed_out = false;
  if (lib.runner->send(message::sync, json::object())) {
    const auto deadline = clock_type::now() + std::chrono::milliseconds(m_hang_ms);
    std::optional<clock_type::time_point> stop_at;
    while (true) {
      if (!stop_at && cudaEventQuery(m_stop) != cudaErrorNotReady) {
        stop_at = clock_type::now();
      }
      if (readable(lib.runner->sock(), 0)) {
        const auto replied = clock_type::now();
        sr = lib.runner->reply(m_hang_ms, &timed_out);
        if (stop_at) {
          w.tail_ns =
              std::chrono::duration_cast<std::chrono::nanoseconds>(replied - *stop_at).count();
        }
        break;
      }
      if (clock_type::now() > deadline) {
        timed_out = true;
        break;
      }
      std::this_thread::yield();
    }
  }
  if (!sr) {
    w.failed = runner_failure(lib, timed_out, what);
    unblock();
    cudaStreamSynchronize(m_stream);
    return w;
  }
  const auto synced = reply_as<sync_reply>(*sr);
  if (!synced) {
    w.failed = malformed_reply(lib, what);
    unblock();
    cudaStreamSynchronize(m_stream);
    return w;
  }
  const sync_reply& sync = *synced;
  if (!sync.error.empty()) {
    stop_runner(lib, true);
    unblock();
    cudaStreamSynchronize(m_stream);
    rejection rj{"launch.cuda_error", fmt::format("{}: {}", what, sync.error)};
    if (sync.error == "cudaErrorMemoryAllocation") {
      rj.reason = "launch.out_of_memory";
    }
    w.failed = rj;
    return w;
  }
  cuda_check(cudaEventSynchronize(m_stop), "window");
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, m_start, m_stop), "elapsed");
  w.window_s = ms * 1e-3;
  if (check_at_stop) {
    const auto c = read_output_check(b, m_stream);
    w.checked_at_stop = true;
    w.stop_digest = c.digest;
    w.stop_poison = c.poisoned;
  }
  return w;
}

auto worker::output_picks(shape_buffers& b) -> std::vector<output_pick> {
  const auto& s = *b.shape;
  std::vector<output_pick> picks;
  size_t bytes = 0;
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const auto& t = s.outputs[o];
    if (t.numel() == 0) {
      continue; // nothing to write, nothing poisoned
    }
    const size_t eb = dtype_bytes(t.dtype);
    std::uniform_int_distribution<int64_t> pos(0, t.numel() - 1);
    for (int k = 0; k < 8 && bytes + eb <= pick_bytes; ++k) {
      picks.push_back(
          {static_cast<const unsigned char*>(b.outputs[o].data()) + pos(m_rng) * eb, eb, o});
      bytes += eb;
    }
  }
  return picks;
}

auto worker::copy_picks(const std::vector<output_pick>& picks, void* host, cudaStream_t stream) -> void {
  size_t at = 0;
  for (const auto& p : picks) {
    cuda_check(cudaMemcpyAsync(static_cast<unsigned char*>(host) + at, p.at, p.bytes,
                               cudaMemcpyDeviceToHost, stream),
               "sample");
    at += p.bytes;
  }
}

auto worker::poison_of(const shape_buffers& b,
                                       const std::vector<output_pick>& picks) const -> std::vector<unsigned char> {
  std::vector<unsigned char> out;
  for (const auto& p : picks) {
    std::vector<unsigned char> one(std::max<size_t>(p.bytes, 8));
    cpu_fill_poison(one.data(), b.shape->outputs[p.output].dtype, 1, m_poison);
    out.insert(out.end(), one.begin(), one.begin() + static_cast<std::ptrdiff_t>(p.bytes));
  }
  return out;
}

auto worker::pick_sizes(const std::vector<output_pick>& picks) -> std::vector<size_t> {
  std::vector<size_t> sizes;
  for (const auto& p : picks) {
    sizes.push_back(p.bytes);
  }
  return sizes;
}

auto worker::compare_picks(const shape_buffers& b, const std::vector<output_pick>& picks,
                               const void* at_stop, const void* after) const -> late_positions {
  const auto* first = static_cast<const unsigned char*>(at_stop);
  return positions_written_late(
      first, after != nullptr ? static_cast<const unsigned char*>(after) : first,
      poison_of(b, picks).data(), pick_sizes(picks));
}

auto worker::outputs_written_early(shape_buffers& b) -> bool {
  const auto picks = output_picks(b);
  copy_picks(picks, m_sample_host, m_aux);
  cuda_check(cudaStreamSynchronize(m_aux), "sample");
  return compare_picks(b, picks, m_sample_host).poison_at_stop < static_cast<int>(picks.size());
}

auto worker::queue_output_check(shape_buffers& b, cudaStream_t stream) -> void {
  const auto& s = *b.shape;
  const size_t n = 2 * s.outputs.size() * sizeof(unsigned long long);
  cuda_check(cudaMemsetAsync(m_check_dev, 0, n, stream), "output check");
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    gpu_keyed_check(b.outputs[o].data(), s.outputs[o].bytes(), s.outputs[o].dtype, m_key,
                    m_poison, m_check_dev + 2 * o, stream);
  }
  cuda_check(cudaMemcpyAsync(m_check_host, m_check_dev, n, cudaMemcpyDeviceToHost, stream),
             "output check");
}

auto worker::read_output_check(const shape_buffers& b, cudaStream_t stream) -> output_state {
  cuda_check(cudaStreamSynchronize(stream), "output check");
  output_state r;
  for (size_t o = 0; o < b.shape->outputs.size(); ++o) {
    r.digest = r.digest * 31 + m_check_host[2 * o];
    r.poisoned += m_check_host[2 * o + 1];
  }
  return r;
}

auto worker::output_check(shape_buffers& b) -> output_state {
  queue_output_check(b, m_stream);
  return read_output_check(b, m_stream);
}

auto worker::whole_call_checks(candidate_lib& lib, shape_buffers& b, int key,
                                             const window_result& w, const std::string& what,
                                             late_tally& late) -> std::optional<rejection> {
  const auto& s = *b.shape;
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    if (!b.outputs[o].guards_intact(m_stream)) {
      b.outputs[o].restore_guards(); // so that the next call is not blamed
      return rejection{"verify.out_of_bounds_write",
                       fmt::format("a timed call ({}) wrote outside output '{}'", what,
                                   s.outputs[o].name)};
    }
  }
  if (b.workspace_bytes > 0 && !b.workspace.guards_intact(m_stream)) {
    b.workspace.restore_guards();
    return rejection{"verify.out_of_bounds_write",
                     fmt::format("a timed call ({}) wrote outside its workspace", what)};
  }
  if (!w.checked_at_stop) {
    return rejection{"timing.unchecked",
                     fmt::format("a timed call ({}) could not be checked whole", what)};
  }
  late.calls += 1;
  const auto known = lib.set_keyed.find(key);
  const std::optional<uint64_t> expected =
      key >= 0 && m_deterministic && known != lib.set_keyed.end()
          ? std::optional<uint64_t>(known->second)
          : std::nullopt;
  const output_reads stop{w.stop_digest, w.stop_poison};
  if (complete_at_stop(stop, expected)) {
    return std::nullopt;
  }
  late.poison_at_stop += 1;
  const output_state again = output_check(b);
  const output_reads after{again.digest, again.poisoned};
  late.written_late += after.digest != stop.digest || after.poisoned != stop.poisoned ? 1 : 0;
  switch (whole_call_finding(stop, after, expected, lib.host_dispatch)) {
  case whole_finding::written_late:
    return rejection{"timing.work_outside_stream",
                     fmt::format("a timed call's outputs ({}) held {} element(s) of poison or "
                                 "other bits right behind the window's STOP and changed after "
                                 "it: the call's work went on after its DONE",
                                 what, w.stop_poison)};
  case whole_finding::unwritten:
    return rejection{"verify.unwritten",
                     fmt::format("a timed call ({}) left {} output element(s) unwritten", what,
                                 after.poisoned)};
  case whole_finding::stale:
    return rejection{"timing.stale_output",
                     fmt::format("output of a timed call ({}) differs from the verified one "
                                 "on the same inputs",
                                 what)};
  case whole_finding::complete:
    break;
  }
  return std::nullopt;
}

auto worker::call(candidate_lib& lib, shape_buffers& b, const std::string& stage,
                                const std::string& what) -> std::optional<rejection> {
  if (b.workspace_bytes > 0) {
    cuda_check(cudaMemsetAsync(b.workspace.data(), 0xFF, b.workspace_bytes, m_stream),
               "workspace poison");
  }
  cuda_check(cudaStreamSynchronize(m_stream), "before call");
  auto w = windowed_call(lib, b, false, stage, what);
  if (w.failed) {
    return w.failed;
  }
  const int rc = w.rc;
  if (!w.launch_error.empty()) {
    return rejection{w.launch_error == "cudaErrorMemoryAllocation" ? "launch.out_of_memory"
                                                                   : "launch.cuda_error",
                     fmt::format("{}: {}", what, w.launch_error)};
  }
  if (rc != 0) {
    return rejection{"launch.refused", fmt::format("kb_launch returned {} ({})", rc, what)};
  }
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    const bool ok = m_host_reference ? b.outputs[i].guards_intact_host_check()
                                     : b.outputs[i].guards_intact(m_stream);
    if (!ok) {
      b.outputs[i].restore_guards(); // so the next candidate is not blamed
      return rejection{"verify.out_of_bounds_write", fmt::format("wrote outside output '{}' ({})",
                                                                 b.shape->outputs[i].name, what)};
    }
  }
  if (b.workspace_bytes > 0 && !(m_host_reference ? b.workspace.guards_intact_host_check()
                                                  : b.workspace.guards_intact(m_stream))) {
    b.workspace.restore_guards();
    return rejection{"verify.out_of_bounds_write",
                     fmt::format("wrote outside its workspace ({})", what)};
  }
  return std::nullopt;
}

} // namespace kb::gpu::detail
