// The judge's worker: one per GPU job, trusted, never loading candidate code (judge.cpp has the
// protocol's overview). Its stages live in files of their own, each readable alone:
//   judge.cpp          the job: runners started, verification, timing, the result; judge_main
//   judge_runners.cpp  runners: start, load, failure and end
//   judge_lanes.cpp    lanes and memory: buffers per lane, inputs, oracle, digests, room checks
//   judge_calls.cpp    calls and per-call checks: the window, early and whole-output checks
//   judge_verify.cpp   verification calls: the matrix, determinism, the checker's self-test
//   judge_timing.cpp   timing rounds and fresh rounds
//   detail/rules.hpp   the decisions that need no GPU (unit-tested)
#pragma once

#include "gpu/check_rule.hpp"
#include "gpu/detail/capture.hpp"
#include "gpu/detail/channel.hpp"
#include "gpu/detail/memory.hpp"
#include "gpu/detail/messages.hpp"
#include "gpu/detail/nvml.hpp"
#include "gpu/detail/rules.hpp"
#include "gpu/detail/runner_client.hpp"
#include "gpu/device_ops.hpp"
#include "gpu/gpu.hpp"
#include "gpu/protocol.hpp"

#include "common/error.hpp"
#include "common/process.hpp"
#include "common/text.hpp"
#include "sandbox/sandbox.hpp"
#include "stats/stats.hpp"

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

