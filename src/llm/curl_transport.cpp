#include "llm/detail/transport.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace kb::llm::detail {

namespace {

// A reply larger than this is not a chat completion worth reading.
constexpr size_t max_body_bytes = 64u << 20; // [bytes]

struct reply_sink {
  http_reply* reply;
  bool overflow = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<reply_sink*>(user);
  const size_t bytes = size * count;
  if (sink->reply->body.size() + bytes > max_body_bytes) {
    sink->overflow = true;
    return 0;
  }
  sink->reply->body.append(data, bytes);
  return bytes;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<reply_sink*>(user);
  const std::string_view line(data, size * count);
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto& kept = kept_headers();
    if (std::find(kept.begin(), kept.end(), name) != kept.end()) {
      sink->reply->headers[name] = trim(line.substr(colon + 1));
    }
  } else if (line.starts_with("HTTP/")) {
    // A new response (after a 100 Continue or a redirect): forget the previous one's headers.
    sink->reply->headers.clear();
  }
  return size * count;
}

status transport_status(CURLcode code) {
  switch (code) {
  case CURLE_OPERATION_TIMEDOUT:
    return status::timeout;
  default:
    return status::unreachable;
  }
}

class curl_transport final : public transport {
public:
  curl_transport() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  ~curl_transport() override {
    for (CURL* handle : m_idle) {
      curl_easy_cleanup(handle);
    }
  }

  http_reply post(const http_request& request) override {
    CURL* handle = take_handle();
    http_reply reply;
    reply_sink sink{&reply};
    const std::string body = request.body.dump();
    char error_buffer[CURL_ERROR_SIZE] = {0};

    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    // No "Expect: 100-continue": some servers answer it slowly or not at all.
    headers = curl_slist_append(headers, "Expect:");
    if (!request.authorization.empty()) {
      headers = curl_slist_append(headers, ("Authorization: " + request.authorization).c_str());
    }

    curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(request.connect_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(request.total_timeout.count()));
    // Signals do not mix with threads; timeouts still hold without them.
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_ACCEPT_ENCODING, "");
    // A redirect would carry the key elsewhere.
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);

    const CURLcode code = curl_easy_perform(handle);
    if (code == CURLE_OK) {
      long http_status = 0;
      curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &http_status);
      reply.http_status = static_cast<int>(http_status);
    } else if (sink.overflow) {
      reply.transport_error = status::malformed_response;
      reply.error_text = "the reply exceeded 64 MB";
    } else {
      reply.transport_error = transport_status(code);
      reply.error_text =
          error_buffer[0] != 0 ? std::string(error_buffer) : curl_easy_strerror(code);
      reply.body.clear();
      reply.headers.clear();
    }
    curl_slist_free_all(headers);
    give_back(handle);
    return reply;
  }

  bool live() const override { return true; }

private:
  // Handles are reused so that their connections are.
  CURL* take_handle() {
    {
      std::lock_guard lock(m_mutex);
      if (!m_idle.empty()) {
        CURL* handle = m_idle.back();
        m_idle.pop_back();
        curl_easy_reset(handle);
        return handle;
      }
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) {
      throw std::bad_alloc();
    }
    return handle;
  }

  void give_back(CURL* handle) {
    std::lock_guard lock(m_mutex);
    m_idle.push_back(handle);
  }

  std::mutex m_mutex;
  std::vector<CURL*> m_idle;
};

} // namespace

std::unique_ptr<transport> make_curl_transport() {
  return std::make_unique<curl_transport>();
}

std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now) {
  const std::string text = trim(value);
  if (text.empty()) {
    return std::nullopt;
  }
  if (std::all_of(text.begin(), text.end(),
                  [](unsigned char c) { return std::isdigit(c) || c == '.'; })) {
    try {
      return std::max(0.0, std::stod(text));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  const time_t when = curl_getdate(text.c_str(), nullptr);
  if (when == -1) {
    return std::nullopt;
  }
  const auto wait = std::chrono::system_clock::from_time_t(when) - now;
  return std::max(0.0, std::chrono::duration<double>(wait).count());
}

} // namespace kb::llm::detail
