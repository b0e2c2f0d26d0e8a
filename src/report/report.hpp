// Report primitives: one table model printed as markdown or CSV, and figures written as SVG text
// (a bar chart of values with intervals around a reference line, a log-log roofline chart). The
// data model is generic (labels, values, intervals, ceilings); what the values mean is the
// caller's business. No device and no external drawing library: the output is plain text that
// any browser or markdown viewer shows.
#pragma once

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
};

// Horizontal bars from 0, one row per bar in the given order, with a vertical reference line.
// The axis runs from 0 to the smallest of {1, 2, 2.5, 5} x 10^k at or above 1.05 times the
// largest value, interval end or reference; bars at or above the reference are drawn in one
// colour, those below it in another. Each bar is labelled with its value (two decimals) and
// value_suffix.
struct bar_chart {
  std::string title;
  std::string axis_label = "speedup (baseline time / candidate time)";
  std::vector<bar> bars;
  double reference = 1.0;
  std::string reference_label = "1.0x";
  std::string value_suffix = "x"; // appended to the value labels ("1.37x")
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

} // namespace kb::report
