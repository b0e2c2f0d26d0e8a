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
#include "gpu/detail/capture.hpp"
#include "gpu/detail/channel.hpp"
#include "gpu/detail/memory.hpp"
#include "gpu/detail/messages.hpp"
#include "gpu/detail/rules.hpp"
#include "gpu/detail/runner_client.hpp"
#include "gpu/gpu.hpp"

#include "eval/detail/device_ops.hpp"
#include "eval/detail/judge.hpp"
#include "eval/detail/nvml.hpp"
#include "eval/eval.hpp"
#include "eval/protocol.hpp"
#include "eval/stats.hpp"

#include "common/error.hpp"
#include "common/process.hpp"
#include "common/text.hpp"
#include "sandbox/sandbox.hpp"

#include "gpu/detail/driver.hpp"

#include <cuda.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kb::gpu {

namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;
using namespace eval::detail;
using namespace gpu::detail;
namespace proto = eval::protocol;

// ---- protocol -----------------------------------------------------------------------------------

class emitter {
public:
  explicit emitter(int fd) : m_fd(fd) {}
  template <class Event> void send(const Event& e) const { send_json(json(e)); }
  void step(const std::string& stage, const std::string& who, const std::string& what) const {
    send(proto::step{stage, who, what});
  }

private:
  void send_json(const json& j) const {
    const std::string line = j.dump() + "\n";
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(m_fd, line.data() + done, line.size() - done);
      if (n <= 0) {
        std::_Exit(3); // the parent is gone
      }
      done += static_cast<size_t>(n);
    }
  }
  int m_fd;
};

// A candidate-attributable failure: recorded as the candidate's rejection.
struct rejection {
  std::string reason;
  std::string message;
  bool context_lost = false; // the CUDA context is unusable afterwards (sticky error)
};

// A runner's reply read as the message T, or nullopt when it is not one.
template <class T> std::optional<T> reply_as(const json& j) {
  try {
    return j.get<T>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Drawn placement (proto::placement::drawn): each timing buffer group goes after a pad of
// 0 to 127 steps of 2 MiB.
constexpr uint64_t placement_pad_steps = 128;
constexpr size_t placement_pad_step = size_t{2} << 20;
// What a runner may hold on the device besides what the judge gives it: a CUDA context, the
// library's code, graph and launch buffers, the profiler's counter buffers. [bytes]
constexpr uint64_t runner_memory_allowance = uint64_t{2} << 30;

// ---- job description
// -----------------------------------------------------------------------------

struct tensor_desc {
  std::string name;
  kb_dtype dtype = KB_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<distribution> dists;
  std::vector<std::string> dist_labels;
  int64_t numel() const {
    int64_t n = 1;
    for (auto e : shape) {
      n *= e;
    }
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_bytes(dtype); }
};

struct shape_desc {
  std::string name;
  std::string role;
  std::vector<tensor_desc> inputs;
  std::vector<tensor_desc> outputs;
};

tensor_desc tensor_of(const proto::tensor& j) {
  tensor_desc t;
  t.name = j.name;
  t.dtype = static_cast<kb_dtype>(j.dtype);
  t.shape = j.shape;
  for (const auto& d : j.dists) {
    t.dists.push_back({d.kind, d.a, d.b});
    t.dist_labels.push_back(d.label);
  }
  return t;
}

kb_tensor view(const tensor_desc& t, void* data) {
  return contiguous_view(data, t.dtype, t.shape);
}

// ---- loaded libraries
// ----------------------------------------------------------------------------

using oracle_fn = int (*)(const kb_args*, int);
using oracle_workspace_fn = int (*)(const kb_args*, uint64_t*);

struct candidate_lib {
  std::string role;
  std::string path;
  std::unique_ptr<runner_client> runner;
  std::unique_ptr<shared_memory> go;   // GO at offset 0, mapped read-only in the runner
  std::unique_ptr<shared_memory> done; // DONE at offset 0, written by the runner's stream
  uint32_t seq = 0;
  bool has_workspace = false;
  bool host_dispatch = false; // proto::library::host_dispatch: the host-time rule does not apply
  std::string info;
  std::optional<rejection> rejected;
  json checks = json::array();
  json summary = json::object();                // worst metrics over all checks
  std::map<int, uint64_t> set_digests;          // output digest per timing input set
  std::map<int, uint64_t> set_keyed;            // the same outputs' keyed digests (this job's key)
  std::optional<proto::runner_end> runner_exit; // how its runner ended
  proto::runner_output output;                  // what its runner printed
};

// ---- the worker
// ------------------------------------------------------------------------------------

class worker {
public:
  worker(const emitter& out, const proto::job& job) : m_out(out), m_job(job) {
    m_host_reference = job.host_reference;
    for (const auto& s : job.shapes) {
      shape_desc sd;
      sd.name = s.name;
      sd.role = s.role;
      for (const auto& t : s.inputs) {
        sd.inputs.push_back(tensor_of(t));
      }
      for (const auto& t : s.outputs) {
        sd.outputs.push_back(tensor_of(t));
      }
      m_shapes.push_back(std::move(sd));
    }
    m_timing_shape = job.timing_shape;
    m_scalars = job.scalars;
    m_atol = job.tol.atol;
    m_rtol = job.tol.rtol;
    m_rel_l2 = job.tol.rel_l2;
    m_deterministic = job.tol.deterministic;
    m_seeds = job.seeds;
    for (const auto& c : job.candidates) {
      candidate_lib lib;
      lib.role = c.role;
      lib.path = c.path;
      lib.host_dispatch = c.host_dispatch;
      m_libs.push_back(std::move(lib));
    }
    cuda_check(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), "stream");
    cuda_check(cudaStreamCreateWithFlags(&m_aux, cudaStreamNonBlocking), "stream");
    cuda_check(cudaHostAlloc(&m_sample_host, pick_bytes, cudaHostAllocDefault), "sample buffer");
    size_t most_outputs = 1;
    for (const auto& sd : m_shapes) {
      most_outputs = std::max(most_outputs, sd.outputs.size());
    }
    cuda_check(cudaMalloc(&m_check_dev, 2 * most_outputs * sizeof(unsigned long long)),
               "output check");
    cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&m_check_host),
                             2 * most_outputs * sizeof(unsigned long long), cudaHostAllocDefault),
               "output check");
    cuda_check(cudaEventCreate(&m_start), "event");
    cuda_check(cudaEventCreate(&m_stop), "event");
    m_hang_ms = static_cast<int>(job.hang_timeout_ms);
    m_log_dir = job.runner_log_dir;
    m_runner_spec = runner_spec(job.runner);
    m_rng.seed(job.judge_seed);
    m_poison = draw_poison(m_rng);
    m_key = {m_rng(), m_rng()};
  }

  proto::result run() {
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
    result.poison = {{"f32", fmt::format("{:08x}", m_poison.f32)},
                     {"f64", fmt::format("{:016x}", m_poison.f64)},
                     {"f16", fmt::format("{:04x}", m_poison.f16)},
                     {"bf16", fmt::format("{:04x}", m_poison.bf16)},
                     {"i64", fmt::format("{:016x}", m_poison.i64)},
                     {"i32", fmt::format("{:08x}", m_poison.i32)}};
    return result;
  }

