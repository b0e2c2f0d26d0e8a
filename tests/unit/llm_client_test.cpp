#include "common/fs.hpp"
#include "llm/detail/transport.hpp"
#include "llm/llm.hpp"
#include "llm_test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace kb::llm {
namespace {

using namespace testing;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

TEST(llm_client, success_carries_content_usage_and_the_request_asked_for) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"hello"}, 120, 45));
  });
  client c(test_config(server));
  auto request = ask("write a kernel");
  request.temperature = 0.5;
  const auto r = c.complete(request);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.choices.size(), 1u);
  EXPECT_EQ(r.choices[0].content, "hello");
  EXPECT_EQ(r.choices[0].finish_reason, "stop");
  EXPECT_EQ(r.usage.prompt_tokens, 120);
  EXPECT_EQ(r.usage.completion_tokens, 45);
  EXPECT_EQ(r.requests, 1);
  EXPECT_EQ(c.spent().prompt_tokens, 120);
  EXPECT_EQ(c.spent().completion_tokens, 45);
  EXPECT_EQ(c.spent().requests, 1);

  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "Bearer " + test_key);
  EXPECT_EQ(seen[0].body["model"], "test-model");
  EXPECT_EQ(seen[0].body["max_tokens"], 256);
  EXPECT_EQ(seen[0].body["temperature"], 0.5);
  EXPECT_FALSE(seen[0].body.contains("n"));
  ASSERT_EQ(seen[0].body["messages"].size(), 2u);
  EXPECT_EQ(seen[0].body["messages"][1]["content"], "write a kernel");
}

TEST(llm_client, no_key_sends_no_authorization) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"hi"}));
  });
  auto config = test_config(server);
  config.api_key_env = "KB_TEST_LLM_UNSET_VARIABLE";
  ::unsetenv(config.api_key_env.c_str());
  client c(config);
  ASSERT_TRUE(c.complete(ask("x")).ok());
  EXPECT_EQ(server.requests()[0].authorization, "");
}

TEST(llm_client, honours_retry_after_on_429_then_succeeds) {
  fake_chat_server server([](const nlohmann::json&, int index, httplib::Response& res) {
    if (index == 0) {
      res.set_header("Retry-After", "1");
      reply_json(res, 429,
                 api_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"));
    } else {
      reply_json(res, 200, completion({"after the wait"}));
    }
  });
  auto config = test_config(server);
  config.backoff_base = 0.001; // so that only Retry-After can explain the wait
  client c(config);
  const auto started = clock_type::now();
  const auto r = c.complete(ask("x"));
  const double took = since(started);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.choices[0].content, "after the wait");
  EXPECT_EQ(r.requests, 2);
  EXPECT_EQ(server.count(), 2);
  EXPECT_GE(took, 0.95);
  EXPECT_LT(took, 3.0);
}

TEST(llm_client, a_retry_after_beyond_the_limit_ends_the_call) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    res.set_header("Retry-After", "3600");
    reply_json(res, 429, api_error("Rate limit reached", "requests", "rate_limit_exceeded"));
  });
  auto config = test_config(server);
  config.max_retry_after = 5;
  client c(config);
  const auto started = clock_type::now();
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::rate_limited);
  EXPECT_EQ(server.count(), 1);
  EXPECT_LT(since(started), 2.0);
  EXPECT_NE(r.message.find("3600"), std::string::npos) << r.message;
}

TEST(llm_client, retries_a_500_then_succeeds) {
  fake_chat_server server([](const nlohmann::json&, int index, httplib::Response& res) {
    if (index == 0) {
      reply_json(res, 500, api_error("The server had an error", "server_error", "internal"));
    } else {
      reply_json(res, 200, completion({"fine now"}));
    }
  });
  client c(test_config(server));
  const auto r = c.complete(ask("x"));
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.choices[0].content, "fine now");
  EXPECT_EQ(server.count(), 2);
}

TEST(llm_client, gives_up_after_the_retries) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 503, api_error("overloaded", "server_error", "overloaded"));
  });
  auto config = test_config(server);
  config.max_retries = 2;
  client c(config);
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::server_error);
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(server.count(), 3);
  EXPECT_NE(r.message.find("overloaded"), std::string::npos);
}

