#include "report/report.hpp"

#include "common/error.hpp"
#include "report/detail/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kb::report {
namespace {

using detail::px;
using detail::svg_document;

constexpr std::string_view title_style = R"(font-size="15" font-weight="bold")";
constexpr std::string_view grid_style = R"(stroke="#dddddd" stroke-width="1")";
constexpr std::string_view axis_style = R"(stroke="#444444" stroke-width="1")";
constexpr std::string_view reference_style =
    R"(stroke="#222222" stroke-width="1.5" stroke-dasharray="6 4")";
constexpr std::string_view error_bar_style = R"(stroke="#111111" stroke-width="1.5")";
constexpr std::string_view faster_fill = R"(fill="#3b7dd8")";
constexpr std::string_view slower_fill = R"(fill="#d9822b")";
// Fills of the named series of a bar chart, in order.
constexpr std::string_view series_fills[] = {R"(fill="#d9822b")", R"(fill="#3b7dd8")",
                                             R"(fill="#6a9f3a")", R"(fill="#8e5ab5")"};
constexpr double legend_height = 24;
constexpr std::string_view ceiling_style = R"(stroke="#b22222" stroke-width="2")";
constexpr std::string_view point_style = R"(fill="#3b7dd8" stroke="#1b4d98" stroke-width="1")";
constexpr std::string_view anchor_end = R"(text-anchor="end")";
constexpr std::string_view anchor_middle = R"(text-anchor="middle")";

void require_finite(double v, bool allow_zero, std::string_view what) {
  if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0)) {
    fail("{} must be {} and finite, got {}", what, allow_zero ? "non-negative" : "positive", v);
  }
}

// The smallest of {1, 2, 2.5, 5} x 10^k at or above v (v > 0).
double nice_ceiling(double v) {
  const double decade = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * decade >= v) {
      return m * decade;
    }
  }
  return 10 * decade;
}

// log10, snapped to the integer when within rounding of one, so exact powers of ten land on
// their decade.
double decade_log(double v) {
  const double l = std::log10(v);
  const double r = std::round(l);
  return std::fabs(l - r) < 1e-9 ? r : l;
}

// Whole decades from the one below the smallest value to the one above the largest.
struct log_axis {
  double lo = 0; // log10 of the axis start
  double hi = 0; // log10 of the axis end

  static log_axis spanning(const std::vector<double>& values) {
    const auto [smallest, largest] = std::minmax_element(values.begin(), values.end());
    return {std::ceil(decade_log(*smallest)) - 1, std::floor(decade_log(*largest)) + 1};
  }
  double fraction(double v) const { return (std::log10(v) - lo) / (hi - lo); }
  double at(int k) const { return std::pow(10.0, k); }
};

// A decade value with an SI prefix: 1e12 -> "1 T", 1e11 -> "100 G".
std::string si(double v) {
  static constexpr const char* prefixes[] = {"", " k", " M", " G", " T", " P", " E"};
  const int group = std::clamp(static_cast<int>(std::floor(decade_log(v) / 3)), 0, 6);
  return fmt::format("{:g}{}", v / std::pow(1000.0, group), prefixes[group]);
}

} // namespace

