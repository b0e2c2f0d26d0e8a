// Timing: interleaved rounds of windowed calls on the timing sets, the calibration's empty
// kernel, the ABI rules, the allocation probe, fresh rounds on contents drawn for the round and
// checked against the oracle, the re-check of changed inputs and the interference check. One
// session's timing is a series of stages (time_all lists them in order), each a function of its
// own that reads and adds to the session's `timing_run`.
#include "gpu/detail/worker.hpp"

#include <utility>

namespace kb::gpu::detail {

auto worker::prepare_fresh(const std::vector<shape_buffers*>& lanes, shape_buffers& refs,
                           int n_dists) -> fresh_reference {
  const auto dist = static_cast<int>(m_rng() % static_cast<uint64_t>(std::max(1, n_dists)));
  const uint64_t seed = m_rng();
  return prepare_contents(lanes, refs, dist, seed);
}

auto worker::prepare_contents(const std::vector<shape_buffers*>& lanes, shape_buffers& refs,
                              int dist, uint64_t seed) -> fresh_reference {
  fresh_reference f;
  f.dist = dist;
  f.seed = seed;
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

auto worker::check_fresh_answer(shape_buffers& b, shape_buffers& refs, const fresh_reference& f,
                                int round, bool fresh_contents) -> std::optional<rejection> {
  const auto& s = *b.shape;
  std::vector<error_metrics> ms;
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    ms.push_back(compare_with(b.outputs[o], s.outputs[o], refs, o, f.tols[o]));
  }
  const auto outcome = judge(ms, f.scales, s);
  if (outcome.passed) {
    return std::nullopt;
  }
  if (!fresh_contents) {
    return rejection{"timing.stale_output",
                     fmt::format("round {}: on a seen set's own contents, drawn again for the "
                                 "round, the answer is wrong against the oracle: {}",
                                 round, outcome.message)};
  }
  return rejection{"timing.stale_after_input_change",
                   fmt::format("round {}: on input contents drawn for the round the answer is "
                               "wrong against the oracle (results reused across calls?): {}",
                               round, outcome.message)};
}

auto worker::restore_set(const std::vector<shape_buffers*>& lanes, int dist, uint64_t seed)
    -> void {
  generate(*lanes[0], dist, seed);
  for (size_t l = 1; l < lanes.size(); ++l) {
    copy_inputs(*lanes[l], *lanes[0], dist, seed);
  }
  cuda_check(cudaStreamSynchronize(m_stream), "inputs");
}

// ---- one session's timing, stage by stage ------------------------------------------------------

// What a call's inputs must hold afterwards, and how they are put back when a call changed them.
struct worker::call_inputs {
  const std::vector<uint64_t>* digests = nullptr;
  int key = -1; // the verified set whose output digest the call must reproduce; -1: none
  std::function<void(shape_buffers&)> restore;
};

// One call as timing makes it: poison, flush, window, then the checks outside the window.
struct worker::timed_result {
  std::optional<rejection> bad;
  window_result w;
};

// What passes from one stage of a session's timing to the next.
struct worker::timing_run {
  timing_run(const proto::timing& timing, const shape_desc& shape)
      : t(timing), s(shape), order_rng(timing.order_seed) {}
  const proto::timing& t;
  const shape_desc& s;
  clock_type::time_point all_start = clock_type::now();
  int n_dists = 1;
  int n_sets = 0;
  // Input sets: (distribution, seed) pairs, every distribution first.
  std::vector<int> set_key;
  std::vector<int> set_dist;
  std::vector<uint64_t> set_seed;
  // Lane 0's sets and, where each library has a lane of its own, the other lanes' copies.
  std::vector<std::unique_ptr<shape_buffers>> bufs;
  std::vector<std::vector<std::unique_ptr<shape_buffers>>> more_lanes;
  json placement_record; // where the buffers went, for the session's record
  std::vector<std::vector<uint64_t>> input_digests;
  void* flush = nullptr;
  size_t flush_bytes = 0;
  // Where a session's wall time goes, for the record: preparing calls (poison, L2 flush), the
  // calls themselves (round trip, window, the runner's sync), the checks after them (digests).
  struct phase_clock {
    double prepare_s = 0;
    double call_s = 0;
    double check_s = 0;
    int calls = 0;
  } phases;
  int input_checks = 0; // timed calls followed by a digest of their inputs
  // The device's quiet before a round on contents the judge prepared (settle): the fastest
  // flush probe seen so far, and what the waits cost.
  struct settle_clock {
    double quiet_probe_s = 0; // [s] the fastest probe of the session
    int waits = 0;
    int probes = 0;
    double wait_s = 0;     // [s] all waits
    double max_wait_s = 0; // [s] the longest
    int unsettled = 0;     // waits that ended at settle_max_s
  } settle;
  // Whose timed call came last, and before the current one: a sample names the library whose
  // call preceded it, so that an effect of the order of the calls shows in the record.
  std::string last_caller;
  std::string previous_caller;
  // Per library: timed calls, those whose sampled outputs still held poison right behind STOP,
  // and those with a sampled position written after STOP.
  std::map<std::string, late_tally> late_outputs;
  // The calibration: the empty kernel's windows and times.
  json calibration = json::object();
  double overhead_s = 0;
  int64_t empty_round_trip_ns = 0;
  int64_t empty_host_ns = 0;
  int64_t empty_outside_ns = 0;
  int64_t empty_tail_ns = 0;
  // The ABI rules.
  host_work_rule host_rule;
  json abi_calls = json::object(); // the first calls the ABI rules saw, per candidate
  std::map<std::string, abi_tally> slow_calls;
  reference_trip reference{0};
  // The empty kernel as the control of the host-work rule, when no baseline can be (rules.hpp,
  // reference_trip): its calls among the others', and why it stopped if it did.
  bool control = false;
  int control_calls = 0;
  std::string control_stopped;
  json allocation = json::object();
  double round_s = 0; // [s] one round's calls as the allocation probe timed them
  // The rounds.
  std::vector<candidate_lib*> alive;
  std::map<std::string, json> samples;
  std::map<std::string, stats::stopping_rule> rules;
  std::mt19937_64 order_rng;
  clock_type::time_point wall_start;
  clock_type::time_point last_beat;
  int round = 0;
  int checked_calls = 0;
  std::map<std::string, int> fresh_calls;
  int fresh_rounds = 0;
  int redrawn_rounds = 0;
  int fresh_checked = 0;
  round_plan plan;
  std::vector<round_kind> deck;
  // After the rounds.
  int swept_sets = 0;
  json reuse = json::object();
  json interference = json::object();

