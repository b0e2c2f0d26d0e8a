#include "stats/stats.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

namespace kb::stats {
namespace {

void require_values(std::span<const double> x, const char* what) {
  if (x.empty()) {
    fail("{}: no values", what);
  }
}

void require_positive(std::span<const double> x, const char* what) {
  require_values(x, what);
  for (double v : x) {
    if (!std::isfinite(v) || v <= 0) {
      fail("{}: every value must be positive and finite, got {}", what, v);
    }
  }
}

double quantile_of_sorted(std::span<const double> sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) {
    return sorted.back();
  }
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

// Median of the values in place, reordering them.
double median_in_place(std::span<double> x) {
  const size_t half = x.size() / 2;
  std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(half), x.end());
  const double upper = x[half];
  if (x.size() % 2 == 1) {
    return upper;
  }
  const double lower = *std::max_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(half));
  return 0.5 * (lower + upper);
}

double normal_sf(double z) {
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// Ranks 1..n of the concatenation a ++ b, tied values getting their mean rank; also returns the
// tie term sum(t^3 - t) over the groups of t equal values.
std::vector<double> mid_ranks(std::span<const double> a, std::span<const double> b,
                              double* tie_term) {
  const size_t n = a.size() + b.size();
  std::vector<std::pair<double, size_t>> order(n);
  for (size_t i = 0; i < a.size(); ++i) {
    order[i] = {a[i], i};
  }
  for (size_t j = 0; j < b.size(); ++j) {
    order[a.size() + j] = {b[j], a.size() + j};
  }
  std::sort(order.begin(), order.end());
  std::vector<double> ranks(n);
  *tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && order[j].first == order[i].first) {
      ++j;
    }
    const double rank = 0.5 * static_cast<double>(i + 1 + j); // mean of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      ranks[order[k].second] = rank;
    }
    const auto t = static_cast<double>(j - i);
    *tie_term += t * t * t - t;
    i = j;
  }
  return ranks;
}

// P(U >= u) under the null hypothesis for samples of n1 and n2 values without ties: the number
// of n1-subsets of the ranks 0..n-1 whose sum minus n1(n1-1)/2 is at least u, over C(n, n1).
double exact_upper_tail(size_t n1, size_t n2, double u) {
  const size_t n = n1 + n2;
  const size_t max_sum = n1 * (n - 1);
  // count[k][s]: subsets of size k of the ranks seen so far with rank sum s. Counts past 2^53
  // (C(100, 50) is about 1e29) lose integer exactness in a double, not relative precision.
  std::vector<std::vector<double>> count(n1 + 1, std::vector<double>(max_sum + 1, 0.0));
  count[0][0] = 1;
  for (size_t rank = 0; rank < n; ++rank) {
    for (size_t k = std::min(n1, rank + 1); k >= 1; --k) {
      for (size_t s = max_sum + 1; s-- > rank;) {
        count[k][s] += count[k - 1][s - rank];
      }
    }
  }
  const size_t offset = n1 * (n1 - 1) / 2;
  double total = 0;
  double tail = 0;
  for (size_t s = offset; s <= max_sum; ++s) {
    total += count[n1][s];
    if (static_cast<double>(s - offset) >= u) {
      tail += count[n1][s];
    }
  }
  return tail / total;
}

// Medians of resamples (with replacement, at the sample's own size) of one sample. Each draw of
// the generator gives two indices by multiply-shift on its 32-bit halves (the same on every
// standard library; the bias, n / 2^32, is far below the bootstrap's own error). The median of a
// resample is found without sorting it: the draws are counted per position of the sorted sample
// and one pass over the counts finds the middle order statistics, which is exact and about twice
// as fast as std::nth_element over the drawn values.
class median_resampler {
public:
  explicit median_resampler(std::span<const double> x)
      : m_sorted(x.begin(), x.end()), m_counts(x.size()) {
    std::sort(m_sorted.begin(), m_sorted.end());
  }

  double draw(std::mt19937_64& rng) {
    const uint64_t n = m_sorted.size();
    std::fill(m_counts.begin(), m_counts.end(), 0u);
    for (uint64_t i = 0; i < n; i += 2) {
      const uint64_t bits = rng();
      ++m_counts[((bits & 0xffffffffu) * n) >> 32];
      if (i + 1 < n) {
        ++m_counts[((bits >> 32) * n) >> 32];
      }
    }
    // The median is the mean of the order statistics of ranks lower_rank and upper_rank (1-based).
    const uint64_t upper_rank = n / 2 + 1;
    const uint64_t lower_rank = n % 2 == 1 ? upper_rank : n / 2;
    uint64_t seen = 0;
    size_t k = 0;
    while ((seen += m_counts[k]) < lower_rank) {
      ++k;
    }
    const double lower = m_sorted[k];
    while (seen < upper_rank) {
      seen += m_counts[++k];
    }
    return 0.5 * (lower + m_sorted[k]);
  }

private:
  std::vector<double> m_sorted;
  std::vector<uint32_t> m_counts;
};

