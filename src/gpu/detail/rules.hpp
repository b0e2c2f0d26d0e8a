// Decisions of the timing protocol that need no GPU, so that they can be tested alone.
#pragma once

#include "stats/stats.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace kb::gpu::detail {

// A call broke the ABI's "kb_launch only enqueues, on the given stream" when one of the judge's
// times of it (the round trip of the call, which holds kb_launch and the work it did outside the
// captured stream; device work after the window) exceeds an honest call's by more than a small
// allowance fixed for the session by the calibration: the empty call's median round trip, at
// least `min_allowance_ns`. Work done before GO is work the window does not see, so the allowance
// does not grow with the window: an honest call spends its time before the window capturing,
// updating and queueing its graph, which costs the empty call's round trip plus a few
// microseconds per kernel (an 18-kernel call measured 25-34 us beyond the baseline's on the H200,
// evidence/h200/variants/; the empty call's round trip is 47-120 us there).
// That cost is not a constant of the candidate: a runner woken after long windows of others runs
// every part of its call several times slower than the empty kernel's (an honest tensor-core
// matmul on the H100: its runner's own preparation 7 us against 0.8, the graph's launch 23 us
// against 5, round trips 99-147 us against a reference of 48-55 us,
// evidence/h100/kernelbench/optimize-l1/L1_001-host-work-calls.json). So a round trip beyond
// the reference and the allowance is not rejected at once: the excess is charged to the call's
// sample (`charge_ns`), which leaves nothing to gain from work before GO beyond the allowance,
// and the call is rejected only when the excess is gross (`rejected`: `reject_allowances`
// allowances), in most calls, as an ABI breach by name. [ns]
struct host_work_rule {
  static constexpr int64_t min_allowance_ns = 50'000;
  static constexpr int64_t reject_allowances = 4;
  int64_t allowance_ns = min_allowance_ns;
  // The session's rule from its calibration: the empty call's median round trip. [ns]
  static host_work_rule calibrated(int64_t empty_round_trip_ns) {
    return {empty_round_trip_ns > min_allowance_ns ? empty_round_trip_ns : min_allowance_ns};
  }
  // A time beyond its reference by more than the allowance.
  bool violated(int64_t time_ns, int64_t reference_ns) const {
    return time_ns - reference_ns > allowance_ns;
  }
  // What a call's sample is charged for its time before the window: the excess over the
  // reference and the allowance. [ns]
  int64_t charge_ns(int64_t time_ns, int64_t reference_ns) const {
    return violated(time_ns, reference_ns) ? time_ns - reference_ns - allowance_ns : 0;
  }
  // The round trip beyond which the call did work before GO by any measure. [ns]
  int64_t reject_above_ns(int64_t reference_ns) const {
    return reference_ns + reject_allowances * allowance_ns;
  }
  bool rejected(int64_t time_ns, int64_t reference_ns) const {
    return time_ns > reject_above_ns(reference_ns);
  }
};

// The honest call a round trip is held against: the median round trip of the baseline's calls
// so far in the session (interleaved with the candidates', so under the same conditions: a
// runner woken after other runners' long windows answers slower on every part of the call than
// the calibration's back-to-back empty calls, the baseline's one-kernel calls included: 135 us
// against the empty call's 55 us on the H200), never below the empty call's, which is the
// reference until `min_baseline_calls` baseline calls were seen. The baseline is held against
// the same median: it is the task's reference, and work it did before its window would only
// make the candidates look slower.
// A baseline whose calls dispatch on the host (a library such as eager PyTorch: its round trip
// holds its own host work and is never held to the rule) cannot be that honest call. Then the
// calibration's empty kernel stays in the session as a control: its calls, made among the
// others' (after their windows, as the candidates' are), give the median instead. Without it, a
// candidate woken after multi-millisecond windows would be held to the back-to-back empty call's
// round trip and an honest one rejected. [ns]
class reference_trip {
public:
  static constexpr size_t min_baseline_calls = 5;
  explicit reference_trip(int64_t empty_round_trip_ns) : m_empty(empty_round_trip_ns) {}
  // A call of the baseline (one that enqueues only) or of the control, among the others' calls.
  void add_baseline(int64_t round_trip_ns) {
    m_baseline.push_back(static_cast<double>(round_trip_ns));
  }
  void add_control(int64_t round_trip_ns) { add_baseline(round_trip_ns); }
  int64_t for_candidate() const {
    if (m_baseline.size() < min_baseline_calls) {
      return m_empty;
    }
    const auto b = static_cast<int64_t>(stats::median(m_baseline));
    return b > m_empty ? b : m_empty;
  }
  int64_t for_baseline() const { return for_candidate(); }
  size_t calls() const { return m_baseline.size(); }

private:
  int64_t m_empty;
  std::vector<double> m_baseline;
};

