#include "common/text.hpp"
#include "llm/llm.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace kb::llm {

namespace {

struct fence_block {
  std::string tag; // lower case, first word of the info string
  std::string content;
  bool closed = false;
  size_t begin = 0; // offsets of the whole block in the text, fences included
  size_t end = 0;
};

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  return s;
}

std::string_view trim(std::string_view s) {
  s = trim_left(s);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// Markdown fences (``` or ~~~, three or more, any indentation); a fence left open runs to the
// end of the text.
std::vector<fence_block> find_fences(std::string_view text) {
  std::vector<fence_block> blocks;
  std::optional<fence_block> open;
  char fence_char = 0;
  size_t fence_length = 0;
  size_t at = 0;
  while (at < text.size()) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, eol - at);
    const std::string_view body = trim_left(line);
    const size_t next = eol < text.size() ? eol + 1 : eol;
    size_t run = 0;
    if (!body.empty() && (body[0] == '`' || body[0] == '~')) {
      while (run < body.size() && body[run] == body[0]) {
        ++run;
      }
    }
    if (!open) {
      if (run >= 3) {
        fence_block b;
        const std::string_view info = trim(body.substr(run));
        b.tag = ascii_lower(info.substr(0, std::min(info.find_first_of(" \t{"), info.size())));
        b.begin = at;
        open = std::move(b);
        fence_char = body[0];
        fence_length = run;
      }
    } else if (run >= fence_length && body[0] == fence_char && trim(body.substr(run)).empty()) {
      open->closed = true;
      open->end = next;
      blocks.push_back(std::move(*open));
      open.reset();
    } else {
      open->content.append(line);
      open->content.push_back('\n');
    }
    at = next;
  }
  if (open) {
    open->end = text.size();
    blocks.push_back(std::move(*open));
  }
  return blocks;
}

bool is_code_tag(const std::string& tag) {
  static const std::vector<std::string> tags{"",   "cuda", "cu",  "cpp", "c++", "cxx",
                                             "cc", "c",    "cuh", "hpp", "h"};
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

std::optional<nlohmann::json> as_object(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::nullopt;
  }
  return j;
}

bool has_answer_keys(const nlohmann::json& j) {
  for (const char* key :
       {"strategy", "hypothesis", "predicted_speedup", "code", "source", "params"}) {
    if (j.contains(key)) {
      return true;
    }
  }
  return false;
}

// The first balanced {...} in `text` that parses to an object with an answer's keys.
std::optional<nlohmann::json> find_bare_object(std::string_view text) {
  for (size_t start = text.find('{'); start != std::string_view::npos;
       start = text.find('{', start + 1)) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (size_t i = start; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        if (auto j = as_object(text.substr(start, i + 1 - start)); j && has_answer_keys(*j)) {
          return j;
        }
        break;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> string_field(const nlohmann::json& j,
                                        std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (j.contains(key) && j[key].is_string() &&
        !trim(j[key].get_ref<const std::string&>()).empty()) {
      return std::string(trim(j[key].get_ref<const std::string&>()));
    }
  }
  return std::nullopt;
}

// 1.3, "1.3", "1.3x", "~1.3x"; nullopt for anything not a positive finite number.
std::optional<double> speedup_field(const nlohmann::json& j) {
  for (const char* key : {"predicted_speedup", "speedup", "expected_speedup"}) {
    if (!j.contains(key)) {
      continue;
    }
    const auto& v = j[key];
    double value = NAN;
    if (v.is_number()) {
      value = v.get<double>();
    } else if (v.is_string()) {
      std::string_view s = trim(v.get_ref<const std::string&>());
      while (!s.empty() &&
             !(std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '.')) {
        s.remove_prefix(1);
      }
      const std::string text(s);
      char* end = nullptr;
      value = std::strtod(text.c_str(), &end);
      if (end == text.c_str()) {
        value = NAN;
      }
    }
    if (std::isfinite(value) && value > 0) {
      return value;
    }
  }
  return std::nullopt;
}

} // namespace

parsed_answer parse_answer(std::string_view text) {
  parsed_answer out;
  const auto blocks = find_fences(text);

  std::optional<nlohmann::json> meta;
  const fence_block* code = nullptr;
  for (const auto& b : blocks) {
    if (b.tag == "json" || b.tag == "jsonc") {
      if (!meta) {
        meta = as_object(b.content);
      }
      continue;
    }
    if (!is_code_tag(b.tag)) {
      continue;
    }
    if (b.tag.empty() && !meta) {
      if (auto j = as_object(b.content); j && has_answer_keys(*j)) {
        meta = std::move(j);
        continue;
      }
    }
    // The complete file: the block that defines kb_launch, the longest if several do.
    const bool launches = b.content.find("kb_launch") != std::string::npos;
    const bool best_launches =
        code != nullptr && code->content.find("kb_launch") != std::string::npos;
    if (code == nullptr || (launches && !best_launches) ||
        (launches == best_launches && b.content.size() > code->content.size())) {
      code = &b;
    }
  }
  if (!meta) {
    // JSON written without a fence: look outside the code blocks.
    std::string prose;
    size_t at = 0;
    for (const auto& b : blocks) {
      prose.append(text.substr(at, b.begin - at));
      at = b.end;
    }
    prose.append(text.substr(std::min(at, text.size())));
    meta = find_bare_object(prose);
  }

  if (code != nullptr && !trim(code->content).empty()) {
    out.code = code->content;
    out.code_unterminated = !code->closed;
  } else if (meta) {
    if (auto field = string_field(*meta, {"code", "source", "cuda"})) {
      // A model may fence the code inside the field too.
      const auto inner = find_fences(*field);
      out.code = inner.empty() ? *field + "\n" : inner.front().content;
    }
  }

  out.has_json = meta.has_value();
  if (meta) {
    if (auto s = string_field(*meta, {"strategy", "name"})) {
      out.strategy = *s;
    }
    if (auto s = string_field(*meta, {"hypothesis", "rationale", "reason"})) {
      out.hypothesis = *s;
    }
    out.predicted_speedup = speedup_field(*meta);
    for (const char* key : {"params", "parameters"}) {
      if (meta->contains(key) && (*meta)[key].is_object()) {
        out.params = (*meta)[key];
        break;
      }
    }
  }
  if (out.code.empty()) {
    out.missing.push_back("code");
  }
  if (out.strategy.empty()) {
    out.missing.push_back("strategy");
  }
  if (out.hypothesis.empty()) {
    out.missing.push_back("hypothesis");
  }
  if (!out.predicted_speedup) {
    out.missing.push_back("predicted_speedup");
  }
  return out;
}

} // namespace kb::llm
