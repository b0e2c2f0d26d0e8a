#include "common/error.hpp"
#include "report/report.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace kb::report {
namespace {

// Why `xml` is not well formed, or "" when it is, for the subset of XML the figures use: a prolog,
// elements with double-quoted attributes, text, and the five predefined entities.
std::string xml_problem(const std::string& xml) {
  static const std::regex tag_body(
      R"(^([A-Za-z][-A-Za-z0-9_:.]*)(\s+[A-Za-z_:][-A-Za-z0-9_:.]*="[^"<]*")*\s*(/?)$)");
  static const std::regex entity(R"(^&(amp|lt|gt|quot|apos);)");
  std::vector<std::string> open;
  bool root_closed = false;
  for (size_t i = 0; i < xml.size();) {
    if (xml[i] == '&') {
      if (!std::regex_search(xml.substr(i, 8), entity)) {
        return "bare & at " + std::to_string(i);
      }
      ++i;
      continue;
    }
    if (xml[i] != '<') {
      if (xml[i] == '>') {
        return "bare > at " + std::to_string(i);
      }
      if (root_closed && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return "text after the root element";
      }
      ++i;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) {
      return "unterminated tag at " + std::to_string(i);
    }
    const std::string body = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (body.starts_with("?xml") && body.ends_with("?")) {
      continue;
    }
    if (root_closed) {
      return "a second root element: <" + body + ">";
    }
    if (body.starts_with("/")) {
      if (open.empty() || open.back() != body.substr(1)) {
        return "</" + body.substr(1) + "> closes " +
               (open.empty() ? "nothing" : "<" + open.back() + ">");
      }
      open.pop_back();
      root_closed = open.empty();
      continue;
    }
    std::smatch m;
    if (!std::regex_match(body, m, tag_body)) {
      return "malformed tag <" + body + ">";
    }
    if (m[3].str().empty()) {
      open.push_back(m[1].str());
    } else if (open.empty()) {
      root_closed = true;
    }
  }
  if (!open.empty()) {
    return "<" + open.back() + "> is never closed";
  }
  return root_closed ? "" : "no root element";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(report_xml_check, rejects_what_is_not_well_formed) {
  EXPECT_EQ(xml_problem(R"(<svg a="1"><g><text x="1">a &amp; b</text></g></svg>)"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a < b</text></svg>"), "");
  EXPECT_NE(xml_problem(R"(<svg a="1></svg>)"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
  EXPECT_NE(xml_problem("<svg>"), "");
}

// ---- Tables -----------------------------------------------------------------------------------

TEST(report_table, markdown_columns_are_aligned) {
  table t({{"task", align::left}, {"speedup", align::right}, {"verdict", align::center}});
  t.add_row({"023 softmax", "1.37×", "improved"}); // "×" is 2 bytes and one column
  t.add_row({"a|b", "0.9×", "same"});
  EXPECT_EQ(to_markdown(t), "| task        | speedup | verdict  |\n"
                            "| :---------- | ------: | :------: |\n"
                            "| 023 softmax |   1.37× | improved |\n"
                            "| a\\|b        |    0.9× |   same   |\n");
  EXPECT_THROW(t.add_row({"too", "few"}), error);
}

TEST(report_table, markdown_of_narrow_columns_and_line_breaks) {
  table t({{"n", align::right}});
  t.add_row({"7"});
  t.add_row({"two\nlines"});
  EXPECT_EQ(to_markdown(t), "|         n |\n"
                            "| --------: |\n"
                            "|         7 |\n"
                            "| two lines |\n");
}

TEST(report_table, csv_quotes_as_rfc_4180_says) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field(""), "");
  table t({{"name"}, {"note, free text"}});
  t.add_row({"plain", "a,b"});
  t.add_row({"say \"hi\"", "line\nbreak"});
  t.add_row({"", "x"});
  EXPECT_EQ(to_csv(t), "name,\"note, free text\"\r\n"
                       "plain,\"a,b\"\r\n"
                       "\"say \"\"hi\"\"\",\"line\nbreak\"\r\n"
                       ",x\r\n");
}

// ---- Bar chart --------------------------------------------------------------------------------

TEST(report_bar_chart, well_formed_with_expected_labels_and_coordinates) {
  bar_chart chart;
  chart.title = "Core 10 speedups";
  chart.bars = {{"023 softmax", 2.0, interval{1.8, 2.3}},
                {"007 <matmul> & co", 0.5, std::nullopt},
                {"019", 1.5, interval{1.4, 1.6}}};
  const std::string svg = to_svg(chart);
  ASSERT_EQ(xml_problem(svg), "") << svg;
  // Default layout: plot from x = 180 to 800 - 70 = 730 (550 px), rows of 26 px from y = 40, so
  // the plot ends at 40 + 3 * 26 = 118 and the canvas at 118 + 50 = 168. The largest value is the
  // interval end 2.3; 1.05 * 2.3 = 2.415 rounds up to an axis of 0 .. 2.5, so v maps to
  // 180 + v / 2.5 * 550.
  EXPECT_NE(svg.find(R"(width="800.00" height="168.00")"), std::string::npos);
  EXPECT_NE(
      svg.find(R"(<rect x="180.00" y="44.00" width="440.00" height="18.00" fill="#3b7dd8"/>)"),
      std::string::npos);
  EXPECT_NE(
      svg.find(R"(<rect x="180.00" y="70.00" width="110.00" height="18.00" fill="#d9822b"/>)"),
      std::string::npos);
  EXPECT_NE(svg.find(R"(<line x1="576.00" y1="53.00" x2="686.00" y2="53.00")"),
            std::string::npos); // [1.8, 2.3]
  EXPECT_NE(svg.find(R"(<line x1="400.00" y1="36.00" x2="400.00" y2="118.00")"),
            std::string::npos); // 1.0x
  EXPECT_NE(svg.find(">1.0x</text>"), std::string::npos);
  EXPECT_NE(svg.find(">023 softmax</text>"), std::string::npos);
  EXPECT_NE(svg.find(">007 &lt;matmul&gt; &amp; co</text>"), std::string::npos);
  EXPECT_NE(svg.find(">2.00x</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0.50x</text>"), std::string::npos);
  EXPECT_NE(svg.find(">2.5</text>"), std::string::npos); // last tick
  EXPECT_NE(svg.find(">Core 10 speedups</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect "), 4u);             // the background and three bars
  EXPECT_EQ(count(svg, "stroke=\"#111111\""), 6u); // two error bars of three strokes each
}

TEST(report_bar_chart, named_series_colour_their_bars_and_get_a_legend) {
  bar_chart chart;
  chart.title = "Evaluations";
  chart.reference = 10;
  chart.series = {"without memory", "with memory"};
  chart.bars = {{"004 without memory", 4.0, std::nullopt, 0},
                {"004 with memory", 12.0, std::nullopt, 1}};
  const std::string svg = to_svg(chart);
  ASSERT_EQ(xml_problem(svg), "") << svg;
  // Two rows end the plot at 40 + 2 * 26 = 92; the legend adds 24 below the 50 of the axis.
  EXPECT_NE(svg.find(R"(width="800.00" height="166.00")"), std::string::npos);
  // Colours follow the series, not the reference: the first bar is below 10, the second above.
  EXPECT_NE(svg.find(R"(y="44.00" width="110.00" height="18.00" fill="#d9822b"/>)"),
            std::string::npos); // 4 of an axis of 20 over 550 px
  EXPECT_NE(svg.find(R"(y="70.00" width="330.00" height="18.00" fill="#3b7dd8"/>)"),
            std::string::npos);
  EXPECT_NE(svg.find(">without memory</text>"), std::string::npos);
  EXPECT_NE(svg.find(">with memory</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect "), 5u); // the background, two bars, two legend swatches
  chart.bars[1].series = 2;
  EXPECT_THROW(to_svg(chart), error);
}

TEST(report_bar_chart, rejects_invalid_data) {
  EXPECT_THROW(to_svg(bar_chart{}), error);
  bar_chart negative;
  negative.bars = {{"x", -1.0, std::nullopt}};
  EXPECT_THROW(to_svg(negative), error);
  bar_chart reversed;
  reversed.bars = {{"x", 1.0, interval{1.2, 0.8}}};
  EXPECT_THROW(to_svg(reversed), error);
}

// ---- Roofline chart ---------------------------------------------------------------------------

TEST(report_roofline, well_formed_with_expected_labels_and_coordinates) {
  roofline_chart chart;
  chart.title = "Roofline";
  chart.bandwidth = {{"HBM 1 TB/s", 1e12}};
  chart.compute = {{"fp32 100 TFLOP/s", 1e14}};
  chart.points = {{"softmax", 1.0, 5e11}, {"matmul", 1000.0, 5e13}};
  const std::string svg = to_svg(chart);
  ASSERT_EQ(xml_problem(svg), "") << svg;
  // x: intensities 1 and 1000 and the ridge 1e14 / 1e12 = 100 span the decades 0.1 .. 1e4 over
  // the 680 px from 90 to 770. y: 5e11 .. 1e14 span 1e11 .. 1e15 over the 460 px from 500 up to 40.
  // softmax: x = 90 + 1/5 * 680 = 226, y = 500 - (log10(5e11) - 11) / 4 * 460 = 419.62.
  EXPECT_NE(svg.find(R"(<circle cx="226.00" cy="419.62" r="4.00")"), std::string::npos);
  // matmul: x = 90 + 4/5 * 680 = 634, y = 500 - (log10(5e13) - 11) / 4 * 460 = 189.62.
  EXPECT_NE(svg.find(R"(<circle cx="634.00" cy="189.62" r="4.00")"), std::string::npos);
  // Bandwidth ceiling from (0.1, 1e11), the plot's corner, to the ridge (100, 1e14).
  EXPECT_NE(svg.find(R"(<line x1="90.00" y1="500.00" x2="498.00" y2="155.00" stroke="#b22222")"),
            std::string::npos);
  // Compute ceiling from the ridge to the right edge.
  EXPECT_NE(svg.find(R"(<line x1="498.00" y1="155.00" x2="770.00" y2="155.00" stroke="#b22222")"),
            std::string::npos);
  for (const char* label :
       {">softmax</text>", ">matmul</text>", ">HBM 1 TB/s</text>", ">fp32 100 TFLOP/s</text>",
        ">0.1</text>", ">10000</text>", ">100 G</text>", ">1 T</text>", ">1 P</text>",
        "<title>softmax: 1 FLOP/byte, 5e+11 FLOP/s</title>"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_EQ(count(svg, "<circle "), 2u);
}

TEST(report_roofline, without_a_compute_ceiling_the_bandwidth_line_runs_to_the_top) {
  roofline_chart chart;
  chart.bandwidth = {{"HBM", 1e12}};
  chart.points = {{"k", 10.0, 1e12}};
  const std::string svg = to_svg(chart);
  ASSERT_EQ(xml_problem(svg), "") << svg;
  // x: 1 .. 100 (680 px), y: 1e11 .. 1e13 (460 px): the line leaves the plot at (10, 1e13).
  EXPECT_NE(svg.find(R"(x2="430.00" y2="40.00" stroke="#b22222")"), std::string::npos) << svg;
}

TEST(report_roofline, rejects_invalid_data) {
  EXPECT_THROW(to_svg(roofline_chart{}), error);
  roofline_chart zero;
  zero.points = {{"k", 0.0, 1e12}};
  EXPECT_THROW(to_svg(zero), error);
}

} // namespace
} // namespace kb::report
