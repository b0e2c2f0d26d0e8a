#include "eval/detail/sanitizer.hpp"

#include <regex>
#include <string>

namespace kb::eval::detail {

std::optional<sanitizer_summary> parse_sanitizer_summary(std::string_view log) {
  static const std::regex error_line(R"(ERROR SUMMARY: (\d+) errors?)");
  static const std::regex race_line(
      R"(RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\))");
  std::optional<sanitizer_summary> last;
  size_t last_at = 0;
  const std::string text(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), error_line);
       it != std::sregex_iterator(); ++it) {
    if (!last || static_cast<size_t>(it->position()) >= last_at) {
      last = sanitizer_summary{std::stol((*it)[1].str()), 0};
      last_at = static_cast<size_t>(it->position());
    }
  }
  for (auto it = std::sregex_iterator(text.begin(), text.end(), race_line);
       it != std::sregex_iterator(); ++it) {
    if (!last || static_cast<size_t>(it->position()) >= last_at) {
      last = sanitizer_summary{std::stol((*it)[1].str()), std::stol((*it)[2].str())};
      last_at = static_cast<size_t>(it->position());
    }
  }
  return last;
}

bool sanitizer_found_errors(std::string_view log, int exit_code, int error_exit_code) {
  if (exit_code == error_exit_code) {
    return true;
  }
  const auto s = parse_sanitizer_summary(log);
  return !s || s->errors > 0;
}

} // namespace kb::eval::detail
