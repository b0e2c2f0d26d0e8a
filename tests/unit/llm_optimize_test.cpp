// The LLM proposer in the optimization loop: a run against a chat server on loopback is recorded,
// and replaying the record with the server stopped makes the same decisions.
#include "common/fs.hpp"
#include "common/process.hpp"
#include "llm_test_support.hpp"
#include "search/optimize.hpp"
#include "search_test_support.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kb::llm {
namespace {

using namespace kb::llm::testing;
using nlohmann::json;

json decisions(const search::task_result& r) {
  json d{{"outcome", search::to_string(r.final)},
         {"reason", r.reason},
         {"best", r.best_strategy},
         {"evaluations", r.evaluations}};
  for (const auto& s : r.steps) {
    d["steps"].push_back(
        {s.value("strategy", ""), s.value("verdict", s.value("proposal_failure", ""))});
  }
  return d;
}

search::task_result optimize_once(client& c, const fs::path& store_dir,
                                  search::testing::scripted_gpu& gpu,
                                  const task::contract& t = task::find_task(root, "023")) {
  store::store st(store_dir);
  search::memory mem(st);
  proposer_config pc;
  pc.project_root = root;
  llm_proposer prop(c, pc);
  search::optimize_options o;
  o.rollouts = 1;
  o.steps = 4;
  o.target_floor_fraction = 1e9;
  search::optimizer opt(st, st.begin_run("optimize", json::object()), mem, prop, o, "gpu",
                        std::ref(gpu), {}, {});
  return opt.optimize(t);
}

TEST(llm_optimize, a_recorded_run_replayed_without_the_server_makes_the_same_decisions) {
  temp_dir dir("llm-optimize");
  client_config config;
  search::testing::scripted_gpu live_gpu;
  live_gpu.speed = {{"online.one_pass", 1.4}, {"online.two_rows", 1.2}, {"fail", 1.0}};
  json live;
  {
    // Answers vary per request: a good strategy, a broken one, an answer without code, a better
    // one.
    fake_chat_server server([](const json&, int index, httplib::Response& res) {
      if (index == 0) {
        reply_json(res, 200, completion({good_answer("online.two_rows", 1.2, "first")}));
      } else if (index == 1) {
        reply_json(res, 200, completion({good_answer("fail", 1.1, "second")}));
      } else if (index == 2) {
        reply_json(res, 200, completion({"I would rather explain than write code."}));
      } else {
        reply_json(
            res, 200,
            completion({good_answer("online.one_pass", 1.3, "later " + std::to_string(index))}));
      }
    });
    config = test_config(server);
    file_recorder recorder(dir.path() / "record");
    client c(config, &recorder);
    live = decisions(optimize_once(c, dir.path() / "store-live", live_gpu));
    EXPECT_GT(server.count(), 3);
  }
  EXPECT_EQ(live.value("outcome", ""), "improved") << live.dump(2);
  EXPECT_EQ(live.value("best", ""), "online.one_pass") << live.dump(2);

  search::testing::scripted_gpu replay_gpu;
  replay_gpu.speed = live_gpu.speed;
  auto replaying = client::replay(config, load_record(dir.path() / "record"));
  const json replayed =
      decisions(optimize_once(*replaying, dir.path() / "store-replay", replay_gpu));
  EXPECT_EQ(replaying->replay_mismatches(), 0);
  EXPECT_EQ(replayed, live);
  EXPECT_EQ(replay_gpu.seen, live_gpu.seen);
}

// A candidate that does not compile: the repair turn shows the model the compiler's lines, and
// the step that stays broken keeps them in the run's record.
TEST(llm_optimize, a_broken_candidate_brings_the_compiler_output_to_the_repair_and_the_record) {
  temp_dir dir("llm-optimize-broken");
  search::testing::scripted_gpu gpu;
  gpu.speed = {{"online.one_pass", 1.4}};
  fake_chat_server server([](const json&, int index, httplib::Response& res) {
    reply_json(res, 200,
               completion({good_answer(index < 2 ? "broken" : "online.one_pass", 1.2,
                                       "answer " + std::to_string(index))}));
  });
  client c(test_config(server));
  const auto r = optimize_once(c, dir.path() / "store", gpu);
  const auto seen = server.requests();
  ASSERT_GE(seen.size(), 2u);
  const auto repair = seen[1].body["messages"].back()["content"].get<std::string>();
  EXPECT_NE(repair.find("error: expected a \";\""), std::string::npos) << repair.substr(0, 400);
  bool kept = false;
  for (const auto& s : r.steps) {
    if (s.value("strategy", "") == "broken") {
      EXPECT_EQ(s.value("reason", ""), "build.compile_error");
      const auto tail = s.value("build_log_tail", std::string());
      EXPECT_LE(tail.size(), 1500u);
      EXPECT_NE(tail.find("error: expected a \";\""), std::string::npos) << tail;
      kept = true;
    }
  }
  EXPECT_TRUE(kept) << decisions(r).dump(2);
}

// An imported KernelBench problem (a pytorch task) through the LLM loop: the prompt carries the
// module's source and the contract, the module is described into its state and outputs, and
// the proposer's candidates are judged against the eager baseline (scripted here).
TEST(llm_optimize, an_imported_pytorch_task_goes_through_the_loop) {
  std::string python;
  for (const std::string py :
       {std::string(std::getenv("KBLASTER_PYTHON") != nullptr ? std::getenv("KBLASTER_PYTHON")
                                                              : ""),
        std::string("/usr/bin/python3")}) {
    process_spec probe;
    probe.argv = {py, "-c", "import torch"};
    if (!py.empty() && run_process(probe).ok()) {
      python = py;
      break;
    }
  }
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch here (scripts/install-deps.sh --tests installs it)";
  }
  ::setenv("KBLASTER_PYTHON", python.c_str(), 1);
  temp_dir dir("llm-optimize-pytorch");
  // The project's own problem file is trusted to run (--trust), in a trust file of the test's.
  const auto trust_file = dir.path() / "trusted_modules";
  ::setenv("KBLASTER_TRUST_FILE", trust_file.c_str(), 1);
  process_spec import;
  import.argv = {KBLASTER_BINARY,
                 "tasks",
                 "import",
                 "--trust",
                 "--out",
                 (dir.path() / "tasks").string(),
                 (root / "tests/data/kernelbench/level1/4_Conv2dSquare.py").string()};
  ASSERT_TRUE(run_process(import).ok());
  const auto conv = task::load_contract(dir.path() / "tasks/L1_004_Conv2dSquare/task.toml");
  ASSERT_EQ(conv.kind, task::task_kind::pytorch);
  search::testing::scripted_gpu gpu;
  gpu.speed = {{"pytorch.direct_conv", 1.5}};
  fake_chat_server server([](const json&, int index, httplib::Response& res) {
    reply_json(res, 200,
               completion({good_answer("pytorch.direct_conv", 1.5, std::to_string(index))}));
  });
  client c(test_config(server));
  const auto r = optimize_once(c, dir.path() / "store", gpu, conv);
  EXPECT_EQ(search::to_string(r.final), "improved") << decisions(r).dump(2);
  EXPECT_EQ(r.best_strategy, "pytorch.direct_conv");
  // Described: the weight is an input after x, and the generated baseline is eager PyTorch.
  EXPECT_TRUE(fs::exists(conv.dir / "resolved.json"));
  const auto seen = server.requests();
  ASSERT_FALSE(seen.empty());
  const auto prompt = seen[0].body["messages"][1]["content"].get<std::string>();
  EXPECT_NE(prompt.find("class Model(nn.Module)"), std::string::npos) << prompt.substr(0, 600);
  EXPECT_NE(prompt.find("Reference: the PyTorch module"), std::string::npos);
  ::unsetenv("KBLASTER_PYTHON");
  ::unsetenv("KBLASTER_TRUST_FILE");
}

} // namespace
} // namespace kb::llm
