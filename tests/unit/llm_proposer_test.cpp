#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "llm/llm.hpp"
#include "llm_test_support.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

namespace kb::llm {
namespace {

using namespace testing;

struct softmax_context {
  task::contract task = task::find_task(root, "023");
  search::proposal_context context;

  softmax_context() {
    context.task = &task;
    context.shape = "official";
    context.gpu = "NVIDIA H200, sm_90a";
    context.best_source = read_file(task.baseline);
    context.best_strategy = "normalize.block_per_row";
    context.best_params = {{"block", 256}};
    context.baseline_seconds = 2.5e-3;
    context.best_seconds = 2.0e-3;
    context.floor_seconds = 1.4e-3;
    context.state = "memory-bound at 61% of peak DRAM bandwidth";
    context.metrics = {{"dram_throughput_pct", 61.25}, {"achieved_occupancy", 0.43}};
    search::strategy_outcome s;
    s.strategy = "normalize.online_single_pass";
    s.description = "one read of the row with the online (max, sum) pair";
    s.params = {{"block", 1024}};
    s.attempts = 3;
    s.successes = 2;
    s.best_speedup = 1.37;
    s.mean_speedup = 1.21;
    s.last_failure = "verify.tolerance";
    context.retrieved = {s};
    search::failure_note f;
    f.strategy = "normalize.vectorized";
    f.stage = "compile";
    f.reason = "build.compile_error";
    f.message = "candidate.cu(12): error: identifier \"float5\" is undefined";
    context.recent_failures = {f};
  }
};

proposer_config test_proposer_config() {
  proposer_config c;
  c.project_root = root;
  return c;
}

TEST(llm_prompt, carries_the_contract_the_state_memory_and_failures) {
  softmax_context s;
  const auto material = load_prompt_material(root, s.task);
  const auto messages = build_prompt(s.context, material, prompt_limits{});
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].role, "system");
  EXPECT_NE(messages[0].content.find("\"predicted_speedup\""), std::string::npos);
  EXPECT_NE(messages[0].content.find("```cuda"), std::string::npos);
  const std::string& p = messages[1].content;
  for (const std::string expected : {"Softmax over dim 1",
                                     "normalize",
                                     "torch.softmax(x, dim=1)",
                                     "M=4096 N=393216",
                                     "float32",
                                     "atol 0.0001",
                                     "relative L2 error <= 1e-05",
                                     "8*M*N",
                                     "Family `normalize`", // the family's device-function contract
                                     "kb_online_softmax",  // the task's math file
                                     "KB_ABI_VERSION",     // the candidate ABI header
                                     "KB_NORMALIZE_BASELINE", // the current best source
                                     "normalize.block_per_row",
                                     "1.250x",
                                     "1.4 ms",
                                     "memory-bound at 61%",
                                     "61.25", // the bottleneck and its numbers
                                     "normalize.online_single_pass",
                                     "best 1.370x",
                                     "verify.tolerance", // memory
                                     "float5\" is undefined",
                                     "build.compile_error",
                                     "NVIDIA H200"}) {
    EXPECT_NE(p.find(expected), std::string::npos) << "the prompt lacks: " << expected;
  }
}

TEST(llm_prompt, limits_what_it_quotes) {
  softmax_context s;
  s.context.recent_failures.clear();
  for (int i = 0; i < 6; ++i) {
    search::failure_note f;
    f.stage = "verify";
    f.reason = "verify.mismatch";
    f.message = "failure number " + std::to_string(i) + " " + std::string(5000, 'e');
    s.context.recent_failures.push_back(f);
  }
  prompt_limits limits;
  limits.failures = 2;
  limits.failure_chars = 100;
  const auto p = build_prompt(s.context, load_prompt_material(root, s.task), limits)[1].content;
  EXPECT_EQ(p.find("failure number 3"), std::string::npos);
  EXPECT_NE(p.find("failure number 4"), std::string::npos);
  EXPECT_NE(p.find("failure number 5"), std::string::npos);
  EXPECT_EQ(p.find(std::string(200, 'e')), std::string::npos);
}

