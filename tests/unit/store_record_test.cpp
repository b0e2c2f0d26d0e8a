#include "common/error.hpp"
#include "common/sha256.hpp"
#include "store/detail/impl.hpp"
#include "store_test_support.hpp"

#include <cstdlib>
#include <fstream>

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace kb::store::testing {
namespace {

TEST_F(store_test, an_evaluation_round_trips_with_its_blobs) {
  store st(store_dir());
  const auto r = record_sample_run(st);
  const auto rows = st.evaluations_of_run(r.run);
  ASSERT_EQ(rows.size(), 1u);
  const auto& row = rows[0];
  const auto expected = sample_evaluation(r, 0);
  EXPECT_EQ(row.id, r.evaluation);
  EXPECT_EQ(row.task_id, "023");
  EXPECT_EQ(row.strategy, "softmax.online");
  EXPECT_EQ(row.origin, candidate_origin::proposer);
  EXPECT_EQ(row.record.candidate, r.candidate);
  EXPECT_EQ(row.record.baseline, r.baseline);
  EXPECT_EQ(row.record.environment, r.environment);
  EXPECT_EQ(row.record.build, r.build);
  EXPECT_EQ(row.record.verdict, verdict::improved);
  EXPECT_EQ(row.record.reason, "timing.improved");
  EXPECT_EQ(row.record.speedup, 1.5);
  EXPECT_EQ(row.record.ci_low, 1.45);
  EXPECT_EQ(row.record.ci_high, 1.55);
  EXPECT_EQ(row.record.p_value, 1e-6);
  EXPECT_EQ(row.record.candidate_median, 1.0e-3);
  EXPECT_EQ(row.record.floor_fraction, 0.8);
  EXPECT_EQ(row.record.correctness, expected.correctness);
  EXPECT_TRUE(row.record.sandboxed);
  EXPECT_EQ(nlohmann::json::parse(st.get(row.detail_digest)), expected.detail);
  EXPECT_EQ(nlohmann::json::parse(st.get(row.samples_digest)), expected.samples);

  const auto run = st.find_run(r.run);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, run_status::finished);
  EXPECT_EQ(run->outcome, "improved");
  EXPECT_EQ(run->evaluations, 1);
  EXPECT_FALSE(run->finished.empty());
  EXPECT_EQ(run->args["task"], "023");
  const auto outcomes = st.outcomes_of_run(r.run);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].best_candidate, r.candidate);
}

TEST_F(store_test, an_evaluation_without_samples_has_no_samples_blob) {
  store st(store_dir());
  auto r = record_sample_run(st);
  auto e = sample_evaluation(r, 1);
  e.verdict = verdict::rejected;
  e.reason = "verify.mismatch";
  e.samples = nullptr;
  e.speedup.reset();
  st.record_evaluation(e);
  const auto rows = st.evaluations_of_run(r.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].samples_digest, "");
  EXPECT_EQ(rows[1].record.verdict, verdict::rejected);
  EXPECT_FALSE(rows[1].record.speedup);
}

TEST_F(store_test, rows_are_deduplicated_where_content_is_the_identity) {
  store st(store_dir());
  const auto r = record_sample_run(st);
  EXPECT_EQ(st.record_task(softmax_task()), r.task);
  EXPECT_EQ(st.record_environment(h200()), r.environment);
  auto other = h200();
  other.gpu_uuid = "GPU-other";
  EXPECT_NE(st.record_environment(other), r.environment);
  // The same source for the same task is the same candidate, whatever proposed it again.
  EXPECT_EQ(st.record_candidate(
                {r.task, r.candidate_source, candidate_origin::portfolio, "x", {}, std::nullopt}),
            r.candidate);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM candidates"), 2);
}

TEST_F(store_test, enums_round_trip_through_their_names) {
  for (auto s : {run_status::running, run_status::finished, run_status::interrupted}) {
    EXPECT_EQ(run_status_from_string(to_string(s)), s);
  }
  for (auto v : {verdict::improved, verdict::same, verdict::regressed, verdict::inconclusive,
                 verdict::rejected, verdict::error, verdict::blocked}) {
    EXPECT_EQ(verdict_from_string(to_string(v)), v);
  }
  for (auto o :
       {candidate_origin::baseline, candidate_origin::portfolio, candidate_origin::proposer,
        candidate_origin::import, candidate_origin::adversarial}) {
    EXPECT_EQ(candidate_origin_from_string(to_string(o)), o);
  }
  EXPECT_FALSE(verdict_from_string("faster"));
  EXPECT_EQ(to_string(verdict::inconclusive), "inconclusive");
}

