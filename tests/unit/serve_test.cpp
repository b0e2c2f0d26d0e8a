// The dashboard's documents over a store: filters, the best-so-far rule, a candidate's sources and
// reasons, the roofline, the evidence archive (read back by tar and checked by the store).
#include "serve/serve.hpp"

#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "eval/eval.hpp"
#include "store_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace kb::serve {
namespace {

using nlohmann::json;
using store::testing::softmax_task;

// Records one evaluation as `kblaster optimize` does: `cand` against `compared`.
int64_t record(store::store& st, int64_t run, const std::string& cand_src,
               const std::string& strategy, const std::string& compared_src, eval::verdict v,
               const std::string& reason, std::optional<double> speedup) {
  const auto& c = softmax_task();
  const eval::candidate_input cand{cand_src, "c.cu", strategy.empty() ? "baseline" : "proposer",
                                   strategy};
  const eval::candidate_input base{
      compared_src, "b.cu", compared_src == read_file(c.baseline) ? "baseline" : "proposer", ""};
  // A successful build is stored with its binary.
  static const fs::path binary = [] {
    const fs::path p = fs::temp_directory_path() / "kb-serve-test-binary.so";
    write_file_atomic(p, "binary");
    return p;
  }();
  eval::result r;
  r.final = v;
  r.reason = reason;
  r.task = {c.id, "", task::to_string(c.fam), ""};
  r.candidate.source_digest = sha256_hex(cand_src);
  r.baseline.source_digest = sha256_hex(compared_src);
  r.seconds = 2.0;
  gpu::protocol::device dev;
  dev.name = "test GPU";
  r.context.device = dev;
  r.context.shape = "official";
  build::result b;
  b.status = build::outcome::ok;
  b.binary = binary;
  b.log = "log <b>";
  r.builds["candidate"] = b;
  if (speedup) {
    eval::gate_summary g;
    g.median_baseline_s = 1e-3 * *speedup;
    g.median_candidate_s = 1e-3;
    g.speedup = *speedup;
    g.speedup_low = *speedup - 0.01;
    g.speedup_high = *speedup + 0.01;
    r.gate = g;
    gpu::protocol::session_timing t;
    t.samples["candidate"] = {{1e-3, 0, 0, {}}, {1.1e-3, 0, 1, {}}};
    t.samples["baseline"] = {};
    r.timing = {t};
  }
  return eval::record(st, run, c, cand, base, r);
}

class serve_test : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::make_unique<temp_dir>("kb-serve-test");
    st = std::make_unique<store::store>(dir->path() / "store");
    baseline = read_file(softmax_task().baseline);
    run = st->begin_run("optimize", json::object());
    record(*st, run, baseline, "", baseline, eval::verdict::same, "timing.same", 1.0);
    e1 = record(*st, run, "// a", "row.a", baseline, eval::verdict::improved, "timing.improved",
                1.5);
    e2 = record(*st, run, "// <script>b</script>", "row.b", "// a", eval::verdict::rejected,
                "verify.mismatch", std::nullopt);
    e3 = record(*st, run, "// c", "row.c", "// a", eval::verdict::improved, "timing.improved", 2.0);
    st->finish_run(run, store::run_status::finished, "improved", "");
    other = st->begin_run("eval", json::object());
  }
  std::unique_ptr<temp_dir> dir;
  std::unique_ptr<store::store> st;
  std::string baseline;
  int64_t run = 0, other = 0, e1 = 0, e2 = 0, e3 = 0;
};

TEST_F(serve_test, runs_are_filtered_by_task_kind_outcome_and_date) {
  const dashboard d(*st, {});
  EXPECT_EQ(d.runs({}).size(), 2u);
  EXPECT_EQ(d.runs({.task = "023"}).size(), 1u);
  EXPECT_EQ(d.runs({.task = "019"}).size(), 0u);
  EXPECT_EQ(d.runs({.outcome = "improved"}).size(), 1u);
  EXPECT_EQ(d.runs({.kind = "eval"}).at(0)["id"], other);
  EXPECT_EQ(d.runs({.since = "2999"}).size(), 0u);
  EXPECT_EQ(d.runs({.until = "2000-01-01"}).size(), 0u);
  EXPECT_EQ(d.runs({.since = "2000-01-01"}).size(), 2u);
}