TEST(llm_client, unauthorized_is_not_retried_and_never_shows_the_key) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 401,
               api_error("Incorrect API key provided: " + test_key + ". Check it.",
                         "invalid_request_error", "invalid_api_key"));
  });
  client c(test_config(server));
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::unauthorized);
  EXPECT_EQ(r.http_status, 401);
  EXPECT_EQ(server.count(), 1);
  EXPECT_NE(r.message.find("401"), std::string::npos);
  EXPECT_NE(r.message.find("Incorrect API key provided"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("$" + test_key_env), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find(test_key), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find(test_key.substr(8, 16)), std::string::npos) << r.message;
}

TEST(llm_client, forbidden_is_not_retried) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 403,
               api_error("You do not have access to this model", "invalid_request_error",
                         "model_not_found"));
  });
  client c(test_config(server));
  EXPECT_EQ(c.complete(ask("x")).code, status::forbidden);
  EXPECT_EQ(server.count(), 1);
}

TEST(llm_client, an_exhausted_quota_is_not_retried) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 429,
               api_error("You exceeded your current quota, please check your plan.",
                         "insufficient_quota", "insufficient_quota"));
  });
  client c(test_config(server));
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::quota);
  EXPECT_EQ(server.count(), 1);
}

TEST(llm_client, times_out_without_waiting_for_the_server) {
  fake_chat_server* self = nullptr;
  fake_chat_server server([&self](const nlohmann::json&, int, httplib::Response& res) {
    self->stall(std::chrono::milliseconds(3000));
    reply_json(res, 200, completion({"too late"}));
  });
  self = &server;
  auto config = test_config(server);
  config.request_timeout = 0.3;
  config.max_retries = 1;
  client c(config);
  const auto started = clock_type::now();
  const auto r = c.complete(ask("x"));
  const double took = since(started);
  EXPECT_EQ(r.code, status::timeout);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_EQ(server.count(), 2); // a timeout is retried
  EXPECT_LT(took, 2.0);
  EXPECT_GE(took, 0.55);
  server.stop();
}

TEST(llm_client, a_stopped_server_is_unreachable) {
  auto server =
      std::make_unique<fake_chat_server>([](const nlohmann::json&, int, httplib::Response& res) {
        reply_json(res, 200, completion({"x"}));
      });
  auto config = test_config(*server);
  config.max_retries = 1;
  server.reset();
  client c(config);
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::unreachable);
  EXPECT_EQ(r.requests, 2);
  EXPECT_NE(r.message.find("127.0.0.1"), std::string::npos) << r.message;
}

TEST(llm_client, a_body_that_is_not_a_completion_is_malformed) {
  fake_chat_server server([](const nlohmann::json&, int index, httplib::Response& res) {
    if (index == 0) {
      res.status = 200;
      res.set_content("{\"choices\": [ this is not json", "application/json");
    } else {
      reply_json(res, 200, {{"object", "chat.completion"}, {"data", 1}});
    }
  });
  client c(test_config(server));
  const auto first = c.complete(ask("x"));
  EXPECT_EQ(first.code, status::malformed_response);
  EXPECT_NE(first.message.find("not JSON"), std::string::npos) << first.message;
  const auto second = c.complete(ask("x"));
  EXPECT_EQ(second.code, status::malformed_response);
  EXPECT_NE(second.message.find("no choices"), std::string::npos) << second.message;
  EXPECT_EQ(server.count(), 2); // not retried
}