  int64_t reference_trip_ns(const candidate_lib& lib) const {
    return lib.role == "baseline" ? reference.for_baseline() : reference.for_candidate();
  }
  void drop_rejected() {
    alive.erase(std::remove_if(alive.begin(), alive.end(),
                               [](candidate_lib* l) { return l->rejected.has_value(); }),
                alive.end());
  }
};

namespace {
double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}
} // namespace

// The device settles before a round on contents the judge prepared: the preparation (a PyTorch
// oracle in float64 allocates and frees tens of GB) leaves the device busy after it returns (on
// the H100 every call of a fresh or redrawn round of an 8.6 GB matrix-vector product ran 22%
// slower than in the seen rounds, both libraries alike, and the first calls of the round after
// it too; the baseline alone, after no preparation, ran at the seen rounds' speed, so the A/A was
// rejected `timing.interference`). A memory-bound probe (the L2 flush's memset, timed with
// events) runs until it is as fast as the session's fastest, within `settle_slack`, three times
// in a row, for at most `settle_max_s` (a process that keeps the device busy would hold every wait
// to it; the interference check is what finds such a process).
namespace {
constexpr double settle_slack = 1.10;
constexpr double settle_max_s = 0.25;
constexpr int settle_quiet_probes = 3;
constexpr double settle_calibration_s = 0.05;
} // namespace

double worker::flush_probe(timing_run& r) {
  cuda_check(cudaEventRecord(m_start, m_stream), "event");
  cuda_check(cudaMemsetAsync(r.flush, static_cast<int>(m_rng() & 0xFF), r.flush_bytes, m_stream),
             "settle probe");
  cuda_check(cudaEventRecord(m_stop, m_stream), "event");
  cuda_check(cudaEventSynchronize(m_stop), "settle probe");
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, m_start, m_stop), "event");
  const double t = ms * 1e-3;
  if (r.settle.quiet_probe_s <= 0 || t < r.settle.quiet_probe_s) {
    r.settle.quiet_probe_s = t;
  }
  return t;
}

// The session's quiet probe: the fastest of the probes over `settle_calibration_s` (at least 20).
void worker::calibrate_settle(timing_run& r) {
  if (r.flush == nullptr) {
    return;
  }
  const auto t0 = clock_type::now();
  for (int i = 0; i < 20 || seconds_since(t0) < settle_calibration_s; ++i) {
    (void)flush_probe(r);
  }
}

void worker::settle_device(timing_run& r) {
  if (r.flush == nullptr || r.settle.quiet_probe_s <= 0) {
    return;
  }
  const auto t0 = clock_type::now();
  int quiet = 0;
  while (quiet < settle_quiet_probes) {
    if (seconds_since(t0) > settle_max_s) {
      ++r.settle.unsettled;
      break;
    }
    const double t = flush_probe(r);
    ++r.settle.probes;
    quiet = t <= r.settle.quiet_probe_s * settle_slack ? quiet + 1 : 0;
  }
  const double waited = seconds_since(t0);
  ++r.settle.waits;
  r.settle.wait_s += waited;
  r.settle.max_wait_s = std::max(r.settle.max_wait_s, waited);
}

// Interleaved timing of all accepted candidates on input sets that rotate over every declared
// distribution, cold L2, every call windowed on the judge's stream, every output checked whole
// after its window (guard bands, poison, keyed digest against the verified answer's), inputs
// digested after drawn calls, fresh rounds on contents drawn for the round and checked against
// the oracle. Each stage below says what it adds.
auto worker::time_all() -> json {
  timing_run r(*m_job.time, timing_shape());
  place_timing_sets(r);
  fill_timing_sets(r);
  calibrate_overhead(r);
  probe_allocation(r);
  plan_timing_rounds(r);
  run_rounds(r);
  sweep_inputs(r);
  finish_abi_rules(r);
  check_reuse(r);
  recheck_changed_inputs(r);
  check_interference(r);
  if (r.flush != nullptr) {
    cudaFree(r.flush);
  }
  return timing_record(r);
}

