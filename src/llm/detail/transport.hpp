// How the client reaches a server: over HTTP (libcurl) or from a record. The client keeps all
// policy (retries, budgets, redaction); a transport only moves one request and its reply.
#pragma once

#include "llm/llm.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kb::llm::detail {

struct http_request {
  std::string url;
  nlohmann::json body;
  std::string authorization; // header value, empty for none; never recorded
  std::chrono::milliseconds connect_timeout{0};
  std::chrono::milliseconds total_timeout{0};
};

struct http_reply {
  int http_status = 0; // 0: no HTTP response
  std::string body;
  std::map<std::string, std::string> headers; // lower-case names; only those the client reads
  status transport_error = status::ok;        // timeout or unreachable when http_status is 0
  std::string error_text;                     // the transport's own words (unredacted)
};

class transport {
public:
  virtual ~transport() = default;
  virtual http_reply post(const http_request& request) = 0;
  // False for a replay: the client then skips its waits.
  virtual bool live() const = 0;
  virtual int64_t mismatches() const { return 0; }
};

std::unique_ptr<transport> make_curl_transport();
std::unique_ptr<transport> make_replay_transport(std::vector<recorded_exchange> record);

// The headers the client reads from a reply, and so the ones a record keeps.
inline const std::vector<std::string>& kept_headers() {
  static const std::vector<std::string> names{"retry-after", "retry-after-ms", "content-type"};
  return names;
}

// Retry-After as seconds ("120", "1.5") or an HTTP-date; the wait in seconds from `now`
// (never negative), or nullopt when the value is neither.
std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now);

// A conservative prompt-token estimate from the text, for budgets checked before sending.
int64_t estimate_tokens(const std::vector<chat_message>& messages);

} // namespace kb::llm::detail
