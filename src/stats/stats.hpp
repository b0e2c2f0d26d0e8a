// The statistics of the timing gate (docs evaluation-bar.md, sections 2 and 3): descriptive
// figures of a sample set, the two-sided Mann-Whitney U test, the bootstrap interval of a ratio
// of medians, the verdict of a candidate against its baseline, the adaptive stopping rule, the
// throttle filter, the A/A spread that sets the verdict's margin, the suite figures and the
// roofline plausibility check. Pure functions of their inputs (no device, no clock, no global
// random state), so every decision can be replayed from the recorded samples.
//
// Errors: an input no caller should pass (an empty sample set, a non-positive time where a ratio
// or a logarithm is taken, mismatched lengths) throws kb::error; those are bugs of the tool, not
// outcomes of a candidate.
#pragma once

#include "common/names.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kb::stats {

// ---- Descriptive figures ----------------------------------------------------------------------

double mean(std::span<const double> x);
// Sample standard deviation (divisor n - 1); 0 for a single value.
double stdev(std::span<const double> x);
// stdev / |mean|: the "noise" of NVBench.
double relative_stdev(std::span<const double> x);
double median(std::span<const double> x);
// The median with its distribution-free 95% interval: the order statistics of (0-based) ranks
// floor(n/2 - 0.98 sqrt(n)) and ceil(n/2 + 0.98 sqrt(n)), clamped to the sample.
struct median_interval {
  double median = 0;
  double low = 0;
  double high = 0;
};
median_interval median_with_interval(std::span<const double> x);
// Whether a sample timed at SM clock `clock_mhz` ran throttled: below `fraction` of the default
// clock. An unknown clock, or an unknown default, is not throttled.
bool throttled(std::optional<double> clock_mhz, double default_mhz, double fraction);
// Quantile of type 7 (R's default, numpy's "linear"): with the values sorted as x[0..n-1] and
// h = (n - 1) q, x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] - x[floor(h)]). q in [0, 1].
double quantile(std::span<const double> x, double q);
// Median absolute deviation from the median, unscaled (1.4826 * mad estimates sigma for normal
// data).
double mad(std::span<const double> x);
double min(std::span<const double> x);
double max(std::span<const double> x);
// exp(mean(log x)); every value must be positive.
double geomean(std::span<const double> x);

struct summary {
  size_t n = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double stdev = 0;
  double relative_stdev = 0;
  double median = 0;
  double mad = 0;
  double q25 = 0; // type 7
  double q75 = 0; // type 7
};
summary describe(std::span<const double> x);

// ---- Two-sided Mann-Whitney U test ------------------------------------------------------------

enum class mann_whitney_method {
  // exact when both samples have at most mann_whitney_exact_limit values and there are no
  // ties, the normal approximation otherwise
  automatic,
  exact,      // the permutation distribution of U; no ties allowed, at most 50 values a side
  asymptotic, // normal approximation with tie correction and continuity correction
};
inline constexpr size_t mann_whitney_exact_limit = 20;

struct mann_whitney_result {
  double u = 0; // U of the first sample: pairs (a_i, b_j) with a_i > b_j, a tie counting 1/2
  // (U - n1 n2 / 2) / sigma with the tie-corrected sigma and the continuity correction (moved
  // 1/2 towards 0, at least 0); > 0 when the first sample tends to be larger. Computed in both
  // methods so the record shows it; 0 when every value is equal.
  double z = 0;
  double p = 1; // two-sided
  bool exact = false;
};
// The p-values agree with scipy.stats.mannwhitneyu(a, b, alternative="two-sided") for the
// same method (scipy's "auto" switches to exact at 8 values, this one at 20).
mann_whitney_result mann_whitney(std::span<const double> a, std::span<const double> b,
                                 mann_whitney_method method = mann_whitney_method::automatic);

// ---- Bootstrap interval of median(B) / median(A) ----------------------------------------------

struct bootstrap_options {
  size_t resamples = 10000;
  double confidence = 0.95;
  // The generator is std::mt19937_64 and indices are drawn by the multiply-shift method (not by
  // std::uniform_int_distribution, whose algorithm differs between standard libraries), so the
  // interval is the same on every platform for a given seed and the same inputs.
  uint64_t seed = 0x6b625f7374617473;
};