// The input sets and their buffers. Where they land (proto::placement): `fixed` allocates lane
// by lane, set by set; `drawn` allocates them in an order drawn from the judge's generator, each
// after a pad of drawn size (within a twentieth of the free memory in all), and frees the pads
// once all are placed.
void worker::place_timing_sets(timing_run& r) {
  const shape_desc& s = r.s;
  r.n_dists = dist_count(s);
  const int n_seeds = static_cast<int>(m_seeds.size());
  // As many rotated sets as the device holds (timing_sets: separate lanes kept over more sets).
  r.n_sets = timing_sets(s);
  m_separate_lanes = m_separate_lanes && lanes_fit(s, r.n_sets);
  for (int k = 0; k < r.n_sets; ++k) {
    const int d = k % r.n_dists;
    const int si = (k / r.n_dists) % n_seeds;
    r.set_key.push_back(d * n_seeds + si);
    r.set_dist.push_back(d);
    r.set_seed.push_back(m_seeds[static_cast<size_t>(si)]);
  }
  const size_t n_sets = static_cast<size_t>(r.n_sets);
  const size_t n_lanes = m_separate_lanes ? std::max<size_t>(1, m_libs.size()) : 1;
  r.bufs.resize(n_sets);
  r.more_lanes.resize(n_lanes - 1);
  for (auto& row : r.more_lanes) {
    row.resize(n_sets);
  }
  const bool drawn = r.t.where == proto::placement::drawn;
  std::vector<std::pair<size_t, size_t>> slots; // (lane, set)
  for (size_t l = 0; l < n_lanes; ++l) {
    for (size_t k = 0; k < n_sets; ++k) {
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
  // The pads go when the sets are placed, or when placing them fails (out_of_device_memory).
  const auto free_pad = [](void* pad) { (void)cudaFree(pad); };
  std::vector<std::unique_ptr<void, decltype(free_pad)>> pads;
  json pad_record = json::array();
  for (const auto& [l, k] : slots) {
    if (drawn) {
      const size_t bytes = static_cast<size_t>(m_rng() % placement_pad_steps) * placement_pad_step;
      void* pad = nullptr;
      if (bytes > 0 && bytes <= pad_budget && cudaMalloc(&pad, bytes) == cudaSuccess) {
        pads.emplace_back(pad, free_pad);
        pad_budget -= bytes;
        pad_record.push_back(bytes);
      } else {
        (void)cudaGetLastError();
        pad_record.push_back(0);
      }
    }
    auto e = std::make_unique<shape_buffers>();
    allocate(*e, s, /*with_reference=*/l == 0 && k == 0, l);
    (l == 0 ? r.bufs[k] : r.more_lanes[l - 1][k]) = std::move(e);
  }
  pads.clear();
  r.placement_record = {{"kind", proto::to_string(r.t.where)}, {"pads_bytes", pad_record}};
}

// Every set's contents in every lane, their digests, and the buffer that flushes L2.
void worker::fill_timing_sets(timing_run& r) {
  const shape_desc& s = r.s;
  for (int k = 0; k < r.n_sets; ++k) {
    const auto ku = static_cast<size_t>(k);
    generate(*r.bufs[ku], r.set_dist[ku], r.set_seed[ku]);
    for (auto& row : r.more_lanes) {
      row[ku]->ref_source = r.bufs[ku].get();
      copy_inputs(*row[ku], *r.bufs[ku], r.set_dist[ku], r.set_seed[ku]);
    }
  }
  cuda_check(cudaStreamSynchronize(m_stream), "timing inputs");
  r.input_digests.resize(r.bufs.size());
  for (size_t k = 0; k < r.bufs.size(); ++k) {
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      r.input_digests[k].push_back(digest(r.bufs[k]->inputs[i], s.inputs[i].bytes()));
    }
  }
  r.flush_bytes = std::max<size_t>(2 * m_l2_bytes, size_t(128) << 20);
  if (r.t.cold_l2) {
    cuda_check(cudaMalloc(&r.flush, r.flush_bytes), "L2 flush buffer");
  }
}

auto worker::timing_buf(timing_run& r, const candidate_lib& lib, size_t k) -> shape_buffers& {
  const size_t l = lane_of(lib);
  return l == 0 || r.more_lanes.empty() ? *r.bufs[k] : *r.more_lanes[l - 1][k];
}

auto worker::timing_lanes(timing_run& r, size_t k) -> std::vector<shape_buffers*> {
  std::vector<shape_buffers*> all{r.bufs[k].get()};
  for (auto& row : r.more_lanes) {
    all.push_back(row[k].get());
  }
  return all;
}

bool worker::inputs_intact(timing_run& r, shape_buffers& b, const std::vector<uint64_t>& digests) {
  for (size_t i = 0; i < r.s.inputs.size(); ++i) {
    if (digest(b.inputs[i], r.s.inputs[i].bytes()) != digests[i]) {
      return false;
    }
  }
  return true;
}

auto worker::set_inputs(timing_run& r, size_t k) -> call_inputs {
  return call_inputs{&r.input_digests[k], r.set_key[k], [this, &r, k](shape_buffers& b) {
                       generate(b, r.set_dist[k], r.set_seed[k]);
                       cuda_check(cudaStreamSynchronize(m_stream), "inputs");
                     }};
}

// One timed call on `b`: poison, L2 flush, the window, then the checks outside it.
auto worker::timed_call_on(timing_run& r, candidate_lib& lib, shape_buffers& b,
                           const call_inputs& in, const std::string& what) -> timed_result {
  const shape_desc& s = r.s;
  timed_result out;
  ++r.phases.calls;
  r.previous_caller = std::exchange(r.last_caller, lib.role);
  auto t = clock_type::now();
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    poison(b.outputs[o], s.outputs[o]);
  }
  if (b.workspace_bytes > 0) {
    cuda_check(cudaMemsetAsync(b.workspace.data(), 0xFF, b.workspace_bytes, m_stream),
               "workspace poison");
  }
  cuda_check(cudaStreamSynchronize(m_stream), "poison");
  if (r.t.cold_l2) {
    cuda_check(cudaMemsetAsync(r.flush, static_cast<int>(m_rng() & 0xFF), r.flush_bytes, m_stream),
               "L2 flush");
  }
  r.phases.prepare_s += seconds_since(t);
  t = clock_type::now();
  out.w = windowed_call(lib, b, true, "time", what);
  r.phases.call_s += seconds_since(t);
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
    out.bad = rejection{"launch.cuda_error", fmt::format("failed while timed ({}): rc {} {}", what,
                                                         out.w.rc, out.w.launch_error)};
    return out;
  }
  // The empty kernel's calls are checked too: the runner's wake-up for the next call depends on
  // how long it waited, so its round trips must come from the same rhythm as everyone's.
  t = clock_type::now();
  struct add_on_exit {
    double& to;
    clock_type::time_point from;
    ~add_on_exit() { to += seconds_since(from); }
  } checking{r.phases.check_s, t};
  const bool digest_inputs =
      !m_separate_lanes || in.key < 0 || m_rng() % static_cast<uint64_t>(input_digest_every) == 0;
  r.input_checks += digest_inputs ? 1 : 0;
  if (digest_inputs && !inputs_intact(r, b, *in.digests)) {
    in.restore(b);
    out.bad = rejection{"verify.inputs_modified",
                        fmt::format("inputs changed by a timed call ({})", what)};
    return out;
  }
  if (&lib != &m_empty) {
    out.bad = whole_call_checks(lib, b, in.key, out.w, what, r.late_outputs[lib.role]);
  }
  return out;
}

auto worker::timed_call(timing_run& r, candidate_lib& lib, size_t k, const std::string& what)
    -> timed_result {
  return timed_call_on(r, lib, timing_buf(r, lib, k), set_inputs(r, k), what);
}