// What a candidate's calls say about the ABI. One slow call is the host's hiccup (scheduling, a
// page fault), and a runner's first calls are slow (buffers mapped, modules loaded, graphs
// instantiated for the first time; on the H200 a run of them can reach a dozen calls, and a
// stretch of slow wake-ups can make a third of an honest runner's first calls slow): a rule holds
// early, once `early_calls` calls were seen, only when more than three quarters of them break it
// (work hidden from the window is hidden in every call it helps), and otherwise at the end of
// timing when more than half of all calls (at least `min_calls`) do.
enum class abi_finding { none, host_work, work_outside_stream, work_after_window };

class abi_tally {
public:
  int min_calls = 10;   // the fewest calls a finding rests on (at the end of timing)
  int early_calls = 40; // before the end, a finding needs this many calls
  // One timed call: whether its round trip was slow, whether the runner's own times put the slow
  // part outside the given stream rather than inside kb_launch, whether its tail was slow.
  abi_finding add(bool slow_trip, bool outside, bool slow_tail) {
    ++m_calls;
    m_host += slow_trip && !outside ? 1 : 0;
    m_outside += slow_trip && outside ? 1 : 0;
    m_tails += !slow_trip && slow_tail ? 1 : 0;
    return m_calls >= early_calls ? finding(early_share) : abi_finding::none;
  }
  // The word at the end of timing, over every call.
  abi_finding finish() const {
    return m_calls >= min_calls ? finding(final_share) : abi_finding::none;
  }
  int calls() const { return m_calls; }
  int slow_calls() const { return m_host + m_outside; }
  int slow_tails() const { return m_tails; }

private:
  static constexpr double early_share = 0.75;
  static constexpr double final_share = 0.5;
  // A finding when more than `share` of the calls break a rule.
  abi_finding finding(double share) const {
    const auto most = [&](int n) { return n > share * m_calls; };
    if (most(m_host + m_outside)) {
      return m_outside > m_host ? abi_finding::work_outside_stream : abi_finding::host_work;
    }
    if (most(m_tails)) {
      return abi_finding::work_after_window;
    }
    return abi_finding::none;
  }
  int m_calls = 0;
  int m_host = 0;
  int m_outside = 0;
  int m_tails = 0;
};

// Interference: the baseline's samples beside the candidates (interleaved with their calls)
// against its samples alone (every other runner ended). The candidates slowed it when the lower
// 95% bound of its median beside them is above the upper bound of its median alone by more than
// `min_effect` and `min_seconds`: a separation beyond the noise, an effect a gate would take for
// a speedup, and more than the few microseconds a process more or less on the device can shift
// a tiny kernel's window by.
// The bounds are distribution-free (order statistics of each sample). The first calls after the
// other runners end are not counted (`interference_warmup_calls`).
inline constexpr int interference_warmup_calls = 3;
// The baseline alone gets as many calls as it had beside the candidates, 10 to this many: the
// interval of a median of 30 samples spans well under 1% for the Core 10 baselines (their
// spread within a session is a few tenths of a percent at most), far inside the rule's 3%, and
// each call more adds to every evaluation's time.
inline constexpr int interference_max_calls = 30;

