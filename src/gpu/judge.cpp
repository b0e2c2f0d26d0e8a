// The judge: one process per GPU job, trusted, never loading candidate code. It loads the task's
// oracle module, allocates every tensor in memory it can share (cuMemCreate with POSIX
// file-descriptor handles), starts one sandboxed runner per candidate, verifies every candidate
// on the same inputs against the float64 oracle and times them interleaved on its own stream.
// Every call of a candidate, checked or timed, is the same message and the same window:
//   runner: kb_launch under stream capture of its stream R -> waits for any work done outside R
//           -> R: waits for GO -> the captured graph -> DONE value; replies
//   judge: receives the reply (its round trip is the host-work clock), samples the outputs (still
//          poison: nothing of the call's stream work ran before GO), then its stream J: START
//          event -> GO value -> waits for DONE -> STOP event -> (timed calls) every output
//          checked whole: keyed digest and poison count
// so the window holds exactly the stream work of the call, and everything else the call did
// falls on the judge's round-trip clock, held to an allowance the calibration fixes. GO is mapped
// read-only in the runner; every tensor ends where the runner's mapping of it ends.
// A runner's crash, hang or exit is that candidate's rejection; the judge goes on.
#include "gpu/detail/device_lock.hpp"
#include "gpu/detail/worker.hpp"

namespace kb::gpu::detail {

auto worker::run() -> proto::result {
  proto::result result;
  json stage_s = json::object(); // where the job's time went
  auto stage_start = clock_type::now();
  const auto stage_done = [&](const char* name) {
    const auto now = clock_type::now();
    stage_s[name] = std::chrono::duration<double>(now - stage_start).count();
    stage_start = now;
  };
  result.dev = device_info().get<proto::device>();
  load_oracle();
  // Every runner starts at once (a sandbox and a CUDA context each), the timing's calibration
  // runner with them; each is then waited for in turn. The device's free memory before them,
  // and the judge's own allocations until then, tell later what the runners hold.
  {
    size_t total = 0;
    cuda_check(cudaDeviceSynchronize(), "memory");
    cuda_check(cudaMemGetInfo(&m_free_at_start, &total), "memory");
    m_judge_bytes_at_start = judge_device_bytes().load();
  }
  for (auto& lib : m_libs) {
    m_out.step("load", lib.role, lib.path);
    lib.rejected = launch_runner(lib);
  }
  if (m_job.time) {
    m_empty.role = "calibration";
    m_empty.path = "";
    m_empty.rejected = launch_runner(m_empty);
  }
  for (auto& lib : m_libs) {
    if (!lib.rejected) {
      lib.rejected = await_runner(lib);
    }
  }
  if (m_job.time && !m_empty.rejected) {
    m_empty.rejected = await_runner(m_empty);
  }
  stage_done("start");
  // A candidate whose calls keep device memory (a cache of answers per input) can leave the judge
  // none for a later allocation of its own: that candidate's rejection, not the job's end.
  try {
    const bool verify = m_job.verify;
    if (verify) {
      result.checker_selftest = verify_all().get<proto::selftest>();
    } else {
      check_expected_digests();
    }
    stage_done(verify ? "verify" : "expected_digests");
    if (!m_verify_phases.is_null()) {
      stage_s["verify_phases"] = m_verify_phases;
    }
    if (!m_context_lost && !m_hoard && m_job.profile && any_alive()) {
      result.profile = profile_calls();
    }
    if (!m_context_lost && m_job.time && any_alive() &&
        check_room(lane_bytes(timing_shape(), timing_sets(timing_shape())),
                   "timing at shape " + timing_shape().name)) {
      result.time = time_all().get<proto::session_timing>();
      stage_done("timing");
    }
  } catch (const out_of_device_memory& e) {
    if (!hoard_took(e.what())) {
      throw device_too_small(fmt::format("{}, with nothing held beyond the runners' allowance: "
                                         "the device is too small for this job",
                                         e.what()));
    }
    stage_done("out_of_memory");
  }
  result.stage_seconds = stage_s;
  for (auto& lib : m_libs) {
    stop_runner(lib, false);
  }
  stop_runner(m_empty, false);
  for (const auto& lib : m_libs) {
    proto::library_result l;
    l.role = lib.role;
    l.accepted = !lib.rejected.has_value();
    if (lib.rejected) {
      l.reason = lib.rejected->reason;
      l.message = lib.rejected->message;
    }
    l.digests = lib.set_digests;
    l.runner_exit = lib.runner_exit;
    l.output = lib.output;
    l.record = {{"info", lib.info}, {"checks", lib.checks}, {"summary", lib.summary}};
    result.candidates.push_back(std::move(l));
  }
  result.context_lost = m_context_lost;
  result.lanes = m_separate_lanes ? "per library" : "shared (device memory)";
  // This job's poison, for the record (the next job draws its own).
  result.poison = {
      {"f32", fmt::format("{:08x}", m_poison.f32)},  {"f64", fmt::format("{:016x}", m_poison.f64)},
      {"f16", fmt::format("{:04x}", m_poison.f16)},  {"bf16", fmt::format("{:04x}", m_poison.bf16)},
      {"i64", fmt::format("{:016x}", m_poison.i64)}, {"i32", fmt::format("{:08x}", m_poison.i32)}};
  return result;
}

} // namespace kb::gpu::detail