namespace kb::gpu::detail {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;
namespace proto = gpu::protocol;

using nlohmann::json;
using clock_type = std::chrono::steady_clock;
using namespace gpu::detail;
namespace proto = gpu::protocol;

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
inline constexpr uint64_t placement_pad_steps = 128;
inline constexpr size_t placement_pad_step = size_t{2} << 20;
// What a runner may hold on the device besides what the judge gives it: a CUDA context, the
// library's code, graph and launch buffers, the profiler's counter buffers. [bytes]
inline constexpr uint64_t runner_memory_allowance = uint64_t{2} << 30;
// What an oracle's kbt_oracle returns where the device ran out of memory in the call (the
// generated PyTorch module: torch's OutOfMemoryError); any other non-zero code is a refusal.
inline constexpr int oracle_out_of_memory = 92;

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

inline tensor_desc tensor_of(const proto::tensor& j) {
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

inline kb_tensor view(const tensor_desc& t, void* data) {
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

  proto::result run();

private:
  struct shape_buffers;

  // ---- runners ----
  // A runner's start: the process, its flags mapped and the load request sent.
  std::optional<rejection> launch_runner(candidate_lib& lib);

  [[noreturn]] void not_started(candidate_lib& lib, bool timed_out);

  // The runner's ready frame, then its answer to its load request. A runner that ends or stays
  // silent before it is ready never loaded the candidate: the judge fails with its last words.
  std::optional<rejection> await_runner(candidate_lib& lib);

  void stop_runner(candidate_lib& lib, bool kill);

  // The runner ended or stopped answering: the candidate's rejection. Its process is gone
  // afterwards, and nothing of it is called again.
  rejection runner_failure(candidate_lib& lib, bool hung, const std::string& what);

  // A reply that is not the message the protocol expects: the runner process (the candidate's
  // process) wrote something else on its socket. The candidate's rejection, never the judge's
  // error; its runner is stopped and nothing of it is called again.
  rejection malformed_reply(candidate_lib& lib, const std::string& what);

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
    int64_t graph_ns = 0;   // [ns] the capture updated or instantiated (runner's clock)
    bool instantiated = false; // the capture could not update the runner's last graph
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
  std::vector<output_pick> output_picks(shape_buffers& b);

  // Queues copies of `picks` into the pinned `host` buffer on `stream`.
  static void copy_picks(const std::vector<output_pick>& picks, void* host, cudaStream_t stream);

  // The poison of each pick's output, laid out as copy_picks lays out the picks.
  std::vector<unsigned char> poison_of(const shape_buffers& b,
                                       const std::vector<output_pick>& picks) const;

  static std::vector<size_t> pick_sizes(const std::vector<output_pick>& picks);

  // How the picks read into `at_stop` (and, where given, read again into `after`) compare with
  // the job's poison: positions_written_late; the host buffers filled by copy_picks, their
  // stream synchronised.
  late_positions compare_picks(const shape_buffers& b, const std::vector<output_pick>& picks,
                               const void* at_stop, const void* after = nullptr) const;

  // Whether any of a few random output positions already holds something other than poison
  // (read on the judge's second stream before GO is written).
  bool outputs_written_early(shape_buffers& b);

  // One call of a candidate, checked or timed alike (see the top of this file).
  window_result windowed_call(candidate_lib& lib, shape_buffers& b, bool sample_outputs,
                              const std::string& stage, const std::string& what);

  // ---- whole-output checks ----
  // The keyed digest of a shape's outputs (per output, combined h = 31 h + d in output order)
  // and the number of their elements holding the job's poison.
  struct output_state {
    uint64_t digest = 0;
    uint64_t poisoned = 0;
  };
  // Queues the check of `b`'s outputs on `stream` (asynchronous; read_output_check reads it).
  void queue_output_check(shape_buffers& b, cudaStream_t stream);
  output_state read_output_check(const shape_buffers& b, cudaStream_t stream);
  output_state output_check(shape_buffers& b);

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
                                             late_tally& late);

  // ---- device ----
  json device_info();

  void load_oracle();

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
  void allocate(shape_buffers& b, const shape_desc& s, bool with_reference, size_t lane);

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

  void generate(shape_buffers& b, int dist_index, uint64_t seed);

  // Another lane's copy of an input set that `from` already holds: the same bits as generating
  // it again (the generator is a function of the set), for the cost of a device copy. Where the
  // references are computed on the host, the host's copies are generated too.
  void copy_inputs(shape_buffers& to, const shape_buffers& from, int dist_index, uint64_t seed);

  void compute_reference(shape_buffers& b) { compute_reference_into(b, b); }

  // The oracle on `in`'s inputs, its answer into `b`'s reference buffers (device or host).
  void compute_reference_into(shape_buffers& in, shape_buffers& b);

  uint64_t digest(guarded_buffer& buf, size_t bytes);

  void poison(guarded_buffer& buf, const tensor_desc& t);

  error_metrics compare(shape_buffers& b, size_t out, const tolerance_spec& tol);

  // Output `y` (tensor `t`) against output `out` of the references `refs` holds.
  error_metrics compare_with(guarded_buffer& y, const tensor_desc& t, const shape_buffers& refs,
                             size_t out, const tolerance_spec& tol);

  moments reference_moments(shape_buffers& b, size_t out);

  // Calls one candidate; a failure is returned as a rejection, the harness's own failures throw.
  std::optional<rejection> call(candidate_lib& lib, shape_buffers& b, const std::string& stage,
                                const std::string& what);

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
    return gpu::judge(ms, scales, names, m_rel_l2);
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
  bool lanes_fit(const shape_desc& s, int sets) const;

  // Whether `bytes` more fit in the device's free memory, a fifth of it kept back.
  static bool fits_on_device(uint64_t bytes);

  // The number of input sets timing uses at shape `s`: every distribution, and at least the
  // job's count where there are seeds enough.
  int timing_sets(const shape_desc& s) const;

  // Whether `need` bytes, which do not fit in the device's free memory, would fit without what the
  // runners hold beyond their allowance. A candidate gets its scratch memory from the judge, so
  // such an excess is a candidate's hoard, allocated so that the judge has no room left to time or
  // to check reuse; the baseline is the task's own. Beside a library dispatched from the host
  // (PyTorch's caching allocator holds memory honestly) it cannot be attributed: false. Records
  // the excess found (m_runner_excess).
  bool runners_hold_room_for(uint64_t need);

  // Whether the judge may go on to allocate `need` bytes for `what`. Where they do not fit in the
  // device's free memory but would without the runners' excess (runners_hold_room_for), every
  // candidate still in the running is rejected for holding device memory of its own, nothing
  // more is verified or timed (m_hoard), and the answer is no. Otherwise yes, as before, fitting
  // or not.
  bool check_room(uint64_t need, const std::string& what);

  // After an allocation of the judge's failed for want of device memory (`what`, its message):
  // whether the runners hold more than their allowance. If they do, that is a candidate's hoard
  // (a cache of answers per input, grown by its calls since the last check_room): every candidate
  // still in the running is rejected abi.allocation, nothing more is verified or timed (m_hoard),
  // and the answer is yes. Otherwise no: the device is too small for the job, a harness error.
  bool hoard_took(const std::string& what);

  // Bytes of one lane of shape `s` with `sets` input sets: inputs and outputs per set, the
  // float64 references once, and the device memory the oracle allocates itself during a call
  // (oracle_transient_bytes), which must stay free while the judge holds its sets.
  uint64_t lane_bytes(const shape_desc& s, int sets) const;

  // What the oracle module says it allocates on the device during one call at shape `s`, beyond
  // its workspace (the optional kbt_oracle_transient_bytes: a PyTorch module's float64 copies
  // and intermediates); 0 for an oracle that allocates nothing of its own.
  uint64_t oracle_transient_bytes(const shape_desc& s) const;

  // Device memory the runners hold beyond their allowance (runner_memory_excess), and the
  // device's free memory it was found beside. [bytes]
  uint64_t runner_excess(size_t* free_now) const;

  // Lanes 1.. for shape `s` beside `base` (lane 0), when they are kept apart.
  std::vector<std::unique_ptr<shape_buffers>> extra_lanes(const shape_buffers& base,
                                                          const shape_desc& s);

  json verify_all();

  void check_determinism(candidate_lib& lib, shape_buffers& b, uint64_t first,
                         const std::string& what);

  // The checker must reject trivial outputs somewhere in the matrix: each kind still untested at
  // this shape is tried, and leaves `untested` once rejected (counted in `rejections`).
  void selftest_trivial(shape_buffers& b, const std::vector<double>& scales,
                        const std::vector<tolerance_spec>& tols, double constant,
                        std::set<std::string>& untested, std::map<std::string, int>& tries,
                        std::map<std::string, int>& rejections);

  // Session 2 and later: the candidates were verified in an earlier worker; their outputs on the
  // timing sets must have the same bits as then.
  void check_expected_digests();

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
  proto::profile_calls profile_calls();

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
                                int n_dists);
  // The same preparation for given contents: a redrawn round passes the set's own distribution
  // and seed, so that its calls follow the same work as a fresh round's on contents seen before.
  fresh_reference prepare_contents(const std::vector<shape_buffers*>& lanes, shape_buffers& refs,
                                   int dist, uint64_t seed);

