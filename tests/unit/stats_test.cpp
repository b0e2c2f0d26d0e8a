#include "common/error.hpp"
#include "stats/stats.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

namespace kb::stats {
namespace {

std::vector<double> lognormal(size_t n, double median, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<double> x(n);
  for (double& v : x) {
    v = median * std::exp(normal(rng));
  }
  return x;
}

// Samples a (of n_a values) against b = 1..n_b whose U statistic is exactly u, without ties:
// value k + 0.5 beats k values of b, and a small distinct offset keeps the a values apart.
std::vector<double> sample_with_u(size_t n_a, size_t n_b, size_t u) {
  std::vector<double> a(n_a);
  for (size_t i = 0; i < n_a; ++i) {
    const size_t beats = std::min(n_b, u);
    u -= beats;
    a[i] = static_cast<double>(beats) + 0.5 + 1e-3 * static_cast<double>(i);
  }
  return a;
}

std::vector<double> one_to(size_t n) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i + 1);
  }
  return x;
}

// ---- Descriptive ------------------------------------------------------------------------------

TEST(stats_descriptive, known_values) {
  const std::vector<double> x{9, 4, 2, 5, 4, 7, 4, 5}; // sorted: 2 4 4 4 5 5 7 9
  EXPECT_DOUBLE_EQ(mean(x), 5.0);
  EXPECT_DOUBLE_EQ(stdev(x), std::sqrt(32.0 / 7.0)); // sum of squared deviations 32, n - 1 = 7
  EXPECT_DOUBLE_EQ(relative_stdev(x), std::sqrt(32.0 / 7.0) / 5.0);
  EXPECT_DOUBLE_EQ(median(x), 4.5);
  EXPECT_DOUBLE_EQ(quantile(x, 0.0), 2.0);
  EXPECT_DOUBLE_EQ(quantile(x, 1.0), 9.0);
  EXPECT_DOUBLE_EQ(quantile(x, 0.25), 4.0); // h = 1.75: 4 + 0.75 (4 - 4)
  EXPECT_DOUBLE_EQ(quantile(x, 0.9), 7.6);  // h = 6.3: 7 + 0.3 (9 - 7)
  EXPECT_DOUBLE_EQ(quantile(x, 0.5), median(x));
  // |x - 4.5| sorted: 0.5 0.5 0.5 0.5 0.5 2.5 2.5 4.5
  EXPECT_DOUBLE_EQ(mad(x), 0.5);
  EXPECT_DOUBLE_EQ(min(x), 2.0);
  EXPECT_DOUBLE_EQ(max(x), 9.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(stdev(std::vector<double>{3}), 0.0);

  const auto s = describe(x);
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.q25, 4.0);
  EXPECT_DOUBLE_EQ(s.q75, 5.5); // h = 5.25: 5 + 0.25 (7 - 5)
  EXPECT_DOUBLE_EQ(s.mad, 0.5);
  EXPECT_DOUBLE_EQ(s.stdev, stdev(x));
}

TEST(stats_descriptive, geomean_and_errors) {
  EXPECT_NEAR(geomean(std::vector<double>{1, 2, 4, 8}), std::pow(2.0, 1.5), 1e-12);
  EXPECT_NEAR(geomean(std::vector<double>{2, 8}), 4.0, 1e-12);
  EXPECT_THROW(geomean(std::vector<double>{1, 0}), error);
  EXPECT_THROW(geomean(std::vector<double>{1, -2}), error);
  EXPECT_THROW(median(std::vector<double>{}), error);
  EXPECT_THROW(quantile(std::vector<double>{1, 2}, 1.5), error);
}

// ---- Mann-Whitney -----------------------------------------------------------------------------