// The scheme's overhead: the empty kernel, launched by a runner of its own through the same
// path. Its median window is taken off every sample; its round trip is the host-work rule's.
void worker::calibrate_overhead(timing_run& r) {
  calibrate_settle(r);
  candidate_lib& empty = m_empty;
  if (empty.rejected) {
    fail("the calibration runner did not start: {}", empty.rejected->message);
  }
  std::vector<double> windows;
  std::vector<double> trips;
  std::vector<double> hosts;
  std::vector<double> outsides;
  std::vector<double> tails;
  std::vector<double> graphs;
  std::vector<double> prepares;
  std::vector<double> launches;
  for (int i = 0; i < 25; ++i) {
    auto tc = timed_call(r, empty, static_cast<size_t>(i) % r.bufs.size(), "calibration");
    if (tc.w.failed) {
      fail("the calibration runner failed: {}", tc.w.failed->message);
    }
    if (i >= 5) {
      windows.push_back(tc.w.window_s);
      trips.push_back(static_cast<double>(tc.w.round_trip_ns));
      hosts.push_back(static_cast<double>(tc.w.host_ns));
      outsides.push_back(static_cast<double>(tc.w.outside_ns));
      graphs.push_back(static_cast<double>(tc.w.graph_ns));
      tails.push_back(static_cast<double>(tc.w.tail_ns));
      prepares.push_back(static_cast<double>(tc.w.prepare_ns));
      launches.push_back(static_cast<double>(tc.w.launch_ns));
    }
  }
  // The control: kept running when no baseline that only enqueues is timed beside candidates
  // that do (the host-work rule holds them to an honest call made under their conditions).
  const auto enqueues = [](const candidate_lib& l) { return !l.rejected && !l.host_dispatch; };
  const bool baseline_enqueues = std::any_of(m_libs.begin(), m_libs.end(), [&](const auto& l) {
    return l.role == "baseline" && enqueues(l);
  });
  const bool candidate_enqueues = std::any_of(m_libs.begin(), m_libs.end(), [&](const auto& l) {
    return l.role != "baseline" && enqueues(l);
  });
  r.control = !baseline_enqueues && candidate_enqueues;
  if (!r.control) {
    stop_runner(empty, false);
  }
  r.overhead_s = stats::median(windows);
  r.empty_round_trip_ns = static_cast<int64_t>(stats::median(trips));
  r.empty_host_ns = static_cast<int64_t>(stats::median(hosts));
  r.empty_outside_ns = static_cast<int64_t>(stats::median(outsides));
  r.empty_tail_ns = static_cast<int64_t>(stats::median(tails));
  r.calibration = {{"empty_window_median_s", r.overhead_s},
                   {"empty_window_min_s", *std::min_element(windows.begin(), windows.end())},
                   {"empty_window_max_s", *std::max_element(windows.begin(), windows.end())},
                   {"empty_round_trip_median_s", r.empty_round_trip_ns * 1e-9},
                   {"empty_host_median_s", r.empty_host_ns * 1e-9},
                   {"empty_outside_median_s", r.empty_outside_ns * 1e-9},
                   {"empty_graph_median_s", stats::median(graphs) * 1e-9},
                   {"empty_tail_median_s", r.empty_tail_ns * 1e-9},
                   {"empty_prepare_median_s", stats::median(prepares) * 1e-9},
                   {"empty_launch_median_s", stats::median(launches) * 1e-9},
                   {"samples", windows.size()},
                   {"control", r.control}};
  // Work before GO is bounded by the calibration: an honest call's time before its window is
  // the empty call's, and the allowance beyond it is one empty round trip (rules.hpp).
  r.host_rule = host_work_rule::calibrated(r.empty_round_trip_ns);
  r.calibration["host_work_allowance_s"] = r.host_rule.allowance_ns * 1e-9;
  r.reference = reference_trip(r.empty_round_trip_ns);
}

// One call of the control (the empty kernel, through the same path as every library) among the
// others' calls: its round trip is the honest call the host-work rule holds candidates to when
// the baseline dispatches on the host. A control that fails stops being called; the reference
// then stays the calibration's.
void worker::control_call(timing_run& r, size_t set, const call_inputs& in) {
  if (!r.control) {
    return;
  }
  const auto tc = timed_call_on(r, m_empty, timing_buf(r, m_empty, set), in, "control");
  if (tc.bad || tc.w.failed) {
    r.control = false;
    r.control_stopped = (tc.bad ? *tc.bad : *tc.w.failed).message;
    stop_runner(m_empty, true);
    return;
  }
  ++r.control_calls;
  r.reference.add_control(tc.w.round_trip_ns);
}

// A candidate's time before its window beyond an honest call's and the allowance, charged to its
// sample (rules.hpp, host_work_rule). Never the baseline's: it is the task's reference, and a
// charge would only make the candidates look faster. Never a library the judge dispatches from
// the host: its round trip holds its dispatch. [ns]
int64_t worker::host_work_charge(const timing_run& r, const candidate_lib& lib,
                                 const window_result& w) const {
  if (lib.host_dispatch || lib.role == "baseline") {
    return 0;
  }
  return r.host_rule.charge_ns(w.round_trip_ns, r.reference_trip_ns(lib));
}

// The window holds the call's stream work only; these rules catch a call that did work
// elsewhere (on the host, on another stream) and so broke the ABI (kb_launch only enqueues, on
// the given stream), in every timed call after the two warm-up calls. One slow call is the
// host's hiccup (scheduling, a page fault), not the candidate's: a rule rejects only when most
// of a candidate's calls break it. An early output rejects at once.
auto worker::abi_rules(timing_run& r, const candidate_lib& lib, const window_result& w)
    -> std::optional<rejection> {
  // The judge's own clock decides: the round trip of the call (kb_launch, and the work it did
  // outside the captured stream, which the runner waits for before it replies). The runner's
  // times only say which of the two it was.
  const int64_t reference_ns = r.reference_trip_ns(lib);
  // Beyond the allowance the call pays for its time before the window (record_sample); far
  // beyond it the call broke the ABI.
  const bool slow_trip = !lib.host_dispatch && r.host_rule.rejected(w.round_trip_ns, reference_ns);
  if (lib.role == "baseline" && !lib.host_dispatch) {
    r.reference.add_baseline(w.round_trip_ns);
  }
  const bool slow_tail = r.host_rule.violated(w.tail_ns, r.empty_tail_ns);
  const bool outside = w.outside_ns - r.empty_outside_ns > w.host_ns - r.empty_host_ns;
  auto& calls = r.abi_calls[lib.role];
  if (calls.size() < 64) {
    calls.push_back({{"round_trip_s", w.round_trip_ns * 1e-9},
                     {"reference_round_trip_s", reference_ns * 1e-9},
                     {"host_s", w.host_ns * 1e-9},
                     {"graph_s", w.graph_ns * 1e-9},
                     {"instantiated", w.instantiated},
                     {"outside_s", w.outside_ns * 1e-9},
                     {"prepare_s", w.prepare_ns * 1e-9},
                     {"launch_s", w.launch_ns * 1e-9},
                     {"tail_s", w.tail_ns * 1e-9},
                     {"window_s", w.window_s},
                     {"charged_s", host_work_charge(r, lib, w) * 1e-9},
                     {"slow_trip", slow_trip},
                     {"slow_tail", slow_tail}});
  }
  auto& tally = r.slow_calls[lib.role];
  const abi_finding found = tally.add(slow_trip, outside, slow_tail);
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
        fmt::format("{} of {} calls took more than {:.3g} ms before their window (an honest "
                    "call's {:.3g} ms and {} allowances of {:.3g} ms); the last took {:.3g} ms "
                    "of the judge's time ({:.3g} ms inside kb_launch, {:.3g} ms of work outside "
                    "the given stream) for a device window of {:.3g} ms: {}",
                    tally.slow_calls(), tally.calls(),
                    r.host_rule.reject_above_ns(reference_ns) * 1e-6, reference_ns * 1e-6,
                    host_work_rule::reject_allowances, r.host_rule.allowance_ns * 1e-6,
                    w.round_trip_ns * 1e-6, w.host_ns * 1e-6, w.outside_ns * 1e-6,
                    (w.window_s - r.overhead_s) * 1e3,
                    named_outside ? "work on another stream" : "work on the host's time")};
  }
  if (found == abi_finding::work_after_window) {
    return rejection{"timing.work_outside_stream",
                     fmt::format("device work went on {:.3g} ms after the window closed "
                                 "(window {:.3g} ms)",
                                 w.tail_ns * 1e-6, (w.window_s - r.overhead_s) * 1e3)};
  }
  return std::nullopt;
}

