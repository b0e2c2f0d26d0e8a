// On the GPU: problems in KernelBench's format (this project's own files under
// tests/data/kernelbench), imported and judged against their PyTorch module. The eager baseline of
// each passes its own verification at every shape and distribution and times as the same against
// itself; on the imported ReLU, candidates get the verdicts they get on the native task 019.
#include "gpu_test_support.hpp"

#include "pytorch/pytorch.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

namespace kb::gpu_test {
namespace {

struct imported {
  fs::path dir;
  std::vector<task::contract> tasks;
};

imported import_problems(const std::vector<std::string>& files) {
  imported out;
  out.dir = fs::temp_directory_path() / ("kblaster-gpu-pytorch-" + std::to_string(getpid()));
  fs::remove_all(out.dir);
  pytorch::import_options opt;
  opt.suite = "gpu_pytorch";
  opt.out = out.dir;
  opt.python = pytorch::probe(root).python;
  std::vector<fs::path> paths;
  for (const auto& f : files) {
    paths.push_back(root / "tests/data/kernelbench/level1" / f);
  }
  // The test's own problem files are trusted to run, in a trust file of the test's.
  setenv("KBLASTER_TRUST_FILE", (out.dir / "trusted_modules").c_str(), 1);
  for (const auto& r : pytorch::import_files(root, paths, opt)) {
    // flagged: imported, with a degenerate official distribution (ReLU on uniform01 inputs).
    const bool written =
        r.status == pytorch::import_status::imported || r.status == pytorch::import_status::flagged;
    EXPECT_TRUE(written) << r.file << ": " << pytorch::to_string(r.status) << " " << r.reason;
    if (written) {
      pytorch::trust_module(r.task_dir / "model.py");
      auto c = task::load_contract(r.task_dir / "task.toml");
      const auto ready = pytorch::make_ready(root, c);
      EXPECT_TRUE(ready.ok) << c.id << ": " << ready.reason << " " << ready.message;
      if (ready.ok) {
        out.tasks.push_back(std::move(c));
      }
    }
  }
  return out;
}

eval::result judge(const task::contract& c, const eval::candidate_input& cand) {
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  // The evaluation's progress lines, timestamped, show in the log where the time went.
  const auto started = std::chrono::steady_clock::now();
  const eval::progress_fn say = [&](const std::string& line) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("  [%s %6.1f s] %s\n", c.id.c_str(), t, line.c_str());
    std::fflush(stdout);
  };
  return eval::evaluate(root, c, cand, base, base_options(), say);
}

class pytorch_tasks : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(eval::probe_device().available) << eval::probe_device().reason;
    const auto& a = pytorch::probe(root);
    ASSERT_TRUE(a.available) << "the GPU tests need PyTorch ($KBLASTER_PYTHON or python3): "
                             << a.reason << " " << a.detail;
  }
};

// The convolution's weight is state the judge draws; its float64 reference runs in the judge's
// process on the judge's stream, after the inputs are generated there.
TEST_F(pytorch_tasks, every_imported_baseline_verifies_and_is_never_called_faster_than_itself) {
  const auto im = import_problems({"1_ReLU.py", "4_Conv2dSquare.py", "6_SoftmaxRows.py"});
  ASSERT_EQ(im.tasks.size(), 3U);
  nlohmann::json record = nlohmann::json::array();
  for (const auto& c : im.tasks) {
    const auto r = judge(c, {read_file(c.baseline), "baseline-copy.cu", "baseline"});
    // Against itself the gate may find no difference (same) or too little evidence either way
    // (inconclusive, at a tiny shape where delta is the timing's resolution); it must never claim
    // one, and the baseline must pass its own verification.
    EXPECT_TRUE(r.final == eval::verdict::same || r.final == eval::verdict::inconclusive)
        << c.id << ": " << eval::to_string(r.final) << " " << r.reason << " " << r.message;
    std::printf("%-40s %-8s %s\n", c.id.c_str(), eval::to_string(r.final).c_str(),
                r.reason.c_str());
    // Before each round on contents the judge prepared (its float64 oracle ran), the device
    // settled: a probe timed once per such round at least, against the session's quiet probe.
    for (const auto& session : r.timing) {
      const auto& settle = session.record.at("settle");
      const auto& reuse = session.record.at("reuse");
      EXPECT_GT(settle.at("quiet_probe_s").get<double>(), 0) << c.id;
      EXPECT_EQ(settle.at("waits").get<int>(),
                reuse.at("fresh_rounds").get<int>() + reuse.at("redrawn_rounds").get<int>())
          << c.id;
      EXPECT_GE(settle.at("probes").get<int>(), 3 * settle.at("waits").get<int>()) << c.id;
    }
    auto s = summary(r);
    s["task"] = c.id;
    record.push_back(s);
  }
  keep("pytorch_baselines", {{"evaluations", record}});
  fs::remove_all(im.dir);
}

TEST_F(pytorch_tasks, an_imported_relu_gives_the_verdicts_of_the_native_task) {
  const auto im = import_problems({"1_ReLU.py"});
  ASSERT_EQ(im.tasks.size(), 1U);
  const auto native = task::load_contract(root / "tasks/core10/019_relu/task.toml");
  struct expectation {
    std::string file;
    bool accepted;
    std::string reason;
  };
  const std::vector<expectation> cases{
      {"tests/data/candidates/relu_grid_stride.cu", true, ""},
      {"tests/adversarial/identity_relu.cu", false, "verify.mismatch"},
      {"tests/adversarial/malloc_every_call_relu.cu", false, "abi.allocation"},
  };
  nlohmann::json record = nlohmann::json::array();
  for (const auto& e : cases) {
    const eval::candidate_input cand{read_file(root / e.file), fs::path(e.file).filename().string(),
                                     "test"};
    for (const auto* c : {&im.tasks.front(), &native}) {
      const auto r = judge(*c, cand);
      const bool accepted = r.final != eval::verdict::rejected && r.final != eval::verdict::error;
      EXPECT_EQ(accepted, e.accepted)
          << e.file << " on " << c->id << ": " << eval::to_string(r.final) << " " << r.reason;
      if (!e.accepted) {
        EXPECT_EQ(r.reason, e.reason) << e.file << " on " << c->id << ": " << r.message;
      }
      std::printf("%-44s on %-10s %-9s %s\n", e.file.c_str(), c->id.c_str(),
                  eval::to_string(r.final).c_str(), r.reason.c_str());
      auto s = summary(r);
      s["task"] = c->id;
      s["candidate"] = e.file;
      record.push_back(s);
    }
  }
  keep("pytorch_relu_verdicts", {{"evaluations", record}});
  fs::remove_all(im.dir);
}

} // namespace
} // namespace kb::gpu_test