struct alone_comparison {
  double beside_median = 0; // [s]
  double alone_median = 0;  // [s]
  double beside_low = 0;    // [s] lower 95% bound of the median beside the candidates
  double alone_high = 0;    // [s] upper 95% bound of the median alone
  double ratio = 1;         // beside / alone medians
  double min_effect = 0.03;
  double min_seconds = 10e-6;
  size_t beside_samples = 0;
  size_t alone_samples = 0;
  bool slowed = false;
  nlohmann::json to_json() const {
    return {{"beside_median_s", beside_median},
            {"alone_median_s", alone_median},
            {"beside_low_s", beside_low},
            {"alone_high_s", alone_high},
            {"ratio", ratio},
            {"min_effect", min_effect},
            {"beside_samples", beside_samples},
            {"alone_samples", alone_samples},
            {"slowed", slowed}};
  }
};

inline alone_comparison compare_alone(const std::vector<double>& beside,
                                      const std::vector<double>& alone, double min_effect = 0.03,
                                      double min_seconds = 10e-6) {
  alone_comparison c;
  c.min_effect = min_effect;
  c.min_seconds = min_seconds;
  c.beside_samples = beside.size();
  c.alone_samples = alone.size();
  if (beside.empty() || alone.empty()) {
    return c;
  }
  const auto b = stats::median_with_interval(beside);
  const auto a = stats::median_with_interval(alone);
  c.beside_median = b.median;
  c.alone_median = a.median;
  c.beside_low = b.low;
  c.alone_high = a.high;
  c.ratio = a.median > 0 ? b.median / a.median : 1.0;
  c.slowed = b.low > a.high * (1 + min_effect) + min_seconds;
  return c;
}

// Reuse of results across calls: a candidate's calls on contents not seen before (fresh
// rounds, one round in `fresh_round_every` at random) against its calls on a set it has seen,
// in rounds prepared exactly as the fresh ones are (redrawn rounds: the set's own contents drawn
// again, the oracle run on them, digested and compared). An honest kernel takes as long on
// either; a cache of results keyed by the inputs (their pointers, a sample of their values or
// all of them) answers the seen set from the cache and must compute the fresh contents. The
// preparation is the same on both sides because it moves the calls after it: on the H100, a
// float64 oracle over a few GB of other memory before the round made an honest eager reduction
// 20% slower on its next calls, which against the plain seen rounds read as reuse. Reused when
// the lower 95% bound of the fresh calls' median is above the upper bound of the redrawn calls'
// by more than 3% and 10 us, as in the interference rule.
inline constexpr int fresh_round_every = 4;
// Input digests during timing, where every library has a lane of its own: after one timed call
// in `input_digest_every`, drawn from the judge's generator (the candidate cannot tell which),
// after every call of a fresh round, and once over every set of every lane when the rounds end.
// A change that stays is found by the sweep at the latest and one made on every call at the
// first drawn call; what sampling gives up is only a change undone by the candidate's own next
// call, which leaves every call it makes with the inputs it was given. Where lanes are shared,
// every call is digested, so that a change is blamed on the call that made it.
inline constexpr int input_digest_every = 4;
// Calls of each kind a candidate needs for the comparison: on fresh contents and on a seen set in
// a redrawn round (the medians' 95% intervals rest on at least 10 samples each side). A session
// has at most `fresh_max_rounds` fresh rounds and as many redrawn ones: each costs two
// generations of the round's set in every lane (its contents for the round, then its own back),
// an oracle run and a whole comparison of every library's answer, and a fast kernel's session has
// a thousand rounds and more.
inline constexpr int fresh_min_calls = 10;
inline constexpr int seen_min_calls = 10;
inline constexpr int fresh_max_rounds = 14;
// The most the rounds of a session may take so that every candidate has its minimum calls of
// each kind when the session's wall-time limit cannot hold them (a slow kernel). [s]
inline constexpr double round_plan_cap_s = 120;

