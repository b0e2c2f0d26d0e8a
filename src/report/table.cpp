#include "report/report.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace kb::report {
namespace {

// Width of a cell as a reader sees it: UTF-8 code points, not bytes.
size_t display_width(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

std::string markdown_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string pad(const std::string& s, size_t width, align a) {
  const size_t fill = width - std::min(width, display_width(s));
  switch (a) {
  case align::left:
    return s + std::string(fill, ' ');
  case align::right:
    return std::string(fill, ' ') + s;
  case align::center:
    return std::string(fill / 2, ' ') + s + std::string(fill - fill / 2, ' ');
  }
  return s;
}

std::string delimiter(size_t width, align a) {
  std::string d(width, '-');
  if (a != align::right) {
    d.front() = ':';
  }
  if (a != align::left) {
    d.back() = ':';
  }
  return d;
}

std::string markdown_line(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const auto& c : cells) {
    line.append(" ").append(c).append(" |");
  }
  return line + "\n";
}

} // namespace

table::table(std::vector<column> columns) : m_columns(std::move(columns)) {
  if (m_columns.empty()) {
    fail("table: no columns");
  }
}

void table::add_row(std::vector<std::string> cells) {
  if (cells.size() != m_columns.size()) {
    fail("table: a row of {} cells in a table of {} columns", cells.size(), m_columns.size());
  }
  m_rows.push_back(std::move(cells));
}

std::string to_markdown(const table& t) {
  const auto& columns = t.columns();
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  // Three characters is the narrowest delimiter that can carry any alignment (":-:").
  std::vector<size_t> widths(columns.size(), 3);
  for (size_t i = 0; i < columns.size(); ++i) {
    headers.push_back(markdown_cell(columns[i].header));
    widths[i] = std::max(widths[i], display_width(headers[i]));
  }
  for (const auto& row : t.rows()) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < row.size(); ++i) {
      cells.push_back(markdown_cell(row[i]));
      widths[i] = std::max(widths[i], display_width(cells[i]));
    }
    rows.push_back(std::move(cells));
  }
  auto padded = [&](std::vector<std::string> cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      cells[i] = pad(cells[i], widths[i], columns[i].alignment);
    }
    return cells;
  };
  std::string out = markdown_line(padded(headers));
  std::vector<std::string> delimiters;
  for (size_t i = 0; i < columns.size(); ++i) {
    delimiters.push_back(delimiter(widths[i], columns[i].alignment));
  }
  out += markdown_line(delimiters);
  for (auto& row : rows) {
    out += markdown_line(padded(std::move(row)));
  }
  return out;
}

std::string csv_field(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    return std::string(field);
  }
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') {
      out += '"';
    }
    out += c;
  }
  return out + "\"";
}

std::string to_csv(const table& t) {
  auto line = [](const auto& cells, auto field_of) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      out += csv_field(field_of(cells[i]));
    }
    return out + "\r\n";
  };
  std::string out =
      line(t.columns(), [](const column& c) -> const std::string& { return c.header; });
  for (const auto& row : t.rows()) {
    out += line(row, [](const std::string& s) -> const std::string& { return s; });
  }
  return out;
}

} // namespace kb::report