std::string percent(double fraction) {
  return fmt::format("{:.2f}%", 100 * fraction);
}

} // namespace

// ---- Descriptive figures ----------------------------------------------------------------------

double mean(std::span<const double> x) {
  require_values(x, "mean");
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double stdev(std::span<const double> x) {
  require_values(x, "stdev");
  if (x.size() == 1) {
    return 0;
  }
  const double m = mean(x);
  double sum_sq = 0;
  for (double v : x) {
    sum_sq += (v - m) * (v - m);
  }
  return std::sqrt(sum_sq / static_cast<double>(x.size() - 1));
}

double relative_stdev(std::span<const double> x) {
  return stdev(x) / std::fabs(mean(x));
}

double median(std::span<const double> x) {
  require_values(x, "median");
  std::vector<double> copy(x.begin(), x.end());
  return median_in_place(copy);
}

median_interval median_with_interval(std::span<const double> x) {
  require_values(x, "median_with_interval");
  std::vector<double> sorted(x.begin(), x.end());
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const auto at = [&](double k) { return sorted[static_cast<size_t>(std::clamp(k, 0.0, n - 1))]; };
  median_interval m;
  m.median = median(sorted);
  m.low = at(std::floor(n / 2 - 0.98 * std::sqrt(n)));
  m.high = at(std::ceil(n / 2 + 0.98 * std::sqrt(n)));
  return m;
}

bool throttled(std::optional<double> clock_mhz, double default_mhz, double fraction) {
  return default_mhz > 0 && clock_mhz && *clock_mhz < fraction * default_mhz;
}

double quantile(std::span<const double> x, double q) {
  require_values(x, "quantile");
  if (!(q >= 0 && q <= 1)) {
    fail("quantile: q must be in [0, 1], got {}", q);
  }
  std::vector<double> sorted(x.begin(), x.end());
  std::sort(sorted.begin(), sorted.end());
  return quantile_of_sorted(sorted, q);
}

double mad(std::span<const double> x) {
  const double m = median(x);
  std::vector<double> deviations(x.size());
  std::transform(x.begin(), x.end(), deviations.begin(),
                 [m](double v) { return std::fabs(v - m); });
  return median_in_place(deviations);
}

double min(std::span<const double> x) {
  require_values(x, "min");
  return *std::min_element(x.begin(), x.end());
}

double max(std::span<const double> x) {
  require_values(x, "max");
  return *std::max_element(x.begin(), x.end());
}

double geomean(std::span<const double> x) {
  require_positive(x, "geomean");
  double log_sum = 0;
  for (double v : x) {
    log_sum += std::log(v);
  }
  return std::exp(log_sum / static_cast<double>(x.size()));
}

summary describe(std::span<const double> x) {
  require_values(x, "describe");
  std::vector<double> sorted(x.begin(), x.end());
  std::sort(sorted.begin(), sorted.end());
  summary s;
  s.n = x.size();
  s.min = sorted.front();
  s.max = sorted.back();
  s.mean = mean(x);
  s.stdev = stdev(x);
  s.relative_stdev = s.stdev / std::fabs(s.mean);
  s.median = quantile_of_sorted(sorted, 0.5);
  s.mad = mad(x);
  s.q25 = quantile_of_sorted(sorted, 0.25);
  s.q75 = quantile_of_sorted(sorted, 0.75);
  return s;
}

// ---- Mann-Whitney ------------------------------------------------------------------------------

mann_whitney_result mann_whitney(std::span<const double> a, std::span<const double> b,
                                 mann_whitney_method method) {
  require_values(a, "mann_whitney (first sample)");
  require_values(b, "mann_whitney (second sample)");
  for (auto x : {a, b}) {
    for (double v : x) {
      if (std::isnan(v)) {
        fail("mann_whitney: NaN in a sample");
      }
    }
  }
  const auto n1 = static_cast<double>(a.size());
  const auto n2 = static_cast<double>(b.size());
  const double n = n1 + n2;
  double tie_term = 0;
  const auto ranks = mid_ranks(a, b, &tie_term);
  const double rank_sum_a =
      std::accumulate(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(a.size()), 0.0);

  mann_whitney_result r;
  r.u = rank_sum_a - n1 * (n1 + 1) / 2;
  const double mu = n1 * n2 / 2;
  const double sigma = std::sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))));
  const double shift = std::max(0.0, std::fabs(r.u - mu) - 0.5);
  r.z = sigma > 0 ? std::copysign(shift / sigma, r.u - mu) : 0.0;

  const bool ties = tie_term > 0;
  const bool small = a.size() <= mann_whitney_exact_limit && b.size() <= mann_whitney_exact_limit;
  if (method == mann_whitney_method::exact) {
    if (ties) {
      fail("mann_whitney: the exact distribution needs samples without ties");
    }
    if (a.size() > 50 || b.size() > 50) {
      fail("mann_whitney: the exact distribution is limited to 50 values a side, got {} and {}",
           a.size(), b.size());
    }
  }
  r.exact = method == mann_whitney_method::exact ||
            (method == mann_whitney_method::automatic && small && !ties);
  if (r.exact) {
    // The distribution is symmetric about n1 n2 / 2: the two-sided p doubles the upper tail of
    // the larger of U and n1 n2 - U.
    const double u_upper = std::max(r.u, n1 * n2 - r.u);
    r.p = std::min(1.0, 2 * exact_upper_tail(a.size(), b.size(), u_upper));
  } else {
    r.p = sigma > 0 ? std::min(1.0, 2 * normal_sf(shift / sigma)) : 1.0;
  }
  return r;
}