TEST(llm_proposer, turns_a_good_answer_into_a_proposal) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({good_answer("normalize.one_pass", 1.35, "first")}, 900, 300));
  });
  client c(test_config(server));
  llm_proposer proposer(c, test_proposer_config());
  softmax_context s;
  const auto r = proposer.propose(s.context);
  ASSERT_TRUE(r.candidate) << r.failure << ": " << r.message;
  EXPECT_EQ(proposer.name(), "llm:test-model");
  EXPECT_EQ(r.candidate->strategy, "normalize.one_pass");
  EXPECT_EQ(r.candidate->hypothesis, "one pass over the row halves the traffic");
  EXPECT_DOUBLE_EQ(r.candidate->predicted_speedup, 1.35);
  EXPECT_EQ(r.candidate->params["block"], 256);
  EXPECT_EQ(r.candidate->origin, "llm:test-model");
  EXPECT_NE(r.candidate->source.find("kb_launch"), std::string::npos);
  EXPECT_NE(r.candidate->source.find("// first"), std::string::npos);
  EXPECT_EQ(r.candidate->trace["repair_turn"], 0);
  EXPECT_EQ(r.candidate->trace["usage"]["prompt_tokens"], 900);
  EXPECT_EQ(r.candidate->trace["answer_digest"].get<std::string>().size(), 64u);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].body["messages"][1]["content"].get<std::string>().find("Softmax over dim 1"),
            std::string::npos);
}

TEST(llm_proposer, a_malformed_answer_is_a_recorded_failure) {
  const std::vector<std::pair<std::string, std::string>> answers{
      {"I think you should use shared memory and warp shuffles.", "stop"},
      {"```json\n{\"strategy\": \"s\"}\n```\n```cuda\n__global__ void k() {}\n```", "stop"},
      {"```json\n{\"strategy\": \"s\"}\n```\n```cuda\nextern \"C\" int kb_launch(const kb_args* a) "
       "{\n",
       "length"},
  };
  fake_chat_server server([&answers](const nlohmann::json&, int index, httplib::Response& res) {
    const auto& [content, finish] = answers[static_cast<size_t>(index)];
    reply_json(res, 200, completion({content}, 10, 10, finish));
  });
  client c(test_config(server));
  llm_proposer proposer(c, test_proposer_config());
  softmax_context s;
  const auto no_code = proposer.propose(s.context);
  EXPECT_FALSE(no_code.candidate);
  EXPECT_EQ(no_code.failure, reason::no_code);
  EXPECT_NE(no_code.message.find("shared memory"), std::string::npos) << no_code.message;
  EXPECT_FALSE(no_code.exhausted);
  const auto no_launch = proposer.propose(s.context);
  EXPECT_EQ(no_launch.failure, reason::malformed_answer);
  const auto cut = proposer.propose(s.context);
  EXPECT_EQ(cut.failure, reason::truncated);
  EXPECT_EQ(server.count(), 3);
}

// A model that names its answer "baseline" gets no trust from the name: the answer is refused.
TEST(llm_proposer, an_answer_named_with_a_reserved_strategy_is_refused) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({good_answer("baseline", 1.35, "first")}, 10, 10));
  });
  client c(test_config(server));
  llm_proposer proposer(c, test_proposer_config());
  softmax_context s;
  const auto r = proposer.propose(s.context);
  EXPECT_FALSE(r.candidate);
  EXPECT_EQ(r.failure, reason::reserved_strategy);
  EXPECT_NE(r.message.find("\"baseline\""), std::string::npos) << r.message;
}

// The portfolio's kernels define kb_launch in a launch template of the project's headers; an
// answer written that way is a candidate (the loader checks the symbol), not a malformed answer.
TEST(llm_proposer, kb_launch_from_a_project_header_is_a_candidate) {
  const std::string code = "#include <kblaster/device/families/common.cuh>\n#include KB_TASK_MATH\n"
                           "#define KB_EW_THREADS 256\n"
                           "#include <kblaster/device/portfolio/elementwise_grid.cuh>\n";
  fake_chat_server server([&code](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200,
               completion({"```json\n{\"strategy\": \"elementwise.grid\"}\n```\n```cuda\n" + code +
                           "```\n"},
                          10, 10));
  });
  client c(test_config(server));
  llm_proposer proposer(c, test_proposer_config());
  softmax_context s;
  const auto r = proposer.propose(s.context);
  ASSERT_TRUE(r.candidate) << r.failure << ": " << r.message;
  EXPECT_EQ(r.candidate->strategy, "elementwise.grid");
  EXPECT_EQ(r.candidate->source, code);
}