TEST(stats_mann_whitney, scipy_documented_example) {
  // scipy.stats.mannwhitneyu's documented example (ages of male and female employees):
  // statistic 17.0; method="exact" p = 0.1111111111111111 (= 14/126, counted by enumerating the
  // 126 splits); method="asymptotic" p = 0.11134688653314041.
  const std::vector<double> males{19, 22, 16, 29, 24};
  const std::vector<double> females{20, 11, 17, 12};
  const auto exact = mann_whitney(males, females);
  EXPECT_TRUE(exact.exact);
  EXPECT_DOUBLE_EQ(exact.u, 17.0);
  EXPECT_NEAR(exact.p, 0.1111111111111111, 1e-12);
  const auto approx = mann_whitney(males, females, mann_whitney_method::asymptotic);
  EXPECT_FALSE(approx.exact);
  EXPECT_DOUBLE_EQ(approx.u, 17.0);
  EXPECT_NEAR(approx.p, 0.11134688653314041, 1e-12);
  // sigma = sqrt(5 * 4 * 10 / 12), z = (17 - 10 - 0.5) / sigma
  EXPECT_NEAR(approx.z, 6.5 / std::sqrt(200.0 / 12.0), 1e-12);
}

TEST(stats_mann_whitney, exact_small_cases_by_hand) {
  // 3 against 3 fully separated: 1 of the C(6, 3) = 20 splits is this extreme on each side.
  const auto r = mann_whitney(std::vector<double>{1, 2, 3}, std::vector<double>{4, 5, 6});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0.0);
  EXPECT_NEAR(r.p, 0.1, 1e-12);
  EXPECT_LT(r.z, 0);
  // 1 against 2 at the middle: U = 1 = n1 n2 / 2, p = 1.
  EXPECT_DOUBLE_EQ(mann_whitney(std::vector<double>{2}, std::vector<double>{1, 3}).p, 1.0);
}

TEST(stats_mann_whitney, exact_matches_published_critical_values) {
  // Published tables of critical values of U (two-sided, alpha = 0.05): 23 for n1 = n2 = 10 and
  // 127 for n1 = n2 = 20 (105 at alpha = 0.01): p <= alpha at the critical value, > alpha one
  // above. Exact p-values from an independent enumeration with integer counts:
  //   n = 10: P(U <= 23) * 2 = 0.04325705254497824, P(U <= 24) * 2 = 0.05242590227110351
  //   n = 20: P(U <= 127) * 2 = 0.04909032518937244, P(U <= 128) * 2 = 0.05239952187284973
  //           P(U <= 105) * 2 = 0.009483607191205005
  struct known {
    size_t n;
    size_t u;
    double p;
  };
  for (const auto& k : {known{10, 23, 0.04325705254497824}, known{10, 24, 0.05242590227110351},
                        known{20, 127, 0.04909032518937244}, known{20, 128, 0.05239952187284973},
                        known{20, 105, 0.009483607191205005}}) {
    const auto a = sample_with_u(k.n, k.n, k.u);
    const auto r = mann_whitney(a, one_to(k.n));
    EXPECT_TRUE(r.exact) << k.n << " " << k.u;
    EXPECT_DOUBLE_EQ(r.u, static_cast<double>(k.u));
    EXPECT_NEAR(r.p, k.p, 1e-12) << k.n << " " << k.u;
  }
}

TEST(stats_mann_whitney, ties_use_the_corrected_normal_approximation) {
  // DolphinDB's documented example of mannWhitneyUTest(5 1 4 3 5, 2 4 7 -1 0 4): U = 11 (for the
  // second sample; 30 - 11 = 19 for the first), two-sided p = 0.518023 with continuity
  // correction. Ties (4, 4, 4 and 5, 5) give the tie term 3^3 - 3 + 2^3 - 2 = 30.
  const std::vector<double> x{5, 1, 4, 3, 5};
  const std::vector<double> y{2, 4, 7, -1, 0, 4};
  const auto r = mann_whitney(x, y);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 19.0);
  EXPECT_NEAR(r.p, 0.518023, 1e-6);
  const double sigma = std::sqrt(30.0 / 12.0 * (12.0 - 30.0 / 110.0));
  EXPECT_NEAR(r.z, (19.0 - 15.0 - 0.5) / sigma, 1e-12);
  EXPECT_DOUBLE_EQ(mann_whitney(y, x).u, 11.0);
  EXPECT_THROW(mann_whitney(x, y, mann_whitney_method::exact), error);
}

