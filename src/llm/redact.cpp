#include "llm/llm.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_set>

namespace kb::llm {

namespace {

constexpr size_t min_secret = 4;  // shorter "keys" are placeholders of keyless servers
constexpr size_t min_pieced = 16; // secrets long enough to look for pieces of
constexpr size_t piece_length = 12;

// Characters a key, or a half-masked echo of one, is made of.
bool is_word_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '*' || c == '+' || c == '/' ||
         c == '=' || c == '~' || u >= 0x80;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  size_t at = 0;
  while ((at = text.find(what, at)) != std::string::npos) {
    text.replace(at, what.size(), with);
    at += with.size();
  }
}

} // namespace

redactor::redactor(std::vector<std::string> secrets, size_t min_length) {
  for (auto& s : secrets) {
    if (s.size() < std::max(min_secret, min_length)) {
      continue;
    }
    if (s.size() >= min_pieced) {
      for (size_t i = 0; i + piece_length <= s.size(); ++i) {
        m_pieces.push_back(s.substr(i, piece_length));
      }
    }
    m_secrets.push_back(std::move(s));
  }
  // Longest first, so a secret that contains another is masked whole.
  std::sort(m_secrets.begin(), m_secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string redactor::apply(std::string_view text) const {
  std::string out(text);
  for (const auto& s : m_secrets) {
    replace_all(out, s, mask);
  }
  if (!m_pieces.empty()) {
    const std::unordered_set<std::string_view> pieces(m_pieces.begin(), m_pieces.end());
    std::string masked;
    masked.reserve(out.size());
    size_t i = 0;
    while (i < out.size()) {
      if (!is_word_char(out[i])) {
        masked.push_back(out[i++]);
        continue;
      }
      size_t end = i;
      while (end < out.size() && is_word_char(out[end])) {
        ++end;
      }
      const std::string_view word(out.data() + i, end - i);
      bool leaks = false;
      for (size_t k = 0; !leaks && k + piece_length <= word.size(); ++k) {
        leaks = pieces.contains(word.substr(k, piece_length));
      }
      masked.append(leaks ? mask : word);
      i = end;
    }
    out = std::move(masked);
  }
  // Whatever follows "Bearer " is a credential, whoever's it is.
  static constexpr std::string_view bearer = "bearer ";
  for (size_t at = 0; at + bearer.size() <= out.size(); ++at) {
    bool match = true;
    for (size_t k = 0; k < bearer.size() && match; ++k) {
      match = std::tolower(static_cast<unsigned char>(out[at + k])) == bearer[k];
    }
    if (!match) {
      continue;
    }
    const size_t begin = at + bearer.size();
    size_t end = begin;
    while (end < out.size() && is_word_char(out[end])) {
      ++end;
    }
    if (end > begin) {
      out.replace(begin, end - begin, mask);
    }
    at = begin;
  }
  return out;
}

nlohmann::json redactor::apply_json(const nlohmann::json& value) const {
  if (value.is_string()) {
    return apply(value.get_ref<const std::string&>());
  }
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : value) {
      out.push_back(apply_json(item));
    }
    return out;
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, item] : value.items()) {
      out[apply(std::string_view(key))] = apply_json(item);
    }
    return out;
  }
  return value;
}

} // namespace kb::llm