struct ratio_interval {
  double ratio = 0; // median(B) / median(A) of the samples themselves
  double low = 0;   // percentile interval of the resampled ratios (quantiles of type 7)
  double high = 0;
  double confidence = 0;
  size_t resamples = 0;
  uint64_t seed = 0;
};
// A and B are resampled independently, each with replacement at its own size; a resample's
// median is found from counts of the drawn positions, without sorting (about 0.2 s for 2,000
// samples a side and 10,000 resamples). Every value must be positive and finite.
ratio_interval bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                      const bootstrap_options& options = {});

// ---- Verdict of a candidate B against its baseline A ------------------------------------------

enum class verdict { improved, same, regressed, inconclusive };
inline constexpr auto verdict_names =
    name_table<verdict>({{verdict::improved, "improved"},
                         {verdict::same, "same"},
                         {verdict::regressed, "regressed"},
                         {verdict::inconclusive, "inconclusive"}});
static_assert(verdict_names.well_formed());
std::string to_string(verdict v);
std::optional<verdict> verdict_from_string(const std::string& s);

// The margin below which a difference is not claimed: max(min_delta, the A/A spread).
double gate_delta(double aa_spread, double min_delta = 0.01);

struct decision {
  verdict result = verdict::inconclusive;
  std::string reason;
};
// With the ratio r = median(B)/median(A) (B's time over A's, below 1 when B is faster):
//   improved:  p < alpha and the whole interval below 1 - delta
//   regressed: p < alpha and the whole interval above 1 + delta
//   same:      the whole interval inside [1 - delta, 1 + delta]
//   otherwise inconclusive.
decision classify(double p, double ci_low, double ci_high, double delta, double alpha = 0.05);

struct comparison_options {
  double alpha = 0.05;
  double aa_spread = 0;        // measured on this machine (see aa_spread_estimate) [fraction]
  double min_delta = 0.01;     // [fraction]
  bootstrap_options bootstrap; // the gate needs at least gate_min_resamples
};
inline constexpr size_t gate_min_resamples = 10000;

// Everything the verdict was decided from, so it can be recorded and replayed.
struct comparison {
  verdict result = verdict::inconclusive;
  std::string reason;
  size_t n_a = 0;
  size_t n_b = 0;
  double median_a = 0; // [seconds]
  double median_b = 0; // [seconds]
  mann_whitney_result test;
  ratio_interval interval;
  double alpha = 0;
  double aa_spread = 0;
  double min_delta = 0;
  double resolution_s = 0; // [s] the structured gate's absolute floor (0: none)
  double delta = 0;
};
// A is the baseline's samples, B the candidate's (times, lower is better).
comparison compare(std::span<const double> a, std::span<const double> b,
                   const comparison_options& options = {});

// ---- The structured gate: sessions, blocks of rounds, and a test that respects them ------------
//
// Timing samples are not independent: each session (a fresh process) has its own offset, samples
// within a session drift together (autocorrelation over rounds), and both sides are measured in
// the same rounds. Treating them as one pool of independent values makes Mann-Whitney's p and an
// i.i.d. bootstrap far too confident (A/A comparisons come out "significant" much more often than
// alpha). The structured gate uses the labels instead:
//  - blocks: within a session, consecutive rounds are grouped into blocks (about
//    target_blocks_per_session per session); a block's figure is log(median B / median A) of the
//    samples of its rounds, so the pairing of both sides in the same rounds is kept;
//  - within-session test: a one-sample Student t test of the block figures (df = blocks - 1);
//    blocks long against the autocorrelation make them close to independent;
//  - between-session test: a one-sample Student t test of the per-session means of the block
//    figures (df = sessions - 1); sessions are the independent units, so a session offset cannot
//    make it over-confident;
//  - p = p_between with two sessions or more: its false-positive rate is alpha whether or not
//    the sessions have offsets (the intersection with the within test, max of both, made it
//    about alpha squared under A/A on the H200, where the two sides of one session share its
//    offsets); with one session only the within test exists and p = p_within (then session
//    offsets are not accounted for: docs/evaluation.md);
//  - interval: a hierarchical bootstrap of median(B)/median(A): sessions drawn with replacement,
//    then blocks drawn with replacement within each drawn session, both sides of a block kept
//    together.

struct timed_sample {
  double t = 0; // [seconds]
  int session = 0;
  int set = 0;   // input set
  int round = 0; // rounds are counted per session; both sides share a round's number
};

