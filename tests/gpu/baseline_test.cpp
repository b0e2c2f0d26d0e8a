// On the GPU: every task's baseline passes verification and, timed against itself, gives "same"
// (A/A); the checker proves it rejects trivial outputs; and the full evaluation of a freshly
// compiled candidate at the official shape (compile, verify, time) takes at most 15 s median.
#include "gpu_test_support.hpp"

#include "task/task.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace kb::gpu_test {
namespace {

TEST(baselines, verify_and_time_as_the_same_against_themselves) {
  ASSERT_TRUE(eval::probe_device().available) << eval::probe_device().reason;
  nlohmann::json record = nlohmann::json::array();
  std::vector<double> seconds;
  std::random_device rd;
  for (const auto& c : task::load_all(root)) {
    auto o = base_options();
    const std::string source = read_file(c.baseline);
    // A comment with a fresh number gives the candidate its own digest, so it is compiled anew:
    // the evaluation time includes a real compile.
    const eval::candidate_input cand{source + "\n// evaluation-time probe " + std::to_string(rd()) +
                                         "\n",
                                     "baseline-copy.cu", "baseline"};
    const eval::candidate_input base{source, "baseline.cu", "baseline"};
    const auto r = eval::evaluate(root, c, cand, base, o, {});
    EXPECT_EQ(r.final, eval::verdict::same) << c.id << ": " << r.reason << " " << r.message;
    EXPECT_TRUE(r.detail.value("checker_selftest", nlohmann::json::object()).value("sound", false))
        << c.id;
    auto s = summary(r);
    s["task"] = c.id;
    s["name"] = c.name;
    s["floor_seconds"] = r.detail.value("floor_seconds", 0.0);
    record.push_back(s);
    seconds.push_back(r.seconds);
    const auto& st = r.detail.value("statistics", nlohmann::json::object());
    std::printf("%-4s %-16s %-8s baseline %9.4f ms  floor %8.4f ms (%5.1f%%)  eval %5.1f s\n",
                c.id.c_str(), c.name.c_str(), eval::to_string(r.final).c_str(),
                1e3 * st.value("median_baseline_s", 0.0),
                1e3 * r.detail.value("floor_seconds", 0.0),
                100 * st.value("baseline_floor_fraction", 0.0), r.seconds);
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  keep("baselines", {{"evaluations", record}, {"evaluation_seconds_median", median}});
  EXPECT_LE(median, 15.0) << "median evaluation time of a freshly compiled candidate";
}

} // namespace
} // namespace kb::gpu_test