TEST_F(store_test, the_build_cache_returns_only_successful_intact_builds_of_the_same_key) {
  store st(store_dir());
  const auto source = st.put("__global__ void k() {}").digest;
  const build_key key{source, "-O3 -arch=sm_90a", "13.0", "sm_90a"};
  EXPECT_FALSE(st.find_build(key));

  const auto log = st.put("error: expected ';'").digest;
  st.record_build({key, "failed", "compile.error", std::nullopt, log, 1.0});
  EXPECT_FALSE(st.find_build(key));

  const auto binary = st.put("cubin bytes").digest;
  st.record_build({key, "ok", "", binary, std::nullopt, 3.0});
  EXPECT_EQ(st.find_build(key), binary);

  auto other_flags = key;
  other_flags.flags = "-O2 -arch=sm_90a";
  EXPECT_FALSE(st.find_build(other_flags));
  auto other_arch = key;
  other_arch.arch = "sm_100a";
  EXPECT_FALSE(st.find_build(other_arch));

  // A success must name its binary.
  EXPECT_THROW(st.record_build({key, "ok", "", std::nullopt, std::nullopt, 1.0}), error);

  // A binary that rotted on disk is a miss, not a wrong answer.
  fs::permissions(st.path_of(binary), fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(st.path_of(binary), std::ios::app) << "x";
  EXPECT_FALSE(st.find_build(key));
}

experience attempt(const std::string& strategy, const std::string& family, const std::string& gpu,
                   double speedup) {
  experience x;
  x.task_id = "023";
  x.family = family;
  x.gpu = gpu;
  x.strategy = strategy;
  x.dtype = "float32";
  x.shape = "official";
  x.op_features = {{"reduce_axes", 1}};
  x.state_before = "memory-bound";
  x.params = {{"block", 256}};
  x.predicted_speedup = 1.2;
  x.measured_speedup = speedup;
  x.correct = speedup > 0;
  x.failure_reason = speedup > 0 ? "" : "verify.mismatch";
  return x;
}

TEST_F(store_test, the_memory_answers_what_a_strategy_did_on_a_family_on_a_gpu) {
  store st(store_dir());
  st.record_experience(attempt("softmax.online", "normalize", "NVIDIA H200", 1.4));
  st.record_experience(attempt("softmax.online", "normalize", "NVIDIA H100", 1.1));
  st.record_experience(attempt("softmax.online", "reduce", "NVIDIA H200", 1.2));
  st.record_experience(attempt("vectorize", "normalize", "NVIDIA H200", 1.05));
  st.record_experience(attempt("softmax.online", "normalize", "NVIDIA H200", 0));

  const auto found = st.find_experiences("normalize", "NVIDIA H200", "softmax.online");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_FALSE(found[0].correct); // newest first
  EXPECT_EQ(found[0].failure_reason, "verify.mismatch");
  EXPECT_EQ(found[1].measured_speedup, 1.4);
  EXPECT_EQ(found[1].op_features, nlohmann::json({{"reduce_axes", 1}}));
  EXPECT_EQ(found[1].state_before, "memory-bound");
  EXPECT_EQ(st.find_experiences("normalize", "NVIDIA H200").size(), 3u);
  EXPECT_TRUE(st.find_experiences("loss", "NVIDIA H200").empty());

  // One indexed lookup, no scan of the table.
  detail::connection db(store_dir() / "store.sqlite", 10000);
  detail::statement s(db, "EXPLAIN QUERY PLAN " + detail::experiences_query(true));
  std::string details;
  while (s.step()) {
    details += s.column_text(3) + "; ";
  }
  EXPECT_NE(
      details.find(
          "USING INDEX experiences_by_family_gpu_strategy (family=? AND gpu=? AND strategy=?)"),
      std::string::npos)
      << details;
  EXPECT_EQ(details.find("SCAN"), std::string::npos) << details;
}

TEST_F(store_test, atomically_stores_everything_or_nothing) {
  store st(store_dir());
  EXPECT_THROW(st.atomically([&] {
    const int64_t run = st.begin_run("optimize", {});
    st.attach(run, "a", st.put("first").digest);
    throw error("interrupted halfway");
  }),
               error);
  EXPECT_TRUE(st.list_runs(10).empty());
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM artifacts"), 0);

  int64_t run = 0;
  st.atomically([&] {
    run = st.begin_run("optimize", {});
    st.attach(run, "a", st.put("first").digest);
  });
  EXPECT_EQ(st.list_runs(10).size(), 1u);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM artifacts"), 1);
}

TEST_F(store_test, runs_finish_once_and_keep_their_attachments) {
  store st(store_dir());
  const int64_t run = st.begin_run("bench", {{"n", 3}});
  EXPECT_EQ(st.find_run(run)->status, run_status::running);
  EXPECT_THROW(st.begin_run("", {}), input_error);
  EXPECT_THROW(st.finish_run(run, run_status::running, "", ""), input_error);
  EXPECT_THROW(st.finish_run(run + 100, run_status::finished, "", ""), input_error);
  st.attach(run, "log", st.put("one").digest);
  st.attach(run, "log", st.put("one").digest); // the same content again is fine
  EXPECT_THROW(st.attach(run, "log", st.put("two").digest), input_error);
  st.finish_run(run, run_status::interrupted, "", "run.sigint");
  const auto info = st.find_run(run);
  EXPECT_EQ(info->status, run_status::interrupted);
  EXPECT_EQ(info->reason, "run.sigint");
  EXPECT_EQ(st.list_runs(10).size(), 1u);
  EXPECT_FALSE(st.find_run(run + 1));
}

TEST_F(store_test, an_outcome_is_one_row_per_run_and_task) {
  store st(store_dir());
  const auto r = record_sample_run(st);
  st.record_outcome({r.run, r.task, "not_improved", "timing.same", std::nullopt});
  const auto outcomes = st.outcomes_of_run(r.run);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].outcome, "not_improved");
  EXPECT_FALSE(outcomes[0].best_candidate);
}

