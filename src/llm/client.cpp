#include "common/error.hpp"
#include "common/text.hpp"
#include "llm/detail/transport.hpp"
#include "llm/llm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

namespace kb::llm {

namespace {

using steady = std::chrono::steady_clock;

constexpr size_t max_quoted_chars = 600;      // of a server's error text in a message
constexpr size_t max_recorded_raw = 1u << 20; // [bytes] of a non-JSON body kept in a record

bool contains_any(const std::string& haystack, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return haystack.find(n) != std::string::npos; });
}

std::string clip(std::string_view text, size_t limit) {
  if (text.size() <= limit) {
    return std::string(text);
  }
  return fmt::format("{}... ({} more bytes)", text.substr(0, limit), text.size() - limit);
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string text_of(const nlohmann::json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_null()) {
    return "";
  }
  return value.dump();
}

// What a server says about an error, in the shapes OpenAI, vLLM, llama.cpp and Ollama use:
// {"error": {"message", "type", "code", "param"}}, {"error": "text"}, {"message": ...},
// {"detail": ...}.
struct error_info {
  std::string message;
  std::string type;
  std::string code;
  std::string param;
};

error_info error_info_of(const std::string& body) {
  error_info info;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.message = body;
    return info;
  }
  const nlohmann::json* e = &j;
  if (j.contains("error")) {
    if (!j["error"].is_object()) {
      info.message = text_of(j["error"]);
      return info;
    }
    e = &j["error"];
  }
  for (const char* key : {"message", "detail", "msg"}) {
    if (e->contains(key)) {
      info.message = text_of((*e)[key]);
      break;
    }
  }
  if (info.message.empty()) {
    info.message = e->dump();
  }
  info.type = e->contains("type") ? text_of((*e)["type"]) : "";
  info.code = e->contains("code") ? text_of((*e)["code"]) : "";
  info.param = e->contains("param") ? text_of((*e)["param"]) : "";
  return info;
}

bool says_quota(const error_info& info) {
  static const std::initializer_list<std::string_view> codes = {
      "insufficient_quota", "quota_exceeded", "billing_hard_limit_reached", "insufficient_balance",
      "billing_not_active"};
  const auto is_code = [](const std::string& s) {
    const std::string l = ascii_lower(s);
    return std::find(codes.begin(), codes.end(), l) != codes.end();
  };
  if (is_code(info.type) || is_code(info.code)) {
    return true;
  }
  return contains_any(ascii_lower(info.message),
                      {"insufficient_quota", "exceeded your current quota", "quota exhausted",
                       "quota has been exhausted", "insufficient balance",
                       "credit balance is too low"});
}

// Whether a 400 says the server does not take parameter `name` (as opposed to a bad value).
bool rejects_param(const error_info& info, std::string_view name) {
  const std::string message = ascii_lower(info.message);
  const bool named = info.param == name ||
                     contains_any(message, {fmt::format("'{}'", name), fmt::format("\"{}\"", name),
                                            fmt::format("`{}`", name), fmt::format(" {} ", name),
                                            fmt::format(": {}", name), fmt::format("{}:", name)}) ||
                     (name.size() > 1 && message.find(name) != std::string::npos);
  const bool unsupported =
      ascii_lower(info.code) == "unsupported_parameter" ||
      contains_any(message, {"unsupported", "not supported", "unrecognized", "unknown", "extra",
                             "not permitted", "not allowed", "only supports", "must be 1"});
  return named && unsupported;
}

struct verdict {
  status code = status::ok;
  std::string message;
  bool retry = false;
  std::optional<double> retry_after; // [seconds]
  bool rejects_token_param = false;
  bool rejects_n = false;
  std::vector<choice> choices;
  std::optional<token_usage> usage;
};