// ---- Bootstrap ---------------------------------------------------------------------------------

ratio_interval bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                      const bootstrap_options& options) {
  require_positive(a, "bootstrap_median_ratio (first sample)");
  require_positive(b, "bootstrap_median_ratio (second sample)");
  if (options.resamples == 0) {
    fail("bootstrap_median_ratio: resamples must be positive");
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    fail("bootstrap_median_ratio: confidence must be in (0, 1), got {}", options.confidence);
  }
  std::mt19937_64 rng(options.seed);
  median_resampler resample_a(a);
  median_resampler resample_b(b);
  std::vector<double> ratios(options.resamples);
  for (double& ratio : ratios) {
    const double median_a = resample_a.draw(rng);
    ratio = resample_b.draw(rng) / median_a;
  }
  std::sort(ratios.begin(), ratios.end());
  ratio_interval ci;
  ci.ratio = median(b) / median(a);
  ci.low = quantile_of_sorted(ratios, (1 - options.confidence) / 2);
  ci.high = quantile_of_sorted(ratios, (1 + options.confidence) / 2);
  ci.confidence = options.confidence;
  ci.resamples = options.resamples;
  ci.seed = options.seed;
  return ci;
}

// ---- Verdict -----------------------------------------------------------------------------------

std::string to_string(verdict v) {
  return std::string(verdict_names.name(v));
}

std::optional<verdict> verdict_from_string(const std::string& s) {
  return verdict_names.parse(s);
}

double gate_delta(double aa_spread, double min_delta) {
  if (!(aa_spread >= 0) || !(min_delta >= 0)) {
    fail("gate_delta: the A/A spread and the minimum delta must be non-negative, got {} and {}",
         aa_spread, min_delta);
  }
  return std::max(min_delta, aa_spread);
}

decision classify(double p, double ci_low, double ci_high, double delta, double alpha) {
  if (!(ci_low <= ci_high)) {
    fail("classify: interval [{}, {}] is empty", ci_low, ci_high);
  }
  const double lower_bound = 1 - delta;
  const double upper_bound = 1 + delta;
  const bool significant = p < alpha;
  const std::string test = fmt::format("p = {:.4g} {} {}", p, significant ? "<" : ">=", alpha);
  const std::string interval = fmt::format("interval [{:.4f}, {:.4f}]", ci_low, ci_high);
  if (significant && ci_high < lower_bound) {
    return {verdict::improved,
            fmt::format("{} and {} below 1 - delta = {:.4f}", test, interval, lower_bound)};
  }
  if (significant && ci_low > upper_bound) {
    return {verdict::regressed,
            fmt::format("{} and {} above 1 + delta = {:.4f}", test, interval, upper_bound)};
  }
  if (ci_low >= lower_bound && ci_high <= upper_bound) {
    return {verdict::same, fmt::format("{} inside [{:.4f}, {:.4f}] ({})", interval, lower_bound,
                                       upper_bound, test)};
  }
  if (ci_high < lower_bound || ci_low > upper_bound) {
    return {verdict::inconclusive, fmt::format("{} outside [{:.4f}, {:.4f}] but {}", interval,
                                               lower_bound, upper_bound, test)};
  }
  return {verdict::inconclusive, fmt::format("{} straddles a bound of [{:.4f}, {:.4f}] ({})",
                                             interval, lower_bound, upper_bound, test)};
}

