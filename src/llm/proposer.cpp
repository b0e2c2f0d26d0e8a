#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "llm/llm.hpp"

#include <fmt/format.h>

namespace kb::llm {

namespace {

std::string prompt_digest(const std::vector<chat_message>& messages) {
  sha256_builder b;
  for (const auto& m : messages) {
    b.field(m.role).field(m.content);
  }
  return b.hex();
}

std::string opening(std::string_view text) {
  constexpr size_t shown = 160;
  std::string out(text.substr(0, shown));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    }
  }
  return text.size() > shown ? out + "..." : out;
}

// Failures after which asking again cannot help, for this context or at all.
bool ends_the_search(status s) {
  return s == status::unauthorized || s == status::forbidden || s == status::quota ||
         s == status::budget_exhausted || s == status::bad_request;
}

search::proposal_result failure(std::string_view reason_code, std::string message) {
  search::proposal_result r;
  r.failure = std::string(reason_code);
  r.message = std::move(message);
  return r;
}

} // namespace

std::string reason::of(status s) {
  return "llm." + to_string(s);
}

void apply(const settings& layer, proposer_config& config) {
  if (layer.repair_turns) {
    if (*layer.repair_turns < 0) {
      fail_input("repair_turns must not be negative");
    }
    config.max_repair_turns = *layer.repair_turns;
  }
  if (layer.samples) {
    if (*layer.samples < 1) {
      fail_input("samples must be at least 1");
    }
    config.samples = *layer.samples;
  }
  if (layer.temperature) {
    config.temperature = layer.temperature;
  }
}

llm_proposer::llm_proposer(client& c, proposer_config config)
    : m_client(c), m_config(std::move(config)),
      m_root(m_config.project_root ? *m_config.project_root : find_project_root()) {}

std::string llm_proposer::name() const {
  return "llm:" + m_client.model();
}

const prompt_material& llm_proposer::material(const task::contract& task) {
  std::lock_guard lock(m_mutex);
  auto it = m_material.find(task.digest);
  if (it == m_material.end()) {
    it = m_material.emplace(task.digest, load_prompt_material(m_root, task)).first;
  }
  return it->second;
}

search::proposal_result llm_proposer::propose(const search::proposal_context& context) {
  if (context.task == nullptr) {
    fail("the LLM proposer was asked to propose without a task");
  }
  const auto messages = build_prompt(context, material(*context.task), m_config.limits);
  return ask(messages, std::max(1, m_config.samples), 0);
}

search::proposal_result llm_proposer::repair(const search::proposal_context& context,
                                             const search::proposal& failed,
                                             const std::string& error) {
  if (context.task == nullptr) {
    fail("the LLM proposer was asked to repair without a task");
  }
  const int turn = (failed.trace.is_object() ? failed.trace.value("repair_turn", 0) : 0) + 1;
  if (turn > m_config.max_repair_turns) {
    auto r = failure(reason::repair_limit,
                     fmt::format("no repair turns left ({} allowed)", m_config.max_repair_turns));
    r.exhausted = true;
    return r;
  }
  const auto messages = build_repair_prompt(context, material(*context.task), m_config.limits,
                                            failed, error, turn, m_config.max_repair_turns);
  return ask(messages, 1, turn);
}

search::proposal_result llm_proposer::ask(const std::vector<chat_message>& messages, int samples,
                                          int repair_turn) {
  const std::string digest = prompt_digest(messages);
  {
    std::lock_guard lock(m_mutex);
    auto it = m_pending.find(digest);
    if (it != m_pending.end() && !it->second.empty()) {
      auto r = std::move(it->second.front());
      it->second.pop_front();
      return r;
    }
  }

  chat_request request;
  request.messages = messages;
  request.samples = samples;
  request.max_tokens = m_config.max_tokens;
  request.temperature = m_config.temperature;
  const chat_result answer = m_client.complete(request);
  if (!answer.ok()) {
    auto r = failure(reason::of(answer.code), answer.message);
    r.exhausted = ends_the_search(answer.code);
    return r;
  }

  std::vector<search::proposal_result> results;
  for (size_t i = 0; i < answer.choices.size(); ++i) {
    const choice& c = answer.choices[i];
    const parsed_answer parsed = parse_answer(c.content);
    const std::string answer_digest = sha256_hex(c.content);
    const std::string where = fmt::format("answer {}", answer_digest.substr(0, 12));
    const bool cut = c.finish_reason == "length";
    if (parsed.code.empty()) {
      results.push_back(
          cut ? failure(reason::truncated,
                        fmt::format("the {} stopped at the token limit before any code", where))
              : failure(reason::no_code, fmt::format("the {} holds no code block; it began: {}",
                                                     where, opening(c.content))));
      continue;
    }
    if (parsed.code_unterminated && cut) {
      results.push_back(
          failure(reason::truncated,
                  fmt::format("the {} stopped at the token limit inside the code", where)));
      continue;
    }
    // kb_launch may come from one of the project's headers (a family's or the portfolio's launch
    // templates define it); the loader has the last word (load.missing_kb_launch).
    if (parsed.code.find("kb_launch") == std::string::npos &&
        parsed.code.find("<kblaster/") == std::string::npos) {
      results.push_back(failure(reason::malformed_answer,
                                fmt::format("the code of the {} defines no kb_launch", where)));
      continue;
    }
    if (search::is_reserved_strategy_name(parsed.strategy)) {
      results.push_back(failure(reason::reserved_strategy,
                                fmt::format("the {} names its strategy \"{}\", a name reserved "
                                            "for where a candidate comes from",
                                            where, parsed.strategy)));
      continue;
    }
    search::proposal p;
    p.source = parsed.code;
    p.strategy = parsed.strategy.empty() ? "llm.unnamed" : parsed.strategy;
    p.params = parsed.params;
    p.hypothesis = parsed.hypothesis;
    p.predicted_speedup = parsed.predicted_speedup.value_or(1.0);
    p.origin = name();
    p.trace = {{"model", m_client.model()},
               {"prompt_digest", digest},
               {"answer_digest", answer_digest},
               {"finish_reason", c.finish_reason},
               {"repair_turn", repair_turn},
               {"sample", i},
               {"samples", answer.choices.size()},
               {"usage",
                {{"prompt_tokens", answer.usage.prompt_tokens},
                 {"completion_tokens", answer.usage.completion_tokens}}},
               {"missing", parsed.missing}};
    search::proposal_result r;
    r.candidate = std::move(p);
    results.push_back(std::move(r));
  }

  auto first = std::move(results.front());
  if (results.size() > 1) {
    std::lock_guard lock(m_mutex);
    auto& queue = m_pending[digest];
    for (size_t i = 1; i < results.size(); ++i) {
      queue.push_back(std::move(results[i]));
    }
  }
  return first;
}

} // namespace kb::llm
