// On the GPU: the same candidate evaluated twice compiles once, and both evaluations are recorded.
#include "gpu_test_support.hpp"

#include "task/task.hpp"

#include <gtest/gtest.h>

#include <random>

namespace kb::gpu_test {
namespace {

TEST(store_on_gpu, evaluating_the_same_candidate_twice_compiles_once) {
  const auto c = task::find_task(root, "019");
  auto st = open_store();
  const int64_t run = st.begin_run("compile-once", nlohmann::json::object());
  std::random_device rd;
  // A fresh comment makes a source nobody compiled before.
  const eval::candidate_input cand{read_file(root / "portfolio/core10/019_relu.cu") + "\n// " +
                                       std::to_string(rd()) + "\n",
                                   "019_relu.cu", "portfolio"};
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  auto o = base_options();
  o.verify_only = true;
  nlohmann::json builds = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    const auto r = eval::evaluate(root, c, cand, base, o, {});
    EXPECT_EQ(r.reason, "verify.passed") << r.message;
    eval::record(st, run, c, cand, base, r);
    builds.push_back(r.builds.at("candidate").to_json());
  }
  st.finish_run(run, store::run_status::finished, "finished", "");
  EXPECT_FALSE(builds[0].value("cached", true));
  EXPECT_TRUE(builds[1].value("cached", false));
  EXPECT_EQ(builds[0]["binary_digest"], builds[1]["binary_digest"]);
  EXPECT_EQ(st.evaluations_of_run(run).size(), 2u);
  keep("compile_once", {{"run", run}, {"builds", builds}});
}

} // namespace
} // namespace kb::gpu_test