comparison compare(std::span<const double> a, std::span<const double> b,
                   const comparison_options& options) {
  if (options.bootstrap.resamples < gate_min_resamples) {
    fail("compare: the gate needs at least {} bootstrap resamples, got {}", gate_min_resamples,
         options.bootstrap.resamples);
  }
  comparison c;
  c.n_a = a.size();
  c.n_b = b.size();
  c.interval = bootstrap_median_ratio(a, b, options.bootstrap);
  c.median_a = median(a);
  c.median_b = median(b);
  c.test = mann_whitney(a, b);
  c.alpha = options.alpha;
  c.aa_spread = options.aa_spread;
  c.min_delta = options.min_delta;
  c.delta = gate_delta(options.aa_spread, options.min_delta);
  auto d = classify(c.test.p, c.interval.low, c.interval.high, c.delta, c.alpha);
  c.result = d.result;
  c.reason =
      fmt::format("{}; median ratio {:.4f}, delta = {} (A/A spread {}, floor {})", d.reason,
                  c.interval.ratio, percent(c.delta), percent(c.aa_spread), percent(c.min_delta));
  return c;
}

// ---- Structured gate ---------------------------------------------------------------------------

namespace {

// Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz).
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) {
    return 0;
  }
  if (x >= 1) {
    return 1;
  }
  if (x > (a + 1) / (a + b + 2)) {
    return 1 - incomplete_beta(1 - x, b, a);
  }
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x)) /
                       a;
  constexpr double tiny = 1e-300;
  double f = 1;
  double c = 1;
  double d = 0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double numerator = 1;
    if (i > 0) {
      numerator = i % 2 == 0 ? m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
                             : -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    }
    d = 1 + numerator * d;
    d = std::fabs(d) < tiny ? tiny : d;
    d = 1 / d;
    c = 1 + numerator / c;
    c = std::fabs(c) < tiny ? tiny : c;
    const double cd = c * d;
    f *= cd;
    if (std::fabs(1 - cd) < 1e-15) {
      break;
    }
  }
  return front * (f - 1);
}

struct sample_block {
  size_t session = 0; // index among the sessions that have blocks
  std::vector<double> a;
  std::vector<double> b;
};

struct block_layout {
  std::vector<sample_block> blocks;
  size_t sessions = 0;
  size_t rounds_per_block = 0;
};

// Groups both sides' samples into blocks of consecutive rounds within each session; keeps the
// blocks that have samples of both sides.
block_layout make_blocks(std::span<const timed_sample> a, std::span<const timed_sample> b,
                         size_t target_blocks) {
  if (target_blocks == 0) {
    fail("structured gate: target_blocks_per_session must be positive");
  }
  for (const auto* side : {&a, &b}) {
    for (const auto& s : *side) {
      if (!std::isfinite(s.t) || s.t <= 0) {
        fail("structured gate: every time must be positive and finite, got {}", s.t);
      }
    }
  }
  std::map<int, std::vector<int>> rounds; // session -> its rounds, sorted, unique
  for (const auto* side : {&a, &b}) {
    for (const auto& s : *side) {
      rounds[s.session].push_back(s.round);
    }
  }
  // (session, round) -> block index in `all`
  std::map<std::pair<int, int>, size_t> block_of;
  std::vector<sample_block> all;
  std::map<int, size_t> session_index;
  block_layout layout;
  for (auto& [session, r] : rounds) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    const size_t length = std::max<size_t>(1, (r.size() + target_blocks - 1) / target_blocks);
    const size_t count = std::max<size_t>(1, r.size() / length); // the last absorbs the rest
    layout.rounds_per_block = std::max(layout.rounds_per_block, length);
    const size_t first = all.size();
    all.resize(first + count);
    for (size_t i = 0; i < r.size(); ++i) {
      block_of[{session, r[i]}] = first + std::min(i / length, count - 1);
    }
  }
  for (const auto& s : a) {
    all[block_of.at({s.session, s.round})].a.push_back(s.t);
  }
  for (const auto& s : b) {
    all[block_of.at({s.session, s.round})].b.push_back(s.t);
  }
  // Session of each block, renumbered over the sessions that keep a block.
  std::vector<int> session_of(all.size());
  for (const auto& [key, index] : block_of) {
    session_of[index] = key.first;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].a.empty() || all[i].b.empty()) {
      continue;
    }
    const auto [it, fresh] = session_index.try_emplace(session_of[i], session_index.size());
    all[i].session = it->second;
    layout.blocks.push_back(std::move(all[i]));
  }
  layout.sessions = session_index.size();
  if (layout.blocks.empty()) {
    fail("structured gate: no block has samples of both sides");
  }
  return layout;
}