struct structured_options {
  double alpha = 0.05;
  double aa_spread = 0;    // [fraction]
  double min_delta = 0.01; // [fraction]
  // The smallest difference of medians the timing scheme can tell apart [s]: two runner
  // processes timing the same kernel differ by up to about a microsecond (each process queues its
  // work its own way). The gate's delta is at least this over the baseline's median, so a kernel
  // of a few microseconds is not called faster on the scheme's own bias.
  double resolution_s = 0;
  size_t target_blocks_per_session = 8;
  bootstrap_options bootstrap; // the gate needs at least gate_min_resamples
};

struct block_test {
  size_t sessions = 0;
  size_t blocks = 0;              // blocks with samples of both sides
  size_t rounds_per_block = 0;    // the largest block length used [rounds]
  double mean_log_ratio = 0;      // mean over blocks of log(median B / median A)
  double p_within = 1;            // Student t over the blocks
  double p_between = 1;           // Student t over the sessions' means; 1 with one session
  bool between_available = false; // at least two sessions
  double p = 1;                   // p_between (p_within with one session)
};

// Two-sided p of Student's t with `df` degrees of freedom (df > 0).
double student_t_two_sided_p(double t, double df);
// One-sample two-sided t test of mean(x) = 0; needs two values (p = 1 with fewer); when every
// value is equal, p is 1 for zero and 0 otherwise.
double one_sample_t_p(std::span<const double> x);

// Whether p values are uniform on [0, 1], as a calibrated test's are under A/A: the
// Kolmogorov-Smirnov distance to the uniform law and its p (Stephens' small-sample form of the
// asymptotic law). Needs one value; every value must lie in [0, 1].
struct uniformity_test {
  size_t n = 0;
  double d = 0; // sup |F_n(x) - x|
  double p = 1;
};
uniformity_test ks_uniform(std::span<const double> values);

// Clopper-Pearson interval of a binomial rate: `k` events in `n` trials [fraction].
struct rate_interval {
  double rate = 0;
  double low = 0;
  double high = 1;
};
rate_interval binomial_interval(size_t k, size_t n, double confidence = 0.95);

block_test structured_test(std::span<const timed_sample> a, std::span<const timed_sample> b,
                           size_t target_blocks_per_session = 8);
ratio_interval hierarchical_bootstrap_median_ratio(std::span<const timed_sample> a,
                                                   std::span<const timed_sample> b,
                                                   const bootstrap_options& options = {},
                                                   size_t target_blocks_per_session = 8);

struct structured_comparison {
  comparison gate; // verdict from block.p and the hierarchical interval; gate.test is the
                   // pooled Mann-Whitney, kept for reference only
  block_test block;
};
structured_comparison compare_structured(std::span<const timed_sample> a,
                                         std::span<const timed_sample> b,
                                         const structured_options& options = {});

// ---- Adaptive stopping rule -------------------------------------------------------------------

// NVBench's "stdrel" criterion. The noise is the relative stdev of all samples so far. After
// min_samples, and once the samples add up to min_time, measuring stops when the noise is under
// max_noise (converged) or when it has stopped moving: the last noise_window noise values (one
// per added sample) have a standard deviation under noise_stability times the current noise
// (noise_stable). Independently of those, it stops at max_samples or once the wall clock passed
// to add() reaches timeout.
struct stopping_options {
  size_t min_samples = 10;
  size_t max_samples = 10000;
  double max_noise = 0.005;      // [fraction]
  double min_time = 0.5;         // [seconds] sum of the samples
  double timeout = 15;           // [seconds] wall clock
  size_t noise_window = 64;      // [samples]
  double noise_stability = 0.05; // [fraction of the current noise]
};

enum class stop_reason { running, converged, noise_stable, max_samples, timeout };
inline constexpr auto stop_reason_names =
    name_table<stop_reason>({{stop_reason::running, "running"},
                             {stop_reason::converged, "converged"},
                             {stop_reason::noise_stable, "noise_stable"},
                             {stop_reason::max_samples, "max_samples"},
                             {stop_reason::timeout, "timeout"}});
static_assert(stop_reason_names.well_formed());
std::string to_string(stop_reason r);
std::optional<stop_reason> stop_reason_from_string(const std::string& s);

class stopping_rule {
public:
  explicit stopping_rule(const stopping_options& options = {});