TEST_F(serve_test, best_so_far_multiplies_speedups_over_the_compared_candidate) {
  const dashboard d(*st, {});
  const json s = d.search(run, "023");
  ASSERT_EQ(s["curve"].size(), 4u);
  EXPECT_DOUBLE_EQ(s["curve"][0]["best"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["curve"][1]["best"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(s["curve"][2]["best"].get<double>(), 1.5); // rejected: no change
  EXPECT_DOUBLE_EQ(s["curve"][3]["best"].get<double>(), 3.0); // 2x over the 1.5x one
  EXPECT_EQ(s["candidates"][2]["reason"], "verify.mismatch");
  EXPECT_EQ(s["candidates"][2]["step"], 2);
  const json r = d.run(run);
  ASSERT_EQ(r["tasks"].size(), 1u);
  EXPECT_EQ(r["tasks"][0]["evaluations"], 3);
  EXPECT_DOUBLE_EQ(r["tasks"][0]["best_so_far"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(r["tasks"][0]["seconds"].get<double>(), 8.0);
}

TEST_F(serve_test, a_candidate_shows_its_source_the_baseline_and_what_it_was_compared_with) {
  const dashboard d(*st, {});
  const json e = d.evaluation(run, e2);
  EXPECT_EQ(e["source"], "// <script>b</script>");
  EXPECT_EQ(e["compared_source"], "// a");
  EXPECT_EQ(e["baseline_source"], baseline);
  EXPECT_EQ(e["reason"], "verify.mismatch");
  EXPECT_EQ(e["build"]["log"], "log <b>");
  const json t = d.evaluation(run, e3);
  EXPECT_EQ(t["samples"]["candidate"].size(), 2u);
  EXPECT_THROW(d.evaluation(run, 999999), not_found);
  EXPECT_THROW(d.run(999999), not_found);
  EXPECT_THROW(d.search(run, "019"), not_found);
}

TEST_F(serve_test, roofline_places_timed_candidates_and_needs_the_contract) {
  const json none = dashboard(*st, {}).roofline(run, "023");
  EXPECT_FALSE(none["available"].get<bool>());
  const json r = dashboard(*st, {.project_root = store::testing::source_root}).roofline(run, "023");
  ASSERT_TRUE(r["available"].get<bool>());
  // The baseline, a and c (the rejected b is not placed).
  EXPECT_EQ(r["points"].size(), 3u);
  for (const auto& p : r["points"]) {
    EXPECT_GT(p["flops_per_s"].get<double>(), 0);
    EXPECT_GT(p["intensity"].get<double>(), 0);
  }
}

TEST_F(serve_test, version_changes_when_an_evaluation_is_recorded) {
  const dashboard d(*st, {});
  const auto v1 = d.version();
  EXPECT_EQ(v1, d.version());
  record(*st, other, "// d", "row.d", baseline, eval::verdict::same, "timing.same", 1.0);
  EXPECT_NE(v1, d.version());
}

TEST_F(serve_test, evidence_archive_unpacks_with_tar_and_passes_the_check) {
  const std::string tar = evidence_archive(*st, run);
  EXPECT_EQ(tar.size() % 512, 0u);
  const fs::path file = dir->path() / "e.tar";
  write_file_atomic(file, tar);
  const fs::path out = dir->path() / "x";
  fs::create_directories(out);
  ASSERT_EQ(std::system(("tar -xf " + file.string() + " -C " + out.string()).c_str()), 0);
  const auto report =
      store::check_evidence(out / fmt::format("run-{}-evidence", run), eval::recorded_outcome_of);
  EXPECT_TRUE(report.ok()) << fmt::format("{}", fmt::join(report.problems, "; "));
  EXPECT_EQ(report.run, run);
  EXPECT_THROW(evidence_archive(*st, 999999), not_found);
}

// A record stored before the result was typed (the judge's whole document, written on the H200)
// shows the same candidate page as that result recorded today.
TEST_F(serve_test, a_record_of_an_earlier_schema_shows_the_same_page) {
  const fs::path root = KBLASTER_SOURCE_DIR;
  json document = json::parse(read_file(root / "evidence/h200/harness/eval-time/019_relu.json"));
  const auto c = task::find_task(root, "019");
  const int64_t r = st->begin_run("eval", json::object());
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  const eval::candidate_input cand{"// relu\n", "019_relu.cu", "candidate"};
  auto typed = eval::stored_result(document);
  // The build's binary, which the store keeps with a successful build, is not in the document.
  typed.builds.at("candidate").binary = dir->path() / "candidate.so";
  write_file_atomic(typed.builds.at("candidate").binary, "binary");
  const int64_t now = eval::record(*st, r, c, cand, base, typed);
  // The same evaluation row, with the detail blob and the samples as record() wrote them then.
  auto before = st->evaluations_of_run(r).at(0).record;
  before.samples = document.at("timing");
  document.erase("timing");
  before.detail = document;
  const int64_t then = st->record_evaluation(before);
  const dashboard d(*st, {.project_root = root});
  const json a = d.evaluation(r, then);
  const json b = d.evaluation(r, now);
  for (const char* key :
       {"message", "source", "compared_source", "build", "verification", "samples",
        "session_medians", "statistics", "sanitize", "profile", "floor_s"}) {
    EXPECT_EQ(a.at(key), b.at(key)) << key;
  }
  EXPECT_EQ(a["build"]["status"], "ok");
  EXPECT_FALSE(a["verification"].empty());
  // The verification table: a row per output of each library's check, as the runner recorded it.
  size_t rows = 0;
  for (const auto& l : document.at("verification")) {
    for (const auto& check : l.at("checks")) {
      rows += std::max<size_t>(1, check.at("outputs").size());
    }
  }
  EXPECT_EQ(a["verification"].size(), rows);
  const json& lib = document.at("verification")[0];
  const json& check = lib.at("checks")[0];
  const json& out = check.at("outputs")[0];
  const json first = {{"role", lib.at("role")},
                      {"shape", check.at("shape")},
                      {"distribution", check.at("distribution")},
                      {"seed", check.at("seed")},
                      {"passed", check.at("passed")},
                      {"inputs_unchanged", check.at("inputs_unchanged")},
                      {"reason", ""},
                      {"output", out.at("output")},
                      {"max_abs_err", out.at("max_abs_err")},
                      {"max_rel_err", out.at("max_rel_err")},
                      {"p99_abs_err", out.at("p99_abs_err")},
                      {"rel_l2", out.at("rel_l2")},
                      {"violations", out.at("violations")},
                      {"nonfinite", out.at("nonfinite")},
                      {"unwritten", out.at("unwritten")}};
  EXPECT_EQ(a["verification"][0].dump(), first.dump());
  ASSERT_EQ(before.samples.size(), 2u);
  EXPECT_EQ(a["samples"]["candidate"].size(), before.samples[0]["samples"]["candidate"].size() +
                                                  before.samples[1]["samples"]["candidate"].size());
  EXPECT_EQ(a["statistics"]["speedup"], document.at("statistics").at("speedup"));
  EXPECT_EQ(a["session_medians"], document.at("statistics").at("session_medians"));
  EXPECT_EQ(a["floor_s"], document.at("floor_seconds"));
  EXPECT_EQ(d.roofline(r, "019")["ceilings_source"], document.at("ceilings").at("source"));
}

// The suite page from a bench.json: each row's ratio to every correct PyTorch method, and
// whether our median is resolved (at least 10 times the timing resolution the row names).
TEST_F(serve_test, suite_rows_from_a_bench_file_say_whether_the_median_is_resolved) {
  const auto row = [](const std::string& shape, double median) {
    return json{{"task", "101"},
                {"shape", shape},
                {"verdict", "improved"},
                {"speedup", 2.0},
                {"statistics", {{"median_candidate_s", median}, {"resolution_s", 2e-6}}}};
  };
  const json bench{
      {"rows", json::array({row("official", 40e-6), row("t1-h4096", 1e-6)})},
      {"pytorch",
       {{"tasks",
         {{"101",
           {{"official", {{"compile", {{"correct", true}, {"median_s", 36e-6}}}}},
            {"t1-h4096", {{"compile", {{"correct", true}, {"median_s", 4e-6}}}}}}}}}}}};
  const fs::path file = dir->path() / "bench.json";
  write_file_atomic(file, bench.dump());
  const json s = dashboard(*st, {.bench_json = file}).suite(std::nullopt);
  ASSERT_TRUE(s["available"].get<bool>()) << s.dump();
  ASSERT_EQ(s["rows"].size(), 2u);
  EXPECT_TRUE(s["rows"][0]["resolved"].get<bool>());
  EXPECT_NEAR(s["rows"][0]["vs_pytorch"]["compile"].get<double>(), 0.9, 1e-12);
  EXPECT_FALSE(s["rows"][1]["resolved"].get<bool>());
  EXPECT_NEAR(s["rows"][1]["vs_pytorch"]["compile"].get<double>(), 4.0, 1e-12);
}

TEST(serve_time, seconds_between_iso_timestamps) {
  EXPECT_DOUBLE_EQ(*seconds_between("2026-11-30T21:00:00.000Z", "2026-11-30T21:01:02.500Z"), 62.5);
  EXPECT_DOUBLE_EQ(*seconds_between("2026-12-31T23:59:59Z", "2027-01-01T00:00:01Z"), 2.0);
  EXPECT_FALSE(seconds_between("yesterday", "2026-11-30T21:00:00Z"));
}

} // namespace
} // namespace kb::serve