TEST(llm_client, budgets_stop_requests_before_they_are_sent) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"ok"}, 100, 50));
  });
  {
    auto config = test_config(server);
    config.limits.prompt_tokens = 20;
    client c(config);
    const auto r = c.complete(ask(std::string(400, 'x')));
    EXPECT_EQ(r.code, status::budget_exhausted);
    EXPECT_NE(r.message.find("prompt-token budget"), std::string::npos) << r.message;
    EXPECT_EQ(r.requests, 0);
    EXPECT_EQ(c.spent().refused, 1);
  }
  {
    auto config = test_config(server);
    config.limits.completion_tokens = 100; // less than the 256 a request may use
    client c(config);
    EXPECT_EQ(c.complete(ask("x")).code, status::budget_exhausted);
  }
  {
    auto config = test_config(server);
    config.limits.wall_seconds = 0;
    client c(config);
    EXPECT_EQ(c.complete(ask("x")).code, status::budget_exhausted);
  }
  EXPECT_EQ(server.count(), 0);
  {
    auto config = test_config(server);
    config.limits.requests = 1;
    client c(config);
    EXPECT_TRUE(c.complete(ask("x")).ok());
    const auto r = c.complete(ask("x"));
    EXPECT_EQ(r.code, status::budget_exhausted);
    EXPECT_NE(r.message.find("request budget"), std::string::npos) << r.message;
  }
  EXPECT_EQ(server.count(), 1);
  {
    // Reported usage counts: after a prompt of 100 tokens, a second (estimated at about 20)
    // would pass 110.
    auto config = test_config(server);
    config.limits.prompt_tokens = 110;
    client c(config);
    EXPECT_TRUE(c.complete(ask("x")).ok());
    EXPECT_EQ(c.complete(ask("x")).code, status::budget_exhausted);
  }
  EXPECT_EQ(server.count(), 2);
}

TEST(llm_client, respects_the_concurrency_limit) {
  fake_chat_server* self = nullptr;
  fake_chat_server server([&self](const nlohmann::json&, int, httplib::Response& res) {
    self->stall(std::chrono::milliseconds(150));
    reply_json(res, 200, completion({"ok"}));
  });
  self = &server;
  auto config = test_config(server);
  config.max_in_flight = 2;
  client c(config);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] { ok += c.complete(ask("x")).ok() ? 1 : 0; });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(server.count(), 6);
  EXPECT_EQ(server.max_in_flight(), 2);
}

TEST(llm_client, samples_come_from_separate_requests_when_n_is_rejected) {
  fake_chat_server server([](const nlohmann::json& body, int index, httplib::Response& res) {
    if (body.contains("n")) {
      reply_json(res, 400,
                 api_error("Unsupported value: 'n' must be 1 for this model.",
                           "invalid_request_error", "unsupported_value", "n"));
    } else {
      reply_json(res, 200, completion({"sample " + std::to_string(index)}));
    }
  });
  client c(test_config(server));
  const auto r = c.complete(ask("x", 3));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.choices.size(), 3u);
  EXPECT_EQ(r.choices[0].content, "sample 1");
  EXPECT_EQ(r.choices[2].content, "sample 3");
  EXPECT_EQ(server.count(), 4);
  EXPECT_FALSE(c.uses_n());
  // Later calls go straight to separate requests.
  ASSERT_EQ(c.complete(ask("y", 2)).choices.size(), 2u);
  EXPECT_EQ(server.count(), 6);
}

TEST(llm_client, samples_come_in_one_request_when_n_works_and_are_topped_up_when_ignored) {
  fake_chat_server with_n([](const nlohmann::json& body, int, httplib::Response& res) {
    const int n = body.value("n", 1);
    std::vector<std::string> contents;
    for (int i = 0; i < n; ++i) {
      contents.push_back("choice " + std::to_string(i));
    }
    reply_json(res, 200, completion(contents));
  });
  client a(test_config(with_n));
  EXPECT_EQ(a.complete(ask("x", 3)).choices.size(), 3u);
  EXPECT_EQ(with_n.count(), 1);
  EXPECT_EQ(with_n.requests()[0].body["n"], 3);

  fake_chat_server ignores_n([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"only one"}));
  });
  client b(test_config(ignores_n));
  EXPECT_EQ(b.complete(ask("x", 3)).choices.size(), 3u);
  EXPECT_EQ(ignores_n.count(), 3);
}