// ABI: no device memory of its own inside kb_launch. The device's memory in use (all processes)
// before and after a series of calls of one candidate at a time. The probe's calls also time a
// round: the median of each library's, summed (`round_s`), plans the rounds.
void worker::probe_allocation(timing_run& r) {
  for (auto& lib : m_libs) {
    if (!lib.rejected) {
      r.alive.push_back(&lib);
    }
  }
  const int64_t allocation_slack = 2 << 20; // [bytes] one allocation granule
  // Calls of the probe: the warm-ups used the first two input sets, the probe's calls go round
  // every set (there are at most a few), so an allocation per call, per set or per pointer shows.
  const int allocation_probe_calls = 10;
  for (auto* lib : r.alive) {
    for (int i = 0; i < 2 && !lib->rejected; ++i) {
      const auto set = static_cast<size_t>(i) % r.bufs.size();
      auto tc = timed_call(r, *lib, set, "warm-up");
      if (tc.bad) {
        reject(*lib, *tc.bad);
      }
      control_call(r, set, set_inputs(r, set));
    }
    if (lib->rejected) {
      continue;
    }
    size_t free0 = 0;
    size_t free1 = 0;
    size_t total = 0;
    cuda_check(cudaDeviceSynchronize(), "memory");
    cuda_check(cudaMemGetInfo(&free0, &total), "memory");
    std::vector<double> call_s;
    for (int i = 0; i < allocation_probe_calls && !lib->rejected; ++i) {
      const auto call_start = clock_type::now();
      const auto set = static_cast<size_t>(i) % r.bufs.size();
      auto tc = timed_call(r, *lib, set, "allocation probe");
      call_s.push_back(seconds_since(call_start));
      if (tc.bad) {
        reject(*lib, *tc.bad);
      } else if (auto broken = abi_rules(r, *lib, tc.w)) {
        reject(*lib, *broken);
      }
      // After the call's window, as a candidate's next call comes (its time is not the round's).
      control_call(r, set, set_inputs(r, set));
    }
    if (lib->rejected) {
      continue;
    }
    r.round_s += stats::median(call_s);
    cuda_check(cudaDeviceSynchronize(), "memory");
    cuda_check(cudaMemGetInfo(&free1, &total), "memory");
    const int64_t growth = static_cast<int64_t>(free0) - static_cast<int64_t>(free1);
    r.allocation[lib->role] = {{"growth_bytes", growth}, {"calls", allocation_probe_calls}};
    if (growth > allocation_slack) {
      reject(*lib, {"abi.allocation",
                    fmt::format("device memory in use grew by {} bytes over {} calls: kb_launch "
                                "allocates (the ABI gives it a workspace instead)",
                                growth, allocation_probe_calls)});
    }
  }
  r.drop_rejected();
}

// The rounds are planned up front from the time one round took in the probe, so that every
// candidate gets its minimum calls on fresh contents and on seen sets however slow its calls are
// (rules.hpp, plan_rounds); which of them are fresh is drawn from the judge's generator. Each
// library still in the running gets its stopping rule.
void worker::plan_timing_rounds(timing_run& r) {
  stats::stopping_options so;
  so.min_samples = static_cast<size_t>(r.t.min_samples);
  so.max_samples = static_cast<size_t>(r.t.max_samples);
  so.max_noise = r.t.target_rsd;
  so.min_time = r.t.min_time;
  so.timeout = r.t.max_wall;
  for (auto* lib : r.alive) {
    r.rules.emplace(lib->role, stats::stopping_rule(so));
  }
  r.plan = plan_rounds(r.round_s, r.t.max_wall);
  if (!r.plan.within_cap) {
    // Even the minimum would take longer than the cap: the reuse check cannot run, and a check
    // that cannot run rejects rather than passes.
    const int minimum = fresh_min_calls + seen_min_calls;
    for (auto* lib : r.alive) {
      if (lib->role != "baseline") {
        reject(*lib,
               {"timing.unchecked",
                fmt::format("one round of calls takes {:.3g} s: the {} rounds the check of "
                            "reuse across calls needs ({} on fresh contents, {} on seen "
                            "sets redrawn) would take {:.3g} s, more than the {:.0f} s a session "
                            "gives them",
                            r.plan.round_s, minimum, fresh_min_calls, seen_min_calls,
                            minimum * r.plan.round_s, r.plan.cap_s)});
      }
    }
    r.drop_rejected();
    r.plan.rounds = 0;
    r.plan.fresh = 0;
    r.plan.redrawn = 0;
  }
  r.deck = round_deck(r.plan, m_rng);
}

// The rounds. Fresh rounds: a cache of results keyed by the inputs' contents (all of them, or a
// sample) passes every check made on the input sets: the timed calls go round inputs the
// candidate has seen, and its answers for them are the verified ones. So some rounds, alike in
// everything else, run every library on contents nobody has seen: drawn for the round on the GPU
// by the judge's generator with a seed of its own (from the generator the system's CSPRNG seeds,
// not replayed), into the round's set's buffers in every lane (prepare_fresh), and put back
// after it. A candidate slower on those than on the others reuses results (`timing.cache`,
// check_reuse); every library's answer there is checked whole against the oracle's right after
// its call (`timing.stale_after_input_change`), in shared lanes as in lanes of their own.
void worker::run_rounds(timing_run& r) {
  r.wall_start = clock_type::now();
  r.last_beat = r.wall_start;
  while (!r.alive.empty()) {
    const bool stopped = std::all_of(r.alive.begin(), r.alive.end(), [&](candidate_lib* l) {
      return r.rules.at(l->role).stopped();
    });
    // The planned rounds are made whatever the stopping rule says (past the session's wall-time
    // limit if need be), within the plan's cap.
    if (stopped && (r.round >= r.plan.rounds || seconds_since(r.wall_start) >= r.plan.cap_s)) {
      break;
    }
    timing_round(r);
    r.drop_rejected();
    ++r.round;
    if (clock_type::now() - r.last_beat > std::chrono::milliseconds(500)) {
      r.last_beat = clock_type::now();
      proto::progress pr;
      pr.stage = "time";
      pr.round = r.round;
      for (auto& [k, v] : r.samples) {
        pr.samples[k] = static_cast<int>(v.size());
      }
      m_out.send(pr);
    }
  }
}