// The rounds a session draws up front, planned from the time one round took in the allocation
// probe (every library's timed call with its checks) so that every candidate gets its minimum
// calls of each kind whatever its speed; the fresh ones are placed among them at positions the
// judge draws (round_deck), and the candidate cannot tell which they are. A fast kernel's session
// plans `fresh_max_rounds * fresh_round_every` rounds (one in `fresh_round_every` fresh, the
// stopping rule going on after them); a slower one as many rounds as its wall-time limit holds,
// never fewer than `fresh_min_calls + seen_min_calls` (at least `fresh_min_calls` of them fresh),
// which may take it past that limit: a slow kernel's evaluation takes longer rather than leaving
// the check unrun. Where even the minimum would take longer than `cap_s`, the check cannot run
// (`within_cap` false) and the candidates are rejected, not passed; the rounds also end at the
// cap once the stopping rule has stopped, whatever the plan said.
struct round_plan {
  int rounds = 0;           // rounds drawn up front; the stopping rule may add seen ones after
  int fresh = 0;            // fresh rounds among them
  int redrawn = 0;          // redrawn rounds among them (a seen set prepared as a fresh one)
  double round_s = 0;       // [s] the measured time of one round
  double budget_s = 0;      // [s] the session's wall-time limit
  double cap_s = 0;         // [s] the most the planned rounds may take
  double expected_s = 0;    // [s] rounds * round_s
  bool past_budget = false; // the planned rounds take longer than the wall-time limit
  bool within_cap = true;   // the minimum rounds fit in the cap
  nlohmann::json to_json() const {
    return {{"rounds", rounds},         {"fresh", fresh},
            {"redrawn", redrawn},       {"round_s", round_s},
            {"budget_s", budget_s},     {"cap_s", cap_s},
            {"expected_s", expected_s}, {"past_budget", past_budget},
            {"within_cap", within_cap}};
  }
};

inline round_plan plan_rounds(double round_s, double budget_s, double cap_s = round_plan_cap_s,
                              int min_fresh = fresh_min_calls, int min_seen = seen_min_calls,
                              int every = fresh_round_every, int max_fresh = fresh_max_rounds) {
  round_plan p;
  p.round_s = round_s > 0 ? round_s : 0;
  p.budget_s = budget_s;
  p.cap_s = cap_s;
  const int minimum = min_fresh + min_seen;
  const int full = std::max(minimum, max_fresh * every);
  // Rounds the wall-time limit holds, counted without overflow for a round of no measurable time.
  const double fit = p.round_s > 0 ? budget_s / p.round_s : static_cast<double>(full);
  const int in_budget = fit >= full ? full : static_cast<int>(fit > 0 ? fit : 0);
  p.rounds = std::max(minimum, in_budget);
  p.fresh = std::clamp(p.rounds / std::max(1, every), min_fresh, std::max(min_fresh, max_fresh));
  p.fresh = std::min(p.fresh, p.rounds - min_seen);
  // As many redrawn rounds as fresh ones, the plan's minimum of seen calls among them.
  p.redrawn = std::min(p.fresh, p.rounds - p.fresh);
  p.expected_s = p.rounds * p.round_s;
  p.past_budget = p.expected_s > budget_s;
  p.within_cap = minimum * p.round_s <= cap_s;
  return p;
}

// What a round of the plan is: on a seen set as it is, on contents drawn for the round (fresh),
// or on a seen set prepared as a fresh round is (redrawn: its own contents drawn again).
enum class round_kind : unsigned char { seen, fresh, redrawn };