TEST(llm_client, switches_the_token_limit_field_once_when_the_server_names_it) {
  fake_chat_server server([](const nlohmann::json& body, int, httplib::Response& res) {
    if (body.contains("max_tokens")) {
      reply_json(res, 400,
                 api_error("Unsupported parameter: 'max_tokens' is not supported with this "
                           "model. Use 'max_completion_tokens' instead.",
                           "invalid_request_error", "unsupported_parameter", "max_tokens"));
    } else {
      reply_json(res, 200, completion({"ok"}));
    }
  });
  client c(test_config(server));
  ASSERT_TRUE(c.complete(ask("x")).ok());
  EXPECT_EQ(server.count(), 2);
  EXPECT_EQ(c.token_param(), token_limit_param::max_completion_tokens);
  EXPECT_EQ(server.requests()[1].body["max_completion_tokens"], 256);
  ASSERT_TRUE(c.complete(ask("y")).ok());
  EXPECT_EQ(server.count(), 3);

  // The other way round: a server that knows only max_tokens.
  fake_chat_server old_server([](const nlohmann::json& body, int, httplib::Response& res) {
    if (body.contains("max_completion_tokens")) {
      reply_json(res, 400,
                 {{"object", "error"},
                  {"message", "Unrecognized request argument supplied: max_completion_tokens"},
                  {"type", "BadRequestError"},
                  {"code", 400}});
    } else {
      reply_json(res, 200, completion({"ok"}));
    }
  });
  auto config = test_config(old_server);
  config.token_param = token_limit_param::max_completion_tokens;
  client d(config);
  ASSERT_TRUE(d.complete(ask("x")).ok());
  EXPECT_EQ(d.token_param(), token_limit_param::max_tokens);
  EXPECT_EQ(old_server.count(), 2);
}

TEST(llm_client, a_bad_request_that_is_not_about_a_parameter_is_final) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 400,
               api_error("This model's maximum context length is 8192 tokens.",
                         "invalid_request_error", "context_length_exceeded", "messages"));
  });
  client c(test_config(server));
  const auto r = c.complete(ask("x"));
  EXPECT_EQ(r.code, status::bad_request);
  EXPECT_EQ(server.count(), 1);
  EXPECT_EQ(c.token_param(), token_limit_param::max_tokens);
  EXPECT_NE(r.message.find("maximum context length"), std::string::npos);
}

TEST(llm_client, the_key_appears_in_no_recorded_exchange) {
  // The server echoes the key everywhere it can: in error text, in an answer, in a header.
  fake_chat_server server([](const nlohmann::json&, int index, httplib::Response& res) {
    if (index == 0) {
      res.set_header("Retry-After", "0");
      reply_json(res, 429, api_error("slow down, " + test_key, "requests", "rate_limit_exceeded"));
    } else if (index == 1) {
      reply_json(res, 200,
                 completion({"your key is " + test_key + " and Bearer " + test_key.substr(3, 14)}));
    } else if (index == 2) {
      res.status = 502;
      res.set_content("<html>bad gateway for key " + test_key.substr(0, 20) + "...</html>",
                      "text/html");
    } else {
      reply_json(res, 401,
                 api_error("Incorrect API key provided: " + test_key, "invalid_request_error",
                           "invalid_api_key"));
    }
  });
  kb::temp_dir dir("llm-record");
  file_recorder recorder(dir.path() / "record");
  auto config = test_config(server);
  config.max_retries = 0;
  config.base_url = server.base_url();
  client c(config, &recorder);
  std::vector<chat_result> results;
  {
    auto retried = config;
    retried.max_retries = 1;
    client r(retried, &recorder);
    results.push_back(r.complete(ask("x")));
  }
  results.push_back(c.complete(ask("y")));
  results.push_back(c.complete(ask("z")));
  EXPECT_EQ(server.count(), 4);
  for (const auto& r : results) {
    EXPECT_EQ(r.message.find(test_key.substr(0, 12)), std::string::npos) << r.message;
    for (const auto& ch : r.choices) {
      EXPECT_EQ(ch.content.find(test_key.substr(0, 12)), std::string::npos) << ch.content;
      EXPECT_NE(ch.content.find(redactor::mask), std::string::npos);
    }
  }
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    if (!entry.is_regular_file()) {
      continue;
    }
    ++files;
    const std::string content = read_file(entry.path());
    for (size_t i = 0; i + 12 <= test_key.size(); ++i) {
      ASSERT_EQ(content.find(test_key.substr(i, 12)), std::string::npos)
          << entry.path() << " holds a piece of the key";
    }
  }
  EXPECT_EQ(files, 5); // four exchanges and the index
  EXPECT_EQ(load_record(dir.path() / "record").size(), 4u);
}