TEST(stats_mann_whitney, identical_samples_give_p_one) {
  const std::vector<double> same{3, 3, 3, 3};
  const auto r = mann_whitney(same, same);
  EXPECT_DOUBLE_EQ(r.p, 1.0);
  EXPECT_DOUBLE_EQ(r.z, 0.0);
  EXPECT_DOUBLE_EQ(r.u, 8.0);
  const auto ramp = one_to(30);
  EXPECT_DOUBLE_EQ(mann_whitney(ramp, ramp).p, 1.0);
}

TEST(stats_mann_whitney, large_shift_is_significant_and_symmetric) {
  const auto a = lognormal(500, 1.0, 0.05, 1);
  const auto b = lognormal(400, 0.98, 0.05, 2);
  const auto ab = mann_whitney(a, b);
  const auto ba = mann_whitney(b, a);
  EXPECT_FALSE(ab.exact);
  EXPECT_LT(ab.p, 1e-4);
  EXPECT_GT(ab.z, 0);
  EXPECT_DOUBLE_EQ(ab.p, ba.p);
  EXPECT_DOUBLE_EQ(ab.z, -ba.z);
  EXPECT_DOUBLE_EQ(ab.u + ba.u, 500.0 * 400.0);
  // A stream against an independent stream of the same distribution is not significant here.
  EXPECT_GT(mann_whitney(a, lognormal(400, 1.0, 0.05, 3)).p, 0.05);
}

// ---- Bootstrap --------------------------------------------------------------------------------

TEST(stats_bootstrap, interval_covers_the_true_ratio_on_lognormal_data) {
  const auto a = lognormal(2000, 1.0e-3, 0.05, 11);
  const auto b = lognormal(2000, 0.9e-3, 0.05, 12);
  const auto start = std::chrono::steady_clock::now();
  const auto ci = bootstrap_median_ratio(a, b, {.resamples = 10000, .seed = 42});
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("bootstrap of 2 x 2000 samples, 10000 resamples: %.3f s\n", took.count());
  EXPECT_LT(ci.low, 0.9);
  EXPECT_GT(ci.high, 0.9);
  EXPECT_LT(ci.high - ci.low, 0.02);
  EXPECT_LE(ci.low, ci.ratio);
  EXPECT_GE(ci.high, ci.ratio);
  EXPECT_DOUBLE_EQ(ci.ratio, median(b) / median(a));
  EXPECT_EQ(ci.resamples, 10000u);
  EXPECT_EQ(ci.seed, 42u);
  EXPECT_DOUBLE_EQ(ci.confidence, 0.95);
}

TEST(stats_bootstrap, deterministic_for_a_seed) {
  const auto a = lognormal(301, 1.0, 0.1, 5);
  const auto b = lognormal(300, 1.0, 0.1, 6);
  const auto first = bootstrap_median_ratio(a, b, {.resamples = 2000, .seed = 7});
  const auto again = bootstrap_median_ratio(a, b, {.resamples = 2000, .seed = 7});
  const auto other = bootstrap_median_ratio(a, b, {.resamples = 2000, .seed = 8});
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  EXPECT_NE(first.low, other.low);
  EXPECT_NEAR(first.low, other.low, 0.01);
}