TEST_F(store_test, gc_removes_only_what_no_row_references) {
  store st(store_dir());
  const auto r = record_sample_run(st);
  const auto unreferenced = st.put("nobody refers to me").digest;
  const fs::path stray = store_dir() / "blobs" / "00" / ".tmp-interrupted";
  fs::create_directories(stray.parent_path());
  std::ofstream(stray) << "partial write";

  // Within the grace period nothing goes: it may be about to be referenced.
  auto report = st.gc(std::chrono::hours(1));
  EXPECT_EQ(report.removed_blobs, 0);
  EXPECT_EQ(report.removed_stray, 0);
  EXPECT_EQ(report.kept_recent, 2);
  EXPECT_TRUE(st.exists(unreferenced));

  report = st.gc(std::chrono::seconds(0), /*dry_run=*/true);
  EXPECT_EQ(report.removed_blobs, 1);
  EXPECT_TRUE(st.exists(unreferenced));
  EXPECT_TRUE(fs::exists(stray));

  report = st.gc(std::chrono::seconds(0));
  EXPECT_EQ(report.removed_blobs, 1);
  EXPECT_EQ(report.removed_bytes, std::string("nobody refers to me").size());
  EXPECT_EQ(report.removed_stray, 1);
  EXPECT_FALSE(st.exists(unreferenced));
  EXPECT_FALSE(fs::exists(stray));
  for (const auto& digest : {r.baseline_source, r.candidate_source, r.binary, r.log, r.artifact}) {
    EXPECT_TRUE(st.exists(digest)) << digest;
  }
  const auto rows = st.evaluations_of_run(r.run);
  EXPECT_TRUE(st.exists(rows[0].detail_digest));
  EXPECT_TRUE(st.exists(rows[0].samples_digest));
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM blobs"), 8); // the run's eight blobs
  EXPECT_TRUE(st.verify().ok());
  EXPECT_TRUE(st.verify().stray.empty());
  EXPECT_EQ(st.gc(std::chrono::seconds(0)).removed_blobs, 0);

  // Stored again after removal, a blob is written anew.
  EXPECT_EQ(st.put("nobody refers to me").digest, unreferenced);
  EXPECT_EQ(st.get(unreferenced), "nobody refers to me");
}

TEST_F(store_test, every_blob_column_is_known_to_gc) {
  store st(store_dir());
  detail::connection db(store_dir() / "store.sqlite", 10000);
  std::vector<std::string> columns;
  for (const auto& c : detail::blob_columns(db)) {
    columns.push_back(c.table + "." + c.column);
  }
  std::sort(columns.begin(), columns.end());
  EXPECT_EQ(columns,
            (std::vector<std::string>{"artifacts.digest", "builds.binary_digest",
                                      "builds.log_digest", "builds.source_digest",
                                      "candidates.source_digest", "evaluations.detail_digest",
                                      "evaluations.samples_digest", "tasks.contract_blob"}));
}

