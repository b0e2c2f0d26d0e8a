// The LLM module: an OpenAI-compatible chat-completions client (hosted APIs, vLLM, llama.cpp
// server, Ollama) and the proposer that asks a model for candidates through it.
//
// A provider failure is a value (a `status` with a readable message), never an exception;
// exceptions are kept for the tool's own failures (a bad configuration, an unreadable record).
// The API key is read from the environment and never leaves the client: every string the client
// returns, records or puts in a message passes through its redactor first.
//
// Every HTTP attempt is handed to an `exchange_recorder`; a client built by `client::replay`
// answers from such a record instead of the network, so a recorded run replays to the same
// proposals.
#pragma once

#include "common/names.hpp"
#include "search/proposer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kb::llm {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Outcomes

enum class status {
  ok,
  unauthorized,       // 401: the key is missing, wrong or revoked
  forbidden,          // 403: the key may not use this model or endpoint
  quota,              // the account's quota or credit is spent (retrying does not help)
  rate_limited,       // 429 that stayed after the retries
  timeout,            // connect or total timeout, or 408
  unreachable,        // no connection (refused, DNS, TLS)
  server_error,       // 5xx (or 409) that stayed after the retries
  bad_request,        // 400, 404, 422 ...: the request itself is wrong
  malformed_response, // a 2xx whose body is not a chat completion
  budget_exhausted,   // refused before sending: a budget would be exceeded
};
inline constexpr auto status_names =
    name_table<status>({{status::ok, "ok"},
                        {status::unauthorized, "unauthorized"},
                        {status::forbidden, "forbidden"},
                        {status::quota, "quota"},
                        {status::rate_limited, "rate_limited"},
                        {status::timeout, "timeout"},
                        {status::unreachable, "unreachable"},
                        {status::server_error, "server_error"},
                        {status::bad_request, "bad_request"},
                        {status::malformed_response, "malformed_response"},
                        {status::budget_exhausted, "budget_exhausted"}});
static_assert(status_names.well_formed());
std::string to_string(status s);
std::optional<status> status_from_string(std::string_view s);

// Which field carries the answer-length limit: older servers know only `max_tokens`, newer
// OpenAI models accept only `max_completion_tokens`.
enum class token_limit_param { max_tokens, max_completion_tokens };
inline constexpr auto token_limit_param_names = name_table<token_limit_param>(
    {{token_limit_param::max_tokens, "max_tokens"},
     {token_limit_param::max_completion_tokens, "max_completion_tokens"}});
static_assert(token_limit_param_names.well_formed());
std::string to_string(token_limit_param p);
std::optional<token_limit_param> token_limit_param_from_string(std::string_view s);

// ---------------------------------------------------------------------------------------------
// Redaction

// Replaces secrets in text that leaves the client: each secret wherever it occurs, any word that
// contains a 12-character piece of a secret of 16 characters or more (servers echo keys half
// masked), and the token after "Bearer ". Secrets shorter than `min_length` characters are
// left alone: below 4 they are placeholders for keyless local servers. What a model writes (the
// answers' content, the recorded responses) is masked for secrets of 16 characters or more only:
// a short local key such as "double" is also a word of the code the answer carries.
class redactor {
public:
  static constexpr std::string_view mask = "[redacted]";
  static constexpr size_t min_output_secret = 16;
  explicit redactor(std::vector<std::string> secrets = {}, size_t min_length = 4);
  std::string apply(std::string_view text) const;
  // Every string inside (keys included), recursively.
  nlohmann::json apply_json(const nlohmann::json& value) const;

private:
  std::vector<std::string> m_secrets;
  std::vector<std::string> m_pieces;
};

// ---------------------------------------------------------------------------------------------
// Configuration

struct budget {
  std::optional<int64_t> requests; // HTTP requests sent, retries included
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> completion_tokens;
  std::optional<double> wall_seconds; // [seconds] since the client was made
};

inline constexpr std::string_view default_api_key_env = "KBLASTER_LLM_API_KEY";
inline constexpr std::string_view fallback_api_key_env = "OPENAI_API_KEY";

struct client_config {
  std::string base_url; // "https://api.openai.com/v1", "http://localhost:8000/v1" ...
  std::string model;
  // The environment variable holding the key. With the default name, OPENAI_API_KEY is read
  // when it is unset. No key: no Authorization header (local servers).
  std::string api_key_env = std::string(default_api_key_env);
  double connect_timeout = 10;  // [seconds]
  double request_timeout = 300; // [seconds] the whole request, answer included
  int max_retries = 4;          // attempts after the first, on 408/409/429/5xx/transport errors
  double backoff_base = 1;      // [seconds] full jitter: uniform in [0, min(max, base * 2^k)]
  double backoff_max = 30;      // [seconds]
  double max_retry_after = 120; // [seconds] a server asking for a longer wait ends the call
  int max_in_flight = 4;        // requests in flight at once, across threads
  token_limit_param token_param = token_limit_param::max_tokens;
  bool use_n = true;     // several samples in one request; off: one request per sample
  int max_tokens = 8192; // answer limit of a request that names none
  budget limits;
};

