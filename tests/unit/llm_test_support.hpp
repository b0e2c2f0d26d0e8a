// A chat-completions server on loopback for the LLM tests: each test scripts its answers, the
// server keeps what it was sent.
#pragma once

#include "llm/llm.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kb::llm::testing {

// The source tree: its tasks are the tests' tasks.
inline const std::filesystem::path root = KBLASTER_SOURCE_DIR;

// A key shaped like a hosted provider's; tests look for it (and pieces of it) everywhere.
inline const std::string test_key = "sk-test-Zq8Xv3Lp0Rm7Nc2Wd5Hk9Tj4Yb6Fs1Ga";
inline const std::string test_key_env = "KB_TEST_LLM_API_KEY";

struct seen_request {
  nlohmann::json body;
  std::string authorization;
};

class fake_chat_server {
public:
  // `answer(body, index, response)` fills the response to request number `index` (from 0).
  using handler =
      std::function<void(const nlohmann::json& body, int index, httplib::Response& response)>;

  explicit fake_chat_server(handler answer) : m_answer(std::move(answer)) {
    m_server.set_keep_alive_timeout(1);
    m_server.Post("/v1/chat/completions",
                  [this](const httplib::Request& req, httplib::Response& res) {
                    const int now = ++m_in_flight;
                    int seen = m_max_in_flight.load();
                    while (now > seen && !m_max_in_flight.compare_exchange_weak(seen, now)) {
                    }
                    int index = 0;
                    {
                      std::lock_guard lock(m_mutex);
                      index = static_cast<int>(m_requests.size());
                      m_requests.push_back({nlohmann::json::parse(req.body, nullptr, false),
                                            req.get_header_value("Authorization")});
                    }
                    m_answer(m_requests_copy(index), index, res);
                    --m_in_flight;
                  });
    m_port = m_server.bind_to_any_port("127.0.0.1");
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
    while (!m_server.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  ~fake_chat_server() { stop(); }
  fake_chat_server(const fake_chat_server&) = delete;
  fake_chat_server& operator=(const fake_chat_server&) = delete;

  void stop() {
    {
      std::lock_guard lock(m_mutex);
      m_stopping = true;
    }
    m_stop.notify_all();
    if (m_thread.joinable()) {
      m_server.stop();
      m_thread.join();
    }
  }

  // Waits up to `d` or until the server stops (handlers that stall use it).
  void stall(std::chrono::milliseconds d) {
    std::unique_lock lock(m_mutex);
    m_stop.wait_for(lock, d, [this] { return m_stopping; });
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(m_port) + "/v1"; }
  int port() const { return m_port; }
  int count() const {
    std::lock_guard lock(m_mutex);
    return static_cast<int>(m_requests.size());
  }
  std::vector<seen_request> requests() const {
    std::lock_guard lock(m_mutex);
    return m_requests;
  }
  int max_in_flight() const { return m_max_in_flight; }

private:
  nlohmann::json m_requests_copy(int index) const {
    std::lock_guard lock(m_mutex);
    return m_requests[static_cast<size_t>(index)].body;
  }

  handler m_answer;
  httplib::Server m_server;
  std::thread m_thread;
  int m_port = 0;
  mutable std::mutex m_mutex;
  std::condition_variable m_stop;
  bool m_stopping = false;
  std::vector<seen_request> m_requests;
  std::atomic<int> m_in_flight{0};
  std::atomic<int> m_max_in_flight{0};
};

inline void reply_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// A chat completion with one choice per content.
inline nlohmann::json completion(const std::vector<std::string>& contents, int prompt_tokens = 11,
                                 int completion_tokens = 7, const std::string& finish = "stop") {
  nlohmann::json choices = nlohmann::json::array();
  for (size_t i = 0; i < contents.size(); ++i) {
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", contents[i]}}},
                       {"finish_reason", finish}});
  }
  return {{"id", "chatcmpl-test"},
          {"object", "chat.completion"},
          {"model", "test-model"},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}}}};
}

inline nlohmann::json api_error(const std::string& message, const std::string& type,
                                const std::string& code, const std::string& param = "") {
  nlohmann::json e{{"message", message}, {"type", type}, {"code", code}};
  e["param"] = param.empty() ? nlohmann::json() : nlohmann::json(param);
  return {{"error", e}};
}

// Settings for a test: the server's address, the test key's variable, short waits.
inline client_config test_config(const std::string& base_url) {
  ::setenv(test_key_env.c_str(), test_key.c_str(), 1);
  client_config c;
  c.base_url = base_url;
  c.model = "test-model";
  c.api_key_env = test_key_env;
  c.connect_timeout = 2;
  c.request_timeout = 5;
  c.max_retries = 3;
  c.backoff_base = 0.01;
  c.backoff_max = 0.05;
  c.max_tokens = 256;
  return c;
}

inline client_config test_config(const fake_chat_server& server) {
  return test_config(server.base_url());
}

inline chat_request ask(const std::string& text, int samples = 1) {
  chat_request r;
  r.messages = {{"system", "You write CUDA."}, {"user", text}};
  r.samples = samples;
  return r;
}

// A well-formed answer: the JSON object, then the source.
inline std::string good_answer(const std::string& strategy, double speedup,
                               const std::string& marker) {
  return "Here is my proposal.\n\n```json\n{\"strategy\": \"" + strategy +
         "\", \"hypothesis\": \"one pass over the row halves the traffic\", "
         "\"predicted_speedup\": " +
         std::to_string(speedup) +
         ", \"params\": {\"block\": 256}}\n```\n\n```cuda\n"
         "#include <kblaster/candidate.h>\n// " +
         marker +
         "\nextern \"C\" int kb_launch(const kb_args* args) { return args == nullptr; }\n```\n";
}

} // namespace kb::llm::testing