// One round: every library still in the running once, in an order drawn for the round, on the
// round's set or, in a fresh round, on contents drawn for it (checked against the oracle right
// after each call, and the set's own contents put back after the round).
void worker::timing_round(timing_run& r) {
  std::vector<candidate_lib*> order = r.alive;
  std::shuffle(order.begin(), order.end(), r.order_rng);
  const int set = r.round % r.n_sets;
  const auto set_u = static_cast<size_t>(set);
  const round_kind kind = static_cast<size_t>(r.round) < r.deck.size()
                              ? r.deck[static_cast<size_t>(r.round)]
                              : round_kind::seen;
  const bool fresh_round = kind == round_kind::fresh;
  const bool prepared = kind != round_kind::seen;
  call_inputs in = set_inputs(r, set_u);
  std::vector<uint64_t> fresh_digests;
  fresh_reference fresh;
  if (kind == round_kind::redrawn) {
    // The set's own contents (the calls' inputs are the set's as in any seen round), prepared
    // as a fresh round's are: generated, the oracle run on them, digested.
    ++r.redrawn_rounds;
    fresh =
        prepare_contents(timing_lanes(r, set_u), *r.bufs[0], r.set_dist[set_u], r.set_seed[set_u]);
    settle_device(r);
  } else if (fresh_round) {
    ++r.fresh_rounds;
    fresh = prepare_fresh(timing_lanes(r, set_u), *r.bufs[0], r.n_dists);
    settle_device(r);
    fresh_digests = fresh.input_digests;
    // A call that changed them gets the same contents again.
    in = call_inputs{&fresh_digests, -1,
                     [this, d = fresh.dist, seed = fresh.seed](shape_buffers& b) {
                       generate(b, d, seed);
                       cuda_check(cudaStreamSynchronize(m_stream), "inputs");
                     }};
  }
  // The control's call at a place drawn for the round, as the libraries' order is.
  const size_t control_at =
      r.control ? std::uniform_int_distribution<size_t>(0, order.size())(r.order_rng) : 0;
  for (size_t i = 0; i <= order.size(); ++i) {
    if (r.control && i == control_at) {
      control_call(r, set_u, in);
    }
    if (i == order.size()) {
      break;
    }
    auto* lib = order[i];
    if (lib->rejected) {
      continue;
    }
    const auto what =
        fresh_round ? fmt::format("round {} fresh contents", r.round)
                    : fmt::format("round {} set {}{}", r.round, set, prepared ? " (redrawn)" : "");
    const auto tc = timed_call_on(r, *lib, timing_buf(r, *lib, set_u), in, what);
    ++r.checked_calls;
    if (tc.bad) {
      reject(*lib, *tc.bad);
      continue;
    }
    if (auto broken = abi_rules(r, *lib, tc.w)) {
      reject(*lib, *broken);
      continue;
    }
    record_sample(r, *lib, tc.w, set, kind);
    if (prepared) {
      if (fresh_round) {
        ++r.fresh_calls[lib->role];
      }
      ++r.fresh_checked;
      // Checked right after its call, before any other library's call can touch a buffer it
      // shares (shared lanes): against the oracle's answer on these contents.
      if (auto bad = check_fresh_answer(timing_buf(r, *lib, set_u), *r.bufs[0], fresh, r.round,
                                        fresh_round)) {
        reject(*lib, *bad);
      }
    }
  }
  if (prepared) {
    // The set's own contents back in every lane (the generator is a function of the set); after
    // a redrawn round too, so that the round after either kind follows the same work.
    restore_set(timing_lanes(r, set_u), r.set_dist[set_u], r.set_seed[set_u]);
  }
}

// A timed call's sample (its window less the calibrated overhead) and its times, for the gate
// and the record; the library's stopping rule sees it until it has stopped.
void worker::record_sample(timing_run& r, const candidate_lib& lib, const window_result& w, int set,
                           round_kind kind) {
  const int64_t charged_ns = host_work_charge(r, lib, w);
  const double sample = net_sample(w.window_s, r.overhead_s) + charged_ns * 1e-9;
  const auto clock = m_nvml->sm_clock_mhz();
  const auto memory_clock = m_nvml->memory_clock_mhz();
  const auto reasons = m_nvml->clocks_event_reasons();
  r.samples[lib.role].push_back(
      {{"t", sample},
       {"window_s", w.window_s},
       {"charged_s", charged_ns * 1e-9},
       {"round_trip_s", w.round_trip_ns * 1e-9},
       {"host_s", w.host_ns * 1e-9},
       {"graph_s", w.graph_ns * 1e-9},
       {"outside_s", w.outside_ns * 1e-9},
       {"prepare_s", w.prepare_ns * 1e-9},
       {"launch_s", w.launch_ns * 1e-9},
       {"tail_s", w.tail_ns * 1e-9},
       {"clock_mhz", clock ? json(*clock) : json(nullptr)},
       {"memory_clock_mhz", memory_clock ? json(*memory_clock) : json(nullptr)},
       {"clock_reasons", reasons ? json(*reasons) : json(nullptr)},
       {"set", set},
       {"after", r.previous_caller},
       {"round", r.round},
       {"fresh", kind == round_kind::fresh},
       {"redrawn", kind == round_kind::redrawn}});
  auto& rule = r.rules.at(lib.role);
  if (!rule.stopped()) {
    rule.add(sample, seconds_since(r.wall_start));
  }
}

// The inputs of every set in every lane of its own, once the rounds are over: a change made in a
// call whose inputs were not digested and never undone.
void worker::sweep_inputs(timing_run& r) {
  if (!m_separate_lanes) {
    return;
  }
  for (auto& lib : m_libs) {
    for (size_t k = 0; k < r.bufs.size() && !lib.rejected; ++k) {
      auto& b = timing_buf(r, lib, k);
      ++r.swept_sets;
      if (!inputs_intact(r, b, r.input_digests[k])) {
        set_inputs(r, k).restore(b);
        reject(lib, {"verify.inputs_modified",
                     fmt::format("inputs of set {} changed by a timed call (found when the "
                                 "rounds ended)",
                                 k)});
      }
    }
  }
}

