// On the GPU: every portfolio kernel passes the full verification, compute-sanitizer included.
#include "gpu_test_support.hpp"

#include "task/task.hpp"

#include <gtest/gtest.h>

namespace kb::gpu_test {
namespace {

TEST(portfolio, every_kernel_passes_verification_and_the_sanitizers) {
  nlohmann::json record = nlohmann::json::array();
  int count = 0;
  for (const auto& c : task::load_all(root)) {
    for (const auto& file : task::portfolio_files(root, c)) {
      ++count;
      auto o = base_options();
      o.verify_only = true;
      o.sanitize = true;
      const eval::candidate_input cand{read_file(file), file.filename().string(), "portfolio"};
      const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
      const auto r = eval::evaluate(root, c, cand, base, o, {});
      EXPECT_EQ(r.reason, "verify.passed") << file.filename() << ": " << r.message;
      auto s = summary(r);
      s["file"] = fs::relative(file, root).string();
      s["verification"] = r.verification;
      s["sanitize"] = r.sanitize ? nlohmann::json(*r.sanitize) : nlohmann::json::object();
      record.push_back(s);
      std::printf("%-28s %-16s %s\n", file.filename().c_str(), r.reason.c_str(),
                  r.message.substr(0, 160).c_str());
    }
  }
  EXPECT_GE(count, 13);
  keep("portfolio_verification", record);
}

} // namespace
} // namespace kb::gpu_test
