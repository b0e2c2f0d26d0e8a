// Reading `ncu --csv --page raw --print-units base`: a header row of column names (identity
// columns, then one per metric), a units row (empty under the identity columns), then one row
// per profiled kernel. Every field is quoted; numbers carry thousands separators ("1,234,567");
// some values are text ("n/a", "(256, 1, 1)", the kernel's name). ncu's own messages
// ("==PROF==", "==WARNING==", "==ERROR==") and whatever the profiled process printed share the
// stream, so only rows of the header's width count.
#include "profile/profile.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>

namespace kb::profile {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
    s.remove_suffix(1);
  }
  return s;
}

// One CSV record on one line (ncu never puts a line break inside a field). Quoted fields may hold
// commas and doubled quotes. nullopt for a line that is not well-formed CSV.
std::optional<std::vector<std::string>> split_csv(std::string_view line) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    std::string field;
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) {
          return std::nullopt;
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      fields.push_back(std::move(field));
      if (i == line.size()) {
        return fields;
      }
      if (line[i] != ',') {
        return std::nullopt;
      }
      ++i;
    } else {
      const size_t comma = line.find(',', i);
      if (comma == std::string_view::npos) {
        fields.emplace_back(line.substr(i));
        return fields;
      }
      fields.emplace_back(line.substr(i, comma - i));
      i = comma + 1;
    }
  }
}

// Prefixes Nsight Compute puts on the units it scales.
std::optional<double> prefix_factor(char c) {
  switch (c) {
  case 'n':
    return 1e-9;
  case 'u':
    return 1e-6;
  case 'm':
    return 1e-3;
  case 'K':
  case 'k':
    return 1e3;
  case 'M':
    return 1e6;
  case 'G':
    return 1e9;
  case 'T':
    return 1e12;
  case 'P':
    return 1e15;
  default:
    return std::nullopt;
  }
}

std::pair<double, std::string> scale_part(std::string_view part) {
  static const std::vector<std::string_view> scalable{"second", "byte", "hz",
                                                      "cycle",  "flop", "inst"};
  if (part == "s") {
    return {1.0, "second"};
  }
  if (part == "ns" || part == "us" || part == "ms") {
    return {*prefix_factor(part[0]), "second"};
  }
  if (part == "Hz") {
    return {1.0, "hz"};
  }
  if (std::find(scalable.begin(), scalable.end(), part) != scalable.end()) {
    return {1.0, std::string(part)};
  }
  if (part.size() > 1) {
    const auto rest = part.substr(1);
    const auto f = prefix_factor(part[0]);
    if (f &&
        (std::find(scalable.begin(), scalable.end(), rest) != scalable.end() || rest == "Hz")) {
      return {*f, rest == "Hz" ? "hz" : std::string(rest)};
    }
  }
  return {1.0, std::string(part)};
}

} // namespace

std::optional<double> parse_number(std::string_view text) {
  static const std::regex number(R"(^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?$)");
  const auto t = trim(text);
  if (t.empty() || !std::regex_match(t.begin(), t.end(), number)) {
    return std::nullopt;
  }
  std::string digits;
  for (char c : t) {
    if (c != ',' && c != '+') {
      digits += c;
    }
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

std::pair<double, std::string> si_scale(std::string_view unit) {
  const auto u = trim(unit);
  if (u.empty()) {
    return {1.0, ""};
  }
  double factor = 1.0;
  std::string out;
  size_t start = 0;
  bool denominator = false;
  while (start <= u.size()) {
    const size_t slash = u.find('/', start);
    const auto part =
        u.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    const auto [f, base] = scale_part(part);
    factor = denominator ? factor / f : factor * f;
    out += (denominator ? "/" : "") + base;
    if (slash == std::string_view::npos) {
      break;
    }
    denominator = true;
    start = slash + 1;
  }
  return {factor, out};
}

std::optional<double> metric::si() const {
  if (!value) {
    return std::nullopt;
  }
  return *value * si_scale(unit).first;
}

std::string kernel_row::kernel_name() const {
  const metric* m = find("Kernel Name");
  return m != nullptr ? m->text : "";
}

const metric* kernel_row::find(const std::string& name) const {
  const auto it = columns.find(name);
  return it != columns.end() ? &it->second : nullptr;
}

std::optional<double> kernel_row::number(const std::string& name) const {
  const metric* m = find(name);
  return m != nullptr ? m->si() : std::nullopt;
}

ncu_output parse_ncu_output(std::string_view text) {
  ncu_output out;
  std::optional<std::vector<std::string>> units;
  size_t id_column = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.find("ERR_NVGPUCTRPERM") != std::string_view::npos) {
      out.permission_denied = true;
    }
    const auto stripped = trim(line);
    if (stripped.rfind("==ERROR==", 0) == 0) {
      out.errors.emplace_back(stripped);
      continue;
    }
    if (stripped.rfind("==WARNING==", 0) == 0) {
      out.warnings.emplace_back(stripped);
      continue;
    }
    if (stripped.empty() || stripped.front() != '"') {
      continue;
    }
    auto fields = split_csv(stripped);
    if (!fields) {
      continue;
    }
    if (out.columns.empty()) {
      const auto id = std::find(fields->begin(), fields->end(), "ID");
      if (id != fields->end() &&
          std::find(fields->begin(), fields->end(), "Kernel Name") != fields->end()) {
        out.columns = *fields;
        id_column = static_cast<size_t>(id - fields->begin());
        out.csv += std::string(stripped) + "\n";
      }
      continue;
    }
    if (fields->size() != out.columns.size() || *fields == out.columns) {
      continue;
    }
    if (trim((*fields)[id_column]).empty()) {
      if (!units && out.kernels.empty()) {
        units = std::move(*fields);
        out.csv += std::string(stripped) + "\n";
      }
      continue;
    }
    kernel_row row;
    for (size_t i = 0; i < fields->size(); ++i) {
      metric m;
      m.text = (*fields)[i];
      m.unit = units ? (*units)[i] : "";
      m.value = parse_number(m.text);
      row.columns[out.columns[i]] = std::move(m);
    }
    out.kernels.push_back(std::move(row));
    out.csv += std::string(stripped) + "\n";
  }
  return out;
}

} // namespace kb::profile
