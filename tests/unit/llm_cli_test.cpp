#include "common/fs.hpp"
#include "common/process.hpp"
#include "llm_test_support.hpp"

#include <gtest/gtest.h>

namespace kb::llm {
namespace {

using namespace testing;

struct cli_run {
  int exit_code;
  std::string output;
};

// Runs `kblaster llm check ...` with only the given environment (and a private HOME, so no
// config file of the machine's user is read).
cli_run run_check(const std::vector<std::string>& args, std::map<std::string, std::string> env,
                  const fs::path& home) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY, "llm", "check"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  env["HOME"] = home.string();
  env["PATH"] = "/usr/bin:/bin";
  spec.env = env;
  spec.timeout = std::chrono::seconds(60);
  const auto r = run_process(spec);
  return {r.exit_code, r.output};
}

TEST(llm_cli, check_says_ok_and_exits_zero) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"OK"}, 12, 1));
  });
  kb::temp_dir home("llm-cli");
  const auto r = run_check({"--llm-base-url", server.base_url(), "--llm-model", "m1"},
                           {{"KBLASTER_LLM_API_KEY", test_key}}, home.path());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: model m1 answered"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("$KBLASTER_LLM_API_KEY (set)"), std::string::npos) << r.output;
  ASSERT_EQ(server.count(), 1);
  const auto seen = server.requests()[0];
  EXPECT_EQ(seen.body["max_tokens"], 1);
  EXPECT_EQ(seen.authorization, "Bearer " + test_key);
  EXPECT_EQ(r.output.find(test_key.substr(0, 12)), std::string::npos);
}

TEST(llm_cli, check_reports_each_failure_clearly_and_never_prints_the_key) {
  struct scenario {
    int http_status;
    nlohmann::json body;
    std::string word;
  };
  const std::vector<scenario> scenarios{
      {401,
       api_error("Incorrect API key provided: " + test_key, "invalid_request_error",
                 "invalid_api_key"),
       "unauthorized"},
      {429,
       api_error("You exceeded your current quota (key " + test_key + ")", "insufficient_quota",
                 "insufficient_quota"),
       "quota"},
      {404,
       api_error("The model `m1` does not exist for key " + test_key, "invalid_request_error",
                 "model_not_found"),
       "bad_request"},
  };
  kb::temp_dir home("llm-cli");
  for (const auto& s : scenarios) {
    fake_chat_server server([&s](const nlohmann::json&, int, httplib::Response& res) {
      reply_json(res, s.http_status, s.body);
    });
    // The fallback variable and the --json output are exercised too.
    for (const bool json : {false, true}) {
      std::vector<std::string> args{"--llm-base-url", server.base_url(), "--llm-model", "m1"};
      if (json) {
        args.push_back("--json");
      }
      const auto r = run_check(args, {{"OPENAI_API_KEY", test_key}}, home.path());
      EXPECT_EQ(r.exit_code, 3) << r.output;
      if (json) {
        const auto j = nlohmann::json::parse(r.output);
        EXPECT_EQ(j["status"], s.word);
        EXPECT_EQ(j["api_key_env"], "OPENAI_API_KEY");
      } else {
        EXPECT_NE(r.output.find(s.word + ": HTTP " + std::to_string(s.http_status)),
                  std::string::npos)
            << r.output;
      }
      for (size_t i = 0; i + 12 <= test_key.size(); ++i) {
        ASSERT_EQ(r.output.find(test_key.substr(i, 12)), std::string::npos) << r.output;
      }
    }
  }
  // Nothing listens: unreachable.
  int port = 0;
  {
    fake_chat_server gone([](const nlohmann::json&, int, httplib::Response&) {});
    port = gone.port();
  }
  const auto r = run_check(
      {"--llm-base-url", "http://127.0.0.1:" + std::to_string(port) + "/v1", "--llm-model", "m1"},
      {{"KBLASTER_LLM_API_KEY", test_key}}, home.path());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("unreachable: cannot reach"), std::string::npos) << r.output;
}

TEST(llm_cli, flags_override_the_environment_which_overrides_the_config_file) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({"OK"}));
  });
  kb::temp_dir home("llm-cli");
  const fs::path config = home.path() / ".config" / "kblaster" / "config.toml";
  fs::create_directories(config.parent_path());
  write_file_atomic(config,
                    "[llm]\nbase_url = \"" + server.base_url() +
                        "\"\nmodel = \"file-model\"\napi_key_env = \"MY_KEY\"\nmax_tokens = 77\n");
  const std::map<std::string, std::string> key{{"MY_KEY", test_key}};

  EXPECT_EQ(run_check({}, key, home.path()).exit_code, 0);
  auto env = key;
  env["KBLASTER_LLM_MODEL"] = "env-model";
  EXPECT_EQ(run_check({}, env, home.path()).exit_code, 0);
  EXPECT_EQ(run_check({"--llm-model", "flag-model"}, env, home.path()).exit_code, 0);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].body["model"], "file-model");
  EXPECT_EQ(seen[1].body["model"], "env-model");
  EXPECT_EQ(seen[2].body["model"], "flag-model");
  EXPECT_EQ(seen[0].authorization, "Bearer " + test_key);

  // --config names another file; a wrong setting there is an input error naming it.
  const fs::path other = home.path() / "other.toml";
  write_file_atomic(other, "[llm]\nbase_url = \"" + server.base_url() +
                               "\"\nmodel = \"x\"\napi_key = \"sk-no\"\n");
  auto r = run_check({"--config", other.string()}, key, home.path());
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_NE(r.output.find("never read from a file"), std::string::npos) << r.output;
  write_file_atomic(other, "[llm]\nmodle = \"x\"\n");
  r = run_check({"--config", other.string()}, key, home.path());
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_NE(r.output.find("no setting modle"), std::string::npos) << r.output;
  write_file_atomic(other, "[llm]\nmax_retries = \"many\"\n");
  r = run_check({"--config", other.string()}, key, home.path());
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_NE(r.output.find("max_retries must be an integer"), std::string::npos) << r.output;
  EXPECT_EQ(server.count(), 3);
}

TEST(llm_cli, check_without_an_endpoint_says_where_to_give_one) {
  kb::temp_dir home("llm-cli");
  const auto r = run_check({"--llm-model", "m"}, {}, home.path());
  EXPECT_EQ(r.exit_code, 65);
  EXPECT_NE(r.output.find("--llm-base-url"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("KBLASTER_LLM_BASE_URL"), std::string::npos) << r.output;
}

} // namespace
} // namespace kb::llm