// The median of the values of both sides drawn with a multiplicity per block: values sorted
// once, with their block, and walked with the weights.
class weighted_median {
public:
  weighted_median(const std::vector<sample_block>& blocks, bool side_b) {
    for (size_t k = 0; k < blocks.size(); ++k) {
      for (double v : side_b ? blocks[k].b : blocks[k].a) {
        m_values.push_back({v, k});
      }
      m_sizes.push_back((side_b ? blocks[k].b : blocks[k].a).size());
    }
    std::sort(m_values.begin(), m_values.end());
  }

  double operator()(const std::vector<uint32_t>& weight) const {
    uint64_t n = 0;
    for (size_t k = 0; k < m_sizes.size(); ++k) {
      n += weight[k] * m_sizes[k];
    }
    const uint64_t upper_rank = n / 2 + 1;
    const uint64_t lower_rank = n % 2 == 1 ? upper_rank : n / 2;
    uint64_t seen = 0;
    size_t i = 0;
    while ((seen += weight[m_values[i].second]) < lower_rank) {
      ++i;
    }
    const double lower = m_values[i].first;
    while (seen < upper_rank) {
      seen += weight[m_values[++i].second];
    }
    return 0.5 * (lower + m_values[i].first);
  }

private:
  std::vector<std::pair<double, size_t>> m_values;
  std::vector<size_t> m_sizes;
};

uint64_t draw_index(std::mt19937_64& rng, uint64_t n) {
  return ((rng() & 0xffffffffu) * n) >> 32;
}

} // namespace

double student_t_two_sided_p(double t, double df) {
  if (!(df > 0)) {
    fail("student_t_two_sided_p: degrees of freedom must be positive, got {}", df);
  }
  if (std::isnan(t)) {
    return 1;
  }
  if (std::isinf(t)) {
    return 0;
  }
  return std::clamp(incomplete_beta(df / (df + t * t), df / 2, 0.5), 0.0, 1.0);
}

double one_sample_t_p(std::span<const double> x) {
  if (x.size() < 2) {
    return 1;
  }
  const double m = mean(x);
  const double sd = stdev(x);
  if (!(sd > 0)) {
    return m == 0 ? 1.0 : 0.0;
  }
  const double t = m / (sd / std::sqrt(static_cast<double>(x.size())));
  return student_t_two_sided_p(t, static_cast<double>(x.size() - 1));
}

uniformity_test ks_uniform(std::span<const double> values) {
  if (values.empty()) {
    fail("ks_uniform: no values");
  }
  std::vector<double> x(values.begin(), values.end());
  for (const double v : x) {
    if (!(v >= 0 && v <= 1)) {
      fail("ks_uniform: {} is not in [0, 1]", v);
    }
  }
  std::sort(x.begin(), x.end());
  uniformity_test r;
  r.n = x.size();
  const double n = static_cast<double>(r.n);
  for (size_t i = 0; i < x.size(); ++i) {
    r.d =
        std::max({r.d, (static_cast<double>(i) + 1) / n - x[i], x[i] - static_cast<double>(i) / n});
  }
  // P(D > d) ~ Q((sqrt(n) + 0.12 + 0.11 / sqrt(n)) d), with Kolmogorov's
  // Q(l) = 2 sum over k >= 1 of (-1)^(k-1) exp(-2 k^2 l^2).
  const double l = (std::sqrt(n) + 0.12 + 0.11 / std::sqrt(n)) * r.d;
  if (l < 0.2) {
    r.p = 1;
    return r;
  }
  double q = 0;
  for (int k = 1; k <= 100; ++k) {
    const double term = std::exp(-2.0 * k * k * l * l);
    q += (k % 2 == 1 ? 2.0 : -2.0) * term;
    if (term < 1e-12) {
      break;
    }
  }
  r.p = std::clamp(q, 0.0, 1.0);
  return r;
}