std::string to_svg(const bar_chart& chart) {
  if (chart.bars.empty()) {
    fail("bar chart: no bars");
  }
  require_finite(chart.reference, false, "bar chart: the reference");
  if (chart.series.size() > std::size(series_fills)) {
    fail("bar chart: {} series, at most {}", chart.series.size(), std::size(series_fills));
  }
  double largest = chart.reference;
  for (const auto& b : chart.bars) {
    if (!chart.series.empty() && b.series >= chart.series.size()) {
      fail("bar chart: {} is in series {} of {}", b.label, b.series, chart.series.size());
    }
    require_finite(b.value, true, fmt::format("bar chart: the value of {}", b.label));
    largest = std::max(largest, b.value);
    if (b.range) {
      require_finite(b.range->low, true, fmt::format("bar chart: the interval of {}", b.label));
      require_finite(b.range->high, true, fmt::format("bar chart: the interval of {}", b.label));
      if (b.range->low > b.range->high) {
        fail("bar chart: the interval of {} is [{}, {}]", b.label, b.range->low, b.range->high);
      }
      largest = std::max(largest, b.range->high);
    }
  }
  const auto& l = chart.layout;
  const double left = l.label_width;
  const double right = l.width - l.right_margin;
  const double top = l.top_margin;
  const double bottom = top + static_cast<double>(chart.bars.size()) * l.row_height;
  const double x_max = nice_ceiling(1.05 * largest);
  auto x = [&](double v) { return left + v / x_max * (right - left); };

  const bool legend = !chart.series.empty();
  svg_document svg(l.width, bottom + l.bottom_margin + (legend ? legend_height : 0));
  svg.text(left, top - 16, chart.title, title_style);
  constexpr int ticks = 5;
  for (int i = 0; i <= ticks; ++i) {
    const double v = x_max * i / ticks;
    svg.line(x(v), top, x(v), bottom, grid_style);
    svg.text(x(v), bottom + 16, fmt::format("{:g}", v), anchor_middle);
  }
  svg.line(left, bottom, right, bottom, axis_style);
  svg.text((left + right) / 2, bottom + 38, chart.axis_label, anchor_middle);

  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const auto& b = chart.bars[i];
    const double row_top = top + static_cast<double>(i) * l.row_height;
    const double middle = row_top + l.row_height / 2;
    svg.rect(x(0), row_top + 4, x(b.value) - x(0), l.row_height - 8,
             legend ? series_fills[b.series]
                    : (b.value >= chart.reference ? faster_fill : slower_fill));
    svg.text(left - 8, middle + 4, b.label, anchor_end);
    double label_at = b.value;
    if (b.range) {
      const double lo = x(b.range->low);
      const double hi = x(b.range->high);
      svg.line(lo, middle, hi, middle, error_bar_style);
      svg.line(lo, middle - 5, lo, middle + 5, error_bar_style);
      svg.line(hi, middle - 5, hi, middle + 5, error_bar_style);
      label_at = std::max(label_at, b.range->high);
    }
    svg.text(x(label_at) + 6, middle + 4, fmt::format("{:.2f}{}", b.value, chart.value_suffix));
  }
  svg.line(x(chart.reference), top - 4, x(chart.reference), bottom, reference_style);
  svg.text(x(chart.reference), top - 6, chart.reference_label, anchor_middle);
  double legend_x = left;
  const double legend_y = bottom + l.bottom_margin + 4;
  for (size_t k = 0; legend && k < chart.series.size(); ++k) {
    svg.rect(legend_x, legend_y, 12, 12, series_fills[k]);
    svg.text(legend_x + 18, legend_y + 11, chart.series[k]);
    legend_x += 30 + 7.0 * static_cast<double>(chart.series[k].size());
  }
  return svg.finish();
}

