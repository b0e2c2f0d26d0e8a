// The structured timing gate on simulated timings with the structure real sessions have: a
// per-session offset shared by both sides, a per-session offset of each side, AR(1) noise over
// rounds and rotated input sets. Under A/A the pooled Mann-Whitney test (the old rule) is
// "significant" far more often than alpha; the block and session test is not, and a real 3%
// difference is still found.
#include "common/error.hpp"
#include "stats/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

namespace kb::stats {
namespace {

struct sim_params {
  int sessions = 2;
  int rounds = 150;                // per session; one sample per side and round
  double median = 1e-3;            // [s]
  double ratio = 1.0;              // B's time over A's
  double shared_session_sd = 5e-3; // [log] both sides of a session move together
  double side_session_sd = 1.5e-3; // [log] each side of a session on its own
  double phi = 0.6;                // AR(1) coefficient over rounds
  double noise_sd = 3e-3;          // [log] stationary sd of the AR(1) noise
};

struct sim_data {
  std::vector<timed_sample> a;
  std::vector<timed_sample> b;
  std::vector<double> pooled_a;
  std::vector<double> pooled_b;
};

sim_data simulate(uint64_t seed, const sim_params& p) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  sim_data d;
  const double innovation = p.noise_sd * std::sqrt(1 - p.phi * p.phi);
  for (int s = 0; s < p.sessions; ++s) {
    const double shared = p.shared_session_sd * normal(rng);
    const double offset_a = p.side_session_sd * normal(rng);
    const double offset_b = p.side_session_sd * normal(rng);
    double ea = p.noise_sd * normal(rng);
    double eb = p.noise_sd * normal(rng);
    for (int r = 0; r < p.rounds; ++r) {
      ea = p.phi * ea + innovation * normal(rng);
      eb = p.phi * eb + innovation * normal(rng);
      const double ta = p.median * std::exp(shared + offset_a + ea);
      const double tb = p.median * p.ratio * std::exp(shared + offset_b + eb);
      d.a.push_back({ta, s, r % 3, r});
      d.b.push_back({tb, s, r % 3, r});
      d.pooled_a.push_back(ta);
      d.pooled_b.push_back(tb);
    }
  }
  return d;
}

TEST(stats_gate, student_t_matches_tables) {
  EXPECT_NEAR(student_t_two_sided_p(12.7062, 1), 0.05, 1e-4);
  EXPECT_NEAR(student_t_two_sided_p(4.3027, 2), 0.05, 1e-4);
  EXPECT_NEAR(student_t_two_sided_p(2.2281, 10), 0.05, 1e-4);
  EXPECT_NEAR(student_t_two_sided_p(2.8453, 20), 0.01, 1e-4);
  EXPECT_NEAR(student_t_two_sided_p(1.95996, 1e7), 0.05, 1e-4);
  for (double t : {0.1, 0.5, 1.0, 3.0, 30.0}) { // df = 1: the Cauchy distribution
    EXPECT_NEAR(student_t_two_sided_p(t, 1), 1 - 2 * std::atan(t) / M_PI, 1e-10) << t;
    EXPECT_DOUBLE_EQ(student_t_two_sided_p(-t, 3), student_t_two_sided_p(t, 3));
  }
  EXPECT_DOUBLE_EQ(student_t_two_sided_p(0, 5), 1.0);
  EXPECT_THROW(student_t_two_sided_p(1, 0), kb::error);
  const std::vector<double> equal{0.5, 0.5, 0.5};
  EXPECT_EQ(one_sample_t_p(equal), 0.0);
  const std::vector<double> zeros{0, 0};
  EXPECT_EQ(one_sample_t_p(zeros), 1.0);
}

TEST(stats_gate, blocks_follow_sessions_and_rounds) {
  sim_params p;
  p.rounds = 80;
  p.sessions = 3;
  const auto d = simulate(1, p);
  const auto t = structured_test(d.a, d.b, 8);
  EXPECT_EQ(t.sessions, 3u);
  EXPECT_EQ(t.blocks, 24u);
  EXPECT_EQ(t.rounds_per_block, 10u);
  EXPECT_TRUE(t.between_available);
  EXPECT_DOUBLE_EQ(t.p, t.p_between);
  // One session: only the within test.
  p.sessions = 1;
  const auto one = simulate(2, p);
  const auto t1 = structured_test(one.a, one.b, 8);
  EXPECT_FALSE(t1.between_available);
  EXPECT_DOUBLE_EQ(t1.p, t1.p_within);
  // Rounds of one side only are dropped; no block with both sides is an error.
  std::vector<timed_sample> a{{1e-3, 0, 0, 0}, {1e-3, 0, 0, 1}};
  std::vector<timed_sample> b{{1e-3, 1, 0, 0}};
  EXPECT_THROW(structured_test(a, b, 8), kb::error);
  b[0].t = -1;
  EXPECT_THROW(structured_test(a, b, 8), kb::error);
}

TEST(stats_gate, bootstrap_is_reproducible_and_brackets_the_ratio) {
  sim_params p;
  p.ratio = 0.97;
  const auto d = simulate(7, p);
  bootstrap_options o;
  o.resamples = 2000;
  const auto x = hierarchical_bootstrap_median_ratio(d.a, d.b, o);
  const auto y = hierarchical_bootstrap_median_ratio(d.a, d.b, o);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
  EXPECT_LE(x.low, x.ratio);
  EXPECT_GE(x.high, x.ratio);
  EXPECT_NEAR(x.ratio, 0.97, 0.01);
}

// Share of A/A simulations the old pooled rule and the structured test call significant.
TEST(stats_gate, aa_false_positive_rate_is_near_alpha) {
  const int n = 2000;
  const sim_params p;
  int old_significant = 0;
  int new_significant = 0;
  int within_only = 0;
  for (int i = 0; i < n; ++i) {
    const auto d = simulate(1000 + static_cast<uint64_t>(i), p);
    if (mann_whitney(d.pooled_a, d.pooled_b).p < 0.05) {
      ++old_significant;
    }
    const auto t = structured_test(d.a, d.b);
    new_significant += t.p < 0.05 ? 1 : 0;
    within_only += t.p_within < 0.05 ? 1 : 0;
  }
  const double old_rate = static_cast<double>(old_significant) / n;
  const double new_rate = static_cast<double>(new_significant) / n;
  std::cout << "A/A false-positive rate over " << n << " simulations: pooled Mann-Whitney "
            << old_rate << ", blocks alone " << static_cast<double>(within_only) / n
            << ", blocks and sessions " << new_rate << "\n";
  EXPECT_GT(old_rate, 0.25);
  EXPECT_GE(new_rate, 0.04);
  EXPECT_LE(new_rate, 0.06);
}

// Without session offsets (only autocorrelation) the test stays near alpha too.
TEST(stats_gate, aa_false_positive_rate_without_session_offsets) {
  const int n = 2000;
  sim_params p;
  p.side_session_sd = 0;
  p.phi = 0.8;
  int old_significant = 0;
  int new_significant = 0;
  for (int i = 0; i < n; ++i) {
    const auto d = simulate(50000 + static_cast<uint64_t>(i), p);
    old_significant += mann_whitney(d.pooled_a, d.pooled_b).p < 0.05 ? 1 : 0;
    new_significant += structured_test(d.a, d.b).p < 0.05 ? 1 : 0;
  }
  const double old_rate = static_cast<double>(old_significant) / n;
  const double new_rate = static_cast<double>(new_significant) / n;
  std::cout << "A/A false-positive rate, autocorrelation only: pooled Mann-Whitney " << old_rate
            << ", blocks and sessions " << new_rate << "\n";
  EXPECT_GT(old_rate, 0.1);
  EXPECT_GE(new_rate, 0.035);
  EXPECT_LE(new_rate, 0.065);
}

// The full gate under A/A never claims a difference beyond delta, and finds a real 3% one.
TEST(stats_gate, verdicts_under_aa_and_a_real_difference) {
  structured_options o;
  o.min_delta = 0.01;
  int aa_not_same_improved = 0;
  for (int i = 0; i < 100; ++i) {
    const auto d = simulate(9000 + static_cast<uint64_t>(i), sim_params{});
    const auto c = compare_structured(d.a, d.b, o);
    aa_not_same_improved += c.gate.result == verdict::improved ? 1 : 0;
  }
  EXPECT_EQ(aa_not_same_improved, 0);
  // With two sessions the session test has one degree of freedom: the simulated session
  // offsets (larger than the H200's) leave it some misses; a third session removes them.
  for (const int sessions : {2, 3}) {
    sim_params faster;
    faster.ratio = 0.97;
    faster.sessions = sessions;
    int improved = 0;
    const int n = 100;
    for (int i = 0; i < n; ++i) {
      const auto d = simulate(20000 + static_cast<uint64_t>(i), faster);
      const auto c = compare_structured(d.a, d.b, o);
      if (c.gate.result == verdict::improved) {
        ++improved;
        EXPECT_LT(c.block.p, 0.05);
        EXPECT_LT(c.gate.interval.high, 0.99);
      }
    }
    std::cout << "3% faster, " << sessions << " sessions: improved in " << improved << " of " << n
              << " simulations\n";
    EXPECT_GE(improved, sessions == 2 ? 80 : 95);
  }
  sim_params slower;
  slower.ratio = 1.03;
  const auto d = simulate(77, slower);
  EXPECT_NE(compare_structured(d.a, d.b, o).gate.result, verdict::improved);
}

// Two runner processes timing the same kernel differ by up to about a microsecond. On a
// kernel of a few microseconds that bias is a large ratio, and the noise is small enough for the
// test to find it: the resolution floor keeps it from being called faster, while a real 2x on a
// longer kernel still is.
TEST(stats_gate, a_bias_below_the_resolution_is_not_a_speedup) {
  sim_params tiny;
  tiny.median = 1.25e-6;
  tiny.ratio = 0.3e-6 / 1.25e-6; // 0.95 us faster: the runners' bias, not the kernel
  tiny.sessions = 3;
  tiny.shared_session_sd = 1e-3;
  tiny.side_session_sd = 1e-4;
  tiny.noise_sd = 1e-2;
  structured_options o;
  const auto d = simulate(5, tiny);
  ASSERT_EQ(compare_structured(d.a, d.b, o).gate.result, verdict::improved)
      << "without the floor the bias passes the gate";
  o.resolution_s = 2e-6;
  const auto c = compare_structured(d.a, d.b, o);
  EXPECT_NE(c.gate.result, verdict::improved);
  EXPECT_DOUBLE_EQ(c.gate.resolution_s, 2e-6);
  EXPECT_NEAR(c.gate.delta, 2e-6 / c.gate.median_a, 1e-12);
  EXPECT_NE(c.gate.reason.find("resolution"), std::string::npos) << c.gate.reason;

  sim_params real = tiny;
  real.median = 40e-6;
  real.ratio = 0.5;
  const auto r = compare_structured(simulate(6, real).a, simulate(6, real).b, o);
  EXPECT_EQ(r.gate.result, verdict::improved) << r.gate.reason;
  EXPECT_NEAR(r.gate.delta, 2e-6 / r.gate.median_a, 1e-12);
  real.median = 400e-6;
  const auto l = compare_structured(simulate(7, real).a, simulate(7, real).b, o);
  EXPECT_EQ(l.gate.result, verdict::improved) << l.gate.reason;
  EXPECT_DOUBLE_EQ(l.gate.delta, 0.01) << "the floor binds only where it is above delta";

  o.resolution_s = -1;
  EXPECT_THROW(compare_structured(d.a, d.b, o), kb::error);
}

// Uniform p values pass the uniformity test; p values piled up below alpha or around one half
// (a test that is too eager, or one that never moves) do not. The rate's interval is exact.
TEST(stats_gate, uniformity_of_p_values_and_the_rate_interval) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> uniform;
  std::vector<double> eager;
  for (int i = 0; i < 200; ++i) {
    uniform.push_back(u(rng));
    eager.push_back(u(rng) * u(rng)); // P(p < 0.05) about 20%
  }
  const auto ok = ks_uniform(uniform);
  EXPECT_EQ(ok.n, 200u);
  EXPECT_LT(ok.d, 0.1);
  EXPECT_GT(ok.p, 0.05);
  EXPECT_LT(ks_uniform(eager).p, 1e-6);
  EXPECT_DOUBLE_EQ(ks_uniform(std::vector<double>{0.5}).d, 0.5);
  EXPECT_THROW(ks_uniform(std::vector<double>{}), kb::error);
  EXPECT_THROW(ks_uniform(std::vector<double>{1.5}), kb::error);
  // Clopper-Pearson: 0 of 29 gives [0, 11.9%]; 5 of 100 gives [1.64%, 11.28%].
  const auto none = binomial_interval(0, 29);
  EXPECT_DOUBLE_EQ(none.low, 0.0);
  EXPECT_NEAR(none.high, 0.1194, 2e-4);
  const auto five = binomial_interval(5, 100);
  EXPECT_NEAR(five.low, 0.0164, 2e-4);
  EXPECT_NEAR(five.high, 0.1128, 2e-4);
  EXPECT_DOUBLE_EQ(binomial_interval(7, 7).high, 1.0);
  EXPECT_THROW(binomial_interval(3, 2), kb::error);
}

TEST(stats_gate, gate_needs_enough_resamples) {
  const auto d = simulate(3, sim_params{});
  structured_options o;
  o.bootstrap.resamples = 100;
  EXPECT_THROW(compare_structured(d.a, d.b, o), kb::error);
}

} // namespace
} // namespace kb::stats
