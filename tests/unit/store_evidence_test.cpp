#include "common/error.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"
#include "eval/eval.hpp"
#include "store_test_support.hpp"

#include <algorithm>
#include <fstream>
#include <functional>

namespace kb::store::testing {
namespace {

class evidence_test : public store_test {
protected:
  void SetUp() override {
    store_test::SetUp();
    m_store = std::make_unique<store>(store_dir());
    m_run = record_sample_run(*m_store, "one");
    m_other = record_sample_run(*m_store, "two");
    const auto report = m_store->export_evidence(m_run.run, out(), eval::recorded_outcome_of);
    ASSERT_TRUE(report.ok()) << ::testing::PrintToString(report.problems);
  }
  fs::path out() const { return tmp() / "evidence"; }
  bool passes() const { return check_evidence(out(), eval::recorded_outcome_of).ok(); }
  std::string problems() const {
    return ::testing::PrintToString(check_evidence(out(), eval::recorded_outcome_of).problems);
  }
  void make_writable(const fs::path& file) const {
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  }

  std::unique_ptr<store> m_store;
  recorded_run m_run;
  recorded_run m_other;
};

TEST_F(evidence_test, an_export_holds_the_runs_rows_and_blobs_and_checks_out) {
  const auto report = check_evidence(out(), eval::recorded_outcome_of);
  EXPECT_TRUE(report.ok()) << problems();
  EXPECT_EQ(report.run, m_run.run);
  EXPECT_EQ(report.manifest_digest, sha256_file(out() / "MANIFEST"));

  const auto doc = nlohmann::json::parse(read_file(out() / "rows.json"));
  const auto& tables = doc.at("tables");
  ASSERT_EQ(tables.at("runs").size(), 1u);
  EXPECT_EQ(tables["runs"][0]["id"], m_run.run);
  EXPECT_EQ(tables["runs"][0]["args_json"]["salt"], "one"); // JSON columns are JSON, not strings
  ASSERT_EQ(tables.at("evaluations").size(), 1u);
  EXPECT_EQ(tables["evaluations"][0]["verdict"], "improved");
  EXPECT_EQ(tables["evaluations"][0]["speedup"], 1.5);
  EXPECT_EQ(tables.at("candidates").size(), 2u); // the candidate and its baseline
  EXPECT_EQ(tables.at("builds").size(), 1u);
  EXPECT_EQ(tables.at("tasks").size(), 1u);
  EXPECT_EQ(tables.at("environments").size(), 1u);
  EXPECT_EQ(tables.at("outcomes").size(), 1u);
  EXPECT_EQ(tables.at("experiences").size(), 1u);
  EXPECT_EQ(tables.at("artifacts").size(), 1u);

  // Every blob of the run is there, byte for byte; none of the other run's.
  for (const auto& digest :
       {m_run.baseline_source, m_run.candidate_source, m_run.binary, m_run.log, m_run.artifact}) {
    EXPECT_EQ(sha256_file(out() / "blobs" / digest), digest);
  }
  EXPECT_FALSE(fs::exists(out() / "blobs" / m_other.candidate_source));
  EXPECT_EQ(doc.at("blobs").size(), 8u);

  // The manifest is sha256sum's format: checkable without kblaster.
  const auto result =
      run_process({.argv = {"sha256sum", "--check", "--strict", "MANIFEST"}, .cwd = out()});
  EXPECT_TRUE(result.ok()) << result.output;
}

TEST_F(evidence_test, an_export_includes_the_ancestry_of_its_candidates) {
  auto& st = *m_store;
  const int64_t run = st.begin_run("optimize", {});
  const auto child_source = st.put("// child of the candidate").digest;
  const int64_t child = st.record_candidate(
      {m_run.task, child_source, candidate_origin::proposer, "tile", {}, m_run.candidate});
  auto e = sample_evaluation(m_run, 7);
  e.run = run;
  e.candidate = child;
  e.baseline.reset();
  e.build.reset();
  st.record_evaluation(e);
  const fs::path dir = tmp() / "ancestry";
  ASSERT_TRUE(st.export_evidence(run, dir, eval::recorded_outcome_of).ok());
  const auto doc = nlohmann::json::parse(read_file(dir / "rows.json"));
  std::vector<int64_t> ids;
  for (const auto& c : doc["tables"]["candidates"]) {
    ids.push_back(c["id"]);
  }
  EXPECT_EQ(ids, (std::vector<int64_t>{m_run.baseline, m_run.candidate, child}));
  // The builds of every candidate's source come along, with their logs.
  ASSERT_EQ(doc["tables"]["builds"].size(), 1u);
  EXPECT_TRUE(fs::exists(dir / "blobs" / m_run.log));
}

TEST_F(evidence_test, one_flipped_byte_anywhere_fails_the_check) {
  for (const auto& file :
       {fs::path("rows.json"), fs::path("blobs") / m_run.binary, fs::path("MANIFEST")}) {
    const fs::path path = out() / file;
    make_writable(path);
    std::string bytes = read_file(path);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    EXPECT_FALSE(passes()) << file;
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    EXPECT_TRUE(passes()) << file << problems();
  }
}

TEST_F(evidence_test, a_missing_file_fails_the_check) {
  fs::remove(out() / "blobs" / m_run.log);
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("is missing"), std::string::npos) << problems();
}

TEST_F(evidence_test, an_extra_file_fails_the_check) {
  std::ofstream(out() / "blobs" / "extra") << "planted";
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("not listed"), std::string::npos) << problems();
}