private:
  struct shape_buffers;

  // ---- runners ----
  // A runner's start: the process, its flags mapped and the load request sent.
  std::optional<rejection> launch_runner(candidate_lib& lib) {
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

  [[noreturn]] void not_started(candidate_lib& lib, bool timed_out) {
    stop_runner(lib, true);
    const std::string said = lib.runner->output_text();
    fail("the {} runner did not start ({}{}): {}", lib.role,
         timed_out ? fmt::format("no word for {} ms, ", m_hang_ms) : std::string(),
         lib.runner_exit ? lib.runner_exit->status : std::string("no exit status"),
         said.empty() ? std::string("it printed nothing") : last_line(said));
  }

  // The runner's ready frame, then its answer to its load request. A runner that ends or stays
  // silent before it is ready never loaded the candidate: the judge fails with its last words.
  std::optional<rejection> await_runner(candidate_lib& lib) {
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

  void stop_runner(candidate_lib& lib, bool kill) {
    if (!lib.runner || lib.runner_exit) {
      return;
    }
    const auto st = sandbox::unwrap(lib.runner->finish(kill, std::chrono::seconds(30)));
    lib.runner_exit = proto::runner_end{st.describe(), st.exit_code,
                                        st.signal != 0 ? signal_name(st.signal) : ""};
    lib.output = lib.runner->output();
  }

  // The runner ended or stopped answering: the candidate's rejection. Its process is gone
  // afterwards, and nothing of it is called again.
  rejection runner_failure(candidate_lib& lib, bool hung, const std::string& what) {
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

  // A reply that is not the message the protocol expects: the runner process (the candidate's
  // process) wrote something else on its socket. The candidate's rejection, never the judge's
  // error; its runner is stopped and nothing of it is called again.
  rejection malformed_reply(candidate_lib& lib, const std::string& what) {
    stop_runner(lib, true);
    return rejection{"crash.bad_reply",
                     fmt::format("the runner's reply to {} is not the protocol's answer", what)};
  }

  tensor_ref ref(candidate_lib& lib, const guarded_buffer& b, const tensor_desc& t) {
    lib.runner->map(b.memory());
    return tensor_ref{b.memory().id(), b.offset(), static_cast<int32_t>(t.dtype), t.shape};
  }

  call_request request_for(candidate_lib& lib, shape_buffers& b) {
    call_request c;
    const auto& s = *b.shape;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      c.inputs.push_back(ref(lib, b.inputs[i], s.inputs[i]));
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      c.outputs.push_back(ref(lib, b.outputs[i], s.outputs[i]));
    }
    c.scalars = m_scalars;
    if (b.workspace_bytes > 0) {
      lib.runner->map(b.workspace.memory());
      c.workspace_buffer = b.workspace.memory().id();
      c.workspace_offset = b.workspace.offset();
      c.workspace_bytes = b.workspace_bytes;
    }
    return c;
  }

  struct window_result {
    std::optional<rejection> failed; // the runner crashed, hung or its CUDA context failed
    int rc = 0;
    std::string launch_error;
    double window_s = 0;       // [s] STOP - START on the judge's stream
    int64_t round_trip_ns = 0; // [ns] judge's wall clock: call sent -> reply received
    bool early_output = false; // sampled outputs were written before the window opened
    // Every output checked whole on the judge's stream right behind STOP (timed calls): the
    // keyed digest of the outputs (combined as output_check combines them) and the elements
    // still holding poison there.
    bool checked_at_stop = false;
    uint64_t stop_digest = 0;
    uint64_t stop_poison = 0;
    int64_t host_ns = 0;    // [ns] inside kb_launch (runner's clock)
    int64_t outside_ns = 0; // [ns] work outside the given stream, after kb_launch (runner's clock)
    int64_t prepare_ns = 0; // [ns] the runner's time before kb_launch (runner's clock)
    int64_t launch_ns = 0;  // [ns] the runner's time queueing the graph (runner's clock)
    int64_t tail_ns = 0;    // [ns] from the STOP event's completion to the runner's reply
                            // that its whole device is idle: work started after the call
  };

  // A random output position (from the judge's generator) and the output it belongs to.
  struct output_pick {
    const void* at = nullptr;
    size_t bytes = 0;
    size_t output = 0;
  };

  // 8 random positions per output, at most `pick_bytes` in all.
  static constexpr size_t pick_bytes = 4096;
  std::vector<output_pick> output_picks(shape_buffers& b) {
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

  // Queues copies of `picks` into the pinned `host` buffer on `stream`.
  static void copy_picks(const std::vector<output_pick>& picks, void* host, cudaStream_t stream) {
    size_t at = 0;
    for (const auto& p : picks) {
      cuda_check(cudaMemcpyAsync(static_cast<unsigned char*>(host) + at, p.at, p.bytes,
                                 cudaMemcpyDeviceToHost, stream),
                 "sample");
      at += p.bytes;
    }
  }

  // The poison of each pick's output, laid out as copy_picks lays out the picks.
  std::vector<unsigned char> poison_of(const shape_buffers& b,
                                       const std::vector<output_pick>& picks) const {
    std::vector<unsigned char> out;
    for (const auto& p : picks) {
      std::vector<unsigned char> one(std::max<size_t>(p.bytes, 8));
      cpu_fill_poison(one.data(), b.shape->outputs[p.output].dtype, 1, m_poison);
      out.insert(out.end(), one.begin(), one.begin() + static_cast<std::ptrdiff_t>(p.bytes));
    }
    return out;
  }

  static std::vector<size_t> pick_sizes(const std::vector<output_pick>& picks) {
    std::vector<size_t> sizes;
    for (const auto& p : picks) {
      sizes.push_back(p.bytes);
    }
    return sizes;
  }

  // How the picks read into `at_stop` (and, where given, read again into `after`) compare with
  // the job's poison: positions_written_late; the host buffers filled by copy_picks, their
  // stream synchronised.
  late_positions compare_picks(const shape_buffers& b, const std::vector<output_pick>& picks,
                               const void* at_stop, const void* after = nullptr) const {
    const auto* first = static_cast<const unsigned char*>(at_stop);
    return positions_written_late(
        first, after != nullptr ? static_cast<const unsigned char*>(after) : first,
        poison_of(b, picks).data(), pick_sizes(picks));
  }

  // Whether any of a few random output positions already holds something other than poison
  // (read on the judge's second stream before GO is written).
  bool outputs_written_early(shape_buffers& b) {
    const auto picks = output_picks(b);
    copy_picks(picks, m_sample_host, m_aux);
    cuda_check(cudaStreamSynchronize(m_aux), "sample");
    return compare_picks(b, picks, m_sample_host).poison_at_stop < static_cast<int>(picks.size());
  }

  // One call of a candidate, checked or timed alike (see the top of this file).
  window_result windowed_call(candidate_lib& lib, shape_buffers& b, bool sample_outputs,
                              const std::string& stage, const std::string& what) {
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

  // ---- whole-output checks ----
  // The keyed digest of a shape's outputs (per output, combined h = 31 h + d in output order)
  // and the number of their elements holding the job's poison.
  struct output_state {
    uint64_t digest = 0;
    uint64_t poisoned = 0;
  };
  // Queues the check of `b`'s outputs on `stream` (asynchronous; read_output_check reads it).
  void queue_output_check(shape_buffers& b, cudaStream_t stream) {
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
  output_state read_output_check(const shape_buffers& b, cudaStream_t stream) {
    cuda_check(cudaStreamSynchronize(stream), "output check");
    output_state r;
    for (size_t o = 0; o < b.shape->outputs.size(); ++o) {
      r.digest = r.digest * 31 + m_check_host[2 * o];
      r.poisoned += m_check_host[2 * o + 1];
    }
    return r;
  }
  output_state output_check(shape_buffers& b) {
    queue_output_check(b, m_stream);
    return read_output_check(b, m_stream);
  }

  // Per library: timed calls checked whole, those whose outputs still held poison (or another
  // digest) right behind STOP, and those of them whose outputs changed once the runner was idle.
  struct late_tally {
    int calls = 0;
    int poison_at_stop = 0;
    int written_late = 0;
  };

  // Every timed call checked whole, outside the window: the guard bands of its outputs and
  // workspace; every element of its outputs, read right behind STOP (windowed_call), holding
  // neither poison nor anything but the verified answer's bits (keyed digest, where the task is
  // deterministic and the call ran on a verified input set, `key` >= 0). What differs at STOP is
  // read again once the runner is idle: changed since, it was written after the call's DONE
  // (`timing.work_outside_stream`); unchanged, the call left it so (`verify.unwritten`,
  // `timing.stale_output`). Libraries the judge dispatches from the host (PyTorch) are judged
  // on their outputs once idle, their late writes recorded only.
  std::optional<rejection> whole_call_checks(candidate_lib& lib, shape_buffers& b, int key,
                                             const window_result& w, const std::string& what,
                                             late_tally& late) {
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
    const auto expected = lib.set_keyed.find(key);
    const bool compare_digest = key >= 0 && m_deterministic && expected != lib.set_keyed.end();
    const bool digest_ok = !compare_digest || w.stop_digest == expected->second;
    if (w.stop_poison == 0 && digest_ok) {
      return std::nullopt;
    }
    late.poison_at_stop += 1;
    const output_state after = output_check(b);
    const bool changed = after.digest != w.stop_digest || after.poisoned != w.stop_poison;
    late.written_late += changed ? 1 : 0;
    if (changed && !lib.host_dispatch) {
      return rejection{"timing.work_outside_stream",
                       fmt::format("a timed call's outputs ({}) held {} element(s) of poison or "
                                   "other bits right behind the window's STOP and changed after "
                                   "it: the call's work went on after its DONE",
                                   what, w.stop_poison)};
    }
    if (after.poisoned > 0) {
      return rejection{"verify.unwritten",
                       fmt::format("a timed call ({}) left {} output element(s) unwritten", what,
                                   after.poisoned)};
    }
    if (compare_digest && after.digest != expected->second) {
      return rejection{"timing.stale_output",
                       fmt::format("output of a timed call ({}) differs from the verified one "
                                   "on the same inputs",
                                   what)};
    }
    return std::nullopt;
  }

  // ---- device ----
  json device_info() {
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "device");
    cudaDeviceProp p{};
    cuda_check(cudaGetDeviceProperties(&p, dev), "properties");
    char bus[64] = {0};
    cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
    m_nvml = std::make_unique<nvml>(bus);
    int driver = 0;
    int runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    int mem_clock_khz = 0;
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
    m_default_clock_mhz = clock_khz / 1000.0;
    m_l2_bytes = static_cast<size_t>(p.l2CacheSize);
    std::string uuid = "GPU";
    for (int i = 0; i < 16; ++i) {
      uuid += fmt::format("{}{:02x}", (i == 0 || i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "",
                          static_cast<unsigned char>(p.uuid.bytes[i]));
    }
    json j{{"name", p.name},
           {"uuid", uuid},
           {"pci_bus_id", bus},
           {"compute_capability", fmt::format("{}.{}", p.major, p.minor)},
           {"sm_count", p.multiProcessorCount},
           {"l2_bytes", p.l2CacheSize},
           {"memory_bytes", p.totalGlobalMem},
           {"max_sm_clock_mhz", m_default_clock_mhz},
           {"memory_clock_mhz", mem_clock_khz / 1000.0},
           {"cuda_driver_api", driver},
           {"cuda_runtime", runtime},
           {"driver_version", m_nvml->driver_version()},
           {"nvml", m_nvml->available() ? "ok" : m_nvml->error()}};
    return j;
  }

  void load_oracle() {
    const std::string& path = m_job.oracle;
    m_out.step("load", "oracle", path);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      fail("cannot load the oracle module {}: {}", path, dlerror());
    }
    m_oracle = reinterpret_cast<oracle_fn>(dlsym(h, "kbt_oracle"));
    m_oracle_ws = reinterpret_cast<oracle_workspace_fn>(dlsym(h, "kbt_oracle_workspace"));
    if (m_oracle == nullptr || m_oracle_ws == nullptr) {
      fail("oracle module {} lacks kbt_oracle/kbt_oracle_workspace", path);
    }
  }

  bool any_alive() const {
    return std::any_of(m_libs.begin(), m_libs.end(),
                       [](const candidate_lib& l) { return !l.rejected; });
  }

  // ---- per-shape buffers ----
  struct shape_buffers {
    const shape_desc* shape = nullptr;
    std::vector<guarded_buffer> inputs;
    std::vector<guarded_buffer> outputs;
    std::vector<double*> refs; // device float64 references
    std::vector<std::vector<double>> host_refs;
    guarded_buffer workspace;
    uint64_t workspace_bytes = 0;
    void* oracle_ws = nullptr;
    int64_t device_bytes = 0; // of refs and oracle_ws, counted in judge_device_bytes()
    // A lane of its own for one candidate: its own inputs (the same bits), outputs and
    // workspace, compared against the references of `ref_source`.
    const shape_buffers* ref_source = nullptr;
    double* ref(size_t o) const { return ref_source != nullptr ? ref_source->refs[o] : refs[o]; }
    const double* host_ref(size_t o) const {
      return ref_source != nullptr ? ref_source->host_refs[o].data() : host_refs[o].data();
    }
    ~shape_buffers() {
      for (double* r : refs) {
        cudaFree(r);
      }
      cudaFree(oracle_ws);
      judge_device_bytes() -= device_bytes;
    }
  };

  kb_args args_for(const shape_desc& s, const std::vector<guarded_buffer>& ins,
                   const std::vector<guarded_buffer>& outs, std::vector<kb_tensor>& in_views,
                   std::vector<kb_tensor>& out_views, void* ws, uint64_t ws_bytes) const {
    in_views.clear();
    out_views.clear();
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      in_views.push_back(view(s.inputs[i], ins[i].data()));
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      out_views.push_back(view(s.outputs[i], outs[i].data()));
    }
    return make_args(in_views, out_views, m_scalars, ws, ws_bytes, m_stream);
  }

  // Lane `lane`'s buffers for shape `s` (with the references when asked). Its workspace is the
  // largest its libraries ask for; only they are asked, so no other runner maps the buffers.
  void allocate(shape_buffers& b, const shape_desc& s, bool with_reference, size_t lane) {
    b.shape = &s;
    for (const auto& t : s.inputs) {
      b.inputs.emplace_back(t.bytes(), m_host_reference);
    }
    for (const auto& t : s.outputs) {
      b.outputs.emplace_back(t.bytes(), m_host_reference);
      double* r = nullptr;
      if (with_reference) {
        const size_t bytes = std::max<size_t>(8, static_cast<size_t>(t.numel()) * 8);
        cuda_check(cudaMalloc(&r, bytes), "reference buffer");
        b.device_bytes += static_cast<int64_t>(bytes);
        judge_device_bytes() += static_cast<int64_t>(bytes);
      }
      b.refs.push_back(r);
      b.host_refs.emplace_back(m_host_reference ? static_cast<size_t>(t.numel()) : 0);
    }
    // Workspace: the largest any candidate asks for at this shape, allocated outside timing.
    std::vector<kb_tensor> iv;
    std::vector<kb_tensor> ov;
    for (auto& lib : m_libs) {
      if (lib.rejected || !lib.has_workspace || lane_of(lib) != lane) {
        continue;
      }
      call_request q = request_for(lib, b);
      m_out.step("workspace", lib.role, s.name);
      bool hung = false;
      std::optional<json> wr;
      if (lib.runner->send(message::workspace, json(q))) {
        wr = lib.runner->reply(m_hang_ms, &hung);
      }
      if (!wr) {
        lib.rejected = runner_failure(lib, hung, "kb_workspace_bytes");
        continue;
      }
      const auto parsed = reply_as<workspace_reply>(*wr);
      if (!parsed) {
        lib.rejected = malformed_reply(lib, "kb_workspace_bytes");
        continue;
      }
      const workspace_reply& w = *parsed;
      const int rc = w.rc;
      const uint64_t bytes = w.bytes;
      if (rc != 0) {
        lib.rejected =
            rejection{"launch.refused",
                      fmt::format("kb_workspace_bytes returned {} at shape {}", rc, s.name)};
        continue;
      }
      size_t free_bytes = 0;
      size_t total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      if (bytes > free_bytes / 2) {
        lib.rejected = rejection{"workspace.too_large",
                                 fmt::format("asks for {} bytes of workspace at shape {} ({} free)",
                                             bytes, s.name, free_bytes)};
        continue;
      }
      b.workspace_bytes = std::max(b.workspace_bytes, bytes);
    }
    if (b.workspace_bytes > 0) {
      b.workspace = guarded_buffer(b.workspace_bytes, false);
    }
    kb_args a = args_for(s, b.inputs, b.outputs, iv, ov, nullptr, 0);
    uint64_t oracle_bytes = 0;
    m_oracle_ws(&a, &oracle_bytes);
    if (oracle_bytes > 0) {
      cuda_check(cudaMalloc(&b.oracle_ws, oracle_bytes), "oracle workspace");
      b.device_bytes += static_cast<int64_t>(oracle_bytes);
      judge_device_bytes() += static_cast<int64_t>(oracle_bytes);
      m_oracle_ws_host.assign(oracle_bytes, 0);
    }
    m_oracle_ws_bytes = oracle_bytes;
  }

  static int dist_count(const shape_desc& s) {
    int dists = 1;
    for (const auto& t : s.inputs) {
      dists = std::max(dists, static_cast<int>(t.dists.size()));
    }
    return dists;
  }

  static const distribution& pick(const tensor_desc& t, int d) {
    return t.dists[static_cast<size_t>(d) % t.dists.size()];
  }

  void generate(shape_buffers& b, int dist_index, uint64_t seed) {
    const auto& s = *b.shape;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const auto& t = s.inputs[i];
      const uint64_t ts = tensor_seed(seed, static_cast<int>(i));
      if (m_host_reference) {
        cpu_fill_random(b.inputs[i].host(), t.dtype, t.numel(), pick(t, dist_index), ts);
        cuda_check(
            cudaMemcpy(b.inputs[i].data(), b.inputs[i].host(), t.bytes(), cudaMemcpyHostToDevice),
            "upload");
      } else {
        gpu_fill_random(b.inputs[i].data(), t.dtype, t.numel(), pick(t, dist_index), ts, m_stream);
      }
    }
  }

  // Another lane's copy of an input set that `from` already holds: the same bits as generating
  // it again (the generator is a function of the set), for the cost of a device copy. Where the
  // references are computed on the host, the host's copies are generated too.
  void copy_inputs(shape_buffers& to, const shape_buffers& from, int dist_index, uint64_t seed) {
    if (m_host_reference) {
      generate(to, dist_index, seed);
      return;
    }
    const auto& s = *to.shape;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      cuda_check(cudaMemcpyAsync(to.inputs[i].data(), from.inputs[i].data(), s.inputs[i].bytes(),
                                 cudaMemcpyDeviceToDevice, m_stream),
                 "inputs");
    }
  }

  void compute_reference(shape_buffers& b) { compute_reference_into(b, b); }

  // The oracle on `in`'s inputs, its answer into `b`'s reference buffers (device or host).
  void compute_reference_into(shape_buffers& in, shape_buffers& b) {
    const auto& s = *b.shape;
    std::vector<kb_tensor> iv;
    std::vector<kb_tensor> ov;
    if (m_host_reference) {
      std::vector<guarded_buffer> none;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        iv.push_back(view(s.inputs[i], in.inputs[i].host()));
      }
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        tensor_desc t = s.outputs[i];
        t.dtype = KB_FLOAT64;
        ov.push_back(view(t, b.host_refs[i].data()));
      }
      const kb_args a =
          make_args(iv, ov, m_scalars, m_oracle_ws_host.data(), m_oracle_ws_bytes, nullptr);
      if (m_oracle(&a, 0) != 0) {
        fail("the CPU oracle refused shape {}", s.name);
      }
      return;
    }
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      iv.push_back(view(s.inputs[i], in.inputs[i].data()));
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      tensor_desc t = s.outputs[i];
      t.dtype = KB_FLOAT64;
      ov.push_back(view(t, b.refs[i]));
    }
    const kb_args a = make_args(iv, ov, m_scalars, b.oracle_ws, m_oracle_ws_bytes, m_stream);
    const int rc = m_oracle(&a, 1);
    if (rc != 0) {
      fail("the GPU oracle refused shape {} (code {})", s.name, rc);
    }
    cuda_check(cudaStreamSynchronize(m_stream), "oracle");
  }

  uint64_t digest(guarded_buffer& buf, size_t bytes) {
    if (m_host_reference) {
      cuda_check(cudaMemcpy(buf.host(), buf.data(), bytes, cudaMemcpyDeviceToHost), "download");
      return cpu_digest(buf.host(), bytes);
    }
    return gpu_digest(buf.data(), bytes, m_stream);
  }

  void poison(guarded_buffer& buf, const tensor_desc& t) {
    if (m_host_reference) {
      cpu_fill_poison(buf.host(), t.dtype, t.numel(), m_poison);
      cuda_check(cudaMemcpy(buf.data(), buf.host(), t.bytes(), cudaMemcpyHostToDevice), "poison");
    } else {
      gpu_fill_poison(buf.data(), t.dtype, t.numel(), m_poison, m_stream);
    }
  }

  error_metrics compare(shape_buffers& b, size_t out, const tolerance_spec& tol) {
    const auto& t = b.shape->outputs[out];
    if (m_host_reference) {
      cuda_check(cudaMemcpy(b.outputs[out].host(), b.outputs[out].data(), t.bytes(),
                            cudaMemcpyDeviceToHost),
                 "download");
      return cpu_compare(b.outputs[out].host(), t.dtype, b.host_ref(out), t.numel(), tol, m_poison);
    }
    return gpu_compare(b.outputs[out].data(), t.dtype, b.ref(out), t.numel(), tol, m_poison,
                       m_stream);
  }

  // Output `y` (tensor `t`) against output `out` of the references `refs` holds.
  error_metrics compare_with(guarded_buffer& y, const tensor_desc& t, const shape_buffers& refs,
                             size_t out, const tolerance_spec& tol) {
    if (m_host_reference) {
      cuda_check(cudaMemcpy(y.host(), y.data(), t.bytes(), cudaMemcpyDeviceToHost), "download");
      return cpu_compare(y.host(), t.dtype, refs.host_ref(out), t.numel(), tol, m_poison);
    }
    return gpu_compare(y.data(), t.dtype, refs.ref(out), t.numel(), tol, m_poison, m_stream);
  }

  moments reference_moments(shape_buffers& b, size_t out) {
    const auto& t = b.shape->outputs[out];
    return m_host_reference ? cpu_moments(b.host_ref(out), t.numel())
                            : gpu_moments(b.ref(out), t.numel(), m_stream);
  }

  // Calls one candidate; a failure is returned as a rejection, the harness's own failures throw.
  std::optional<rejection> call(candidate_lib& lib, shape_buffers& b, const std::string& stage,
                                const std::string& what) {
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

  void reject(candidate_lib& lib, rejection r) {
    if (r.context_lost) {
      m_context_lost = true;
    }
    m_out.send(proto::rejected{lib.role, r.reason, r.message});
    lib.rejected = std::move(r);
  }

  check_outcome judge(const std::vector<error_metrics>& ms, const std::vector<double>& scales,
                      const shape_desc& s) const {
    std::vector<std::string> names;
    for (const auto& o : s.outputs) {
      names.push_back(o.name);
    }
    return eval::detail::judge(ms, scales, names, m_rel_l2);
  }

  static void fold_summary(json& summary, const json& outputs) {
    for (const auto& o : outputs) {
      for (const char* k : {"max_abs_err", "max_rel_err", "p99_abs_err", "rel_l2", "max_excess"}) {
        const double v = o.at(k);
        summary[k] = std::max(summary.value(k, 0.0), v);
      }
    }
    summary["checks"] = summary.value("checks", 0) + 1;
  }

  // The verification matrix: shapes (check shapes first) x distributions x seeds, all candidates
  // on the same inputs against one oracle run. Returns the checker self-test.
  // ---- lanes ----
  // The candidate and the baseline never share a writable buffer: each library gets a lane of its
  // own (inputs with the same bits, outputs, workspace), so that nothing one runner does to its
  // buffers, during its calls or between them, can reach another's. Lane 0 holds the
  // references. Where the device cannot hold a lane per library, they share lane 0 and the
  // record says so.
  size_t lane_of(const candidate_lib& lib) const {
    if (!m_separate_lanes || &lib == &m_empty) {
      return 0;
    }
    return static_cast<size_t>(&lib - m_libs.data());
  }

  // Whether `sets` input sets of shape `s` for every library, and the references, fit in 80% of
  // the device's free memory. Asked before lane 0 is allocated.
  bool lanes_fit(const shape_desc& s, int sets) const {
    if (m_libs.size() < 2) {
      return true;
    }
    // A lane per library: as one lane with that many times the sets, the references once.
    return fits_on_device(lane_bytes(s, sets * static_cast<int>(m_libs.size())));
  }

  // Whether `bytes` more fit in the device's free memory, a fifth of it kept back.
  static bool fits_on_device(uint64_t bytes) {
    size_t free_bytes = 0;
    size_t total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      return false;
    }
    return fits_in_free(bytes, free_bytes);
  }

  // The number of input sets timing uses at shape `s`: every distribution, and at least the
  // job's count where there are seeds enough.
  int timing_sets(const shape_desc& s) const {
    const int sets = std::max(1, m_job.time->input_sets);
    const int n_dists = dist_count(s);
    const int n_seeds = static_cast<int>(m_seeds.size());
    return std::min(std::max(sets, n_dists), n_dists * n_seeds);
  }

  // Whether `need` bytes, which do not fit in the device's free memory, would fit without what the
  // runners hold beyond their allowance. A candidate gets its scratch memory from the judge, so
  // such an excess is a candidate's hoard, allocated so that the judge has no room left to time or
  // to check reuse; the baseline is the task's own. Beside a library dispatched from the host
  // (PyTorch's caching allocator holds memory honestly) it cannot be attributed: false. Records
  // the excess found (m_runner_excess).
  bool runners_hold_room_for(uint64_t need) {
    if (std::any_of(m_libs.begin(), m_libs.end(),
                    [](const candidate_lib& lib) { return lib.host_dispatch; })) {
      return false;
    }
    size_t free_now = 0;
    m_runner_excess = runner_excess(&free_now);
    return m_runner_excess > 0 && fits_in_free(need, free_now + m_runner_excess);
  }

  // Whether the judge may go on to allocate `need` bytes for `what`. Where they do not fit in the
  // device's free memory but would without the runners' excess (runners_hold_room_for), every
  // candidate still in the running is rejected for holding device memory of its own, nothing
  // more is verified or timed (m_hoard), and the answer is no. Otherwise yes, as before, fitting
  // or not.
  bool check_room(uint64_t need, const std::string& what) {
    if (m_hoard) {
      return false;
    }
    if (fits_on_device(need) || !runners_hold_room_for(need)) {
      return true;
    }
    m_hoard = true;
    for (auto& lib : m_libs) {
      if (!lib.rejected && lib.role != "baseline") {
        reject(lib, {"abi.allocation",
                     fmt::format("the runners hold {} bytes of device memory beyond their "
                                 "allowance ({} bytes each), so that the {} bytes the judge needs "
                                 "for {} do not fit: a candidate allocates device memory of its "
                                 "own (the ABI gives it a workspace instead)",
                                 m_runner_excess, runner_memory_allowance, need, what)});
      }
    }
    return false;
  }

  // Bytes of one lane of shape `s` with `sets` input sets: inputs and outputs per set, the
  // float64 references once.
  static uint64_t lane_bytes(const shape_desc& s, int sets) {
    uint64_t need = 0;
    for (const auto& t : s.inputs) {
      need += t.bytes() * static_cast<uint64_t>(sets);
    }
    for (const auto& t : s.outputs) {
      need += t.bytes() * static_cast<uint64_t>(sets) + static_cast<uint64_t>(t.numel()) * 8;
    }
    return need;
  }

  // Device memory the runners hold beyond their allowance (runner_memory_excess), and the
  // device's free memory it was found beside. [bytes]
  uint64_t runner_excess(size_t* free_now) const {
    size_t total = 0;
    *free_now = 0;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemGetInfo(free_now, &total) != cudaSuccess) {
      return 0;
    }
    const int64_t judge = judge_device_bytes().load() - m_judge_bytes_at_start;
    const int runners = static_cast<int>(m_libs.size()) + (m_empty.runner ? 1 : 0);
    return runner_memory_excess(m_free_at_start, *free_now,
                                judge > 0 ? static_cast<uint64_t>(judge) : 0, runners,
                                runner_memory_allowance);
  }

  // Lanes 1.. for shape `s` beside `base` (lane 0), when they are kept apart.
  std::vector<std::unique_ptr<shape_buffers>> extra_lanes(const shape_buffers& base,
                                                          const shape_desc& s) {
    std::vector<std::unique_ptr<shape_buffers>> lanes;
    if (!m_separate_lanes) {
      return lanes;
    }
    for (size_t l = 1; l < m_libs.size(); ++l) {
      auto e = std::make_unique<shape_buffers>();
      allocate(*e, s, /*with_reference=*/false, l);
      e->ref_source = &base;
      lanes.push_back(std::move(e));
    }
    return lanes;
  }

  json verify_all() {
    const bool selftest_on = m_job.checker_selftest;
    // The self-test tries each trivial output at every check of a shape until the checker rejects
    // it there once: the point is that the checker can tell it from a right answer at each shape,
    // and at the official shape (gigabytes per output) one rejection costs what nine would.
    std::map<std::string, int> trivial_rejections{
        {"zeros", 0}, {"copy_of_input", 0}, {"constant", 0}};
    std::map<std::string, int> trivial_tries{{"zeros", 0}, {"copy_of_input", 0}, {"constant", 0}};
    int shapes_checked = 0;
    std::optional<double> constant;
    int total_checks = 0;
    for (const auto& s : m_shapes) {
      int dists = 1;
      for (const auto& t : s.inputs) {
        dists = std::max(dists, static_cast<int>(t.dists.size()));
      }
      if (m_job.single_check) {
        dists = 1; // the official distribution only
      }
      total_checks += dists * static_cast<int>(m_seeds.size());
    }
    int done = 0;
    // Where verification's time goes, for the record.
    struct {
      double allocate_s = 0, reference_s = 0, call_s = 0, compare_s = 0, digest_s = 0,
             determinism_s = 0, selftest_s = 0;
    } vp;
    const auto seconds_since = [](clock_type::time_point t) {
      return std::chrono::duration<double>(clock_type::now() - t).count();
    };
    for (const auto& s : m_shapes) {
      if (!any_alive() || m_context_lost ||
          !check_room(lane_bytes(s, 1), "verification at shape " + s.name)) {
        break;
      }
      const auto ta = clock_type::now();
      m_separate_lanes = m_separate_lanes && lanes_fit(s, 1);
      shape_buffers b;
      allocate(b, s, /*with_reference=*/true, 0);
      const auto extra = extra_lanes(b, s);
      const auto lane = [&](const candidate_lib& lib) -> shape_buffers& {
        const size_t l = lane_of(lib);
        return l == 0 || extra.empty() ? b : *extra[l - 1];
      };
      vp.allocate_s += seconds_since(ta);
      ++shapes_checked;
      std::set<std::string> untested_here{"zeros", "copy_of_input", "constant"};
      const bool timing_shape = s.name == m_timing_shape;
      int dists = 1;
      for (const auto& t : s.inputs) {
        dists = std::max(dists, static_cast<int>(t.dists.size()));
      }
      if (m_job.single_check) {
        dists = 1; // the official distribution only
      }
      for (int d = 0; d < dists && any_alive() && !m_context_lost; ++d) {
        for (size_t si = 0; si < m_seeds.size() && any_alive() && !m_context_lost; ++si) {
          const uint64_t seed = m_seeds[si];
          std::string dist_label;
          for (const auto& t : s.inputs) {
            dist_label += (dist_label.empty() ? "" : "/") +
                          t.dist_labels[static_cast<size_t>(d) % t.dist_labels.size()];
          }
          const std::string what = fmt::format("{} {} seed {}", s.name, dist_label, si);
          proto::progress pr;
          pr.stage = "verify";
          pr.done = done;
          pr.total = total_checks;
          pr.what = what;
          m_out.send(pr);
          auto t0 = clock_type::now();
          generate(b, d, seed);
          for (const auto& e : extra) {
            copy_inputs(*e, b, d, seed);
          }
          compute_reference(b);
          vp.reference_s += seconds_since(t0);
          t0 = clock_type::now();
          std::vector<uint64_t> input_digests;
          for (size_t i = 0; i < s.inputs.size(); ++i) {
            input_digests.push_back(digest(b.inputs[i], s.inputs[i].bytes()));
          }
          std::vector<double> scales;
          for (size_t o = 0; o < s.outputs.size(); ++o) {
            const auto mo = reference_moments(b, o);
            scales.push_back(std::sqrt(mo.sum_sq / std::max<int64_t>(1, s.outputs[o].numel())));
            if (!constant) {
              constant = mo.sum / std::max<int64_t>(1, s.outputs[o].numel());
            }
          }
          vp.digest_s += seconds_since(t0);
          std::vector<tolerance_spec> tols;
          for (double sc : scales) {
            tols.push_back({m_atol, m_rtol, sc});
          }
          for (auto& lib : m_libs) {
            if (lib.rejected) {
              continue;
            }
            auto& lb = lane(lib);
            t0 = clock_type::now();
            for (size_t o = 0; o < s.outputs.size(); ++o) {
              poison(lb.outputs[o], s.outputs[o]);
            }
            if (auto r = call(lib, lb, "verify", what)) {
              reject(lib, *r);
              continue;
            }
            vp.call_s += seconds_since(t0);
            t0 = clock_type::now();
            std::vector<error_metrics> ms;
            for (size_t o = 0; o < s.outputs.size(); ++o) {
              ms.push_back(compare(lb, o, tols[o]));
            }
            vp.compare_s += seconds_since(t0);
            auto outcome = judge(ms, scales, s);
            t0 = clock_type::now();
            bool inputs_ok = true;
            for (size_t i = 0; i < s.inputs.size(); ++i) {
              inputs_ok =
                  inputs_ok && digest(lb.inputs[i], s.inputs[i].bytes()) == input_digests[i];
            }
            vp.digest_s += seconds_since(t0);
            if (outcome.passed && !inputs_ok) {
              outcome.passed = false;
              outcome.reason = "verify.inputs_modified";
              outcome.message = fmt::format("inputs changed by the call ({})", what);
            }
            lib.checks.push_back({{"shape", s.name},
                                  {"distribution", dist_label},
                                  {"seed", seed},
                                  {"passed", outcome.passed},
                                  {"inputs_unchanged", inputs_ok},
                                  {"outputs", outcome.outputs}});
            fold_summary(lib.summary, outcome.outputs);
            if (!outcome.passed) {
              reject(lib, {outcome.reason, fmt::format("{}: {}", what, outcome.message)});
              continue;
            }
            if (timing_shape) {
              t0 = clock_type::now();
              uint64_t h = 0;
              for (size_t o = 0; o < s.outputs.size(); ++o) {
                h = h * 31 + digest(lb.outputs[o], s.outputs[o].bytes());
              }
              const int key = d * static_cast<int>(m_seeds.size()) + static_cast<int>(si);
              lib.set_digests[key] = h;
              lib.set_keyed[key] = output_check(lb).digest;
              vp.digest_s += seconds_since(t0);
              if (si == 0 && d == 0) {
                t0 = clock_type::now();
                check_determinism(lib, lb, h, what);
                vp.determinism_s += seconds_since(t0);
              }
            }
          }
          if (selftest_on && !untested_here.empty()) {
            t0 = clock_type::now();
            selftest_trivial(b, scales, tols, *constant, untested_here, trivial_tries,
                             trivial_rejections);
            vp.selftest_s += seconds_since(t0);
          }
          ++done;
        }
      }
    }
    m_verify_phases = {{"allocate_s", vp.allocate_s}, {"reference_s", vp.reference_s},
                       {"call_s", vp.call_s},         {"compare_s", vp.compare_s},
                       {"digest_s", vp.digest_s},     {"determinism_s", vp.determinism_s},
                       {"selftest_s", vp.selftest_s}};
    // *_rejected_by counts the shapes where the kind was rejected (once each), *_tried the
    // checks it was tried at.
    json st{{"zeros_rejected_by", trivial_rejections["zeros"]},
            {"copy_of_input_rejected_by", trivial_rejections["copy_of_input"]},
            {"constant_rejected_by", trivial_rejections["constant"]},
            {"zeros_tried", trivial_tries["zeros"]},
            {"copy_of_input_tried", trivial_tries["copy_of_input"]},
            {"constant_tried", trivial_tries["constant"]},
            {"constant", constant.value_or(0.0)},
            {"shapes", shapes_checked},
            {"checks", done}};
    st["sound"] = !selftest_on ||
                  (trivial_rejections["zeros"] > 0 && trivial_rejections["copy_of_input"] > 0 &&
                   trivial_rejections["constant"] > 0);
    return st;
  }

  void check_determinism(candidate_lib& lib, shape_buffers& b, uint64_t first,
                         const std::string& what) {
    const int runs = m_job.determinism_runs;
    const auto& s = *b.shape;
    for (int r = 1; r < runs && !lib.rejected; ++r) {
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        poison(b.outputs[o], s.outputs[o]);
      }
      if (auto rj = call(lib, b, "determinism", fmt::format("{} run {}", what, r + 1))) {
        reject(lib, *rj);
        return;
      }
      uint64_t h = 0;
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        h = h * 31 + digest(b.outputs[o], s.outputs[o].bytes());
      }
      if (h != first && m_deterministic) {
        reject(lib, {"verify.nondeterministic",
                     fmt::format("run {} of {} gave different bits than run 1 ({})", r + 1, runs,
                                 what)});
      }
    }
  }

  // The checker must reject trivial outputs somewhere in the matrix: each kind still untested at
  // this shape is tried, and leaves `untested` once rejected (counted in `rejections`).
  void selftest_trivial(shape_buffers& b, const std::vector<double>& scales,
                        const std::vector<tolerance_spec>& tols, double constant,
                        std::set<std::string>& untested, std::map<std::string, int>& tries,
                        std::map<std::string, int>& rejections) {
    const auto& s = *b.shape;
    for (const char* kind : {"zeros", "copy_of_input", "constant"}) {
      if (untested.count(kind) == 0) {
        continue;
      }
      tries[kind] += 1;
      std::vector<error_metrics> ms;
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        const auto& t = s.outputs[o];
        const std::string k = kind;
        if (m_host_reference) {
          void* h = b.outputs[o].host();
          if (k == "zeros") {
            cpu_fill_value(h, t.dtype, t.numel(), 0.0);
          } else if (k == "constant") {
            cpu_fill_value(h, t.dtype, t.numel(), constant);
          } else {
            cpu_copy_cyclic(b.inputs[0].host(), s.inputs[0].dtype, s.inputs[0].numel(), h, t.dtype,
                            t.numel());
          }
          ms.push_back(
              cpu_compare(h, t.dtype, b.host_refs[o].data(), t.numel(), tols[o], m_poison));
        } else {
          void* dptr = b.outputs[o].data();
          if (k == "zeros") {
            gpu_fill_value(dptr, t.dtype, t.numel(), 0.0, m_stream);
          } else if (k == "constant") {
            gpu_fill_value(dptr, t.dtype, t.numel(), constant, m_stream);
          } else {
            gpu_copy_cyclic(b.inputs[0].data(), s.inputs[0].dtype, s.inputs[0].numel(), dptr,
                            t.dtype, t.numel(), m_stream);
          }
          ms.push_back(
              gpu_compare(dptr, t.dtype, b.refs[o], t.numel(), tols[o], m_poison, m_stream));
        }
      }
      if (!judge(ms, scales, s).passed) {
        rejections[kind] += 1;
        untested.erase(kind);
      }
    }
  }

  // Session 2 and later: the candidates were verified in an earlier worker; their outputs on the
  // timing sets must have the same bits as then.
  void check_expected_digests() {
    const auto& expected = m_job.expected_digests;
    const shape_desc& s = timing_shape();
    m_separate_lanes = m_separate_lanes && lanes_fit(s, 1);
    shape_buffers b;
    allocate(b, s, /*with_reference=*/false, 0);
    const auto extra = extra_lanes(b, s);
    // Set by set: generated once into lane 0 and copied into the other lanes; where the lanes are
    // shared, generated again before each library's call after the first (a call may have
    // changed them, and the next library must not pay for it).
    const int n_seeds = static_cast<int>(m_seeds.size());
    for (int k = 0; k < dist_count(s) * n_seeds; ++k) {
      const auto si = static_cast<size_t>(k % n_seeds);
      const int d = k / n_seeds;
      bool generated = false;
      bool lane0_called = false;
      for (auto& lib : m_libs) {
        const auto want = expected.find(lib.role);
        if (lib.rejected || want == expected.end()) {
          continue;
        }
        const auto digest_was = want->second.find(k);
        if (digest_was == want->second.end()) {
          continue;
        }
        const size_t l = lane_of(lib);
        const bool on_lane0 = l == 0 || extra.empty();
        auto& lb = on_lane0 ? b : *extra[l - 1];
        if (!generated) {
          generate(b, d, m_seeds[si]);
          for (const auto& e : extra) {
            copy_inputs(*e, b, d, m_seeds[si]);
          }
          generated = true;
        } else if (on_lane0 && lane0_called) {
          generate(b, d, m_seeds[si]);
        }
        lane0_called = lane0_called || on_lane0;
        for (size_t o = 0; o < s.outputs.size(); ++o) {
          poison(lb.outputs[o], s.outputs[o]);
        }
        if (auto r = call(lib, lb, "recheck", fmt::format("set {}", si))) {
          reject(lib, *r);
          continue;
        }
        uint64_t h = 0;
        for (size_t o = 0; o < s.outputs.size(); ++o) {
          h = h * 31 + digest(lb.outputs[o], s.outputs[o].bytes());
        }
        lib.set_digests[k] = h;
        lib.set_keyed[k] = output_check(lb).digest;
        if (h != digest_was->second && m_deterministic) {
          reject(lib, {"verify.nondeterministic",
                       fmt::format("output bits on input set {} differ from the verifying session",
                                   si)});
        }
      }
    }
  }

  const shape_desc& timing_shape() const {
    for (const auto& s : m_shapes) {
      if (s.name == m_timing_shape) {
        return s;
      }
    }
    fail("timing shape {} not in the job", m_timing_shape);
  }

  // ---- the profiler's calls (profile/) ----
  // At the timing shape on the first seed, L2 flushed before each call.
  proto::profile_calls profile_calls() {
    auto& lib = *std::find_if(m_libs.begin(), m_libs.end(),
                              [](const candidate_lib& l) { return !l.rejected; });
    const shape_desc& s = timing_shape();
    shape_buffers b;
    allocate(b, s, /*with_reference=*/false, lane_of(lib));
    generate(b, 0, m_seeds.at(0));
    cuda_check(cudaStreamSynchronize(m_stream), "inputs");
    call_request c = request_for(lib, b);
    c.counters = m_job.counters;
    m_out.step("profile", lib.role, s.name);
    // The profiler's calls run in the runner (Nsight Compute and CUPTI see that process); what
    // it reports is measurement, never part of a verdict.
    bool hung = false;
    std::optional<json> r;
    if (lib.runner->send(message::profile, json(c))) {
      r = lib.runner->reply(m_hang_ms * 4, &hung);
    }
    if (!r) {
      reject(lib, runner_failure(lib, hung, "profile"));
      return {};
    }
    const auto out = reply_as<proto::profile_calls>(*r);
    if (!out) {
      reject(lib, malformed_reply(lib, "profile"));
      return {};
    }
    if (out->failed) {
      reject(lib, {"launch.cuda_error", *out->failed, out->context_lost});
    }
    return *out;
  }

  // ---- fresh rounds ----
  // A fresh round's contents and the oracle's answer on them: drawn on the GPU by the judge's
  // generator (distribution and seed drawn for the round, never sent to a runner) into `lanes`
  // (lane 0 generated, the others copied), the reference computed into `refs`'s float64
  // buffers (set 0 of lane 0: nothing reads them during the rounds, and the re-check after them
  // computes its own), with the tolerance the verification uses.
  struct fresh_reference {
    int dist = 0;
    uint64_t seed = 0;
    std::vector<uint64_t> input_digests;
    std::vector<double> scales;
    std::vector<tolerance_spec> tols;
  };
  fresh_reference prepare_fresh(const std::vector<shape_buffers*>& lanes, shape_buffers& refs,
                                int n_dists) {
    fresh_reference f;
    f.dist = static_cast<int>(m_rng() % static_cast<uint64_t>(std::max(1, n_dists)));
    f.seed = m_rng();
    shape_buffers& first = *lanes[0];
    const auto& s = *first.shape;
    generate(first, f.dist, f.seed);
    for (size_t l = 1; l < lanes.size(); ++l) {
      copy_inputs(*lanes[l], first, f.dist, f.seed);
    }
    compute_reference_into(first, refs);
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      f.input_digests.push_back(digest(first.inputs[i], s.inputs[i].bytes()));
    }
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      const auto mo = reference_moments(refs, o);
      f.scales.push_back(std::sqrt(mo.sum_sq / std::max<int64_t>(1, s.outputs[o].numel())));
      f.tols.push_back({m_atol, m_rtol, f.scales.back()});
    }
    cuda_check(cudaStreamSynchronize(m_stream), "fresh inputs");
    return f;
  }

  // One library's answer on a fresh round's contents (`b`: its lane's buffers of the round's
  // set), whole, against the oracle's in `refs`.
  std::optional<rejection> check_fresh_answer(shape_buffers& b, shape_buffers& refs,
                                              const fresh_reference& f, int round) {
    const auto& s = *b.shape;
    std::vector<error_metrics> ms;
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      ms.push_back(compare_with(b.outputs[o], s.outputs[o], refs, o, f.tols[o]));
    }
    const auto outcome = judge(ms, f.scales, s);
    if (outcome.passed) {
      return std::nullopt;
    }
    return rejection{"timing.stale_after_input_change",
                     fmt::format("round {}: on input contents drawn for the round the answer is "
                                 "wrong against the oracle (results reused across calls?): {}",
                                 round, outcome.message)};
  }

  // A set's own contents back in every lane after a fresh round.
  void restore_set(const std::vector<shape_buffers*>& lanes, int dist, uint64_t seed) {
    generate(*lanes[0], dist, seed);
    for (size_t l = 1; l < lanes.size(); ++l) {
      copy_inputs(*lanes[l], *lanes[0], dist, seed);
    }
    cuda_check(cudaStreamSynchronize(m_stream), "inputs");
  }

  // ---- timing ----
  json time_all();

  const emitter& m_out;
  const proto::job& m_job;
  cudaStream_t m_aux = nullptr; // samples outputs before GO, writes DONE for a failed runner
  void* m_sample_host = nullptr;
  digest_key m_key{}; // drawn per job from m_rng, never sent to a runner
  unsigned long long* m_check_dev = nullptr;  // output checks' accumulators, 2 per output
  unsigned long long* m_check_host = nullptr; // pinned copy
  cudaEvent_t m_start = nullptr;
  cudaEvent_t m_stop = nullptr;
  int m_hang_ms = 30000;
  std::string m_log_dir;
  process_spec m_runner_spec;
  std::mt19937_64 m_rng;
  poison_pattern m_poison{}; // drawn per job from m_rng: candidates cannot know it
  bool m_host_reference = false;
  std::vector<shape_desc> m_shapes;
  std::string m_timing_shape;
  std::vector<double> m_scalars;
  double m_atol = 0;
  double m_rtol = 0;
  double m_rel_l2 = 0;
  bool m_deterministic = true;
  std::vector<uint64_t> m_seeds;
  std::vector<candidate_lib> m_libs;
  candidate_lib m_empty;        // the timing's calibration runner: the empty kernel
  json m_verify_phases;         // verify_all's time by step
  bool m_separate_lanes = true; // a lane of buffers per library (see lane_of)
  size_t m_free_at_start = 0;   // device memory free before the runners started [bytes]
  uint64_t m_runner_excess = 0; // what runner_excess() found when last asked (check_room)
  bool m_hoard = false; // check_room found a candidate's hoard: nothing more is verified or timed
  int64_t m_judge_bytes_at_start = 0; // judge_device_bytes() then
  cudaStream_t m_stream = nullptr;
  oracle_fn m_oracle = nullptr;
  oracle_workspace_fn m_oracle_ws = nullptr;
  uint64_t m_oracle_ws_bytes = 0;
  std::vector<unsigned char> m_oracle_ws_host;
  bool m_context_lost = false;
  std::unique_ptr<nvml> m_nvml;
  double m_default_clock_mhz = 0;
  size_t m_l2_bytes = 0;
};

