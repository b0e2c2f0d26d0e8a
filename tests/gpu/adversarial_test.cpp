// Every candidate of tests/adversarial must be rejected with one of the reasons its manifest entry
// names, and the run must go on after each (they are evaluated one after another in this process).
#include "gpu_test_support.hpp"

#include "task/task.hpp"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>

namespace kb::gpu_test {
namespace {

struct entry {
  std::string file;
  std::string task;
  std::vector<std::string> expect;
  bool sanitize = false;
  bool accept = false; // honest: must not be rejected
  int hang_timeout = 30;
};

std::vector<entry> manifest() {
  std::vector<entry> out;
  const auto doc = toml::parse_file((root / "tests/adversarial/manifest.toml").string());
  for (const auto& node : *doc["candidate"].as_array()) {
    const auto& t = *node.as_table();
    entry e;
    e.file = t["file"].value_or(std::string());
    e.task = t["task"].value_or(std::string());
    for (const auto& x : *t["expect"].as_array()) {
      e.expect.push_back(x.value_or(std::string()));
    }
    e.sanitize = t["sanitize"].value_or(false);
    e.accept = t["accept"].value_or(false);
    e.hang_timeout = static_cast<int>(t["hang_timeout"].value_or(int64_t{30}));
    out.push_back(std::move(e));
  }
  return out;
}

// The entries to evaluate: all of them, or where KBLASTER_ADVERSARIAL_ONLY is set (names
// separated by commas), those whose file name contains one of its names (a part of the suite
// rerun on its own, e.g. KBLASTER_ADVERSARIAL_ONLY=pre_go,forged,write_flags).
std::vector<entry> selected() {
  const auto all = manifest();
  const char* only = std::getenv("KBLASTER_ADVERSARIAL_ONLY");
  if (only == nullptr || *only == '\0') {
    return all;
  }
  std::vector<std::string> names;
  std::string cur;
  for (const char* c = only;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty()) {
        names.push_back(cur);
      }
      cur.clear();
      if (*c == '\0') {
        break;
      }
    } else {
      cur += *c;
    }
  }
  std::vector<entry> out;
  for (const auto& e : all) {
    if (std::any_of(names.begin(), names.end(),
                    [&](const std::string& n) { return e.file.find(n) != std::string::npos; })) {
      out.push_back(e);
    }
  }
  return out;
}

// An entry's file: under tests/adversarial, or a portfolio kernel named from the repository root
// (an honest kernel that must stay accepted).
fs::path source_of(const entry& e) {
  return e.file.rfind("portfolio/", 0) == 0 ? root / e.file : root / "tests/adversarial" / e.file;
}

TEST(adversarial, manifest_covers_at_least_fifteen_candidates_that_exist) {
  const auto all = manifest();
  EXPECT_GE(all.size(), 15u);
  for (const auto& e : all) {
    EXPECT_TRUE(fs::exists(source_of(e))) << e.file;
    EXPECT_TRUE(e.accept || !e.expect.empty()) << e.file;
  }
  EXPECT_GE(all.size(), 35u);
}

TEST(adversarial, every_candidate_is_rejected_with_its_expected_reason) {
  nlohmann::json record = nlohmann::json::array();
  auto st = open_store();
  const int64_t run =
      st.begin_run("adversarial", {{"manifest", "tests/adversarial/manifest.toml"}});
  const auto entries = selected();
  for (const auto& e : entries) {
    const auto c = task::find_task(root, e.task);
    auto o = base_options();
    o.sessions = 1;
    o.timing.max_wall = 2.0;
    o.sanitize = e.sanitize;
    o.hang_timeout = std::chrono::seconds(e.hang_timeout);
    const eval::candidate_input cand{read_file(source_of(e)), e.file,
                                     "adversarial"};
    const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
    const auto r = eval::evaluate(root, c, cand, base, o, {});
    eval::record(st, run, c, cand, base, r);
    const bool listed = std::find(e.expect.begin(), e.expect.end(), r.reason) != e.expect.end();
    // A cheat that, once defeated, is honest but slower work may list timing.regressed: the
    // timing then saw all of its work.
    const bool turned_away =
        r.final == eval::verdict::rejected || (r.final == eval::verdict::regressed && listed);
    const bool expected =
        e.accept ? r.final != eval::verdict::rejected && r.final != eval::verdict::error : listed;
    if (e.accept) {
      EXPECT_TRUE(expected) << e.file << ": an honest candidate ended " << eval::to_string(r.final)
                            << " " << r.reason << " (" << r.message << ")";
    } else {
      EXPECT_TRUE(turned_away) << e.file << ": " << eval::to_string(r.final) << " " << r.reason
                               << " " << r.message;
      EXPECT_TRUE(expected) << e.file << ": rejected for " << r.reason << " (" << r.message
                            << "), expected one of " << nlohmann::json(e.expect).dump();
    }
    auto s = summary(r);
    s["file"] = e.file;
    s["task"] = e.task;
    s["expected"] = e.expect;
    s["accept"] = e.accept;
    s["as_expected"] = e.accept ? expected : turned_away && expected;
    record.push_back(s);
    std::printf("%-34s %-4s %-10s %-34s %5.1f s\n", e.file.c_str(), e.task.c_str(),
                eval::to_string(r.final).c_str(), r.reason.c_str(), r.seconds);
  }
  st.finish_run(run, store::run_status::finished, "finished", "adversarial suite");
  // Every evaluation, failures included, is in the store with its reason.
  const auto rows = st.evaluations_of_run(run);
  EXPECT_EQ(rows.size(), entries.size());
  for (const auto& row : rows) {
    EXPECT_FALSE(row.record.reason.empty());
  }
  keep("adversarial", {{"run", run}, {"store", st.dir().string()}, {"evaluations", record}});
}

} // namespace
} // namespace kb::gpu_test