TEST(store_owner, a_dead_process_is_told_from_a_live_one) {
  const std::string me = detail::process_owner();
  EXPECT_FALSE(detail::owner_is_dead(me));
  const auto first_slash = me.find('/');
  const auto second_slash = me.find('/', first_slash + 1);
  const std::string host = me.substr(0, first_slash);
  const std::string boot = me.substr(first_slash + 1, second_slash - first_slash - 1);
  EXPECT_TRUE(detail::owner_is_dead(host + "/" + boot + "/999999999/12345")); // no such process
  EXPECT_TRUE(detail::owner_is_dead(host + "/" + boot + "/" + std::to_string(getpid()) +
                                    "/1")); // pid reused
  EXPECT_TRUE(detail::owner_is_dead(host + "/another-boot/" + std::to_string(getpid()) + "/1"));
  EXPECT_FALSE(
      detail::owner_is_dead("another-host/" + boot + "/999999999/1")); // cannot tell from here
}

TEST_F(store_test, the_location_is_the_flag_then_kblaster_home_then_the_data_folder) {
  const char* saved_home = std::getenv("HOME");
  const char* saved_kb = std::getenv("KBLASTER_HOME");
  const std::string home = saved_home != nullptr ? saved_home : "";
  const std::optional<std::string> kb_home =
      saved_kb != nullptr ? std::optional<std::string>(saved_kb) : std::nullopt;
  setenv("HOME", (tmp() / "home").c_str(), 1);
  setenv("KBLASTER_HOME", (tmp() / "kbhome").c_str(), 1);
  EXPECT_EQ(resolve_dir(tmp() / "flag"), tmp() / "flag");
  EXPECT_EQ(resolve_dir(std::nullopt), tmp() / "kbhome");
  unsetenv("KBLASTER_HOME");
  EXPECT_EQ(resolve_dir(std::nullopt), tmp() / "home" / ".local" / "share" / "kblaster");
  setenv("HOME", home.c_str(), 1);
  if (kb_home) {
    setenv("KBLASTER_HOME", kb_home->c_str(), 1);
  }
}

TEST_F(store_test, a_new_store_folder_is_private) {
  const fs::path dir = tmp() / "a" / "b" / "store";
  store st(dir);
  for (const auto& d : {tmp() / "a", tmp() / "a" / "b", dir}) {
    struct stat info {};
    ASSERT_EQ(stat(d.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u) << d;
  }
}

TEST(store_location, network_filesystems_are_recognised) {
  EXPECT_EQ(network_filesystem_name(0x6969), "NFS");
  EXPECT_EQ(network_filesystem_name(0xFE534D42), "SMB2");
  EXPECT_EQ(network_filesystem_name(0xFF534D42), "CIFS");
  EXPECT_EQ(network_filesystem_name(
                static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(0xFF534D42)))),
            "CIFS"); // as a sign-extended f_type
  EXPECT_EQ(network_filesystem_name(0x517B), "SMB");
  EXPECT_EQ(network_filesystem_name(0x65735546), "FUSE");
  EXPECT_EQ(network_filesystem_name(0x01021997), "9p");
  EXPECT_EQ(network_filesystem_name(0x00C36400), "Ceph");
  EXPECT_EQ(network_filesystem_name(0x5346414F), "AFS");
  EXPECT_EQ(network_filesystem_name(0x0BD00BD0), "Lustre");
  EXPECT_FALSE(network_filesystem_name(0xEF53));     // ext4
  EXPECT_FALSE(network_filesystem_name(0x58465342)); // xfs
  EXPECT_FALSE(network_filesystem_name(0x01021994)); // tmpfs
  EXPECT_FALSE(network_filesystem_name(0x794C7630)); // overlayfs
}

TEST_F(store_test, a_store_on_a_network_filesystem_is_refused) {
  open_options options{store_dir()};
  options.filesystem_type = [](const fs::path&) -> uint64_t { return 0x6969; };
  try {
    store st(options);
    FAIL() << "opened a store on NFS";
  } catch (const input_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("network filesystem (NFS)"), std::string::npos) << message;
    EXPECT_NE(message.find("--store"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(store_dir() / "store.sqlite"));

  // The real probe on this machine's temporary folder: a local disk.
  EXPECT_FALSE(network_filesystem_name(filesystem_type(tmp())));
  store local(store_dir());
}

} // namespace
} // namespace kb::store::testing