rate_interval binomial_interval(size_t k, size_t n, double confidence) {
  if (n == 0 || k > n) {
    fail("binomial_interval: {} events in {} trials", k, n);
  }
  if (!(confidence > 0 && confidence < 1)) {
    fail("binomial_interval: confidence must be in (0, 1), got {}", confidence);
  }
  const double tail = (1 - confidence) / 2;
  const double kd = static_cast<double>(k);
  const double nd = static_cast<double>(n);
  // P(X >= k | rate) = I_rate(k, n - k + 1), increasing in the rate: bisection on it.
  const auto solve = [](const auto& f, double target) {
    double lo = 0;
    double hi = 1;
    for (int i = 0; i < 100; ++i) {
      const double mid = 0.5 * (lo + hi);
      (f(mid) < target ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  };
  rate_interval r;
  r.rate = kd / nd;
  r.low = k == 0 ? 0.0 : solve([&](double x) { return incomplete_beta(x, kd, nd - kd + 1); }, tail);
  r.high =
      k == n ? 1.0 : solve([&](double x) { return incomplete_beta(x, kd + 1, nd - kd); }, 1 - tail);
  return r;
}

block_test structured_test(std::span<const timed_sample> a, std::span<const timed_sample> b,
                           size_t target_blocks_per_session) {
  const auto layout = make_blocks(a, b, target_blocks_per_session);
  std::vector<double> figures;
  std::vector<std::vector<double>> per_session(layout.sessions);
  for (const auto& blk : layout.blocks) {
    const double f = std::log(median(blk.b) / median(blk.a));
    figures.push_back(f);
    per_session[blk.session].push_back(f);
  }
  block_test r;
  r.sessions = layout.sessions;
  r.blocks = layout.blocks.size();
  r.rounds_per_block = layout.rounds_per_block;
  r.mean_log_ratio = mean(figures);
  r.p_within = one_sample_t_p(figures);
  r.between_available = layout.sessions >= 2;
  if (r.between_available) {
    std::vector<double> session_means;
    for (const auto& f : per_session) {
      session_means.push_back(mean(f));
    }
    r.p_between = one_sample_t_p(session_means);
    r.p = r.p_between;
  } else {
    r.p_between = 1;
    r.p = r.p_within;
  }
  return r;
}

ratio_interval hierarchical_bootstrap_median_ratio(std::span<const timed_sample> a,
                                                   std::span<const timed_sample> b,
                                                   const bootstrap_options& options,
                                                   size_t target_blocks_per_session) {
  if (options.resamples == 0) {
    fail("hierarchical_bootstrap_median_ratio: resamples must be positive");
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    fail("hierarchical_bootstrap_median_ratio: confidence must be in (0, 1), got {}",
         options.confidence);
  }
  const auto layout = make_blocks(a, b, target_blocks_per_session);
  std::vector<std::vector<size_t>> blocks_of(layout.sessions);
  for (size_t k = 0; k < layout.blocks.size(); ++k) {
    blocks_of[layout.blocks[k].session].push_back(k);
  }
  const weighted_median median_a(layout.blocks, false);
  const weighted_median median_b(layout.blocks, true);
  std::mt19937_64 rng(options.seed);
  std::vector<uint32_t> weight(layout.blocks.size());
  std::vector<double> ratios(options.resamples);
  for (double& ratio : ratios) {
    std::fill(weight.begin(), weight.end(), 0u);
    for (size_t s = 0; s < layout.sessions; ++s) {
      const auto& pool = blocks_of[draw_index(rng, layout.sessions)];
      for (size_t k = 0; k < pool.size(); ++k) {
        ++weight[pool[draw_index(rng, pool.size())]];
      }
    }
    ratio = median_b(weight) / median_a(weight);
  }
  std::sort(ratios.begin(), ratios.end());
  std::vector<double> ta;
  std::vector<double> tb;
  for (const auto& blk : layout.blocks) {
    ta.insert(ta.end(), blk.a.begin(), blk.a.end());
    tb.insert(tb.end(), blk.b.begin(), blk.b.end());
  }
  ratio_interval ci;
  ci.ratio = median(tb) / median(ta);
  ci.low = quantile_of_sorted(ratios, (1 - options.confidence) / 2);
  ci.high = quantile_of_sorted(ratios, (1 + options.confidence) / 2);
  ci.confidence = options.confidence;
  ci.resamples = options.resamples;
  ci.seed = options.seed;
  return ci;
}

structured_comparison compare_structured(std::span<const timed_sample> a,
                                         std::span<const timed_sample> b,
                                         const structured_options& options) {
  if (options.bootstrap.resamples < gate_min_resamples) {
    fail("compare_structured: the gate needs at least {} bootstrap resamples, got {}",
         gate_min_resamples, options.bootstrap.resamples);
  }
  structured_comparison out;
  out.block = structured_test(a, b, options.target_blocks_per_session);
  comparison& c = out.gate;
  std::vector<double> ta;
  std::vector<double> tb;
  for (const auto& s : a) {
    ta.push_back(s.t);
  }
  for (const auto& s : b) {
    tb.push_back(s.t);
  }
  c.n_a = ta.size();
  c.n_b = tb.size();
  c.median_a = median(ta);
  c.median_b = median(tb);
  c.test = mann_whitney(ta, tb);
  c.interval = hierarchical_bootstrap_median_ratio(a, b, options.bootstrap,
                                                   options.target_blocks_per_session);
  c.alpha = options.alpha;
  c.aa_spread = options.aa_spread;
  c.min_delta = options.min_delta;
  if (!(options.resolution_s >= 0)) {
    fail("compare_structured: the resolution must be non-negative, got {}", options.resolution_s);
  }
  c.resolution_s = options.resolution_s;
  c.delta = gate_delta(options.aa_spread, options.min_delta);
  const bool resolution_binds = c.median_a > 0 && options.resolution_s / c.median_a > c.delta;
  if (resolution_binds) {
    c.delta = options.resolution_s / c.median_a;
  }
  auto d = classify(out.block.p, c.interval.low, c.interval.high, c.delta, c.alpha);
  c.result = d.result;
  c.reason = fmt::format(
      "{}; block test over {} blocks in {} sessions (p within {:.3g}, between {}); median ratio "
      "{:.4f}, delta = {} (A/A spread {}, floor {}{})",
      d.reason, out.block.blocks, out.block.sessions, out.block.p_within,
      out.block.between_available ? fmt::format("{:.3g}", out.block.p_between)
                                  : std::string("n/a, one session"),
      c.interval.ratio, percent(c.delta), percent(c.aa_spread), percent(c.min_delta),
      resolution_binds ? fmt::format(", the scheme's resolution {:.3g} us over the baseline's "
                                     "median {:.3g} us",
                                     options.resolution_s * 1e6, c.median_a * 1e6)
                       : std::string());
  return out;
}

// ---- Stopping rule -----------------------------------------------------------------------------

std::string to_string(stop_reason v) {
  return std::string(stop_reason_names.name(v));
}

std::optional<stop_reason> stop_reason_from_string(const std::string& s) {
  return stop_reason_names.parse(s);
}

stopping_rule::stopping_rule(const stopping_options& options) : m_options(options) {
  if (m_options.min_samples < 2) {
    fail("stopping_rule: min_samples must be at least 2 (the noise needs two samples)");
  }
  if (m_options.max_samples < m_options.min_samples) {
    fail("stopping_rule: max_samples ({}) is below min_samples ({})", m_options.max_samples,
         m_options.min_samples);
  }
  if (m_options.noise_window < 2) {
    fail("stopping_rule: noise_window must be at least 2");
  }
}

double stopping_rule::noise() const {
  if (m_count < 2) {
    return std::numeric_limits<double>::infinity();
  }
  return std::sqrt(m_m2 / static_cast<double>(m_count - 1)) / std::fabs(m_mean);
}

bool stopping_rule::noise_is_stable() const {
  if (m_noise_history.size() < m_options.noise_window) {
    return false;
  }
  const std::vector<double> window(m_noise_history.begin(), m_noise_history.end());
  return stdev(window) < m_options.noise_stability * m_noise_history.back();
}

bool stopping_rule::add(double sample, double wall_elapsed) {
  if (stopped()) {
    fail("stopping_rule: sample added after the rule stopped ({})", to_string(m_reason));
  }
  if (!std::isfinite(sample) || sample < 0) {
    fail("stopping_rule: a sample must be a finite non-negative time, got {}", sample);
  }
  ++m_count;
  m_sum += sample;
  const double delta = sample - m_mean;
  m_mean += delta / static_cast<double>(m_count);
  m_m2 += delta * (sample - m_mean);
  if (m_count >= 2) {
    m_noise_history.push_back(noise());
    if (m_noise_history.size() > m_options.noise_window) {
      m_noise_history.pop_front();
    }
  }

  const bool enough = m_count >= m_options.min_samples && m_sum >= m_options.min_time;
  if (enough && noise() < m_options.max_noise) {
    m_reason = stop_reason::converged;
  } else if (enough && noise_is_stable()) {
    m_reason = stop_reason::noise_stable;
  } else if (m_count >= m_options.max_samples) {
    m_reason = stop_reason::max_samples;
  } else if (wall_elapsed >= m_options.timeout) {
    m_reason = stop_reason::timeout;
  }
  return stopped();
}

// ---- Throttle filter ---------------------------------------------------------------------------

throttle_filter_result drop_throttled(std::span<const double> samples,
                                      std::span<const double> sm_clocks, double default_clock,
                                      double min_fraction) {
  if (samples.size() != sm_clocks.size()) {
    fail("drop_throttled: {} samples but {} clock readings", samples.size(), sm_clocks.size());
  }
  if (!(default_clock > 0)) {
    fail("drop_throttled: the default clock must be positive, got {}", default_clock);
  }
  throttle_filter_result r;
  r.threshold = min_fraction * default_clock;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (sm_clocks[i] < r.threshold) {
      ++r.dropped;
    } else {
      r.kept.push_back(samples[i]);
      r.kept_indices.push_back(i);
    }
  }
  return r;
}

// ---- A/A spread --------------------------------------------------------------------------------

namespace {

struct aa_comparison {
  double ratio;
  double low;
  double high;
};

aa_spread_estimate estimate_spread(const std::vector<aa_comparison>& comparisons) {
  if (comparisons.empty()) {
    fail("A/A spread: no comparisons");
  }
  std::vector<double> shifts;
  std::vector<double> half_widths;
  std::vector<double> reaches;
  for (const auto& c : comparisons) {
    const double shift = std::fabs(c.ratio - 1);
    shifts.push_back(shift);
    half_widths.push_back((c.high - c.low) / 2);
    reaches.push_back(std::max({shift, 1 - c.low, c.high - 1}));
  }
  aa_spread_estimate e;
  e.comparisons = comparisons.size();
  e.ratio_p95 = quantile(shifts, 0.95);
  e.half_width_median = median(half_widths);
  e.spread = quantile(reaches, 0.95);
  return e;
}

} // namespace

aa_spread_estimate aa_spread_from_ratios(std::span<const double> ratios) {
  require_positive(ratios, "aa_spread_from_ratios");
  std::vector<aa_comparison> comparisons;
  for (double r : ratios) {
    comparisons.push_back({r, r, r});
  }
  return estimate_spread(comparisons);
}

aa_spread_estimate aa_spread_from_runs(std::span<const aa_run> runs,
                                       const bootstrap_options& options) {
  std::vector<aa_comparison> comparisons;
  for (const auto& run : runs) {
    const auto ci = bootstrap_median_ratio(run.first, run.second, options);
    comparisons.push_back({ci.ratio, ci.low, ci.high});
  }
  return estimate_spread(comparisons);
}

aa_spread_estimate aa_spread_from_intervals(std::span<const ratio_interval> intervals) {
  std::vector<aa_comparison> comparisons;
  for (const auto& ci : intervals) {
    if (!(ci.ratio > 0 && ci.low <= ci.high)) {
      fail("aa_spread_from_intervals: ratio {} with interval [{}, {}]", ci.ratio, ci.low, ci.high);
    }
    comparisons.push_back({ci.ratio, ci.low, ci.high});
  }
  return estimate_spread(comparisons);
}

// ---- Suite figures -----------------------------------------------------------------------------

namespace {

void validate_outcomes(std::span<const task_outcome> tasks) {
  if (tasks.empty()) {
    fail("suite figures: no tasks");
  }
  for (const auto& t : tasks) {
    if (t.improved && !t.correct) {
      fail("suite figures: task {} is marked improved but not correct", t.task);
    }
    if (t.correct && !(std::isfinite(t.speedup) && t.speedup > 0)) {
      fail("suite figures: task {} is correct but its speedup is {}", t.task, t.speedup);
    }
  }
}

} // namespace

double fast_p(std::span<const task_outcome> tasks, double p) {
  validate_outcomes(tasks);
  const auto fast = std::count_if(tasks.begin(), tasks.end(), [p](const task_outcome& t) {
    return t.correct && t.speedup > p;
  });
  return static_cast<double>(fast) / static_cast<double>(tasks.size());
}

suite_figures summarize_suite(std::span<const task_outcome> tasks) {
  validate_outcomes(tasks);
  suite_figures f;
  f.tasks = tasks.size();
  std::vector<double> strict;
  std::vector<double> attempted;
  for (const auto& t : tasks) {
    strict.push_back(t.improved ? t.speedup : 1.0);
    if (t.correct) {
      attempted.push_back(t.speedup);
      ++f.correct;
    }
    if (t.improved) {
      ++f.improved;
    }
  }
  f.strict_geomean = geomean(strict);
  if (!attempted.empty()) {
    f.attempted_geomean = geomean(attempted);
  }
  f.fast_1_0 = fast_p(tasks, 1.0);
  f.fast_1_5 = fast_p(tasks, 1.5);
  return f;
}

// ---- Plausibility ------------------------------------------------------------------------------

plausibility check_roofline_floor(double measured, double floor) {
  if (!(std::isfinite(measured) && measured > 0) || !(std::isfinite(floor) && floor > 0)) {
    fail("check_roofline_floor: times must be positive and finite, got {} and {}", measured, floor);
  }
  plausibility r;
  r.floor_fraction = measured / floor;
  r.flagged = measured < floor;
  r.reason = r.flagged ? fmt::format("measured {:.4g} s is {:.1f}% of the roofline floor {:.4g} s: "
                                     "faster than the hardware allows, a bug or an exploit",
                                     measured, 100 * r.floor_fraction, floor)
                       : fmt::format("measured {:.4g} s is {:.1f}% of the roofline floor {:.4g} s",
                                     measured, 100 * r.floor_fraction, floor);
  return r;
}

} // namespace kb::stats
