#include "report/detail/svg.hpp"

#include <fmt/format.h>

namespace kb::report::detail {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string px(double v) {
  return fmt::format("{:.2f}", v);
}

svg_document::svg_document(double width, double height) {
  m_out = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                      px(width), px(height));
  rect(0, 0, width, height, R"(fill="white")");
}

void svg_document::line(double x1, double y1, double x2, double y2, std::string_view attributes) {
  m_out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>\n", px(x1), px(y1),
                       px(x2), px(y2), attributes);
}

void svg_document::rect(double x, double y, double width, double height,
                        std::string_view attributes) {
  m_out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {}/>\n", px(x), px(y),
                       px(width), px(height), attributes);
}

void svg_document::circle(double cx, double cy, double r, std::string_view tooltip,
                          std::string_view attributes) {
  m_out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {}><title>{}</title></circle>\n",
                       px(cx), px(cy), px(r), attributes, xml_escape(tooltip));
}

void svg_document::text(double x, double y, std::string_view content, std::string_view attributes) {
  m_out += fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>\n", px(x), px(y),
                       attributes.empty() ? "" : " ", attributes, xml_escape(content));
}

std::string svg_document::finish() {
  return std::move(m_out) + "</svg>\n";
}

} // namespace kb::report::detail