// A 2xx body as a chat completion; malformed_response when it is not one.
void read_completion(const std::string& body, verdict& v) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  const auto malformed = [&](std::string why) {
    v.code = status::malformed_response;
    v.message = "the server's answer is not a chat completion: " + why;
  };
  if (j.is_discarded()) {
    malformed(fmt::format("not JSON ({})", clip(body, 200)));
    return;
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty()) {
    malformed("no choices");
    return;
  }
  for (const auto& c : j["choices"]) {
    if (!c.is_object()) {
      malformed("a choice is not an object");
      return;
    }
    choice out;
    if (c.contains("message") && c["message"].is_object()) {
      const auto& content = c["message"].value("content", nlohmann::json());
      if (content.is_string()) {
        out.content = content.get<std::string>();
      } else if (content.is_array()) {
        for (const auto& part : content) {
          if (part.is_object() && part.value("type", "") == "text") {
            out.content += part.value("text", "");
          }
        }
      } else if (!content.is_null()) {
        malformed("a message's content is neither text nor parts");
        return;
      }
    } else if (c.contains("text") && c["text"].is_string()) {
      out.content = c["text"].get<std::string>();
    } else {
      malformed("a choice has no message");
      return;
    }
    out.finish_reason = text_of(c.value("finish_reason", nlohmann::json()));
    v.choices.push_back(std::move(out));
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      token_usage usage;
      usage.prompt_tokens = u["prompt_tokens"].get<int64_t>();
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
        usage.completion_tokens = u["completion_tokens"].get<int64_t>();
      }
      v.usage = usage;
    }
  }
}

verdict judge(const detail::http_reply& reply, const std::string& url, token_limit_param param,
              int n, const std::optional<api_key>& key, const client_config& config,
              double timeout) {
  verdict v;
  if (reply.http_status == 0) {
    v.code = reply.transport_error == status::ok ? status::unreachable : reply.transport_error;
    if (v.code == status::timeout) {
      v.message = fmt::format("no answer from {} within {:.3g} s (connect limit {:.3g} s): {}", url,
                              timeout, config.connect_timeout, reply.error_text);
    } else if (v.code == status::unreachable) {
      v.message = fmt::format("cannot reach {}: {}", url, reply.error_text);
    } else {
      v.message = fmt::format("{}: {}", url, reply.error_text);
    }
    v.retry = v.code == status::timeout || v.code == status::unreachable;
    return v;
  }
  const int h = reply.http_status;
  if (h >= 200 && h < 300) {
    read_completion(reply.body, v);
    return v;
  }
  const error_info info = error_info_of(reply.body);
  const std::string said = clip(info.message, max_quoted_chars);
  const std::string where = fmt::format("HTTP {} from {}", h, url);
  if (const auto it = reply.headers.find("retry-after-ms"); it != reply.headers.end()) {
    char* end = nullptr;
    const double ms = std::strtod(it->second.c_str(), &end);
    if (end != it->second.c_str() && ms >= 0) {
      v.retry_after = ms / 1000;
    }
  }
  if (const auto it = reply.headers.find("retry-after");
      it != reply.headers.end() && !v.retry_after) {
    v.retry_after = detail::parse_retry_after(it->second, std::chrono::system_clock::now());
  }
  const std::string key_hint =
      key ? fmt::format("the key was read from ${}", key->env)
          : (config.api_key_env == default_api_key_env
                 ? fmt::format("no key is set (${} and ${} are empty)", default_api_key_env,
                               fallback_api_key_env)
                 : fmt::format("no key is set (${} is empty)", config.api_key_env));
  if (h == 401) {
    v.code = status::unauthorized;
    v.message = fmt::format("{}: {} ({})", where, said, key_hint);
  } else if (h == 402 || ((h == 403 || h == 429) && says_quota(info))) {
    v.code = status::quota;
    v.message = fmt::format(
        "{}: {} (the account's quota or credit is spent; retrying will not help)", where, said);
  } else if (h == 403) {
    v.code = status::forbidden;
    v.message =
        fmt::format("{}: {} ({}; may it use model {}?)", where, said, key_hint, config.model);
  } else if (h == 429) {
    v.code = status::rate_limited;
    v.message = fmt::format("{}: {}", where, said);
    v.retry = true;
  } else if (h == 408) {
    v.code = status::timeout;
    v.message = fmt::format("{}: {}", where, said);
    v.retry = true;
  } else if (h == 409 || h >= 500) {
    v.code = status::server_error;
    v.message = fmt::format("{}: {}", where, said);
    v.retry = true;
  } else if (h >= 300 && h < 400) {
    v.code = status::bad_request;
    v.message =
        fmt::format("{}: the server redirects; give the final address as the base URL", where);
  } else {
    v.code = status::bad_request;
    v.message = fmt::format("{}: {}", where, said);
    if (h == 404) {
      v.message +=
          fmt::format(" (is {} the API's base URL, ending in /v1, and {} a model it serves?)",
                      config.base_url, config.model);
    }
    v.rejects_token_param = rejects_param(info, to_string(param));
    v.rejects_n = n > 1 && rejects_param(info, "n");
  }
  return v;
}