TEST_F(evidence_test, a_symlink_fails_the_check) {
  const fs::path blob = out() / "blobs" / m_run.log;
  const fs::path real = tmp() / "outside";
  fs::copy_file(blob, real);
  fs::remove(blob);
  fs::create_symlink(real, blob);
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("symlink"), std::string::npos) << problems();
}

TEST_F(evidence_test, a_rewritten_manifest_cannot_hide_a_replaced_blob) {
  // Replace a blob and update its MANIFEST line: the blob's name still gives it away.
  const fs::path blob = out() / "blobs" / m_run.binary;
  make_writable(blob);
  std::ofstream(blob, std::ios::binary | std::ios::trunc) << "forged binary";
  make_writable(out() / "MANIFEST");
  std::string manifest = read_file(out() / "MANIFEST");
  const auto at = manifest.find("  blobs/" + m_run.binary);
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at - 64, 64, sha256_hex("forged binary"));
  std::ofstream(out() / "MANIFEST", std::ios::binary | std::ios::trunc) << manifest;
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("not named by its SHA-256"), std::string::npos) << problems();
}

TEST_F(evidence_test, a_manifest_cannot_point_outside_the_folder) {
  std::ofstream(tmp() / "secret") << "not evidence";
  make_writable(out() / "MANIFEST");
  std::ofstream(out() / "MANIFEST", std::ios::app)
      << sha256_hex("not evidence") << "  ../secret\n"
      << sha256_hex("not evidence") << "  /etc/hostname\n";
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("'..' component"), std::string::npos) << problems();
  EXPECT_NE(problems().find("not a relative path"), std::string::npos) << problems();
}

// A forger who edits rows.json and writes a new MANIFEST to match: the rows no longer agree
// with their blobs (the judge's own record), and the MANIFEST's digest is not the published one.
TEST_F(evidence_test, a_forged_row_with_a_rewritten_manifest_fails_the_check) {
  const std::string published = sha256_file(out() / "MANIFEST");
  const auto forge = [&](const std::function<void(nlohmann::json&)>& edit) {
    make_writable(out() / "rows.json");
    make_writable(out() / "MANIFEST");
    auto doc = nlohmann::json::parse(read_file(out() / "rows.json"));
    edit(doc);
    std::ofstream(out() / "rows.json", std::ios::binary | std::ios::trunc) << doc.dump(2) << "\n";
    std::string manifest;
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(out())) {
      const auto rel = e.path().lexically_relative(out()).generic_string();
      if (e.is_regular_file() && rel != "MANIFEST") {
        files.push_back(rel);
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      manifest += sha256_file(out() / f) + "  " + f + "\n";
    }
    std::ofstream(out() / "MANIFEST", std::ios::binary | std::ios::trunc) << manifest;
  };
  forge([](nlohmann::json& doc) {
    auto& e = doc["tables"]["evaluations"][0];
    e["verdict"] = "regressed";
    e["speedup"] = 9.99;
  });
  const auto report = check_evidence(out(), eval::recorded_outcome_of);
  EXPECT_FALSE(report.ok());
  std::string all;
  for (const auto& p : report.problems) {
    all += p + "\n";
  }
  EXPECT_NE(all.find("the row says regressed but its detail blob says \"improved\""),
            std::string::npos)
      << all;
  EXPECT_NE(problems().find("not the ratio of its medians"), std::string::npos) << problems();
  EXPECT_NE(report.manifest_digest, published);
  // A row whose blob was deleted, and struck from the blob list too.
  forge([&](nlohmann::json& doc) {
    auto& e = doc["tables"]["evaluations"][0];
    e["verdict"] = "improved";
    e["speedup"] = 1.5;
    auto& blobs = doc["blobs"];
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (blobs[i]["digest"] == m_run.log) {
        blobs.erase(i);
        break;
      }
    }
  });
  fs::remove(out() / "blobs" / m_run.log);
  forge([](nlohmann::json&) {});
  EXPECT_FALSE(passes());
  EXPECT_NE(problems().find("log_digest blob " + m_run.log + " is missing"), std::string::npos)
      << problems();
}

TEST_F(evidence_test, check_compares_the_manifest_with_the_published_digest) {
  const std::string digest = sha256_file(out() / "MANIFEST");
  const auto ok = run_process({.argv = {KBLASTER_BINARY, "evidence", "check", out().string(),
                                        "--manifest-sha256", digest}});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const auto other = run_process({.argv = {KBLASTER_BINARY, "evidence", "check", out().string(),
                                           "--manifest-sha256", std::string(64, 'a')}});
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("not the published"), std::string::npos) << other.output;
}

TEST_F(evidence_test, export_refuses_a_non_empty_folder_and_an_unknown_run) {
  EXPECT_THROW(m_store->export_evidence(m_run.run, out(), eval::recorded_outcome_of), input_error);
  EXPECT_THROW(m_store->export_evidence(9999, tmp() / "nothing", eval::recorded_outcome_of),
               input_error);
  fs::create_directories(tmp() / "target");
  fs::create_directory_symlink(tmp() / "target", tmp() / "link");
  EXPECT_THROW(m_store->export_evidence(m_run.run, tmp() / "link", eval::recorded_outcome_of),
               input_error);
  EXPECT_THROW(check_evidence(tmp() / "absent", eval::recorded_outcome_of), input_error);
}

} // namespace
} // namespace kb::store::testing
