#include "common/error.hpp"
#include "llm/detail/transport.hpp"

#include <atomic>
#include <mutex>

namespace kb::llm::detail {

namespace {

// Serves the recorded replies: for each request the earliest unused exchange with the same
// request digest, else (the request changed) the earliest unused one.
class replay_transport final : public transport {
public:
  explicit replay_transport(std::vector<recorded_exchange> record)
      : m_record(std::move(record)), m_used(m_record.size(), false) {
    for (size_t i = 0; i < m_record.size(); ++i) {
      const auto& e = m_record[i];
      const auto is = [&](const char* key, auto check) {
        return !e.meta.contains(key) || (e.meta[key].*check)();
      };
      if (!e.meta.is_object() || !e.response.is_object() ||
          !is("http_status", &nlohmann::json::is_number_integer) ||
          !is("request_digest", &nlohmann::json::is_string) ||
          !is("body_kind", &nlohmann::json::is_string) ||
          !is("transport_error", &nlohmann::json::is_string) ||
          !is("transport_message", &nlohmann::json::is_string) ||
          !is("headers", &nlohmann::json::is_object) ||
          (e.meta.value("body_kind", "") == "raw" &&
           !e.response.value("raw", nlohmann::json()).is_string())) {
        fail_input("exchange {} of the replayed record is not one the client wrote", i);
      }
    }
  }

  http_reply post(const http_request& request) override {
    const std::string digest = request_digest(request.body);
    std::lock_guard lock(m_mutex);
    std::optional<size_t> pick;
    for (size_t i = 0; i < m_record.size() && !pick; ++i) {
      if (!m_used[i] && m_record[i].meta.value("request_digest", "") == digest) {
        pick = i;
      }
    }
    if (!pick) {
      for (size_t i = 0; i < m_record.size() && !pick; ++i) {
        if (!m_used[i]) {
          pick = i;
        }
      }
      if (pick) {
        ++m_mismatches;
      }
    }
    if (!pick) {
      http_reply reply;
      reply.transport_error = status::unreachable;
      reply.error_text = "the replayed record has no exchange left for this request";
      return reply;
    }
    m_used[*pick] = true;
    return reply_of(m_record[*pick]);
  }

  bool live() const override { return false; }
  int64_t mismatches() const override { return m_mismatches; }

private:
  static http_reply reply_of(const recorded_exchange& exchange) {
    http_reply reply;
    const auto& meta = exchange.meta;
    reply.http_status = meta.value("http_status", 0);
    if (reply.http_status == 0) {
      reply.transport_error = status_from_string(meta.value("transport_error", "unreachable"))
                                  .value_or(status::unreachable);
      reply.error_text = meta.value("transport_message", "");
    }
    if (meta.value("body_kind", "") == "raw") {
      reply.body = exchange.response.value("raw", "");
    } else if (meta.value("body_kind", "") == "json") {
      reply.body = exchange.response.dump();
    }
    if (meta.contains("headers") && meta["headers"].is_object()) {
      for (const auto& [name, value] : meta["headers"].items()) {
        if (value.is_string()) {
          reply.headers[name] = value.get<std::string>();
        }
      }
    }
    return reply;
  }

  std::mutex m_mutex;
  std::vector<recorded_exchange> m_record;
  std::vector<bool> m_used;
  std::atomic<int64_t> m_mismatches{0};
};

} // namespace

std::unique_ptr<transport> make_replay_transport(std::vector<recorded_exchange> record) {
  return std::make_unique<replay_transport>(std::move(record));
}

} // namespace kb::llm::detail