// The key per the configuration, and the variable it came from; nullopt when none is set.
struct api_key {
  std::string value;
  std::string env;
};
std::optional<api_key> read_api_key(const client_config& config);

// Settings as the user writes them: each layer (file, environment, flags) sets some fields and
// the later layer wins. Also the proposer's settings, so one [llm] table configures both.
struct settings {
  std::optional<std::string> base_url;
  std::optional<std::string> model;
  std::optional<std::string> api_key_env;
  std::optional<std::string> token_param;
  std::optional<double> connect_timeout;
  std::optional<double> request_timeout;
  std::optional<int> max_retries;
  std::optional<int> max_in_flight;
  std::optional<int> max_tokens;
  std::optional<bool> use_n;
  std::optional<int64_t> max_requests;
  std::optional<int64_t> max_prompt_tokens;
  std::optional<int64_t> max_completion_tokens;
  std::optional<double> max_wall_seconds;
  std::optional<double> temperature;
  std::optional<int> repair_turns;
  std::optional<int> samples;
};
// The [llm] table of a config file (common/config.hpp; absent table: nothing set). Unknown keys
// and wrong types are input errors naming the file and the key.
settings settings_from_toml(const fs::path& file);
// KBLASTER_LLM_BASE_URL, KBLASTER_LLM_MODEL, KBLASTER_LLM_API_KEY_ENV.
settings settings_from_env();
void apply(const settings& layer, client_config& config);
// Input errors for what cannot work (no endpoint, no model, a timeout of zero ...), each saying
// where the setting can be given.
void validate(const client_config& config);

// ---------------------------------------------------------------------------------------------
// Record and replay

// One HTTP attempt: the request body sent, the response (the body as JSON, or {"raw": text}
// when it was not JSON, or {} when none came) and what else happened (meta: status, timings,
// retry headers, request digest ...). All three are redacted before they get here.
struct recorded_exchange {
  nlohmann::json request;
  nlohmann::json response;
  nlohmann::json meta;
};

class exchange_recorder {
public:
  virtual ~exchange_recorder() = default;
  // Called once per HTTP attempt, from any thread, in the order the attempts finished.
  virtual void record(const nlohmann::json& request, const nlohmann::json& response,
                      const nlohmann::json& meta) = 0;
};

// A folder of JSON files, each named by the SHA-256 of its content, and `index.jsonl`, one line
// per exchange in recording order. Appends to an existing record.
class file_recorder final : public exchange_recorder {
public:
  explicit file_recorder(fs::path dir);
  void record(const nlohmann::json& request, const nlohmann::json& response,
              const nlohmann::json& meta) override;
  const fs::path& dir() const { return m_dir; }

private:
  fs::path m_dir;
  std::mutex m_mutex;
  int64_t m_count = 0;
};

// The exchanges of a file record in order; input errors for a missing index, a missing file or
// one whose content does not match its name.
std::vector<recorded_exchange> load_record(const fs::path& dir);

// Digest of a request body as recorded and matched (SHA-256 of its canonical JSON).
std::string request_digest(const nlohmann::json& request);

// ---------------------------------------------------------------------------------------------
// The client

struct chat_message {
  std::string role; // system | user | assistant
  std::string content;
};

struct chat_request {
  std::vector<chat_message> messages;
  int samples = 1;               // answers wanted
  std::optional<int> max_tokens; // else the client's
  std::optional<double> temperature;
  std::optional<int64_t> seed;
};

struct token_usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

struct choice {
  std::string content; // redacted
  std::string finish_reason;
};

struct chat_result {
  status code = status::ok;
  std::string message; // what went wrong, or a note (fewer samples than asked); redacted
  int http_status = 0; // of the last attempt; 0 when nothing was received
  std::vector<choice> choices;
  token_usage usage; // as the server reported it, summed over the requests
  int requests = 0;  // HTTP requests sent for this call
  bool ok() const { return code == status::ok; }
};

struct spending {
  int64_t requests = 0;
  int64_t prompt_tokens = 0; // reported, or estimated where the server reported none
  int64_t completion_tokens = 0;
  int64_t refused = 0;     // calls refused by a budget before sending
  double wall_seconds = 0; // [seconds] since the client was made
};

namespace detail {
class transport;
}