token_limit_param other(token_limit_param p) {
  return p == token_limit_param::max_tokens ? token_limit_param::max_completion_tokens
                                            : token_limit_param::max_tokens;
}

// A request's body: the model, the messages, the answer limit under the name the server takes,
// and n, temperature and seed where they are asked for.
nlohmann::json request_body(const std::string& model, const nlohmann::json& messages,
                            token_limit_param param, int max_tokens, int n,
                            const chat_request& request) {
  nlohmann::json body{{"model", model}, {"messages", messages}};
  body[to_string(param)] = max_tokens;
  if (n > 1) {
    body["n"] = n;
  }
  if (request.temperature) {
    body["temperature"] = *request.temperature;
  }
  if (request.seed) {
    body["seed"] = *request.seed;
  }
  return body;
}

// Why a request that may take `prompt_estimate` prompt tokens and `completion_cap` completion
// tokens cannot be sent under budget `b`, given what is spent and in flight; "" when it can.
std::string budget_refusal(const budget& b, const spending& spent, int64_t reserved_prompt,
                           int64_t reserved_completion, int64_t prompt_estimate,
                           int64_t completion_cap, double elapsed) {
  std::string refusal;
  if (b.requests && spent.requests + 1 > *b.requests) {
    refusal =
        fmt::format("the request budget is spent ({} of {} sent)", spent.requests, *b.requests);
  } else if (b.prompt_tokens &&
             spent.prompt_tokens + reserved_prompt + prompt_estimate > *b.prompt_tokens) {
    refusal = fmt::format("the prompt-token budget would be exceeded ({} used, {} in flight, "
                          "this prompt about {}, budget {})",
                          spent.prompt_tokens, reserved_prompt, prompt_estimate, *b.prompt_tokens);
  } else if (b.completion_tokens && spent.completion_tokens + reserved_completion + completion_cap >
                                        *b.completion_tokens) {
    refusal = fmt::format("the completion-token budget would be exceeded ({} used, {} in flight, "
                          "this request up to {}, budget {})",
                          spent.completion_tokens, reserved_completion, completion_cap,
                          *b.completion_tokens);
  } else if (b.wall_seconds && elapsed >= *b.wall_seconds) {
    refusal = fmt::format("the wall-time budget is spent ({:.1f} s of {:.1f} s)", elapsed,
                          *b.wall_seconds);
  }
  return refusal;
}

// What one attempt's record says besides the request and the response.
struct attempt_facts {
  int64_t sequence = 0;
  int64_t call_id = 0;
  int attempt = 0;
  std::string url;
  std::string model;
  bool live = false;
  double seconds = 0; // the attempt's round trip
};