namespace kb::gpu {

using detail::emitter;
using detail::worker;
namespace proto = gpu::protocol;
using nlohmann::json;

namespace {

// The current device's UUID as nvidia-smi prints it ("GPU-" and 32 hex digits); empty without a
// device (nothing to lock: the job's first CUDA call then fails with its message).
std::string device_uuid() {
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  std::string uuid = "GPU";
  for (int i = 0; i < 16; ++i) {
    uuid += fmt::format("{}{:02x}", (i == 0 || i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "",
                        static_cast<unsigned char>(p.uuid.bytes[i]));
  }
  return uuid;
}

} // namespace

int judge_main() {
  const char* fd_env = std::getenv("KBLASTER_RESULT_FD");
  if (fd_env == nullptr) {
    fmt::print(stderr, "kblaster worker: KBLASTER_RESULT_FD is not set (the worker is started by "
                       "kblaster itself)\n");
    return exit_code::usage;
  }
  const emitter out(std::atoi(fd_env));
  // The CUDA context comes up before the first job is read: a judge started ahead of its job
  // (while the parent compiles) is then ready when it arrives. Without a device this fails here
  // and again, with its message, in the job's first CUDA call.
  (void)cudaFree(nullptr);
  std::string line;
  while (std::getline(std::cin, line)) {
    proto::job job;
    try {
      job = json::parse(line).get<proto::job>();
    } catch (const std::exception& e) {
      out.send(proto::error{std::string("bad job: ") + e.what(), false});
      return exit_code::tool;
    }
    if (job.what == proto::op::exit) {
      return 0;
    }
    try {
      // One judge per device for the life of the job (device_lock.hpp): another judge's calls
      // would share the device with this one's windows.
      detail::device_lock lock;
      const std::string uuid = device_uuid();
      const auto lock_file = detail::device_lock_path(uuid, detail::device_lock_dir());
      const auto got =
          uuid.empty()
              ? detail::lock_result::held
              : lock.acquire(lock_file, detail::device_lock_wait, detail::device_lock_poll,
                             [&](std::chrono::milliseconds waited) {
                               out.step("lock", "",
                                        fmt::format("waiting {} s for {}", waited.count() / 1000,
                                                    lock_file.string()));
                             });
      if (got == detail::lock_result::busy) {
        out.send(proto::error{
            fmt::format("another judge held the device for {} s (lock {}): nothing was run",
                        detail::device_lock_wait.count() / 1000, lock_file.string()),
            false, proto::blocked_by::device_busy});
        // The judge's one blocked end: the parent ends the evaluation blocked.device_busy and
        // the batch goes on.
        return exit_code::blocked;
      }
      if (got == detail::lock_result::failed) {
        out.send(proto::error{lock.error() + " (KBLASTER_DEVICE_LOCK_DIR names a folder every "
                                             "judge of this host can write)",
                              false});
        return exit_code::tool;
      }
      worker w(out, job);
      const proto::result r = w.run();
      out.send(r);
      if (r.context_lost) {
        return 0; // the parent starts a fresh worker for the next job
      }
    } catch (const detail::device_too_small& e) {
      out.send(proto::error{e.what(), false, proto::blocked_by::device_memory});
      return exit_code::blocked;
    } catch (const cuda_error& e) {
      out.send(proto::error{e.what(), e.sticky()});
      return exit_code::tool;
    } catch (const std::exception& e) {
      out.send(proto::error{e.what(), false});
      return exit_code::tool;
    }
  }
  return 0;
}

} // namespace kb::gpu