TEST(stats_bootstrap, coverage_is_near_the_nominal_level) {
  // 200 independent experiments of 40 samples a side with a true ratio of 0.95: the 95% interval
  // should cover 0.95 in about 190 of them. The bounds are far enough from 190 that only a
  // broken interval (too narrow, shifted, or resampling A and B together) falls outside.
  int covered = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    const auto a = lognormal(40, 1.0, 0.1, 1000 + 2 * k);
    const auto b = lognormal(40, 0.95, 0.1, 1001 + 2 * k);
    const auto ci = bootstrap_median_ratio(a, b, {.resamples = 1000, .seed = k});
    covered += ci.low <= 0.95 && 0.95 <= ci.high;
  }
  EXPECT_GE(covered, 176);
  EXPECT_LE(covered, 199);
}

TEST(stats_bootstrap, degenerate_and_invalid_inputs) {
  const auto ci = bootstrap_median_ratio(std::vector<double>{2}, std::vector<double>{1});
  EXPECT_DOUBLE_EQ(ci.low, 0.5);
  EXPECT_DOUBLE_EQ(ci.high, 0.5);
  EXPECT_THROW(bootstrap_median_ratio(std::vector<double>{1, 0}, std::vector<double>{1}), error);
  EXPECT_THROW(bootstrap_median_ratio(std::vector<double>{}, std::vector<double>{1}), error);
  EXPECT_THROW(
      bootstrap_median_ratio(std::vector<double>{1}, std::vector<double>{1}, {.resamples = 0}),
      error);
}

// ---- Verdict ----------------------------------------------------------------------------------

TEST(stats_verdict, names_round_trip) {
  for (verdict v : {verdict::improved, verdict::same, verdict::regressed, verdict::inconclusive}) {
    EXPECT_EQ(verdict_from_string(to_string(v)), v);
  }
  EXPECT_EQ(verdict_from_string("faster"), std::nullopt);
}

TEST(stats_verdict, delta_is_the_larger_of_one_percent_and_the_aa_spread) {
  EXPECT_DOUBLE_EQ(gate_delta(0.003), 0.01);
  EXPECT_DOUBLE_EQ(gate_delta(0.025), 0.025);
  EXPECT_THROW(gate_delta(-0.1), error);
}

TEST(stats_verdict, constructed_cases_on_each_side_of_delta) {
  const double delta = 0.01;
  EXPECT_EQ(classify(0.001, 0.90, 0.95, delta).result, verdict::improved);
  EXPECT_EQ(classify(0.001, 0.97, 0.9899, delta).result, verdict::improved);
  EXPECT_EQ(classify(0.001, 0.97, 0.9901, delta).result, verdict::inconclusive);
  EXPECT_EQ(classify(0.06, 0.90, 0.95, delta).result, verdict::inconclusive); // p too large
  EXPECT_EQ(classify(0.049, 0.90, 0.95, delta).result, verdict::improved);
  EXPECT_EQ(classify(0.001, 1.0101, 1.05, delta).result, verdict::regressed);
  EXPECT_EQ(classify(0.001, 1.0099, 1.05, delta).result, verdict::inconclusive);
  EXPECT_EQ(classify(0.5, 0.995, 1.004, delta).result, verdict::same);
  EXPECT_EQ(classify(0.5, 0.9899, 1.004, delta).result, verdict::inconclusive);
  EXPECT_EQ(classify(0.5, 0.995, 1.0101, delta).result, verdict::inconclusive);
  // Significant but smaller than delta: the same kernel as far as the gate is concerned.
  EXPECT_EQ(classify(0.001, 0.992, 0.996, delta).result, verdict::same);
  // A larger A/A spread widens the band.
  EXPECT_EQ(classify(0.001, 0.975, 0.985, 0.01).result, verdict::improved);
  EXPECT_EQ(classify(0.001, 0.975, 0.985, 0.03).result, verdict::same);

  const auto d = classify(0.001, 0.90, 0.95, delta);
  EXPECT_NE(d.reason.find("below 1 - delta = 0.9900"), std::string::npos) << d.reason;
  EXPECT_NE(classify(0.5, 0.98, 1.02, delta).reason.find("straddles"), std::string::npos);
}