// Records one attempt: the request, the response (JSON, or its raw text clipped) and the facts,
// every secret redacted.
void record_attempt(exchange_recorder& recorder, const redactor& redact,
                    const redactor& redact_output, const nlohmann::json& body,
                    const detail::http_reply& reply, const verdict& v, const attempt_facts& f) {
  nlohmann::json response = nlohmann::json::object();
  std::string body_kind = "none";
  if (!reply.body.empty()) {
    auto parsed = nlohmann::json::parse(reply.body, nullptr, false);
    if (!parsed.is_discarded()) {
      response = redact_output.apply_json(parsed);
      body_kind = "json";
    } else {
      response = {{"raw", redact_output.apply(clip(reply.body, max_recorded_raw))}};
      body_kind = "raw";
    }
  }
  nlohmann::json headers = nlohmann::json::object();
  for (const auto& [name, value] : reply.headers) {
    headers[name] = redact.apply(value);
  }
  nlohmann::json meta{{"sequence", f.sequence},
                      {"call", f.call_id},
                      {"attempt", f.attempt},
                      {"time", utc_now()},
                      {"url", redact.apply(f.url)},
                      {"model", f.model},
                      {"live", f.live},
                      {"http_status", reply.http_status},
                      {"status", to_string(v.code)},
                      {"message", v.message},
                      {"headers", headers},
                      {"seconds", f.seconds},
                      {"request_digest", request_digest(body)},
                      {"body_kind", body_kind}};
  if (reply.http_status == 0) {
    meta["transport_error"] = to_string(reply.transport_error);
    meta["transport_message"] = redact.apply(reply.error_text);
  }
  if (v.usage) {
    meta["usage"] = {{"prompt_tokens", v.usage->prompt_tokens},
                     {"completion_tokens", v.usage->completion_tokens}};
  }
  recorder.record(redact.apply_json(body), response, meta);
}

// How long to wait before retry number `retries`: the server's Retry-After, else a random
// exponential backoff. Nothing, with why added to `message`, when the server asks for a longer
// wait than allowed or the wall-time budget ends within the wait.
std::optional<double> retry_wait(const verdict& v, int retries, const client_config& config,
                                 steady::time_point started, std::string& message) {
  double wait = 0; // [seconds]
  if (v.retry_after) {
    if (*v.retry_after > config.max_retry_after) {
      message += fmt::format(" (the server asks to retry after {:.0f} s, more than the {:.0f} s "
                             "allowed)",
                             *v.retry_after, config.max_retry_after);
      return std::nullopt;
    }
    wait = *v.retry_after;
  } else {
    thread_local std::mt19937_64 random{std::random_device{}()};
    const double cap =
        std::min(config.backoff_max, config.backoff_base * std::pow(2.0, retries - 1));
    wait = std::uniform_real_distribution<double>(0, std::max(cap, 0.0))(random);
  }
  if (config.limits.wall_seconds) {
    const double left = *config.limits.wall_seconds -
                        std::chrono::duration<double>(steady::now() - started).count();
    if (wait >= left) {
      message +=
          fmt::format(" (no retry: the wall-time budget ends within the {:.1f} s wait)", wait);
      return std::nullopt;
    }
  }
  return wait;
}

} // namespace

namespace detail {

int64_t estimate_tokens(const std::vector<chat_message>& messages) {
  // About 3 bytes a token for code and English with common tokenizers (4 is typical), plus the
  // chat template's few tokens per message: an over-estimate, as a budget check wants.
  int64_t tokens = 3;
  for (const auto& m : messages) {
    tokens += 4 + static_cast<int64_t>((m.content.size() + m.role.size() + 2) / 3);
  }
  return tokens;
}

} // namespace detail

struct client::state {
  std::unique_ptr<detail::transport> transport;
  exchange_recorder* recorder = nullptr;
  steady::time_point started = steady::now();
  std::atomic<int> token_param{0};
  std::atomic<bool> use_n{true};
  std::atomic<int64_t> calls{0};

  mutable std::mutex mutex; // guards what follows
  std::condition_variable slot_freed;
  int in_flight = 0;
  spending spent;
  int64_t reserved_prompt = 0;
  int64_t reserved_completion = 0;
  int64_t sequence = 0;
};

client::client(client_config config, exchange_recorder* recorder)
    : client(std::move(config), detail::make_curl_transport(), recorder) {}

client::client(client_config config, std::unique_ptr<detail::transport> transport,
               exchange_recorder* recorder)
    : m_config(std::move(config)), m_state(std::make_unique<state>()) {
  validate(m_config);
  while (m_config.base_url.ends_with('/')) {
    m_config.base_url.pop_back();
  }
  m_key = read_api_key(m_config);
  const auto secrets = m_key ? std::vector<std::string>{m_key->value} : std::vector<std::string>{};
  m_redactor = redactor(secrets);
  m_output_redactor = redactor(secrets, redactor::min_output_secret);
  m_state->transport = std::move(transport);
  m_state->recorder = recorder;
  m_state->token_param = static_cast<int>(m_config.token_param);
  m_state->use_n = m_config.use_n;
}