// Interleaved timing of all accepted candidates on input sets that rotate over every declared
// distribution, cold L2, every call windowed on the judge's stream, every output checked whole
// after its window (guard bands, poison, keyed digest against the verified answer's), inputs
// digested after drawn calls, fresh rounds on contents drawn for the round and checked against
// the oracle.
json worker::time_all() {
  const auto all_start = clock_type::now();
  const proto::timing& t = *m_job.time;
  const int min_samples = t.min_samples;
  const int max_samples = t.max_samples;
  const double min_time = t.min_time;
  const double target_rsd = t.target_rsd;
  const double max_wall = t.max_wall;
  const bool cold_l2 = t.cold_l2;
  const uint64_t order_seed = t.order_seed;
  const shape_desc& s = timing_shape();
  const int n_dists = dist_count(s);
  const int n_seeds = static_cast<int>(m_seeds.size());

  // Input sets: (distribution, seed) pairs, every distribution first.
  std::vector<int> set_key;
  std::vector<int> set_dist;
  std::vector<uint64_t> set_seed;
  const int n_sets = timing_sets(s);
  m_separate_lanes = m_separate_lanes && lanes_fit(s, n_sets);
  for (int k = 0; k < n_sets; ++k) {
    const int d = k % n_dists;
    const int si = (k / n_dists) % n_seeds;
    set_key.push_back(d * n_seeds + si);
    set_dist.push_back(d);
    set_seed.push_back(m_seeds[static_cast<size_t>(si)]);
  }
  // Lane 0's sets (`bufs`) and, where each library has a lane of its own, the other lanes' copies
  // of them. Where they land (proto::placement): `fixed` allocates lane by lane, set by set;
  // `drawn` allocates them in an order drawn from the judge's generator, each after a pad of drawn
  // size (within a twentieth of the free memory in all), and frees the pads once all are placed.
  const size_t n_lanes = m_separate_lanes ? std::max<size_t>(1, m_libs.size()) : 1;
  std::vector<std::unique_ptr<shape_buffers>> bufs(static_cast<size_t>(n_sets));
  std::vector<std::vector<std::unique_ptr<shape_buffers>>> more_lanes(n_lanes - 1);
  for (auto& row : more_lanes) {
    row.resize(static_cast<size_t>(n_sets));
  }
  json placement_record; // where the buffers went, for the session's record
  {
    const bool drawn = t.where == proto::placement::drawn;
    std::vector<std::pair<size_t, size_t>> slots; // (lane, set)
    for (size_t l = 0; l < n_lanes; ++l) {
      for (size_t k = 0; k < static_cast<size_t>(n_sets); ++k) {
        slots.emplace_back(l, k);
      }
    }
    size_t pad_budget = 0;
    if (drawn) {
      std::shuffle(slots.begin(), slots.end(), m_rng);
      size_t free_bytes = 0;
      size_t total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        pad_budget = free_bytes / 20;
      }
    }
    std::vector<void*> pads;
    json pad_record = json::array();
    for (const auto& [l, k] : slots) {
      if (drawn) {
        const size_t bytes =
            static_cast<size_t>(m_rng() % placement_pad_steps) * placement_pad_step;
        void* pad = nullptr;
        if (bytes > 0 && bytes <= pad_budget && cudaMalloc(&pad, bytes) == cudaSuccess) {
          pads.push_back(pad);
          pad_budget -= bytes;
          pad_record.push_back(bytes);
        } else {
          (void)cudaGetLastError();
          pad_record.push_back(0);
        }
      }
      auto e = std::make_unique<shape_buffers>();
      allocate(*e, s, /*with_reference=*/l == 0 && k == 0, l);
      (l == 0 ? bufs[k] : more_lanes[l - 1][k]) = std::move(e);
    }
    for (void* pad : pads) {
      cuda_check(cudaFree(pad), "placement pad");
    }
    placement_record = {{"kind", proto::to_string(t.where)}, {"pads_bytes", pad_record}};
  }
  for (int k = 0; k < n_sets; ++k) {
    const auto ku = static_cast<size_t>(k);
    generate(*bufs[ku], set_dist[ku], set_seed[ku]);
    for (auto& row : more_lanes) {
      row[ku]->ref_source = bufs[ku].get();
      copy_inputs(*row[ku], *bufs[ku], set_dist[ku], set_seed[ku]);
    }
  }
  const auto buf = [&](const candidate_lib& lib, size_t k) -> shape_buffers& {
    const size_t l = lane_of(lib);
    return l == 0 || more_lanes.empty() ? *bufs[k] : *more_lanes[l - 1][k];
  };
  // Every lane of set k, lane 0 first.
  const auto lanes_of_set = [&](size_t k) {
    std::vector<shape_buffers*> all{bufs[k].get()};
    for (auto& row : more_lanes) {
      all.push_back(row[k].get());
    }
    return all;
  };
  cuda_check(cudaStreamSynchronize(m_stream), "timing inputs");
  std::vector<std::vector<uint64_t>> input_digests(bufs.size());
  for (size_t k = 0; k < bufs.size(); ++k) {
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      input_digests[k].push_back(digest(bufs[k]->inputs[i], s.inputs[i].bytes()));
    }
  }
  void* flush = nullptr;
  const size_t flush_bytes = std::max<size_t>(2 * m_l2_bytes, size_t(128) << 20);
  if (cold_l2) {
    cuda_check(cudaMalloc(&flush, flush_bytes), "L2 flush buffer");
  }
  const auto inputs_intact = [&](shape_buffers& b, const std::vector<uint64_t>& digests) {
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (digest(b.inputs[i], s.inputs[i].bytes()) != digests[i]) {
        return false;
      }
    }
    return true;
  };
  // What a call's inputs must hold afterwards, and how they are put back when a call changed them.
  struct call_inputs {
    const std::vector<uint64_t>* digests = nullptr;
    int key = -1; // the verified set whose output digest the call must reproduce; -1: none
    std::function<void(shape_buffers&)> restore;
  };
  const auto set_inputs = [&](size_t k) {
    return call_inputs{&input_digests[k], set_key[k], [&, k](shape_buffers& b) {
                         generate(b, set_dist[k], set_seed[k]);
                         cuda_check(cudaStreamSynchronize(m_stream), "inputs");
                       }};
  };
  // One call as timing makes it: poison, flush, window, then the checks outside the window.
  struct timed {
    std::optional<rejection> bad;
    window_result w;
  };
  // Where a session's wall time goes, for the record: preparing calls (poison, L2 flush), the
  // calls themselves (round trip, window, the runner's sync), the checks after them (digests).
  struct phase_clock {
    double prepare_s = 0;
    double call_s = 0;
    double check_s = 0;
    int calls = 0;
  } phases;
  int input_checks = 0; // timed calls followed by a digest of their inputs
  // Per library: timed calls, those whose sampled outputs still held poison right behind STOP,
  // and those with a sampled position written after STOP.
  std::map<std::string, late_tally> late_outputs;
  const auto since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  const auto timed_call_on = [&](candidate_lib& lib, shape_buffers& b, const call_inputs& in,
                                 const std::string& what) {
    timed out;
    ++phases.calls;
    auto t = clock_type::now();
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      poison(b.outputs[o], s.outputs[o]);
    }
    if (b.workspace_bytes > 0) {
      cuda_check(cudaMemsetAsync(b.workspace.data(), 0xFF, b.workspace_bytes, m_stream),
                 "workspace poison");
    }
    cuda_check(cudaStreamSynchronize(m_stream), "poison");
    if (cold_l2) {
      cuda_check(cudaMemsetAsync(flush, static_cast<int>(m_rng() & 0xFF), flush_bytes, m_stream),
                 "L2 flush");
    }
    phases.prepare_s += since(t);
    t = clock_type::now();
    out.w = windowed_call(lib, b, true, "time", what);
    phases.call_s += since(t);
    if (out.w.failed) {
      out.bad = out.w.failed;
      return out;
    }
    if (out.w.launch_error == "cudaErrorMemoryAllocation" && &lib != &m_empty) {
      // Its checked calls at this shape (this session's verification or re-check) succeeded in
      // the same memory, and the judge allocates nothing between timed calls: the device filled
      // up with what its own calls allocated (a cache of results per input, a buffer per call).
      out.bad = rejection{"abi.allocation",
                          fmt::format("out of device memory in a timed call ({}) after its checked "
                                      "calls at this shape succeeded: memory allocated by its "
                                      "calls and kept",
                                      what)};
      return out;
    }
    if (out.w.rc != 0 || !out.w.launch_error.empty()) {
      out.bad = rejection{"launch.cuda_error", fmt::format("failed while timed ({}): rc {} {}",
                                                           what, out.w.rc, out.w.launch_error)};
      return out;
    }
    // The empty kernel's calls are checked too: the runner's wake-up for the next call depends on
    // how long it waited, so its round trips must come from the same rhythm as everyone's.
    t = clock_type::now();
    struct add_on_exit {
      double& to;
      clock_type::time_point from;
      ~add_on_exit() { to += std::chrono::duration<double>(clock_type::now() - from).count(); }
    } checking{phases.check_s, t};
    const bool digest_inputs =
        !m_separate_lanes || in.key < 0 || m_rng() % static_cast<uint64_t>(input_digest_every) == 0;
    input_checks += digest_inputs ? 1 : 0;
    if (digest_inputs && !inputs_intact(b, *in.digests)) {
      in.restore(b);
      out.bad = rejection{"verify.inputs_modified",
                          fmt::format("inputs changed by a timed call ({})", what)};
      return out;
    }
    if (&lib != &m_empty) {
      out.bad = whole_call_checks(lib, b, in.key, out.w, what, late_outputs[lib.role]);
    }
    return out;
  };
  const auto timed_call = [&](candidate_lib& lib, size_t k, const std::string& what) {
    return timed_call_on(lib, buf(lib, k), set_inputs(k), what);
  };

  // The scheme's overhead: the empty kernel, launched by a runner of its own through the same
  // path. Its median window is taken off every sample; its round trip is the host-work rule's.
  json calibration = json::object();
  double overhead_s = 0;
  int64_t empty_round_trip_ns = 0;
  int64_t empty_host_ns = 0;
  int64_t empty_outside_ns = 0;
  int64_t empty_tail_ns = 0;
  {
    candidate_lib& empty = m_empty;
    if (empty.rejected) {
      fail("the calibration runner did not start: {}", empty.rejected->message);
    }
    std::vector<double> windows;
    std::vector<double> trips;
    std::vector<double> hosts;
    std::vector<double> outsides;
    std::vector<double> tails;
    std::vector<double> prepares;
    std::vector<double> launches;
    for (int i = 0; i < 25; ++i) {
      auto tc = timed_call(empty, static_cast<size_t>(i) % bufs.size(), "calibration");
      if (tc.w.failed) {
        fail("the calibration runner failed: {}", tc.w.failed->message);
      }
      if (i >= 5) {
        windows.push_back(tc.w.window_s);
        trips.push_back(static_cast<double>(tc.w.round_trip_ns));
        hosts.push_back(static_cast<double>(tc.w.host_ns));
        outsides.push_back(static_cast<double>(tc.w.outside_ns));
        tails.push_back(static_cast<double>(tc.w.tail_ns));
        prepares.push_back(static_cast<double>(tc.w.prepare_ns));
        launches.push_back(static_cast<double>(tc.w.launch_ns));
      }
    }
    stop_runner(empty, false);
    overhead_s = stats::median(windows);
    empty_round_trip_ns = static_cast<int64_t>(stats::median(trips));
    empty_host_ns = static_cast<int64_t>(stats::median(hosts));
    empty_outside_ns = static_cast<int64_t>(stats::median(outsides));
    empty_tail_ns = static_cast<int64_t>(stats::median(tails));
    calibration = {{"empty_window_median_s", overhead_s},
                   {"empty_window_min_s", *std::min_element(windows.begin(), windows.end())},
                   {"empty_window_max_s", *std::max_element(windows.begin(), windows.end())},
                   {"empty_round_trip_median_s", empty_round_trip_ns * 1e-9},
                   {"empty_host_median_s", empty_host_ns * 1e-9},
                   {"empty_outside_median_s", empty_outside_ns * 1e-9},
                   {"empty_tail_median_s", empty_tail_ns * 1e-9},
                   {"empty_prepare_median_s", stats::median(prepares) * 1e-9},
                   {"empty_launch_median_s", stats::median(launches) * 1e-9},
                   {"samples", windows.size()}};
  }
  // Work before GO is bounded by the calibration: an honest call's time before its window is
  // the empty call's, and the allowance beyond it is one empty round trip (rules.hpp).
  const auto host_rule = host_work_rule::calibrated(empty_round_trip_ns);
  calibration["host_work_allowance_s"] = host_rule.allowance_ns * 1e-9;
  json abi_calls = json::object(); // the first calls the ABI rules saw, per candidate
  std::map<std::string, abi_tally> slow_calls;
  reference_trip reference(empty_round_trip_ns);
  const auto reference_trip_ns = [&](const candidate_lib& lib) {
    return lib.role == "baseline" ? reference.for_baseline() : reference.for_candidate();
  };

  // The window holds the call's stream work only; these rules catch a call that did work
  // elsewhere (on the host, on another stream) and so broke the ABI (kb_launch only enqueues, on
  // the given stream), in every timed call after the two warm-up calls. One slow call is the
  // host's hiccup (scheduling, a page fault), not the candidate's: a rule rejects only when most
  // of a candidate's calls break it. An early output rejects at once.
  const auto abi_rules = [&](const candidate_lib& lib,
                             const window_result& w) -> std::optional<rejection> {
    // The judge's own clock decides: the round trip of the call (kb_launch, and the work it did
    // outside the captured stream, which the runner waits for before it replies). The runner's
    // times only say which of the two it was.
    const int64_t reference_ns = reference_trip_ns(lib);
    const bool slow_trip = !lib.host_dispatch && host_rule.violated(w.round_trip_ns, reference_ns);
    if (lib.role == "baseline" && !lib.host_dispatch) {
      reference.add_baseline(w.round_trip_ns);
    }
    const bool slow_tail = host_rule.violated(w.tail_ns, empty_tail_ns);
    const bool outside = w.outside_ns - empty_outside_ns > w.host_ns - empty_host_ns;
    auto& calls = abi_calls[lib.role];
    if (calls.size() < 64) {
      calls.push_back({{"round_trip_s", w.round_trip_ns * 1e-9},
                       {"reference_round_trip_s", reference_ns * 1e-9},
                       {"host_s", w.host_ns * 1e-9},
                       {"outside_s", w.outside_ns * 1e-9},
                       {"prepare_s", w.prepare_ns * 1e-9},
                       {"launch_s", w.launch_ns * 1e-9},
                       {"tail_s", w.tail_ns * 1e-9},
                       {"window_s", w.window_s},
                       {"slow_trip", slow_trip},
                       {"slow_tail", slow_tail}});
    }
    const abi_finding found = slow_calls[lib.role].add(slow_trip, outside, slow_tail);
    if (w.early_output) {
      return rejection{outside ? "timing.work_outside_stream" : "timing.host_work",
                       fmt::format("outputs were written before the window opened: work done "
                                   "{} ({:.3g} ms inside kb_launch, {:.3g} ms outside the given "
                                   "stream after it)",
                                   outside ? "on another stream" : "on the host's time",
                                   w.host_ns * 1e-6, w.outside_ns * 1e-6)};
    }
    if (found == abi_finding::host_work || found == abi_finding::work_outside_stream) {
      const bool named_outside = found == abi_finding::work_outside_stream;
      return rejection{
          named_outside ? "timing.work_outside_stream" : "timing.host_work",
          fmt::format("{} of {} calls took longer before their window than an honest call "
                      "({:.3g} ms) allows; the last took {:.3g} ms of the judge's time ({:.3g} ms "
                      "inside kb_launch, {:.3g} ms of work outside the given stream) for a "
                      "device window of {:.3g} ms: {}",
                      slow_calls[lib.role].slow_calls(), slow_calls[lib.role].calls(),
                      reference_ns * 1e-6, w.round_trip_ns * 1e-6, w.host_ns * 1e-6,
                      w.outside_ns * 1e-6, (w.window_s - overhead_s) * 1e3,
                      named_outside ? "work on another stream" : "work on the host's time")};
    }
    if (found == abi_finding::work_after_window) {
      return rejection{"timing.work_outside_stream",
                       fmt::format("device work went on {:.3g} ms after the window closed "
                                   "(window {:.3g} ms)",
                                   w.tail_ns * 1e-6, (w.window_s - overhead_s) * 1e3)};
    }
    return std::nullopt;
  };

  std::vector<candidate_lib*> alive;
  for (auto& lib : m_libs) {
    if (!lib.rejected) {
      alive.push_back(&lib);
    }
  }

  // ABI: no device memory of its own inside kb_launch. The device's memory in use (all
  // processes) before and after a series of calls of one candidate at a time.
  json allocation = json::object();
  const int64_t allocation_slack = 2 << 20; // [bytes] one allocation granule
  // Calls of the probe: the warm-ups used the first two input sets, the probe's calls go round
  // every set (there are at most a few), so an allocation per call, per set or per pointer shows.
  const int allocation_probe_calls = 10;
  for (auto* lib : alive) {
    for (int i = 0; i < 2 && !lib->rejected; ++i) {
      auto tc = timed_call(*lib, static_cast<size_t>(i) % bufs.size(), "warm-up");
      if (tc.bad) {
        reject(*lib, *tc.bad);
      }
    }
    if (lib->rejected) {
      continue;
    }
    size_t free0 = 0;
    size_t free1 = 0;
    size_t total = 0;
    cuda_check(cudaDeviceSynchronize(), "memory");
    cuda_check(cudaMemGetInfo(&free0, &total), "memory");
    for (int i = 0; i < allocation_probe_calls && !lib->rejected; ++i) {
      auto tc = timed_call(*lib, static_cast<size_t>(i) % bufs.size(), "allocation probe");
      if (tc.bad) {
        reject(*lib, *tc.bad);
      } else if (auto broken = abi_rules(*lib, tc.w)) {
        reject(*lib, *broken);
      }
    }
    if (lib->rejected) {
      continue;
    }
    cuda_check(cudaDeviceSynchronize(), "memory");
    cuda_check(cudaMemGetInfo(&free1, &total), "memory");
    const int64_t growth = static_cast<int64_t>(free0) - static_cast<int64_t>(free1);
    allocation[lib->role] = {{"growth_bytes", growth}, {"calls", allocation_probe_calls}};
    if (growth > allocation_slack) {
      reject(*lib, {"abi.allocation",
                    fmt::format("device memory in use grew by {} bytes over {} calls: kb_launch "
                                "allocates (the ABI gives it a workspace instead)",
                                growth, allocation_probe_calls)});
    }
  }

  alive.clear();
  for (auto& lib : m_libs) {
    if (!lib.rejected) {
      alive.push_back(&lib);
    }
  }
  std::map<std::string, json> samples;
  std::map<std::string, stats::stopping_rule> rules;
  stats::stopping_options so;
  so.min_samples = static_cast<size_t>(min_samples);
  so.max_samples = static_cast<size_t>(max_samples);
  so.max_noise = target_rsd;
  so.min_time = min_time;
  so.timeout = max_wall;
  for (auto* lib : alive) {
    rules.emplace(lib->role, stats::stopping_rule(so));
  }
  std::mt19937_64 rng(order_seed);
  const auto wall_start = clock_type::now();
  auto last_beat = wall_start;
  int round = 0;
  int checked_calls = 0;
  // Fresh rounds. A cache of results keyed by the inputs' contents (all of them, or a sample)
  // passes every check made on the input sets: the timed calls go round inputs the candidate has
  // seen, and its answers for them are the verified ones. So some rounds, alike in everything
  // else, run every library on contents nobody has seen: drawn for the round on the GPU by the
  // judge's generator with a seed of its own (from the generator the system's CSPRNG seeds, not
  // replayed), into the round's set's buffers in every lane (prepare_fresh), and put back after
  // it. A candidate slower on those than on the others reuses results (`timing.cache`, below);
  // every library's answer there is checked whole against the oracle's right after its call
  // (`timing.stale_after_input_change`), in shared lanes as in lanes of their own.
  std::map<std::string, int> fresh_calls;
  int fresh_rounds = 0;
  int fresh_checked = 0;
  int extra_rounds = 0;
  const auto fresh_wanted = [&] {
    return std::any_of(alive.begin(), alive.end(), [&](candidate_lib* l) {
      return l->role != "baseline" && fresh_calls[l->role] < fresh_min_calls;
    });
  };
  while (!alive.empty()) {
    const bool stopped = std::all_of(alive.begin(), alive.end(),
                                     [&](candidate_lib* l) { return rules.at(l->role).stopped(); });
    // After the stopping rule, rounds go on (fresh ones in half of them) until every candidate
    // has enough fresh calls for the comparison, within a bound of rounds (past the session's
    // wall-time limit if need be: the check is not given up for time a candidate's calls take).
    if (stopped && (!fresh_wanted() || extra_rounds >= fresh_max_extra_rounds)) {
      break;
    }
    extra_rounds += stopped ? 1 : 0;
    std::vector<candidate_lib*> order = alive;
    std::shuffle(order.begin(), order.end(), rng);
    const int set = round % n_sets;
    const bool fresh_round = fresh_rounds < fresh_max_rounds &&
                             m_rng() % (stopped ? 2 : fresh_round_every) == 0;
    call_inputs in = set_inputs(static_cast<size_t>(set));
    std::vector<uint64_t> fresh_digests;
    fresh_reference fresh;
    if (fresh_round) {
      ++fresh_rounds;
      fresh = prepare_fresh(lanes_of_set(static_cast<size_t>(set)), *bufs[0], n_dists);
      fresh_digests = fresh.input_digests;
      // A call that changed them gets the same contents again.
      in = call_inputs{&fresh_digests, -1, [&, d = fresh.dist, seed = fresh.seed](shape_buffers& b) {
                         generate(b, d, seed);
                         cuda_check(cudaStreamSynchronize(m_stream), "inputs");
                       }};
    }
    for (auto* lib : order) {
      if (lib->rejected) {
        continue;
      }
      const auto what = fresh_round ? fmt::format("round {} fresh contents", round)
                                    : fmt::format("round {} set {}", round, set);
      const auto tc = timed_call_on(*lib, buf(*lib, static_cast<size_t>(set)), in, what);
      ++checked_calls;
      if (tc.bad) {
        reject(*lib, *tc.bad);
        continue;
      }
      const auto& w = tc.w;
      if (auto broken = abi_rules(*lib, w)) {
        reject(*lib, *broken);
        continue;
      }
      const double sample = net_sample(w.window_s, overhead_s);
      const auto clock = m_nvml->sm_clock_mhz();
      samples[lib->role].push_back({{"t", sample},
                                    {"window_s", w.window_s},
                                    {"round_trip_s", w.round_trip_ns * 1e-9},
                                    {"host_s", w.host_ns * 1e-9},
                                    {"outside_s", w.outside_ns * 1e-9},
                                    {"prepare_s", w.prepare_ns * 1e-9},
                                    {"launch_s", w.launch_ns * 1e-9},
                                    {"tail_s", w.tail_ns * 1e-9},
                                    {"clock_mhz", clock ? json(*clock) : json(nullptr)},
                                    {"set", set},
                                    {"round", round},
                                    {"fresh", fresh_round}});
      auto& rule = rules.at(lib->role);
      if (!rule.stopped()) {
        rule.add(sample, std::chrono::duration<double>(clock_type::now() - wall_start).count());
      }
      if (fresh_round) {
        ++fresh_calls[lib->role];
        ++fresh_checked;
        // Checked right after its call, before any other library's call can touch a buffer it
        // shares (shared lanes): against the oracle's answer on these contents.
        if (auto r = check_fresh_answer(buf(*lib, static_cast<size_t>(set)), *bufs[0], fresh,
                                        round)) {
          reject(*lib, *r);
        }
      }
    }
    if (fresh_round) {
      // The set's own contents back in every lane (the generator is a function of the set).
      restore_set(lanes_of_set(static_cast<size_t>(set)), set_dist[static_cast<size_t>(set)],
                  set_seed[static_cast<size_t>(set)]);
    }
    alive.erase(std::remove_if(alive.begin(), alive.end(),
                               [](candidate_lib* l) { return l->rejected.has_value(); }),
                alive.end());
    ++round;
    if (clock_type::now() - last_beat > std::chrono::milliseconds(500)) {
      last_beat = clock_type::now();
      proto::progress pr;
      pr.stage = "time";
      pr.round = round;
      for (auto& [k, v] : samples) {
        pr.samples[k] = static_cast<int>(v.size());
      }
      m_out.send(pr);
    }
  }

  // The inputs of every set in every lane of its own, once the rounds are over: a change made in
  // a call whose inputs were not digested and never undone.
  int swept_sets = 0;
  if (m_separate_lanes) {
    for (auto& lib : m_libs) {
      for (size_t k = 0; k < bufs.size() && !lib.rejected; ++k) {
        auto& b = buf(lib, k);
        ++swept_sets;
        if (!inputs_intact(b, input_digests[k])) {
          set_inputs(k).restore(b);
          reject(lib, {"verify.inputs_modified",
                       fmt::format("inputs of set {} changed by a timed call (found when the "
                                   "rounds ended)",
                                   k)});
        }
      }
    }
  }

  // The ABI rules' word over all of a candidate's calls, for those too few for an early one.
  for (auto& lib : m_libs) {
    if (lib.rejected || slow_calls.count(lib.role) == 0) {
      continue;
    }
    const auto& tally = slow_calls.at(lib.role);
    const abi_finding found = tally.finish();
    if (found == abi_finding::host_work || found == abi_finding::work_outside_stream) {
      const bool named_outside = found == abi_finding::work_outside_stream;
      reject(lib,
             {named_outside ? "timing.work_outside_stream" : "timing.host_work",
              fmt::format("{} of {} calls took longer before their window than an honest "
                          "call ({:.3g} ms) allows: {}",
                          tally.slow_calls(), tally.calls(), reference_trip_ns(lib) * 1e-6,
                          named_outside ? "work on another stream" : "work on the host's time")});
    } else if (found == abi_finding::work_after_window) {
      reject(lib, {"timing.work_outside_stream",
                   fmt::format("in {} of {} calls device work went on after the window closed",
                               tally.slow_tails(), tally.calls())});
    }
  }

  // Reuse of results: each candidate's fresh calls against its calls on the seen sets.
  json reuse = json::object();
  reuse["fresh_rounds"] = fresh_rounds;
  reuse["answers_checked_calls"] = fresh_checked;
  reuse["runner_excess_bytes"] = m_runner_excess;
  for (auto& lib : m_libs) {
    if (lib.rejected || lib.role == "baseline" || samples.count(lib.role) == 0) {
      continue;
    }
    std::vector<double> fresh_t;
    std::vector<double> seen_t;
    for (const auto& x : samples[lib.role]) {
      (x.value("fresh", false) ? fresh_t : seen_t).push_back(x.at("t").get<double>());
    }
    if (fresh_t.size() < static_cast<size_t>(fresh_min_calls) || seen_t.size() < 10) {
      // Rounds go on past the session's wall-time limit until every candidate has its fresh
      // calls, so this is a bound of rounds reached: the check could not run, and a check that
      // cannot run rejects rather than passes.
      reuse[lib.role] = {{"fresh_samples", fresh_t.size()}, {"seen_samples", seen_t.size()}};
      reject(lib, {"timing.unchecked",
                   fmt::format("{} calls on fresh contents and {} on seen sets: too few to tell "
                               "whether results are reused across calls (at least {} and 10)",
                               fresh_t.size(), seen_t.size(), fresh_min_calls)});
      continue;
    }
    const auto cmp = compare_fresh(fresh_t, seen_t);
    reuse[lib.role] = cmp.to_json();
    if (cmp.c.slowed) {
      reject(lib, {"timing.cache",
                   fmt::format("calls on input contents it had not seen before took {:.1f}% "
                               "longer (median {:.4g} ms over {}) than calls on the input sets it "
                               "had seen (median {:.4g} ms over {}): results reused across calls",
                               100 * (cmp.c.ratio - 1), cmp.c.beside_median * 1e3, fresh_t.size(),
                               cmp.c.alone_median * 1e3, seen_t.size())});
    }
  }

  // Result caching keyed by pointer or by a sample of the contents: change input set 0 in place,
  // first all of it, then values at random positions (64 random runs of up to 16 elements per
  // input, from fresh contents), and check each answer against the oracle.
  const uint64_t fresh_seed = m_job.fresh_seed;
  bool any = false;
  for (auto& lib : m_libs) {
    any = any || (!lib.rejected && lib.role != "baseline");
  }
  if (any) {
    // The same change in every lane's set 0; the references come from lane 0.
    const auto zero = lanes_of_set(0);
    auto& b = *zero[0];
    for (const bool sparse : {false, true}) {
      if (sparse) {
        for (size_t i = 0; i < s.inputs.size(); ++i) {
          const auto& t = s.inputs[i];
          const size_t eb = dtype_bytes(t.dtype);
          guarded_buffer fresh(t.bytes(), m_host_reference);
          const uint64_t seed = tensor_seed(fresh_seed + 1, static_cast<int>(i));
          if (m_host_reference) {
            cpu_fill_random(fresh.host(), t.dtype, t.numel(), pick(t, set_dist[0]), seed);
          } else {
            gpu_fill_random(fresh.data(), t.dtype, t.numel(), pick(t, set_dist[0]), seed, m_stream);
            cuda_check(cudaStreamSynchronize(m_stream), "fresh values");
          }
          std::uniform_int_distribution<int64_t> pos(0, std::max<int64_t>(0, t.numel() - 1));
          std::vector<std::pair<size_t, size_t>> runs; // [bytes] offset, length
          for (int run = 0; run < 64; ++run) {
            const int64_t at = pos(m_rng);
            const int64_t n =
                std::min<int64_t>(1 + static_cast<int64_t>(m_rng() % 16), t.numel() - at);
            runs.emplace_back(static_cast<size_t>(at) * eb, static_cast<size_t>(n) * eb);
          }
          for (auto* lb : zero) {
            for (const auto& [off, len] : runs) {
              if (m_host_reference) {
                std::memcpy(static_cast<unsigned char*>(lb->inputs[i].host()) + off,
                            static_cast<unsigned char*>(fresh.host()) + off, len);
              } else {
                cuda_check(cudaMemcpyAsync(static_cast<unsigned char*>(lb->inputs[i].data()) + off,
                                           static_cast<unsigned char*>(fresh.data()) + off, len,
                                           cudaMemcpyDeviceToDevice, m_stream),
                           "random positions");
              }
            }
            if (m_host_reference) {
              cuda_check(cudaMemcpy(lb->inputs[i].data(), lb->inputs[i].host(), t.bytes(),
                                    cudaMemcpyHostToDevice),
                         "upload");
            }
          }
        }
      } else {
        for (auto* lb : zero) {
          generate(*lb, set_dist[0], fresh_seed);
        }
      }
      compute_reference(b);
      std::vector<double> scales;
      std::vector<tolerance_spec> tols;
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        const auto mo = reference_moments(b, o);
        scales.push_back(std::sqrt(mo.sum_sq / std::max<int64_t>(1, s.outputs[o].numel())));
        tols.push_back({m_atol, m_rtol, scales.back()});
      }
      for (auto& lib : m_libs) {
        if (lib.rejected || lib.role == "baseline") {
          continue;
        }
        auto& lb = buf(lib, 0);
        for (size_t o = 0; o < s.outputs.size(); ++o) {
          poison(lb.outputs[o], s.outputs[o]);
        }
        const std::string what = sparse ? "input set 0 with values at random positions changed"
                                        : "input set 0 with new contents in place";
        if (auto r = call(lib, lb, "time", what)) {
          reject(lib, *r);
          continue;
        }
        std::vector<error_metrics> ms;
        for (size_t o = 0; o < s.outputs.size(); ++o) {
          ms.push_back(compare(lb, o, tols[o]));
        }
        const auto outcome = judge(ms, scales, s);
        if (!outcome.passed) {
          reject(lib, {"timing.stale_after_input_change",
                       fmt::format("{}: the output was wrong (results reused across calls?): {}",
                                   what, outcome.message)});
        }
      }
    }
  }

  // Interference: a candidate's process can run GPU work of its own between its calls (from a
  // thread of its own), which then shares the device with the baseline's windows and slows them,
  // so that the candidate looks faster. With every other runner ended (its context, and whatever
  // it queued, gone with it), the baseline is timed again on the same input sets; a baseline
  // clearly slower beside the candidates than alone was slowed by one of them.
  json interference = json::object();
  candidate_lib* base = nullptr;
  for (auto& lib : m_libs) {
    if (lib.role == "baseline" && !lib.rejected) {
      base = &lib;
    }
  }
  const bool others = std::any_of(m_libs.begin(), m_libs.end(), [&](const candidate_lib& l) {
    return &l != base && !l.rejected;
  });
  if (base != nullptr && others && samples.count("baseline") != 0 &&
      samples["baseline"].size() >= 10) {
    for (auto& lib : m_libs) {
      if (&lib != base) {
        stop_runner(lib, false);
      }
    }
    // Set 0 was changed in place by the re-check above: every lane gets its verified inputs back.
    for (auto* lb : lanes_of_set(0)) {
      generate(*lb, set_dist[0], set_seed[0]);
    }
    cuda_check(cudaDeviceSynchronize(), "interference check");
    // Throttled samples count on neither side, as in the gate.
    const auto throttled = [&](const std::optional<double>& clock) {
      return stats::throttled(clock, m_default_clock_mhz, t.throttle_fraction);
    };
    const auto beside = [&] {
      std::vector<double> v;
      for (const auto& x : samples["baseline"]) {
        const auto& c = x.at("clock_mhz");
        if (!throttled(c.is_number() ? std::optional<double>(c.get<double>()) : std::nullopt)) {
          v.push_back(x.at("t").get<double>());
        }
      }
      return v;
    }();
    const int n = std::clamp(static_cast<int>(beside.size()), 10, interference_max_calls);
    std::vector<double> alone;
    for (int i = 0; i < n + interference_warmup_calls && !base->rejected; ++i) {
      const auto tc = timed_call(*base, static_cast<size_t>(i) % bufs.size(), "alone");
      const auto clock = m_nvml->sm_clock_mhz();
      if (tc.bad) {
        reject(*base, *tc.bad);
      } else if (i >= interference_warmup_calls &&
                 !throttled(clock ? std::optional<double>(*clock) : std::nullopt)) {
        alone.push_back(net_sample(tc.w.window_s, overhead_s));
      }
    }
    if (!base->rejected && alone.size() >= 10 && beside.size() >= 10) {
      const auto cmp = compare_alone(beside, alone);
      interference = cmp.to_json();
      if (cmp.slowed) {
        for (auto& lib : m_libs) {
          if (&lib != base && !lib.rejected) {
            reject(lib, {"timing.interference",
                         fmt::format("the baseline ran {:.1f}% slower beside this candidate "
                                     "(median {:.4g} ms) than alone (median {:.4g} ms): the "
                                     "candidate's process used the device between its calls",
                                     100 * (cmp.ratio - 1), cmp.beside_median * 1e3,
                                     cmp.alone_median * 1e3)});
          }
        }
      }
    }
  }

  if (flush != nullptr) {
    cudaFree(flush);
  }
  json stopping = json::object();
  for (const auto& [role, rule] : rules) {
    stopping[role] = {{"reason", stats::to_string(rule.reason())},
                      {"noise", rule.noise()},
                      {"samples", rule.samples()}};
  }
  json out{{"samples", samples},
           {"stop", stopping},
           {"rounds", round},
           {"input_sets", n_sets},
           {"checked_calls", checked_calls},
           {"placement", placement_record},
           {"late_outputs",
            [&] {
              json j = json::object();
              for (const auto& [role, t] : late_outputs) {
                j[role] = {{"calls", t.calls},
                           {"poison_at_stop", t.poison_at_stop},
                           {"written_late", t.written_late}};
              }
              return j;
            }()},
           {"input_digests",
            {{"calls", input_checks},
             {"every", m_separate_lanes ? input_digest_every : 1},
             {"swept_sets", swept_sets}}},
           {"calibration", calibration},
           {"overhead_s", overhead_s},
           {"allocation", allocation},
           {"abi_calls", abi_calls},
           {"interference", interference},
           {"reuse", reuse},
           {"flush_bytes", cold_l2 ? flush_bytes : 0},
           {"default_sm_clock_mhz", m_default_clock_mhz},
           {"wall_s", std::chrono::duration<double>(clock_type::now() - wall_start).count()},
           {"total_s", std::chrono::duration<double>(clock_type::now() - all_start).count()},
           {"phases",
            {{"calls", phases.calls},
             {"prepare_s", phases.prepare_s},
             {"call_s", phases.call_s},
             {"check_s", phases.check_s}}}};
  return out;
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
      worker w(out, job);
      const proto::result r = w.run();
      out.send(r);
      if (r.context_lost) {
        return 0; // the parent starts a fresh worker for the next job
      }
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