TEST(stats_verdict, compare_end_to_end_on_synthetic_timings) {
  const auto a = lognormal(2000, 1.0e-3, 0.02, 21);
  const auto faster = compare(a, lognormal(2000, 0.9e-3, 0.02, 22));
  EXPECT_EQ(faster.result, verdict::improved) << faster.reason;
  EXPECT_LT(faster.interval.high, 0.99);
  EXPECT_LT(faster.test.p, 0.05);
  EXPECT_EQ(faster.n_a, 2000u);
  EXPECT_DOUBLE_EQ(faster.delta, 0.01);
  EXPECT_DOUBLE_EQ(faster.median_a, median(a));

  const auto slower = compare(a, lognormal(2000, 1.1e-3, 0.02, 23));
  EXPECT_EQ(slower.result, verdict::regressed) << slower.reason;

  const auto same = compare(a, lognormal(2000, 1.0e-3, 0.02, 24));
  EXPECT_EQ(same.result, verdict::same) << same.reason;

  // 3% faster but measured 8 times with 5% noise: not enough to tell.
  const auto few = compare(lognormal(8, 1.0e-3, 0.05, 25), lognormal(8, 0.97e-3, 0.05, 26));
  EXPECT_EQ(few.result, verdict::inconclusive) << few.reason;

  // A 5% improvement is within the noise of a machine whose A/A spread is 6%.
  const auto b5 = lognormal(2000, 0.95e-3, 0.02, 27);
  EXPECT_EQ(compare(a, b5).result, verdict::improved);
  const auto noisy_machine = compare(a, b5, {.aa_spread = 0.06});
  EXPECT_EQ(noisy_machine.result, verdict::same) << noisy_machine.reason;
  EXPECT_DOUBLE_EQ(noisy_machine.delta, 0.06);
  EXPECT_NE(noisy_machine.reason.find("A/A spread 6.00%"), std::string::npos)
      << noisy_machine.reason;

  EXPECT_THROW(compare(a, b5, {.bootstrap = {.resamples = 999}}), error);
}

// ---- Stopping rule ----------------------------------------------------------------------------

// Feeds samples of `mean` seconds with relative noise `noise` until the rule stops; each sample
// also advances the wall clock by `wall_per_sample`.
stopping_rule run_stream(const stopping_options& options, double mean, double noise,
                         double wall_per_sample, uint64_t seed) {
  stopping_rule rule(options);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, noise);
  double wall = 0;
  for (size_t i = 0; i < 1000000; ++i) {
    wall += wall_per_sample;
    if (rule.add(mean * (1 + normal(rng)), wall)) {
      break;
    }
  }
  return rule;
}

TEST(stopping_rule, quiet_stream_converges_once_min_time_is_reached) {
  // 1 ms samples with 0.1% noise: the noise is under 0.5% at once, so the 0.5 s of measured
  // time decides: about 500 samples.
  const auto rule = run_stream({}, 1e-3, 0.001, 2e-3, 1);
  EXPECT_EQ(rule.reason(), stop_reason::converged);
  EXPECT_GE(rule.measured_time(), 0.5);
  EXPECT_GE(rule.samples(), 490u);
  EXPECT_LE(rule.samples(), 510u);
  EXPECT_LT(rule.noise(), 0.005);
}

TEST(stopping_rule, min_samples_holds_even_without_noise) {
  stopping_rule rule({.min_time = 0});
  for (int i = 0; i < 9; ++i) {
    EXPECT_FALSE(rule.add(1.0, 0.0));
  }
  EXPECT_TRUE(rule.add(1.0, 0.0));
  EXPECT_EQ(rule.samples(), 10u);
  EXPECT_EQ(rule.reason(), stop_reason::converged);
  EXPECT_THROW(rule.add(1.0, 0.0), error);
}