// The ABI rules' word over all of a candidate's calls, for those too few for an early one.
void worker::finish_abi_rules(timing_run& r) {
  for (auto& lib : m_libs) {
    if (lib.rejected || r.slow_calls.count(lib.role) == 0) {
      continue;
    }
    const auto& tally = r.slow_calls.at(lib.role);
    const abi_finding found = tally.finish();
    if (found == abi_finding::host_work || found == abi_finding::work_outside_stream) {
      const bool named_outside = found == abi_finding::work_outside_stream;
      reject(lib,
             {named_outside ? "timing.work_outside_stream" : "timing.host_work",
              fmt::format("{} of {} calls took more than {} allowances of {:.3g} ms before "
                          "their window beyond an honest call's {:.3g} ms: {}",
                          tally.slow_calls(), tally.calls(), host_work_rule::reject_allowances,
                          r.host_rule.allowance_ns * 1e-6, r.reference_trip_ns(lib) * 1e-6,
                          named_outside ? "work on another stream" : "work on the host's time")});
    } else if (found == abi_finding::work_after_window) {
      reject(lib, {"timing.work_outside_stream",
                   fmt::format("in {} of {} calls device work went on after the window closed",
                               tally.slow_tails(), tally.calls())});
    }
  }
}

// Reuse of results: each candidate's fresh calls against its calls in the redrawn rounds.
void worker::check_reuse(timing_run& r) {
  r.reuse["fresh_rounds"] = r.fresh_rounds;
  r.reuse["redrawn_rounds"] = r.redrawn_rounds;
  r.reuse["answers_checked_calls"] = r.fresh_checked;
  r.reuse["runner_excess_bytes"] = m_runner_excess;
  r.reuse["plan"] = r.plan.to_json();
  for (auto& lib : m_libs) {
    if (lib.rejected || lib.role == "baseline" || r.samples.count(lib.role) == 0) {
      continue;
    }
    // Fresh calls against calls on a seen set after the same preparation (redrawn rounds); the
    // plain seen rounds' calls are not compared (work before a round moves its calls).
    std::vector<double> fresh_t;
    std::vector<double> seen_t;
    for (const auto& x : r.samples[lib.role]) {
      if (x.value("fresh", false)) {
        fresh_t.push_back(x.at("t").get<double>());
      } else if (x.value("redrawn", false)) {
        seen_t.push_back(x.at("t").get<double>());
      }
    }
    if (fresh_t.size() < static_cast<size_t>(fresh_min_calls) ||
        seen_t.size() < static_cast<size_t>(seen_min_calls)) {
      // The plan gives every candidate its minimum of each kind, so this is the cap reached (the
      // rounds took longer than the probe said): the check could not run, and a check that
      // cannot run rejects rather than passes.
      r.reuse[lib.role] = {{"fresh_samples", fresh_t.size()}, {"redrawn_samples", seen_t.size()}};
      reject(lib, {"timing.unchecked",
                   fmt::format("{} calls on fresh contents and {} on redrawn seen sets: too few "
                               "to tell "
                               "whether results are reused across calls (at least {} and {}; "
                               "the rounds ended at the {:.0f} s cap)",
                               fresh_t.size(), seen_t.size(), fresh_min_calls, seen_min_calls,
                               r.plan.cap_s)});
      continue;
    }
    const auto cmp = compare_fresh(fresh_t, seen_t);
    r.reuse[lib.role] = cmp.to_json();
    if (cmp.c.slowed) {
      reject(lib, {"timing.cache",
                   fmt::format("calls on input contents it had not seen before took {:.1f}% "
                               "longer (median {:.4g} ms over {}) than calls on an input set it "
                               "had seen, prepared alike (median {:.4g} ms over {}): results "
                               "reused across calls",
                               100 * (cmp.c.ratio - 1), cmp.c.beside_median * 1e3, fresh_t.size(),
                               cmp.c.alone_median * 1e3, seen_t.size())});
    }
  }
}

