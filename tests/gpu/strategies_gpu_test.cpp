// Every strategy the library offers a task, at its default point, verified on the GPU against the
// task's float64 oracle (kb::eval::evaluate with verify_only: the check shapes and the official
// shape, every distribution and seed, NaN poison, untouched inputs, bitwise determinism), for the
// repository's tasks and the made-up ones in tests/data/tasks.
//
// Knobs (environment):
//   KBLASTER_GPU_STRATEGY_POINTS=corners  also the corner points of each strategy's space
//   KBLASTER_GPU_STRATEGY_QUICK=1         verify at the check shapes only (skip the official shape)
//   KBLASTER_GPU_SANITIZE=1               compute-sanitizer (memcheck, racecheck, initcheck,
//                                         synccheck) at the check shapes first
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace kb::search {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

bool env_is(const char* name, const std::string& value) {
  const char* v = std::getenv(name);
  return v != nullptr && value == v;
}

const std::vector<task::contract>& every_task() {
  static const std::vector<task::contract> tasks = [] {
    std::vector<task::contract> all = task::load_all(root);
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root / "tests" / "data" / "tasks")) {
      dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
      all.push_back(task::load_contract(d / "task.toml"));
    }
    return all;
  }();
  return tasks;
}

struct gpu_case {
  size_t task_index = 0;
  std::string strategy;
  nlohmann::json params;
  std::string label;
};

std::vector<gpu_case> gpu_cases() {
  std::vector<gpu_case> cases;
  const bool corners = env_is("KBLASTER_GPU_STRATEGY_POINTS", "corners");
  for (size_t i = 0; i < every_task().size(); ++i) {
    for (const auto* s : strategies_for(every_task()[i])) {
      const auto points = corners ? corner_points(*s) : std::vector<nlohmann::json>{s->defaults};
      for (size_t p = 0; p < points.size(); ++p) {
        cases.push_back({i, s->name, points[p], p == 0 ? "default" : "corner" + std::to_string(p)});
      }
    }
  }
  return cases;
}

void PrintTo(const gpu_case& info, std::ostream* os) {
  *os << every_task()[info.task_index].id + " " + info.strategy + " " + info.params.dump();
}

class strategy_on_gpu : public ::testing::TestWithParam<gpu_case> {};

TEST_P(strategy_on_gpu, passes_verification) {
  const auto probe = eval::probe_device();
  if (!probe.available) {
    GTEST_SKIP() << probe.reason;
  }
  const auto& cc = GetParam();
  const auto& c = every_task()[cc.task_index];
  const strategy& s = find_strategy(cc.strategy);
  eval::options opt;
  opt.verify_only = true;
  opt.cache_dir = default_cache_dir();
  opt.sanitize = env_is("KBLASTER_GPU_SANITIZE", "1");
  if (env_is("KBLASTER_GPU_STRATEGY_QUICK", "1")) {
    opt.shape = c.shapes_with_role("check").front()->name;
  }
  const eval::candidate_input candidate{generate(c, s, cc.params), "candidate.cu", "proposer"};
  const eval::candidate_input baseline{read_file(c.baseline), "baseline.cu", "baseline"};
  const auto r = eval::evaluate(root, c, candidate, baseline, opt, {});
  EXPECT_EQ(eval::to_string(r.final), "same")
      << candidate_info(s, cc.params) << " on " << c.suite << "/" << c.id << ": " << r.reason
      << ": " << r.message;
  EXPECT_EQ(r.reason, "verify.passed");
  if (opt.sanitize) {
    // Each of the four tools ran, found nothing, and its own summary line says so; the line
    // printed here is the record of it in the test log.
    ASSERT_TRUE(r.sanitize) << "the sanitizer did not run";
    const auto& tools = *r.sanitize;
    std::string line =
        fmt::format("sanitize {}/{} {}:", c.suite, c.id, candidate_info(s, cc.params));
    for (const char* tool : {"memcheck", "racecheck", "initcheck", "synccheck"}) {
      ASSERT_TRUE(tools.contains(tool)) << tool << " did not run";
      const auto& t = tools.at(tool);
      EXPECT_FALSE(t.errors) << tool << ": " << t.log_tail;
      const bool summarized = t.summary_errors.has_value();
      EXPECT_TRUE(summarized) << tool << " printed no summary line: " << t.log_tail;
      line += fmt::format(" {}={}", tool,
                          summarized ? fmt::format("{} errors/{} warnings", *t.summary_errors,
                                                   t.summary_warnings.value_or(-1))
                                     : std::string("no summary"));
    }
    std::printf("%s\n", line.c_str());
  }
}

std::string case_name(const ::testing::TestParamInfo<gpu_case>& info) {
  const auto& c = every_task()[info.param.task_index];
  std::string n = c.suite + "_" + c.id + "_" + info.param.strategy + "_" + info.param.label;
  for (auto& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      ch = '_';
    }
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(strategies, strategy_on_gpu, ::testing::ValuesIn(gpu_cases()), case_name);

} // namespace
} // namespace kb::search