TEST(llm_proposer, provider_failures_become_reason_codes) {
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 401,
               api_error("Incorrect API key provided: " + test_key, "invalid_request_error",
                         "invalid_api_key"));
  });
  client c(test_config(server));
  llm_proposer proposer(c, test_proposer_config());
  softmax_context s;
  const auto r = proposer.propose(s.context);
  EXPECT_FALSE(r.candidate);
  EXPECT_EQ(r.failure, "llm.unauthorized");
  EXPECT_TRUE(r.exhausted);
  EXPECT_EQ(r.message.find(test_key), std::string::npos);
}

TEST(llm_proposer, repairs_with_the_error_text_within_a_bounded_number_of_turns) {
  fake_chat_server server([](const nlohmann::json& body, int index, httplib::Response& res) {
    reply_json(
        res, 200,
        completion({good_answer("normalize.one_pass", 1.3, "turn " + std::to_string(index))}));
  });
  client c(test_config(server));
  auto config = test_proposer_config();
  config.max_repair_turns = 2;
  llm_proposer proposer(c, config);
  softmax_context s;
  auto current = proposer.propose(s.context);
  ASSERT_TRUE(current.candidate);
  for (int turn = 1; turn <= 2; ++turn) {
    const std::string error = "candidate.cu(3): error " + std::to_string(turn) + ": expected a ';'";
    const auto repaired = proposer.repair(s.context, *current.candidate, error);
    ASSERT_TRUE(repaired.candidate) << repaired.failure << ": " << repaired.message;
    EXPECT_EQ(repaired.candidate->trace["repair_turn"], turn);
    const auto sent = server.requests().back().body["messages"];
    ASSERT_EQ(sent.size(), 4u);
    EXPECT_EQ(sent[2]["role"], "assistant");
    EXPECT_NE(sent[2]["content"].get<std::string>().find(current.candidate->source),
              std::string::npos);
    EXPECT_EQ(sent[3]["role"], "user");
    EXPECT_NE(sent[3]["content"].get<std::string>().find(error), std::string::npos);
    EXPECT_NE(
        sent[3]["content"].get<std::string>().find("repair turn " + std::to_string(turn) + " of 2"),
        std::string::npos);
    current = repaired;
  }
  const auto refused = proposer.repair(s.context, *current.candidate, "still broken");
  EXPECT_FALSE(refused.candidate);
  EXPECT_EQ(refused.failure, reason::repair_limit);
  EXPECT_TRUE(refused.exhausted);
  EXPECT_EQ(server.count(), 3); // the refused turn sent nothing
}

TEST(llm_proposer, several_samples_from_one_request_serve_later_calls) {
  fake_chat_server server([](const nlohmann::json& body, int, httplib::Response& res) {
    std::vector<std::string> contents;
    for (int i = 0; i < body.value("n", 1); ++i) {
      contents.push_back(good_answer("normalize.s" + std::to_string(i), 1.1, "sample"));
    }
    reply_json(res, 200, completion(contents));
  });
  client c(test_config(server));
  auto config = test_proposer_config();
  config.samples = 2;
  llm_proposer proposer(c, config);
  softmax_context s;
  const auto a = proposer.propose(s.context);
  const auto b = proposer.propose(s.context);
  ASSERT_TRUE(a.candidate && b.candidate);
  EXPECT_EQ(a.candidate->strategy, "normalize.s0");
  EXPECT_EQ(b.candidate->strategy, "normalize.s1");
  EXPECT_EQ(server.count(), 1);
  EXPECT_TRUE(proposer.propose(s.context).candidate);
  EXPECT_EQ(server.count(), 2);
}

void expect_same(const search::proposal_result& a, const search::proposal_result& b) {
  EXPECT_EQ(a.failure, b.failure);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.exhausted, b.exhausted);
  ASSERT_EQ(a.candidate.has_value(), b.candidate.has_value());
  if (a.candidate) {
    EXPECT_EQ(a.candidate->source, b.candidate->source);
    EXPECT_EQ(a.candidate->strategy, b.candidate->strategy);
    EXPECT_EQ(a.candidate->params, b.candidate->params);
    EXPECT_EQ(a.candidate->hypothesis, b.candidate->hypothesis);
    EXPECT_EQ(a.candidate->predicted_speedup, b.candidate->predicted_speedup);
    EXPECT_EQ(a.candidate->origin, b.candidate->origin);
    EXPECT_EQ(a.candidate->trace, b.candidate->trace);
  }
}