std::unique_ptr<client> client::replay(client_config config, std::vector<recorded_exchange> record,
                                       exchange_recorder* recorder) {
  return std::unique_ptr<client>(
      new client(std::move(config), detail::make_replay_transport(std::move(record)), recorder));
}

client::~client() = default;

spending client::spent() const {
  std::lock_guard lock(m_state->mutex);
  spending out = m_state->spent;
  out.wall_seconds = std::chrono::duration<double>(steady::now() - m_state->started).count();
  return out;
}

token_limit_param client::token_param() const {
  return static_cast<token_limit_param>(m_state->token_param.load());
}

bool client::uses_n() const {
  return m_state->use_n;
}

int64_t client::replay_mismatches() const {
  return m_state->transport->mismatches();
}

chat_result client::complete(const chat_request& request) {
  const size_t wanted = static_cast<size_t>(std::max(1, request.samples));
  chat_result total;
  const auto merge = [&total](chat_result part) {
    total.code = part.code;
    total.message = std::move(part.message);
    total.http_status = part.http_status;
    total.requests += part.requests;
    total.usage.prompt_tokens += part.usage.prompt_tokens;
    total.usage.completion_tokens += part.usage.completion_tokens;
    for (auto& c : part.choices) {
      total.choices.push_back(std::move(c));
    }
  };
  if (wanted > 1 && m_state->use_n) {
    bool n_rejected = false;
    chat_result part = call(request, static_cast<int>(wanted), &n_rejected);
    const bool ok = part.ok();
    merge(std::move(part));
    if (n_rejected) {
      // The server does not take `n`: one request per sample from now on.
      m_state->use_n = false;
      total.code = status::ok;
      total.message.clear();
    } else if (!ok) {
      return total;
    } else if (total.choices.size() < wanted) {
      // The server ignores `n`.
      m_state->use_n = false;
    }
  }
  while (total.choices.size() < wanted) {
    chat_result part = call(request, 1, nullptr);
    const bool ok = part.ok();
    merge(std::move(part));
    if (!ok) {
      break;
    }
  }
  if (!total.choices.empty() && !total.ok()) {
    total.message =
        fmt::format("{} of {} samples; then: {}", total.choices.size(), wanted, total.message);
    total.code = status::ok;
  }
  if (total.choices.size() > wanted) {
    total.choices.resize(wanted);
  }
  return total;
}