  // Adds one sample [seconds]; wall_elapsed is the wall-clock time since measuring began
  // [seconds]. Returns true once measuring should stop; adding after that throws kb::error.
  bool add(double sample, double wall_elapsed);

  bool stopped() const { return m_reason != stop_reason::running; }
  stop_reason reason() const { return m_reason; }
  size_t samples() const { return m_count; }
  double measured_time() const { return m_sum; } // [seconds]
  double noise() const;                          // relative stdev of the samples so far
  const stopping_options& options() const { return m_options; }

private:
  bool noise_is_stable() const;

  stopping_options m_options;
  stop_reason m_reason = stop_reason::running;
  size_t m_count = 0;
  double m_sum = 0;                   // [seconds]
  double m_mean = 0;                  // [seconds] Welford's running mean
  double m_m2 = 0;                    // Welford's sum of squared deviations
  std::deque<double> m_noise_history; // the last noise_window noise values
};

// ---- Throttle filter --------------------------------------------------------------------------

struct throttle_filter_result {
  std::vector<double> kept;
  std::vector<size_t> kept_indices; // into the input, to filter data recorded beside the samples
  size_t dropped = 0;
  double threshold = 0; // min_fraction * default_clock, in the clocks' unit
};
// Drops every sample whose SM clock (same unit as default_clock) is below min_fraction of the
// default clock [NVBench: 75%]. A sample whose clock could not be read (NaN) is kept.
throttle_filter_result drop_throttled(std::span<const double> samples,
                                      std::span<const double> sm_clocks, double default_clock,
                                      double min_fraction = 0.75);

// ---- A/A spread -------------------------------------------------------------------------------

// How far from 1.0 an A/A comparison reaches on this machine; it sets delta (gate_delta).
// Each A/A comparison gives a ratio r = median(A'')/median(A') and, when its samples are given,
// a bootstrap interval [low, high] of that ratio. Its reach is max(|r - 1|, 1 - low, high - 1):
// the distance from 1 that the interval extends to, so that an unchanged candidate lands inside
// [1 - reach, 1 + reach] ("same") instead of outside it. With ratios only, the interval is the
// ratio itself and the reach is |r - 1|.
//   spread = the 95th percentile (type 7) of the reaches over the comparisons.
// ratio_p95 and half_width_median are the two parts it combines, kept for the record.
struct aa_spread_estimate {
  size_t comparisons = 0;
  double ratio_p95 = 0;         // 95th percentile of |r - 1|
  double half_width_median = 0; // median of (high - low) / 2; 0 when only ratios were given
  double spread = 0;            // [fraction]
};

// Ratios of medians from independent A/A sessions (separate processes).
aa_spread_estimate aa_spread_from_ratios(std::span<const double> ratios);

// Paired sample sets of the same kernel (two interleaved runs of the baseline), one per session.
struct aa_run {
  std::vector<double> first;  // [seconds]
  std::vector<double> second; // [seconds]
};
aa_spread_estimate aa_spread_from_runs(std::span<const aa_run> runs,
                                       const bootstrap_options& options = {});
// From the intervals the gate itself computed for each A/A comparison (the structured gate's).
aa_spread_estimate aa_spread_from_intervals(std::span<const ratio_interval> intervals);

// ---- Suite figures ----------------------------------------------------------------------------

struct task_outcome {
  std::string task;
  bool correct = false;  // a candidate passed verification
  bool improved = false; // its improvement passed the gate (verdict improved); implies correct
  double speedup = 0;    // baseline time / candidate time, > 1 when faster; read only if correct
};

struct suite_figures {
  size_t tasks = 0;
  size_t correct = 0;
  size_t improved = 0;
  double strict_geomean = 1; // over all tasks; a task without a verified improvement counts 1.0
  std::optional<double> attempted_geomean; // over the correct tasks; none when there are none
  double fast_1_0 = 0;
  double fast_1_5 = 0;
};

// KernelBench's fast_p: the share of all tasks that are correct and have speedup > p.
double fast_p(std::span<const task_outcome> tasks, double p);
suite_figures summarize_suite(std::span<const task_outcome> tasks);

// ---- Plausibility -----------------------------------------------------------------------------

struct plausibility {
  bool flagged = false;      // faster than the roofline floor: a bug or an exploit
  double floor_fraction = 0; // measured / floor
  std::string reason;
};
plausibility check_roofline_floor(double measured, double floor); // [seconds], [seconds]

} // namespace kb::stats