TEST(llm_client, retry_after_reads_seconds_and_http_dates) {
  const auto now =
      std::chrono::system_clock::from_time_t(1700000000); // Tue, 14 Nov 2023 22:13:20 GMT
  EXPECT_DOUBLE_EQ(*detail::parse_retry_after("3", now), 3.0);
  EXPECT_DOUBLE_EQ(*detail::parse_retry_after(" 1.5 ", now), 1.5);
  EXPECT_DOUBLE_EQ(*detail::parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now), 10.0);
  EXPECT_DOUBLE_EQ(*detail::parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now), 0.0);
  EXPECT_FALSE(detail::parse_retry_after("soon", now));
  EXPECT_FALSE(detail::parse_retry_after("", now));
}

TEST(llm_client, prompt_estimates_err_on_the_high_side) {
  // About four bytes a token is typical; the estimate must not fall below it.
  const std::vector<chat_message> messages{{"user", std::string(4000, 'a')}};
  EXPECT_GE(detail::estimate_tokens(messages), 1000);
}

TEST(llm_client, statuses_round_trip_through_strings) {
  for (const auto s :
       {status::ok, status::unauthorized, status::forbidden, status::quota, status::rate_limited,
        status::timeout, status::unreachable, status::server_error, status::bad_request,
        status::malformed_response, status::budget_exhausted}) {
    EXPECT_EQ(status_from_string(to_string(s)), s);
  }
  EXPECT_FALSE(status_from_string("fine"));
  EXPECT_EQ(token_limit_param_from_string("max_completion_tokens"),
            token_limit_param::max_completion_tokens);
}

// A short key of a local server ("double" for the loopback model) is also a word of C++: the
// answer and its record keep it, so the candidate compiles and a replay reads the same code; what
// is sent and said about the server is still masked.
TEST(llm_client, a_short_local_key_is_not_masked_in_what_the_model_wrote) {
  const std::string answer = "```cuda\ndouble acc = 0; // double precision\n```";
  fake_chat_server server([&](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({answer}));
  });
  kb::temp_dir dir("llm-short-key");
  file_recorder recorder(dir.path() / "record");
  auto config = test_config(server);
  config.api_key_env = "KB_TEST_LLM_SHORT_KEY";
  ::setenv(config.api_key_env.c_str(), "double", 1);
  client c(config, &recorder);
  const auto r = c.complete(ask("x"));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.choices.size(), 1u);
  EXPECT_EQ(r.choices[0].content, answer);
  EXPECT_EQ(server.requests()[0].authorization, "Bearer double");
  bool recorded = false;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    if (entry.is_regular_file() &&
        read_file(entry.path()).find("double acc = 0") != std::string::npos) {
      recorded = true;
    }
  }
  EXPECT_TRUE(recorded) << "the recorded response lost the answer's code";
  EXPECT_EQ(redactor({"double"}).apply("Bearer double"), "Bearer [redacted]");
  EXPECT_EQ(redactor({"double"}, redactor::min_output_secret).apply("double x"), "double x");
  ::unsetenv(config.api_key_env.c_str());
}

TEST(llm_redactor, masks_the_key_its_pieces_and_bearer_tokens) {
  const redactor r({test_key, "abc"});
  EXPECT_EQ(r.apply("key=" + test_key + "!"), "key=[redacted]!");
  EXPECT_EQ(r.apply("echo " + test_key.substr(0, 20) + "**** end"), "echo [redacted] end");
  EXPECT_EQ(r.apply("Authorization: Bearer sk-other-token-1"), "Authorization: Bearer [redacted]");
  EXPECT_EQ(r.apply("abc stays: too short to be a secret"), "abc stays: too short to be a secret");
  EXPECT_EQ(r.apply("sk-proj-****Fs1Ga keeps the last few"),
            "sk-proj-****Fs1Ga keeps the last few");
  const auto j = r.apply_json({{"a", {test_key, 3}}, {test_key, "x"}});
  EXPECT_EQ(j.dump().find(test_key), std::string::npos);
  EXPECT_EQ(j["a"][1], 3);
}

} // namespace
} // namespace kb::llm