chat_result client::call(const chat_request& request, int n, bool* n_rejected) {
  state& st = *m_state;
  const int64_t call_id = ++st.calls;
  const std::string url = m_config.base_url + "/chat/completions";
  const int max_tokens = request.max_tokens.value_or(m_config.max_tokens);
  const int64_t prompt_estimate = detail::estimate_tokens(request.messages);
  const int64_t completion_cap = static_cast<int64_t>(max_tokens) * n;
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : request.messages) {
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }

  chat_result result;
  bool switched = false;
  int retries = 0;
  for (int attempt = 0;; ++attempt) {
    const token_limit_param param = token_param();
    nlohmann::json body = request_body(m_config.model, messages, param, max_tokens, n, request);

    // The budgets hold before anything is sent: this request's worst case must fit.
    double timeout = m_config.request_timeout;
    {
      std::unique_lock lock(st.mutex);
      const double elapsed = std::chrono::duration<double>(steady::now() - st.started).count();
      const budget& b = m_config.limits;
      const std::string refusal =
          budget_refusal(b, st.spent, st.reserved_prompt, st.reserved_completion, prompt_estimate,
                         completion_cap, elapsed);
      if (!refusal.empty()) {
        ++st.spent.refused;
        result.code = status::budget_exhausted;
        result.message = attempt == 0
                             ? refusal
                             : fmt::format("{}; the last attempt: {}", refusal, result.message);
        return result;
      }
      if (b.wall_seconds) {
        timeout = std::min(timeout, *b.wall_seconds - elapsed);
      }
      ++st.spent.requests;
      st.reserved_prompt += prompt_estimate;
      st.reserved_completion += completion_cap;
      st.slot_freed.wait(lock, [&] { return st.in_flight < m_config.max_in_flight; });
      ++st.in_flight;
    }

    detail::http_request http{
        url, body, m_key ? "Bearer " + m_key->value : std::string(),
        std::chrono::milliseconds(static_cast<int64_t>(m_config.connect_timeout * 1000)),
        std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(timeout * 1000)))};
    const auto sent = steady::now();
    detail::http_reply reply;
    try {
      reply = st.transport->post(http);
    } catch (const std::exception& e) {
      // Out of handles or memory: a failed attempt, which must still give its slot back.
      reply = {};
      reply.transport_error = status::unreachable;
      reply.error_text = e.what();
    }
    const double seconds = std::chrono::duration<double>(steady::now() - sent).count();
    verdict v = judge(reply, url, param, n, m_key, m_config, timeout);
    v.message = m_redactor.apply(v.message);
    for (auto& c : v.choices) {
      c.content = m_output_redactor.apply(c.content);
    }
    ++result.requests;
    result.http_status = reply.http_status;

    int64_t sequence = 0;
    {
      std::lock_guard lock(st.mutex);
      --st.in_flight;
      st.reserved_prompt -= prompt_estimate;
      st.reserved_completion -= completion_cap;
      if (v.code == status::ok) {
        int64_t completion = 0;
        for (const auto& c : v.choices) {
          completion += static_cast<int64_t>(c.content.size() / 3) + 1;
        }
        st.spent.prompt_tokens += v.usage ? v.usage->prompt_tokens : prompt_estimate;
        st.spent.completion_tokens += v.usage ? v.usage->completion_tokens : completion;
      } else if (v.code == status::timeout) {
        // The server may have read, and billed, the prompt.
        st.spent.prompt_tokens += prompt_estimate;
      }
      sequence = st.sequence++;
    }
    st.slot_freed.notify_one();

    if (st.recorder != nullptr) {
      record_attempt(
          *st.recorder, m_redactor, m_output_redactor, body, reply, v,
          {sequence, call_id, attempt, url, m_config.model, st.transport->live(), seconds});
    }

    if (v.code == status::ok) {
      result.code = status::ok;
      result.message.clear();
      result.choices = std::move(v.choices);
      if (v.usage) {
        result.usage = *v.usage;
      }
      return result;
    }
    result.code = v.code;
    result.message = v.message;
    if (v.rejects_token_param && !switched) {
      // The server takes the other name of the answer limit: switch once, for later calls too.
      int expected = static_cast<int>(param);
      st.token_param.compare_exchange_strong(expected, static_cast<int>(other(param)));
      switched = true;
      continue;
    }
    if (v.rejects_n && n_rejected != nullptr) {
      *n_rejected = true;
      return result;
    }
    if (!v.retry || retries >= m_config.max_retries) {
      if (v.retry && retries > 0) {
        result.message += fmt::format(" (after {} retries)", retries);
      }
      return result;
    }
    ++retries;
    const std::optional<double> wait = retry_wait(v, retries, m_config, st.started, result.message);
    if (!wait) {
      return result;
    }
    if (st.transport->live() && *wait > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(*wait));
    }
  }
}

preflight_result preflight(client& c) {
  chat_request request;
  request.messages = {{"user", "Reply with the single word OK."}};
  request.max_tokens = 1;
  const auto started = steady::now();
  const chat_result r = c.complete(request);
  preflight_result out;
  out.code = r.code;
  out.http_status = r.http_status;
  out.seconds = std::chrono::duration<double>(steady::now() - started).count();
  out.message =
      r.ok() ? fmt::format("model {} answered at {}", c.model(), c.redact(c.config().base_url))
             : r.message;
  return out;
}

} // namespace kb::llm
