// Report primitives: one table model printed as markdown or CSV, and figures written as SVG text
// (a bar chart of values with intervals around a reference line, a log-log roofline chart). The
// data model is generic (labels, values, intervals, ceilings); what the values mean is the
// caller's business. No device and no external drawing library: the output is plain text that
// any browser or markdown viewer shows.
#pragma once

#include "common/names.hpp"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::report {

// ---- Tables -----------------------------------------------------------------------------------

enum class align { left, right, center };

struct column {
  std::string header;
  align alignment = align::left;
};

class table {
public:
  explicit table(std::vector<column> columns);
  // Throws kb::error when the row has a different number of cells than there are columns.
  void add_row(std::vector<std::string> cells);

  const std::vector<column>& columns() const { return m_columns; }
  const std::vector<std::vector<std::string>>& rows() const { return m_rows; }

private:
  std::vector<column> m_columns;
  std::vector<std::vector<std::string>> m_rows;
};

// GitHub-flavoured markdown with every column padded to its widest cell (width counted in UTF-8
// code points), so the source reads as a table too. A '|' in a cell is escaped as "\|" and a line
// break becomes a space; the delimiter row carries the alignment (":--", "--:", ":-:").
std::string to_markdown(const table& t);

// RFC 4180: the header line then one line per row, fields separated by commas, every line ended
// by CRLF. A field holding a comma, a double quote, CR or LF is enclosed in double quotes, its
// double quotes doubled.
std::string to_csv(const table& t);
std::string csv_field(std::string_view field);

// ---- Figures ----------------------------------------------------------------------------------

struct interval {
  double low = 0;
  double high = 0;
};

// Sizes of a bar chart [px]. Its height follows from the number of bars:
// top_margin + bars * row_height + bottom_margin.
struct bar_chart_layout {
  double width = 800;
  double label_width = 180;  // left of the plot: the bar labels
  double right_margin = 70;  // right of the plot: room for the value labels
  double top_margin = 40;    // the title
  double bottom_margin = 50; // the axis and its label
  double row_height = 26;
};

struct bar {
  std::string label;
  double value = 0;              // >= 0
  std::optional<interval> range; // drawn as an error bar
  size_t series = 0;             // index into bar_chart::series, where the chart names series
};

// Horizontal bars from 0, one row per bar in the given order, with a vertical reference line.
// The axis runs from 0 to the smallest of {1, 2, 2.5, 5} x 10^k at or above 1.05 times the
// largest value, interval end or reference; bars at or above the reference are drawn in one
// colour, those below it in another, unless the chart names series: then each bar takes its
// series' colour and a legend below the axis names them. Each bar is labelled with its value
// (two decimals) and value_suffix.
struct bar_chart {
  std::string title;
  std::string axis_label = "speedup (baseline time / candidate time)";
  std::vector<bar> bars;
  double reference = 1.0;
  std::string reference_label = "1.0x";
  std::string value_suffix = "x";  // appended to the value labels ("1.37x")
  std::vector<std::string> series; // names of the bars' series (at most 4); empty: none
  bar_chart_layout layout;
};
std::string to_svg(const bar_chart& chart);

// Sizes of a roofline chart [px]; the plot area is the canvas less the margins.
struct plot_layout {
  double width = 800;
  double height = 560;
  double margin_left = 90;
  double margin_right = 30;
  double margin_top = 40;
  double margin_bottom = 60;
};

struct ceiling {
  std::string label;
  double value = 0; // [bytes/s] for a bandwidth ceiling, [FLOP/s] for a compute ceiling
};

struct roofline_point {
  std::string label;
  double intensity = 0;   // [FLOP/byte]
  double performance = 0; // [FLOP/s] achieved
};

// Log-log: arithmetic intensity against achieved FLOP/s. A bandwidth ceiling b is the line
// y = b x up to the highest compute ceiling; a compute ceiling c is the line y = c from where it
// meets the highest bandwidth ceiling. Each axis spans whole decades, from the one below its
// smallest value to the one above its largest (x: the points and the ridge points c / b; y: the
// points and the compute ceilings), so no point sits on the frame. At least one point.
struct roofline_chart {
  std::string title;
  std::vector<ceiling> bandwidth;
  std::vector<ceiling> compute;
  std::vector<roofline_point> points;
  plot_layout layout;
};
std::string to_svg(const roofline_chart& chart);

// ---- Comparison with PyTorch --------------------------------------------------------------------

// How a PyTorch method ran: eager code, or torch.compile with the graphs Dynamo captured. A
// compiled method with no graph or a graph break ran (partly) eagerly: not_compiled.
enum class compile_status { eager, compiled, not_compiled };
inline constexpr auto compile_status_names =
    name_table<compile_status>({{compile_status::eager, "eager"},
                                {compile_status::compiled, "compiled"},
                                {compile_status::not_compiled, "not_compiled"}});
static_assert(compile_status_names.well_formed());
std::string_view to_string(compile_status s);