// The kind of each of a plan's rounds: `plan.fresh` fresh and `plan.redrawn` redrawn ones at
// positions drawn from `rng` (the judge's generator), the others seen. Rounds after the deck are
// seen rounds.
template <class Rng> std::vector<round_kind> round_deck(const round_plan& plan, Rng& rng) {
  std::vector<round_kind> deck(static_cast<size_t>(std::max(0, plan.rounds)), round_kind::seen);
  const auto fresh = static_cast<size_t>(std::max(0, plan.fresh));
  const auto redrawn = static_cast<size_t>(std::max(0, plan.redrawn));
  for (size_t i = 0; i < deck.size() && i < fresh + redrawn; ++i) {
    deck[i] = i < fresh ? round_kind::fresh : round_kind::redrawn;
  }
  std::shuffle(deck.begin(), deck.end(), rng);
  return deck;
}

// Whether the baseline's calls of `round` are timed under the conditions of its calls alone: a
// seen round after a seen round (or the first). A round on contents the judge prepared runs right
// after the judge's own device work (the contents generated, a float64 oracle that allocates and
// frees tens of GB, digests), and so may the round after it: on the H100 an 8.6 GB
// matrix-vector product ran 22% slower in those rounds, for both copies of an A/A, and never in
// a seen round after a seen one (evidence/h100/kernelbench/optimize-l1/L1_004-interference.json).
// The baseline alone follows no such work, so the interference check holds it against these
// rounds only. A candidate's process that works between its calls slows them as much as any.
inline bool timed_like_alone(const std::vector<round_kind>& deck, int round) {
  const auto kind = [&](int k) {
    return k >= 0 && static_cast<size_t>(k) < deck.size() ? deck[static_cast<size_t>(k)]
                                                          : round_kind::seen;
  };
  return kind(round) == round_kind::seen && kind(round - 1) == round_kind::seen;
}

struct fresh_comparison {
  alone_comparison c; // beside: the fresh calls; alone: the redrawn rounds' calls
  nlohmann::json to_json() const {
    return {{"fresh_median_s", c.beside_median},
            {"redrawn_median_s", c.alone_median},
            {"fresh_low_s", c.beside_low},
            {"redrawn_high_s", c.alone_high},
            {"ratio", c.ratio},
            {"min_effect", c.min_effect},
            {"fresh_samples", c.beside_samples},
            {"redrawn_samples", c.alone_samples},
            {"reused", c.slowed}};
  }
};

inline fresh_comparison compare_fresh(const std::vector<double>& fresh,
                                      const std::vector<double>& redrawn) {
  return {compare_alone(fresh, redrawn)};
}

// Output positions read right behind a timed call's STOP (`at_stop`) and again once the runner
// has replied that its device is idle (`after`), each `sizes[k]` bytes, laid end to end, with
// the call's poison in `poison` (the same layout). Every kernel of an honest call ends before the
// runner's DONE, which STOP waits for, so what a position holds at STOP it still holds after: a
// position that held poison at STOP and something else afterwards was written after the call's
// DONE. An honest output that happens to equal the poison (a small integer type) holds it in both
// reads. Returns the positions written late, and counts those that held poison at STOP.
struct late_positions {
  int poison_at_stop = 0;
  int written_late = 0;
};
inline late_positions positions_written_late(const unsigned char* at_stop,
                                             const unsigned char* after,
                                             const unsigned char* poison,
                                             const std::vector<size_t>& sizes) {
  late_positions r;
  size_t at = 0;
  for (const size_t n : sizes) {
    bool was_poison = true;
    bool same = true;
    for (size_t i = 0; i < n; ++i) {
      was_poison = was_poison && at_stop[at + i] == poison[at + i];
      same = same && at_stop[at + i] == after[at + i];
    }
    r.poison_at_stop += was_poison ? 1 : 0;
    r.written_late += was_poison && !same ? 1 : 0;
    at += n;
  }
  return r;
}

