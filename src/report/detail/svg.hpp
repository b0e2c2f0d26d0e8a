// A minimal SVG writer: elements appended as text, attribute values and text escaped for XML,
// coordinates printed with two decimals so output is stable and comparable.
#pragma once

#include <string>
#include <string_view>

namespace kb::report::detail {

std::string xml_escape(std::string_view s);
// A coordinate or length [px] as written into the document: fixed, two decimals.
std::string px(double v);

class svg_document {
public:
  svg_document(double width, double height); // [px]

  // `attributes` are written verbatim after the geometry: the caller's constant styling.
  void line(double x1, double y1, double x2, double y2, std::string_view attributes);
  void rect(double x, double y, double width, double height, std::string_view attributes);
  // A circle with a tooltip (<title>).
  void circle(double cx, double cy, double r, std::string_view tooltip,
              std::string_view attributes);
  void text(double x, double y, std::string_view content, std::string_view attributes = {});

  std::string finish();

private:
  std::string m_out;
};

} // namespace kb::report::detail