class client {
public:
  // Talks to config.base_url. Throws kb::input_error when the configuration cannot work.
  explicit client(client_config config, exchange_recorder* recorder = nullptr);
  // Answers from `record` and makes no network request; the same budgets and retry logic
  // apply, without the waits.
  static std::unique_ptr<client> replay(client_config config, std::vector<recorded_exchange> record,
                                        exchange_recorder* recorder = nullptr);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Thread-safe. Samples beyond what one request returned (a server without `n`, or one that
  // ignores it) are asked for one request at a time.
  chat_result complete(const chat_request& request);

  const client_config& config() const { return m_config; }
  const std::string& model() const { return m_config.model; }
  spending spent() const;
  token_limit_param token_param() const; // after any switch a server asked for
  bool uses_n() const;
  // Recorded exchanges a replay served out of order because no unused one matched the request.
  int64_t replay_mismatches() const;
  std::string redact(std::string_view text) const { return m_redactor.apply(text); }

private:
  struct state;
  client(client_config config, std::unique_ptr<detail::transport> transport,
         exchange_recorder* recorder);
  chat_result call(const chat_request& request, int n, bool* n_rejected);

  client_config m_config;
  std::optional<api_key> m_key;
  redactor m_redactor;
  redactor m_output_redactor; // what the model wrote: long secrets only
  std::unique_ptr<state> m_state;
};

// One tiny chat completion (one token) that tells whether the endpoint, the key and the model
// work: ok, unauthorized, forbidden, quota, unreachable, timeout, bad_request ...
struct preflight_result {
  status code = status::ok;
  std::string message;
  int http_status = 0;
  double seconds = 0; // [seconds]
  bool ok() const { return code == status::ok; }
};
preflight_result preflight(client& c);

// ---------------------------------------------------------------------------------------------
// Prompts and answers

// What the prompt quotes from files.
struct prompt_material {
  std::string abi_header;      // include/kblaster/candidate.h
  std::string family_contract; // the leading comment of the family's device header
  std::string family_header;   // its include path ("kblaster/device/families/normalize.cuh")
  std::string math;            // the task's math file (native tasks)
  std::string module_source;   // the PyTorch module (pytorch tasks): the reference to match
  std::string contract;        // the task.toml as written (pytorch tasks)
};
prompt_material load_prompt_material(const fs::path& project_root, const task::contract& task);

struct prompt_limits {
  size_t strategies = 5;       // retrieved strategies shown, best first
  size_t failures = 4;         // recent failures shown, latest last
  size_t failure_chars = 2000; // of each failure's compiler or verifier text
  size_t repair_chars = 8000;  // of the error text a repair turn sends back
};

std::vector<chat_message> build_prompt(const search::proposal_context& context,
                                       const prompt_material& material,
                                       const prompt_limits& limits);
// The conversation of a repair turn: the prompt, the failed answer, the error text.
std::vector<chat_message> build_repair_prompt(const search::proposal_context& context,
                                              const prompt_material& material,
                                              const prompt_limits& limits,
                                              const search::proposal& failed,
                                              const std::string& error, int turn, int max_turns);

struct parsed_answer {
  std::string code;               // empty: the answer holds none
  bool code_unterminated = false; // the code fence never closed
  bool has_json = false;
  std::string strategy;
  std::string hypothesis;
  std::optional<double> predicted_speedup;
  nlohmann::json params = nlohmann::json::object();
  std::vector<std::string> missing; // fields the answer lacked
};
// Finds the JSON object (fenced or bare) and the code (```cuda, cu, cpp, c++, c or untagged
// fence, else the JSON's "code" field); never throws.
parsed_answer parse_answer(std::string_view text);

// ---------------------------------------------------------------------------------------------
// The proposer

// Reason codes of proposal_result.failure; provider failures are "llm." + to_string(status).
namespace reason {
inline constexpr std::string_view malformed_answer = "llm.malformed_answer"; // no usable code
inline constexpr std::string_view no_code = "llm.no_code";
inline constexpr std::string_view truncated = "llm.truncated";       // cut at the token limit
inline constexpr std::string_view repair_limit = "llm.repair_limit"; // no repair turns left
// The answer named its strategy with a name reserved for a candidate's origin ("baseline").
inline constexpr std::string_view reserved_strategy = "llm.reserved_strategy";
std::string of(status s);
} // namespace reason

struct proposer_config {
  std::optional<fs::path> project_root; // else kb::find_project_root()
  int max_repair_turns = 2;
  int samples = 1; // answers per request; extras serve later calls
  std::optional<double> temperature;
  std::optional<int> max_tokens;
  prompt_limits limits;
};
void apply(const settings& layer, proposer_config& config);

class llm_proposer final : public search::proposer {
public:
  llm_proposer(client& c, proposer_config config = {});
  std::string name() const override; // "llm:<model>"
  search::proposal_result propose(const search::proposal_context& context) override;
  search::proposal_result repair(const search::proposal_context& context,
                                 const search::proposal& failed, const std::string& error) override;

private:
  search::proposal_result ask(const std::vector<chat_message>& messages, int samples,
                              int repair_turn);
  const prompt_material& material(const task::contract& task);

  client& m_client;
  proposer_config m_config;
  fs::path m_root;
  std::mutex m_mutex;
  std::map<std::string, prompt_material> m_material;                    // by task digest
  std::map<std::string, std::deque<search::proposal_result>> m_pending; // by prompt digest
};

} // namespace kb::llm