// A timed call's outputs checked whole (poison count and keyed digest): right behind STOP, and
// once more with the runner idle where the first read was not the verified answer. `expected`:
// the keyed digest of the same library's verified outputs on the call's input set, where the
// task is deterministic and the set was verified. An honest call's outputs are complete behind
// STOP, since every kernel of its graph ends before its DONE.
struct output_reads {
  uint64_t digest = 0;
  uint64_t poisoned = 0; // elements holding the job's poison
};
enum class whole_finding { complete, written_late, unwritten, stale };

inline bool complete_at_stop(const output_reads& stop, const std::optional<uint64_t>& expected) {
  return stop.poisoned == 0 && (!expected || stop.digest == *expected);
}

// What the second read says: outputs that changed after STOP were written after the call's DONE
// (recorded only for libraries the judge dispatches from the host); poison left is an unwritten
// output; another digest than the verified one is a stale or wrong answer.
inline whole_finding whole_call_finding(const output_reads& stop, const output_reads& after,
                                        const std::optional<uint64_t>& expected,
                                        bool host_dispatch) {
  const bool changed = after.digest != stop.digest || after.poisoned != stop.poisoned;
  if (changed && !host_dispatch) {
    return whole_finding::written_late;
  }
  if (after.poisoned > 0) {
    return whole_finding::unwritten;
  }
  if (expected && after.digest != *expected) {
    return whole_finding::stale;
  }
  return whole_finding::complete;
}

// Whether `need` bytes fit in the judge's share of `free` bytes of device memory (80%: the rest is
// left to the runners' contexts and the driver).
inline bool fits_in_free(uint64_t need, uint64_t free) {
  return need <= free / 10 * 8;
}

// How many timing input sets to place: `wanted` (every distribution, rotated) where the device
// holds them, else as many as fit (`fits(total sets)`), each set once per lane. Separate lanes (a
// set per candidate) are kept over more sets; one shared lane only where even one set per lane
// does not fit. KernelBench's official shapes take gigabytes per tensor, so that four rotated
// sets and their outputs in two lanes exceed the device, where one or two fit. At least 1.
struct sets_choice {
  int sets = 1;
  bool separate_lanes = false;
};
template <class Fits>
sets_choice sets_that_fit(int wanted, int lanes, bool separate_lanes, Fits&& fits) {
  wanted = std::max(1, wanted);
  lanes = std::max(1, lanes);
  if (separate_lanes && lanes > 1) {
    for (int n = wanted; n >= 1; --n) {
      if (fits(n * lanes)) {
        return {n, true};
      }
    }
  }
  for (int n = wanted; n >= 1; --n) {
    if (fits(n)) {
      return {n, false};
    }
  }
  return {1, false};
}

// Device memory the runners hold beyond what `runners` runners need to exist (`per_runner` each:
// a CUDA context, the library's code, graph and launch buffers). `free_at_start` is the device's
// free memory before any runner started, `free_now` now, `judge_bytes` what the judge allocated in
// between and holds. A candidate gets its scratch memory from the judge (its workspace), so an
// excess is memory a runner allocated for itself. 0 when there is none.
inline uint64_t runner_memory_excess(uint64_t free_at_start, uint64_t free_now,
                                     uint64_t judge_bytes, int runners, uint64_t per_runner) {
  const int64_t held = static_cast<int64_t>(free_at_start) - static_cast<int64_t>(free_now) -
                       static_cast<int64_t>(judge_bytes);
  const int64_t allowed = static_cast<int64_t>(runners) * static_cast<int64_t>(per_runner);
  return held > allowed ? static_cast<uint64_t>(held - allowed) : 0;
}

// A window's sample with the scheme's calibrated overhead taken off, never below 0.1 us. [s]
inline double net_sample(double window_s, double overhead_s) {
  const double t = window_s - overhead_s;
  return t > 1e-7 ? t : 1e-7;
}

} // namespace kb::gpu::detail