std::string to_svg(const roofline_chart& chart) {
  if (chart.points.empty()) {
    fail("roofline chart: no points");
  }
  std::vector<double> xs;
  std::vector<double> ys;
  for (const auto& p : chart.points) {
    require_finite(p.intensity, false, fmt::format("roofline chart: the intensity of {}", p.label));
    require_finite(p.performance, false,
                   fmt::format("roofline chart: the performance of {}", p.label));
    xs.push_back(p.intensity);
    ys.push_back(p.performance);
  }
  for (const auto& c : chart.bandwidth) {
    require_finite(c.value, false, fmt::format("roofline chart: ceiling {}", c.label));
  }
  for (const auto& c : chart.compute) {
    require_finite(c.value, false, fmt::format("roofline chart: ceiling {}", c.label));
    ys.push_back(c.value);
    for (const auto& b : chart.bandwidth) {
      xs.push_back(c.value / b.value);
    }
  }
  const auto x_axis = log_axis::spanning(xs);
  const auto y_axis = log_axis::spanning(ys);
  const auto& l = chart.layout;
  const double left = l.margin_left;
  const double right = l.width - l.margin_right;
  const double top = l.margin_top;
  const double bottom = l.height - l.margin_bottom;
  auto x = [&](double v) { return left + x_axis.fraction(v) * (right - left); };
  auto y = [&](double v) { return bottom - y_axis.fraction(v) * (bottom - top); };
  const double x_lo = std::pow(10.0, x_axis.lo);
  const double x_hi = std::pow(10.0, x_axis.hi);
  const double y_lo = std::pow(10.0, y_axis.lo);
  const double y_hi = std::pow(10.0, y_axis.hi);

  svg_document svg(l.width, l.height);
  svg.text(left, top - 16, chart.title, title_style);
  for (int k = static_cast<int>(x_axis.lo); k <= static_cast<int>(x_axis.hi); ++k) {
    svg.line(x(x_axis.at(k)), top, x(x_axis.at(k)), bottom, grid_style);
    svg.text(x(x_axis.at(k)), bottom + 16, fmt::format("{:g}", x_axis.at(k)), anchor_middle);
  }
  for (int k = static_cast<int>(y_axis.lo); k <= static_cast<int>(y_axis.hi); ++k) {
    svg.line(left, y(y_axis.at(k)), right, y(y_axis.at(k)), grid_style);
    svg.text(left - 6, y(y_axis.at(k)) + 4, si(y_axis.at(k)), anchor_end);
  }
  svg.rect(left, top, right - left, bottom - top,
           R"(fill="none" stroke="#444444" stroke-width="1")");
  svg.text((left + right) / 2, bottom + 38, "arithmetic intensity [FLOP/byte]", anchor_middle);
  const double y_label_x = left - 62;
  const double y_label_y = (top + bottom) / 2;
  svg.text(y_label_x, y_label_y, "performance [FLOP/s]",
           fmt::format(R"svg(text-anchor="middle" transform="rotate(-90 {} {})")svg", px(y_label_x),
                       px(y_label_y)));

  // Without a compute ceiling a bandwidth line runs to the top of the plot.
  double top_compute = chart.compute.empty() ? y_hi : 0;
  for (const auto& c : chart.compute) {
    top_compute = std::max(top_compute, c.value);
  }
  double top_bandwidth = 0;
  for (const auto& b : chart.bandwidth) {
    top_bandwidth = std::max(top_bandwidth, b.value);
  }

  for (const auto& b : chart.bandwidth) {
    const double from = std::max(x_lo, y_lo / b.value);
    const double to = std::min(x_hi, std::min(y_hi, top_compute) / b.value);
    if (from >= to) {
      continue;
    }
    svg.line(x(from), y(b.value * from), x(to), y(b.value * to), ceiling_style);
    const double angle =
        std::atan2(y(b.value * to) - y(b.value * from), x(to) - x(from)) * 180 / std::numbers::pi;
    const double label_x = x(from) + 0.15 * (x(to) - x(from));
    const double label_y = y(b.value * from) + 0.15 * (y(b.value * to) - y(b.value * from)) - 6;
    svg.text(label_x, label_y, b.label,
             fmt::format(R"svg(fill="#b22222" transform="rotate({:.2f} {} {})")svg", angle,
                         px(label_x), px(label_y)));
  }
  for (const auto& c : chart.compute) {
    const double from = top_bandwidth > 0 ? std::max(x_lo, c.value / top_bandwidth) : x_lo;
    if (from >= x_hi) {
      continue;
    }
    svg.line(x(from), y(c.value), x(x_hi), y(c.value), ceiling_style);
    svg.text(x(x_hi) - 4, y(c.value) - 6, c.label, R"(fill="#b22222" text-anchor="end")");
  }
  for (const auto& p : chart.points) {
    svg.circle(
        x(p.intensity), y(p.performance), 4,
        fmt::format("{}: {:.3g} FLOP/byte, {:.3g} FLOP/s", p.label, p.intensity, p.performance),
        point_style);
    svg.text(x(p.intensity) + 7, y(p.performance) - 7, p.label);
  }
  return svg.finish();
}

} // namespace kb::report