TEST(stopping_rule, noisy_stream_stops_when_the_noise_has_stabilised) {
  // 10 ms samples with 5% noise never reach 0.5%, but their noise estimate settles.
  const auto rule = run_stream({}, 10e-3, 0.05, 20e-3, 2);
  EXPECT_EQ(rule.reason(), stop_reason::noise_stable);
  EXPECT_GE(rule.samples(), 64u);
  EXPECT_LT(rule.samples(), 2000u);
  EXPECT_GT(rule.noise(), 0.03);
  EXPECT_LT(rule.noise(), 0.07);
}

TEST(stopping_rule, a_slow_noisy_kernel_runs_into_the_wall_clock_cap) {
  // 1 s samples with 2% noise, 1.1 s of wall clock each: after 14 samples (15.4 s) the cap
  // stops it, long before a 64-value noise window could fill.
  const auto rule = run_stream({}, 1.0, 0.02, 1.1, 4);
  EXPECT_EQ(rule.reason(), stop_reason::timeout);
  EXPECT_EQ(rule.samples(), 14u);
}

TEST(stopping_rule, the_wall_clock_cap_holds_before_min_samples) {
  stopping_rule rule;
  EXPECT_FALSE(rule.add(4.0, 4.0));
  EXPECT_FALSE(rule.add(4.0, 8.0));
  EXPECT_FALSE(rule.add(4.0, 12.0));
  EXPECT_TRUE(rule.add(4.0, 16.0));
  EXPECT_EQ(rule.reason(), stop_reason::timeout);
}

TEST(stopping_rule, max_samples_caps_the_count) {
  const auto rule = run_stream({.max_samples = 200, .noise_window = 10000}, 1e-3, 0.05, 1e-3, 3);
  EXPECT_EQ(rule.reason(), stop_reason::max_samples);
  EXPECT_EQ(rule.samples(), 200u);
}

TEST(stopping_rule, reasons_round_trip_and_options_are_checked) {
  for (stop_reason r : {stop_reason::running, stop_reason::converged, stop_reason::noise_stable,
                        stop_reason::max_samples, stop_reason::timeout}) {
    EXPECT_EQ(stop_reason_from_string(to_string(r)), r);
  }
  EXPECT_EQ(stop_reason_from_string("bored"), std::nullopt);
  EXPECT_THROW(stopping_rule({.min_samples = 20, .max_samples = 10}), error);
}

// ---- Throttle filter --------------------------------------------------------------------------

TEST(throttle, drops_samples_below_three_quarters_of_the_default_clock) {
  const std::vector<double> samples{1, 2, 3, 4, 5};
  const std::vector<double> clocks{1980, 1400, 1485, std::nan(""), 1484.9}; // [MHz]
  const auto r = drop_throttled(samples, clocks, 1980);
  EXPECT_DOUBLE_EQ(r.threshold, 1485);
  EXPECT_EQ(r.dropped, 2u);
  EXPECT_EQ(r.kept, (std::vector<double>{1, 3, 4}));
  EXPECT_EQ(r.kept_indices, (std::vector<size_t>{0, 2, 3}));
  EXPECT_THROW(drop_throttled(samples, std::vector<double>{1980}, 1980), error);
}

// ---- A/A spread -------------------------------------------------------------------------------

TEST(aa_spread, from_ratios_is_the_95th_percentile_of_the_distance_from_one) {
  // |r - 1| sorted: 0.001 0.002 0.003 0.005 0.010; h = 4 * 0.95 = 3.8: 0.005 + 0.8 * 0.005
  const std::vector<double> ratios{1.002, 0.997, 1.010, 0.995, 1.001};
  const auto e = aa_spread_from_ratios(ratios);
  EXPECT_EQ(e.comparisons, 5u);
  EXPECT_NEAR(e.spread, 0.009, 1e-12);
  EXPECT_NEAR(e.ratio_p95, 0.009, 1e-12);
  EXPECT_DOUBLE_EQ(e.half_width_median, 0.0);
  EXPECT_DOUBLE_EQ(gate_delta(e.spread), 0.01);
}