  // One library's answer on a fresh or redrawn round's contents (`b`: its lane's buffers of the
  // round's set), whole, against the oracle's in `refs`.
  std::optional<rejection> check_fresh_answer(shape_buffers& b, shape_buffers& refs,
                                              const fresh_reference& f, int round,
                                              bool fresh_contents);

  // A set's own contents back in every lane after a fresh or redrawn round.
  void restore_set(const std::vector<shape_buffers*>& lanes, int dist, uint64_t seed);

  // ---- timing (judge_timing.cpp) ----
  // A session's timing, stage by stage, in the order time_all runs them; `timing_run` holds what
  // passes from one stage to the next.
  struct timing_run;
  struct call_inputs;  // what a call's inputs must hold afterwards, and how they are put back
  struct timed_result; // a timed call's window and the rejection its checks found, if any
  json time_all();
  void place_timing_sets(timing_run& r);
  void fill_timing_sets(timing_run& r);
  void calibrate_overhead(timing_run& r);
  void probe_allocation(timing_run& r);
  void control_call(timing_run& r, size_t set, const call_inputs& in);
  void plan_timing_rounds(timing_run& r);
  void run_rounds(timing_run& r);
  void timing_round(timing_run& r);
  void record_sample(timing_run& r, const candidate_lib& lib, const window_result& w, int set,
                     round_kind kind);
  void sweep_inputs(timing_run& r);
  void finish_abi_rules(timing_run& r);
  void check_reuse(timing_run& r);
  void recheck_changed_inputs(timing_run& r);
  void change_set_zero(timing_run& r, bool sparse);
  void check_interference(timing_run& r);
  std::vector<double> time_baseline_alone(timing_run& r, candidate_lib& base, int n);
  json timing_record(timing_run& r);
  // The stages' parts: a library's buffers of set k, every lane's, the digests of a call's
  // inputs, one timed call, the ABI rules on its times, a clock reading's throttling.
  shape_buffers& timing_buf(timing_run& r, const candidate_lib& lib, size_t k);
  std::vector<shape_buffers*> timing_lanes(timing_run& r, size_t k);
  bool inputs_intact(timing_run& r, shape_buffers& b, const std::vector<uint64_t>& digests);
  call_inputs set_inputs(timing_run& r, size_t k);
  timed_result timed_call_on(timing_run& r, candidate_lib& lib, shape_buffers& b,
                             const call_inputs& in, const std::string& what);
  timed_result timed_call(timing_run& r, candidate_lib& lib, size_t k, const std::string& what);
  std::optional<rejection> abi_rules(timing_run& r, const candidate_lib& lib,
                                     const window_result& w);
  int64_t host_work_charge(const timing_run& r, const candidate_lib& lib,
                           const window_result& w) const;
  double flush_probe(timing_run& r);
  void calibrate_settle(timing_run& r);
  void settle_device(timing_run& r);
  bool throttled(const timing_run& r, const std::optional<double>& clock_mhz) const;

  const emitter& m_out;
  const proto::job& m_job;
  cudaStream_t m_aux = nullptr; // samples outputs before GO, writes DONE for a failed runner
  void* m_sample_host = nullptr;
  digest_key m_key{};                         // drawn per job from m_rng, never sent to a runner
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
  double m_workspace_wait_s = 0; // [s] waiting for the runners' workspace answers (allocate)
  bool m_separate_lanes = true; // a lane of buffers per library (see lane_of)
  size_t m_free_at_start = 0;   // device memory free before the runners started [bytes]
  uint64_t m_runner_excess = 0; // what runner_excess() found when last asked (check_room)
  bool m_hoard = false; // check_room found a candidate's hoard: nothing more is verified or timed
  int64_t m_judge_bytes_at_start = 0; // judge_device_bytes() then
  cudaStream_t m_stream = nullptr;
  oracle_fn m_oracle = nullptr;
  oracle_workspace_fn m_oracle_ws = nullptr;
  oracle_workspace_fn m_oracle_transient = nullptr; // optional: kbt_oracle_transient_bytes
  uint64_t m_oracle_ws_bytes = 0;
  std::vector<unsigned char> m_oracle_ws_host;
  bool m_context_lost = false;
  std::unique_ptr<nvml> m_nvml;
  double m_default_clock_mhz = 0;
  size_t m_l2_bytes = 0;
};
} // namespace kb::gpu::detail