// Result caching keyed by pointer or by a sample of the contents: change input set 0 in place,
// first all of it, then values at random positions (64 random runs of up to 16 elements per
// input, from fresh contents), and check each answer against the oracle.
void worker::recheck_changed_inputs(timing_run& r) {
  bool any = false;
  for (auto& lib : m_libs) {
    any = any || (!lib.rejected && lib.role != "baseline");
  }
  if (!any) {
    return;
  }
  const shape_desc& s = r.s;
  for (const bool sparse : {false, true}) {
    // The same change in every lane's set 0; the references come from lane 0.
    change_set_zero(r, sparse);
    auto& b = *r.bufs[0];
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
      auto& lb = timing_buf(r, lib, 0);
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        poison(lb.outputs[o], s.outputs[o]);
      }
      const std::string what = sparse ? "input set 0 with values at random positions changed"
                                      : "input set 0 with new contents in place";
      if (auto bad = call(lib, lb, "time", what)) {
        reject(lib, *bad);
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

// Set 0 changed in place in every lane: all of it (new contents from the job's fresh seed), or,
// `sparse`, 64 random runs of up to 16 elements per input taken from contents drawn anew.
void worker::change_set_zero(timing_run& r, bool sparse) {
  const auto zero = timing_lanes(r, 0);
  const uint64_t fresh_seed = m_job.fresh_seed;
  if (!sparse) {
    for (auto* lb : zero) {
      generate(*lb, r.set_dist[0], fresh_seed);
    }
    return;
  }
  for (size_t i = 0; i < r.s.inputs.size(); ++i) {
    const auto& t = r.s.inputs[i];
    const size_t eb = dtype_bytes(t.dtype);
    guarded_buffer fresh(t.bytes(), m_host_reference);
    const uint64_t seed = tensor_seed(fresh_seed + 1, static_cast<int>(i));
    if (m_host_reference) {
      cpu_fill_random(fresh.host(), t.dtype, t.numel(), pick(t, r.set_dist[0]), seed);
    } else {
      gpu_fill_random(fresh.data(), t.dtype, t.numel(), pick(t, r.set_dist[0]), seed, m_stream);
      cuda_check(cudaStreamSynchronize(m_stream), "fresh values");
    }
    std::uniform_int_distribution<int64_t> pos(0, std::max<int64_t>(0, t.numel() - 1));
    std::vector<std::pair<size_t, size_t>> runs; // [bytes] offset, length
    for (int run = 0; run < 64; ++run) {
      const int64_t at = pos(m_rng);
      const int64_t n = std::min<int64_t>(1 + static_cast<int64_t>(m_rng() % 16), t.numel() - at);
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
}

// Interference: a candidate's process can run GPU work of its own between its calls (from a
// thread of its own), which then shares the device with the baseline's windows and slows them,
// so that the candidate looks faster. With every other runner ended (its context, and whatever
// it queued, gone with it), the baseline is timed again on the same input sets; a baseline
// clearly slower beside the candidates than alone was slowed by one of them.
void worker::check_interference(timing_run& r) {
  candidate_lib* base = nullptr;
  for (auto& lib : m_libs) {
    if (lib.role == "baseline" && !lib.rejected) {
      base = &lib;
    }
  }
  const bool others = std::any_of(m_libs.begin(), m_libs.end(), [&](const candidate_lib& l) {
    return &l != base && !l.rejected;
  });
  if (base == nullptr || !others || r.samples.count("baseline") == 0 ||
      r.samples["baseline"].size() < 10) {
    return;
  }
  for (auto& lib : m_libs) {
    if (&lib != base) {
      stop_runner(lib, false);
    }
  }
  if (r.control) {
    r.control = false;
    stop_runner(m_empty, false);
  }
  // Set 0 was changed in place by the re-check: every lane gets its verified inputs back.
  for (auto* lb : timing_lanes(r, 0)) {
    generate(*lb, r.set_dist[0], r.set_seed[0]);
  }
  cuda_check(cudaDeviceSynchronize(), "interference check");
  // Throttled samples count on neither side, as in the gate. The baseline's calls beside the
  // candidates are those of the rounds timed like its calls alone (rules.hpp, timed_like_alone),
  // all of them where those are too few.
  std::vector<double> beside;
  std::vector<double> beside_all;
  for (const auto& x : r.samples["baseline"]) {
    const auto& c = x.at("clock_mhz");
    if (!throttled(r, c.is_number() ? std::optional<double>(c.get<double>()) : std::nullopt)) {
      beside_all.push_back(x.at("t").get<double>());
      if (timed_like_alone(r.deck, x.at("round").get<int>())) {
        beside.push_back(beside_all.back());
      }
    }
  }
  const bool like_alone = beside.size() >= 10;
  if (!like_alone) {
    beside = beside_all;
  }
  const int n = std::clamp(static_cast<int>(beside.size()), 10, interference_max_calls);
  const std::vector<double> alone = time_baseline_alone(r, *base, n);
  if (base->rejected || alone.size() < 10 || beside.size() < 10) {
    return;
  }
  const auto cmp = compare_alone(beside, alone);
  r.interference = cmp.to_json();
  r.interference["alone_s"] = alone;
  r.interference["beside_rounds"] = like_alone ? "seen after seen" : "all";
  r.interference["beside_all_samples"] = beside_all.size();
  if (!cmp.slowed) {
    return;
  }
  for (auto& lib : m_libs) {
    if (&lib != base && !lib.rejected) {
      reject(lib,
             {"timing.interference",
              fmt::format("the baseline ran {:.1f}% slower beside this candidate "
                          "(median {:.4g} ms) than alone (median {:.4g} ms): the "
                          "candidate's process used the device between its calls",
                          100 * (cmp.ratio - 1), cmp.beside_median * 1e3, cmp.alone_median * 1e3)});
    }
  }
}

bool worker::throttled(const timing_run& r, const std::optional<double>& clock_mhz) const {
  return stats::throttled(clock_mhz, m_default_clock_mhz, r.t.throttle_fraction);
}

// The baseline's samples alone: `n` calls after `interference_warmup_calls`, round the sets,
// throttled ones left out.
std::vector<double> worker::time_baseline_alone(timing_run& r, candidate_lib& base, int n) {
  std::vector<double> alone;
  for (int i = 0; i < n + interference_warmup_calls && !base.rejected; ++i) {
    const auto tc = timed_call(r, base, static_cast<size_t>(i) % r.bufs.size(), "alone");
    const auto clock = m_nvml->sm_clock_mhz();
    if (tc.bad) {
      reject(base, *tc.bad);
    } else if (i >= interference_warmup_calls &&
               !throttled(r, clock ? std::optional<double>(*clock) : std::nullopt)) {
      alone.push_back(net_sample(tc.w.window_s, r.overhead_s));
    }
  }
  return alone;
}

// The session's timing record: samples, stopping, checks and where the time went.
json worker::timing_record(timing_run& r) {
  json stopping = json::object();
  for (const auto& [role, rule] : r.rules) {
    stopping[role] = {{"reason", stats::to_string(rule.reason())},
                      {"noise", rule.noise()},
                      {"samples", rule.samples()}};
  }
  json late = json::object();
  for (const auto& [role, t] : r.late_outputs) {
    late[role] = {
        {"calls", t.calls}, {"poison_at_stop", t.poison_at_stop}, {"written_late", t.written_late}};
  }
  return json{{"samples", r.samples},
              {"stop", stopping},
              {"rounds", r.round},
              {"input_sets", r.n_sets},
              {"checked_calls", r.checked_calls},
              {"placement", r.placement_record},
              {"late_outputs", late},
              {"input_digests",
               {{"calls", r.input_checks},
                {"every", m_separate_lanes ? input_digest_every : 1},
                {"swept_sets", r.swept_sets}}},
              {"calibration", r.calibration},
              {"overhead_s", r.overhead_s},
              {"allocation", r.allocation},
              {"abi_calls", r.abi_calls},
              {"control",
               {{"used", r.control_calls > 0},
                {"calls", r.control_calls},
                {"reference_round_trip_s", r.reference.for_candidate() * 1e-9},
                {"stopped", r.control_stopped}}},
              {"interference", r.interference},
              {"reuse", r.reuse},
              {"flush_bytes", r.t.cold_l2 ? r.flush_bytes : 0},
              {"default_sm_clock_mhz", m_default_clock_mhz},
              {"wall_s", seconds_since(r.wall_start)},
              {"total_s", seconds_since(r.all_start)},
              {"phases",
               {{"calls", r.phases.calls},
                {"prepare_s", r.phases.prepare_s},
                {"call_s", r.phases.call_s},
                {"check_s", r.phases.check_s}}},
              {"settle",
               {{"quiet_probe_s", r.settle.quiet_probe_s},
                {"waits", r.settle.waits},
                {"probes", r.settle.probes},
                {"wait_s", r.settle.wait_s},
                {"max_wait_s", r.settle.max_wait_s},
                {"unsettled", r.settle.unsettled}}}};
}

} // namespace kb::gpu::detail