TEST(aa_spread, from_runs_covers_both_the_shift_and_the_interval) {
  std::vector<aa_run> runs;
  for (uint64_t k = 0; k < 5; ++k) {
    runs.push_back(
        {lognormal(500, 1e-3, 0.03, 100 + 2 * k), lognormal(500, 1e-3, 0.03, 101 + 2 * k)});
  }
  const auto e = aa_spread_from_runs(runs, {.resamples = 2000});
  EXPECT_EQ(e.comparisons, 5u);
  EXPECT_GT(e.half_width_median, 0.0);
  EXPECT_GE(e.spread, e.ratio_p95);
  EXPECT_GE(e.spread, e.half_width_median);
  EXPECT_LT(e.spread, 0.02); // 3% noise, 500 samples: the median's spread is well under 1%
}

// ---- Suite figures ----------------------------------------------------------------------------

TEST(suite_figures, strict_and_attempted_geomeans_and_fast_p) {
  const std::vector<task_outcome> tasks{
      {"001", true, true, 2.0},   // verified improvement
      {"002", true, false, 1.2},  // correct, measured faster, not verified
      {"003", true, true, 1.6},   // verified improvement
      {"004", false, false, 0.0}, // no correct candidate
      {"005", true, false, 1.5},  // exactly 1.5: fast_1.5 needs more
  };
  const auto f = summarize_suite(tasks);
  EXPECT_EQ(f.tasks, 5u);
  EXPECT_EQ(f.correct, 4u);
  EXPECT_EQ(f.improved, 2u);
  EXPECT_NEAR(f.strict_geomean, std::pow(2.0 * 1.6, 1.0 / 5), 1e-12);
  ASSERT_TRUE(f.attempted_geomean.has_value());
  EXPECT_NEAR(*f.attempted_geomean, std::pow(2.0 * 1.2 * 1.6 * 1.5, 1.0 / 4), 1e-12);
  EXPECT_DOUBLE_EQ(f.fast_1_0, 4.0 / 5);
  EXPECT_DOUBLE_EQ(f.fast_1_5, 2.0 / 5);
  EXPECT_DOUBLE_EQ(fast_p(tasks, 0.0), 4.0 / 5); // fast_0 is the correctness rate
  EXPECT_DOUBLE_EQ(fast_p(tasks, 1.9), 1.0 / 5);
}

TEST(suite_figures, no_correct_task_and_invalid_rows) {
  const std::vector<task_outcome> none{{"001", false, false, 0.0}, {"002", false, false, 0.0}};
  const auto f = summarize_suite(none);
  EXPECT_DOUBLE_EQ(f.strict_geomean, 1.0);
  EXPECT_FALSE(f.attempted_geomean.has_value());
  EXPECT_DOUBLE_EQ(f.fast_1_0, 0.0);
  EXPECT_THROW(summarize_suite(std::vector<task_outcome>{{"001", false, true, 2.0}}), error);
  EXPECT_THROW(summarize_suite(std::vector<task_outcome>{{"001", true, false, 0.0}}), error);
  EXPECT_THROW(summarize_suite(std::vector<task_outcome>{}), error);
}

// ---- Plausibility -----------------------------------------------------------------------------

TEST(plausibility, faster_than_the_roofline_floor_is_flagged) {
  const auto fast = check_roofline_floor(1.0e-3, 1.2e-3);
  EXPECT_TRUE(fast.flagged);
  EXPECT_NEAR(fast.floor_fraction, 1.0 / 1.2, 1e-12);
  EXPECT_NE(fast.reason.find("exploit"), std::string::npos);
  const auto fine = check_roofline_floor(2.0e-3, 1.2e-3);
  EXPECT_FALSE(fine.flagged);
  EXPECT_FALSE(check_roofline_floor(1.2e-3, 1.2e-3).flagged);
  EXPECT_THROW(check_roofline_floor(1e-3, 0), error);
}

} // namespace
} // namespace kb::stats