TEST(llm_proposer, a_recorded_run_replays_to_the_same_proposals_without_a_server) {
  kb::temp_dir dir("llm-replay");
  const fs::path record_dir = dir.path() / "record";
  softmax_context s;
  client_config config;

  // A run whose answers differ per request, with a rate limit, a switch of the token-limit
  // field, a malformed answer and a repair along the way.
  const auto run = [&s](client& c) {
    llm_proposer proposer(c, test_proposer_config());
    std::vector<search::proposal_result> out;
    out.push_back(proposer.propose(s.context));
    out.push_back(proposer.propose(s.context));
    out.push_back(proposer.propose(s.context));
    if (out[0].candidate) {
      out.push_back(proposer.repair(s.context, *out[0].candidate, "error: expected a ';'"));
    }
    return out;
  };
  std::vector<search::proposal_result> live;
  {
    fake_chat_server server([](const nlohmann::json& body, int index, httplib::Response& res) {
      if (body.contains("max_tokens")) {
        reply_json(res, 400,
                   api_error("Unsupported parameter: 'max_tokens'", "invalid_request_error",
                             "unsupported_parameter", "max_tokens"));
      } else if (index == 2) {
        res.set_header("Retry-After", "1");
        reply_json(res, 429, api_error("Rate limit reached", "requests", "rate_limit_exceeded"));
      } else if (index == 4) {
        reply_json(res, 200, completion({"no code this time, sorry"}));
      } else {
        reply_json(res, 200,
                   completion({good_answer("normalize.v" + std::to_string(index),
                                           1.0 + index / 10.0, "request " + std::to_string(index))},
                              100 + index, 50 + index));
      }
    });
    config = test_config(server);
    file_recorder recorder(record_dir);
    client c(config, &recorder);
    live = run(c);
    EXPECT_EQ(server.count(), 6);
  } // the server is gone from here on

  const auto record = load_record(record_dir);
  ASSERT_EQ(record.size(), 6u);
  const auto started = std::chrono::steady_clock::now();
  auto replaying = client::replay(config, record);
  const auto replayed = run(*replaying);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 0.9)
      << "a replay does not wait for Retry-After";
  EXPECT_EQ(replaying->replay_mismatches(), 0);
  ASSERT_EQ(live.size(), 4u);
  ASSERT_EQ(replayed.size(), live.size());
  EXPECT_TRUE(live[0].candidate && live[1].candidate && live[3].candidate);
  EXPECT_EQ(live[2].failure, reason::no_code);
  for (size_t i = 0; i < live.size(); ++i) {
    SCOPED_TRACE(i);
    expect_same(live[i], replayed[i]);
  }

  // Requests the run never sent are served from the record in sequence, and counted: here the
  // token-limit refusal, then the first answer.
  auto changed = client::replay(config, record);
  const auto r = changed->complete(ask("a prompt the run never sent"));
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.requests, 2);
  EXPECT_EQ(changed->replay_mismatches(), 2);
}

TEST(llm_record, names_files_by_content_and_rejects_edits) {
  kb::temp_dir dir("llm-record");
  file_recorder recorder(dir.path());
  recorder.record({{"a", 1}}, {{"b", 2}}, {{"request_digest", "d1"}, {"status", "ok"}});
  recorder.record({{"a", 3}}, {{"b", 4}}, {{"request_digest", "d2"}, {"status", "timeout"}});
  auto record = load_record(dir.path());
  ASSERT_EQ(record.size(), 2u);
  EXPECT_EQ(record[0].request["a"], 1);
  EXPECT_EQ(record[1].meta["status"], "timeout");
  {
    file_recorder appending(dir.path());
    appending.record({{"a", 5}}, {}, {});
  }
  EXPECT_EQ(load_record(dir.path()).size(), 3u);

  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().extension() == ".json") {
      EXPECT_EQ(entry.path().stem().string(), sha256_hex(read_file(entry.path())));
    }
  }
  const std::string index = read_file(dir.path() / "index.jsonl");
  const std::string first = nlohmann::json::parse(index.substr(0, index.find('\n')))["file"];
  std::string content = read_file(dir.path() / first);
  content.replace(content.find("\"b\": 2"), 6, "\"b\": 9");
  write_file_atomic(dir.path() / first, content);
  EXPECT_THROW(load_record(dir.path()), input_error);
  EXPECT_THROW(load_record(dir.path() / "missing"), input_error);
}

} // namespace
} // namespace kb::llm