// One PyTorch method at one task and shape, as scripts/pytorch_baselines.py measured it.
struct pytorch_method {
  std::string name;
  bool correct = false;
  bool stable = true; // the provider's samples did not scatter (reported; does not exclude)
  compile_status compile = compile_status::eager;
  int graphs = 0;       // compiled methods only
  int graph_breaks = 0; // compiled methods only
  std::string reason;   // why incorrect or not compiled
  std::optional<double> median_s;
  std::optional<interval> ci_s;
  std::optional<double> unqueued_median_s; // one call from Python, launch overhead included
};

// The provider's methods of one task and shape ({method: {...}}); an object that is not one is
// an error (kb::error) naming the method.
std::vector<pytorch_method> pytorch_methods_from_json(const nlohmann::json& methods);

// Eligible for "fastest": correct, timed and not `not_compiled`. A method whose samples scatter
// (stable = false) still counts: its median is its typical time, and leaving it out would compare
// us with a slower method (a few stray samples among thousands make the scatter). The fastest
// eligible method, or none.
bool eligible_for_fastest(const pytorch_method& m);
std::optional<size_t> fastest_method(const std::vector<pytorch_method>& methods);

// One task (at one shape): our kernel against the fastest PyTorch method and against eager.
struct task_comparison {
  std::string task;
  bool correct = false; // our kernel passed verification and was timed
  double candidate_s = 0;
  interval candidate_ci;
  // The judge's timing resolution for this evaluation [s] (stats' resolution_s: a sample is the
  // window less the scheme's calibrated overhead, so a median is known to about this much in
  // absolute terms); 0: unknown.
  double resolution_s = 0;
  std::optional<std::string> fastest_method;
  double fastest_s = 0;
  interval fastest_ci;
  std::optional<double> eager_s;
  // The task's floor at this shape [s] (task::floor_seconds: its bytes at the measured copy rate
  // or its FLOPs at the peak); 0: unknown.
  double floor_s = 0;
};

// A ratio to PyTorch counts as measured only when our median is at least this many times the
// timing resolution, so that the resolution moves it by at most 1 / resolved_multiple (10%).
// Below it the kernel's time is of the order of what the window-less-overhead scheme can
// resolve (launch-bound shapes: microseconds): the ratio is printed, marked, and left out of the
// "resolved" geometric means and of the goals.
inline constexpr double resolved_multiple = 10;
bool resolved(const task_comparison& t);

// The comparison of one task and shape from its parts: our kernel's median and interval (when
// correct), the timing resolution, the task's floor (0: unknown), and the PyTorch provider's
// methods at that task and shape (the fastest eligible one, and eager when correct and timed).
task_comparison compare_task(std::string task, bool correct, double candidate_s,
                             interval candidate_ci, double resolution_s, double floor_s,
                             const std::vector<pytorch_method>& methods);

// Speedup = PyTorch time / our time, with the interval that the two medians' intervals allow
// ([fastest low / ours high, fastest high / ours low]). None when either side is missing.
struct ratio {
  double value = 0;
  interval range;
};
std::optional<ratio> speedup_vs_fastest(const task_comparison& t);
std::optional<double> speedup_vs_eager(const task_comparison& t);

// The speedup over the fastest method that a kernel running at the task's floor would have:
// fastest / floor, what is left to win there. Not a strict bound (a read-mostly kernel can
// stream faster than the copy rate the floor counts). None without a fastest method or a floor.
std::optional<double> speedup_at_floor(const task_comparison& t);

// Over ALL tasks given: fast_p is the share of every task that is correct, has a fastest PyTorch
// method and a speedup above p (an incorrect task or one without PyTorch figures counts as not
// fast). The geometric means run over the tasks where both sides exist; their counts say over
// how many. The `resolved` ones run over those of them whose median is resolved (`resolved`).
struct suite_comparison {
  size_t tasks = 0;
  size_t correct = 0;
  size_t with_fastest = 0;
  size_t with_eager = 0;
  size_t below_resolution = 0; // correct tasks whose median is not resolved
  size_t with_fastest_resolved = 0;
  size_t with_eager_resolved = 0;
  double fast_1_0_vs_fastest = 0;
  double fast_1_5_vs_fastest = 0;
  double fast_1_0_vs_eager = 0;
  std::optional<double> geomean_vs_fastest;
  std::optional<double> geomean_vs_eager;
  std::optional<double> geomean_vs_fastest_resolved;
  std::optional<double> geomean_vs_eager_resolved;
  // speedup_at_floor's geometric mean over the tasks of geomean_vs_fastest (and of its resolved
  // one) that have a floor: the most those means could reach with every kernel at its floor.
  std::optional<double> geomean_vs_fastest_at_floor;
  std::optional<double> geomean_vs_fastest_at_floor_resolved;
};
suite_comparison compare_suite(const std::vector<task_comparison>& tasks);

// The goals: a geometric mean at or above `goal` over every task (each with the PyTorch figure,
// none below the resolution), or over the resolved tasks alone (at least one).
struct goal_check {
  bool met = false;          // over every task
  bool met_resolved = false; // over the resolved tasks
};
goal_check check_goal_vs_fastest(const suite_comparison& s, double goal);
goal_check check_goal_vs_eager(const suite_comparison& s, double goal);

nlohmann::json to_json(const suite_comparison& s);

} // namespace kb::report
