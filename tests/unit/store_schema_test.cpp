#include "common/error.hpp"
#include "common/sha256.hpp"
#include "store/detail/schema.hpp"
#include "store_test_support.hpp"

#include <map>

namespace kb::store::testing {
namespace {

using detail::connection;
using detail::statement;

// The schema as SQLite reports it, object by object.
std::map<std::string, std::string> schema_of(const fs::path& file) {
  connection db(file, 10000);
  std::map<std::string, std::string> out;
  statement s(db, "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL");
  while (s.step()) {
    out[s.column_text(0)] = s.column_text(1);
  }
  return out;
}

// A database at `version`, as an older kblaster left it.
fs::path old_store(const fs::path& dir, int version) {
  fs::create_directories(dir);
  connection db(dir / "store.sqlite", 10000);
  detail::migrate(db, version);
  EXPECT_EQ(detail::schema_version(db), version);
  return dir / "store.sqlite";
}

// The rows a version-1 kblaster would have written, through its own SQL.
void insert_version1_rows(const fs::path& file) {
  connection db(file, 10000);
  db.exec("PRAGMA foreign_keys = ON");
  const std::string contract = std::string(64, 'c');
  const std::string source = std::string(64, 'd');
  const std::string detail = std::string(64, 'e');
  db.exec("INSERT INTO blobs VALUES ('" + contract + "', 10), ('" + source + "', 20), ('" + detail +
          "', 30)");
  db.exec("INSERT INTO tasks VALUES (1, '023', 'core10', 'normalize', 'contractdigest', '" +
          contract + "')");
  db.exec("INSERT INTO runs (id, kind, args_json, started, status, tool_version) "
          "VALUES (1, 'eval', '{}', '2024-01-01T00:00:00.000Z', 'running', '0.0.1')");
  db.exec("INSERT INTO candidates VALUES (1, 1, '" + source +
          "', 'baseline', '', '{}', NULL, 'then')");
  db.exec("INSERT INTO evaluations (run, candidate, shape, verdict, reason, correctness_json, "
          "detail_digest, "
          "sandboxed, created) VALUES (1, 1, 'official', 'same', 'timing.same', '{}', '" +
          detail + "', 0, 'then')");
}

TEST_F(store_test, a_new_store_is_at_the_latest_schema_with_wal) {
  store st(store_dir());
  EXPECT_EQ(st.schema_version(), detail::latest_schema_version());
  EXPECT_GE(detail::latest_schema_version(), 3);
  EXPECT_EQ(query_text(store_dir(), "PRAGMA journal_mode"), "wal");
  // Opening again changes nothing.
  const auto before = schema_of(store_dir() / "store.sqlite");
  store again(store_dir());
  EXPECT_EQ(schema_of(store_dir() / "store.sqlite"), before);
}

TEST_F(store_test, foreign_keys_are_enforced) {
  store st(store_dir());
  const auto source = st.put("src").digest;
  EXPECT_THROW(st.record_candidate({12345, source, candidate_origin::import, "", {}, std::nullopt}),
               error);
  const int64_t task = st.record_task(softmax_task());
  EXPECT_THROW(
      st.record_candidate(
          {task, sha256_hex("not stored"), candidate_origin::import, "", {}, std::nullopt}),
      error);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM candidates"), 0);
}

TEST_F(store_test, upgrading_from_version_1_keeps_every_row) {
  const fs::path file = old_store(store_dir(), 1);
  insert_version1_rows(file);
  store st(store_dir());
  EXPECT_EQ(st.schema_version(), detail::latest_schema_version());
  const auto runs = st.list_runs(10);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, "eval");
  EXPECT_EQ(runs[0].status, run_status::running); // no owner recorded: nothing can tell it died
  const auto evaluations = st.evaluations_of_run(1);
  ASSERT_EQ(evaluations.size(), 1u);
  EXPECT_EQ(evaluations[0].record.verdict, verdict::same);
  EXPECT_EQ(evaluations[0].task_id, "023");
  // What later versions added works on the upgraded store.
  EXPECT_EQ(query_text(store_dir(), "SELECT owner FROM runs WHERE id = 1"), "");
  experience x;
  x.task_id = "023";
  x.family = "normalize";
  x.gpu = "NVIDIA H200";
  x.strategy = "softmax.online";
  st.record_experience(x);
  EXPECT_EQ(st.find_experiences("normalize", "NVIDIA H200").size(), 1u);
  st.attach(1, "report", st.put("report").digest);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM artifacts"), 1);
}

TEST_F(store_test, upgrading_from_version_2_keeps_the_memory) {
  const fs::path file = old_store(store_dir(), 2);
  insert_version1_rows(file);
  {
    connection db(file, 10000);
    db.exec("INSERT INTO experiences (task_id, family, op_features_json, shape, dtype, gpu, "
            "state_before, strategy, "
            "params_json, measured_speedup, correct, failure_reason, created) VALUES ('023', "
            "'normalize', '{}', "
            "'official', 'float32', 'NVIDIA H200', 'memory-bound', 'softmax.online', "
            "'{\"block\":128}', 1.25, 1, '', 'then')");
  }
  store st(store_dir());
  EXPECT_EQ(st.schema_version(), detail::latest_schema_version());
  const auto found = st.find_experiences("normalize", "NVIDIA H200", "softmax.online");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].params, nlohmann::json({{"block", 128}}));
  EXPECT_EQ(found[0].measured_speedup, 1.25);
  EXPECT_EQ(st.evaluations_of_run(1).size(), 1u);
}

TEST_F(store_test, an_upgraded_schema_equals_a_new_one) {
  for (int version = 1; version < detail::latest_schema_version(); ++version) {
    const fs::path old_dir = tmp() / ("v" + std::to_string(version));
    old_store(old_dir, version);
    store upgraded(old_dir);
    store fresh(tmp() / ("fresh" + std::to_string(version)));
    EXPECT_EQ(schema_of(old_dir / "store.sqlite"),
              schema_of(tmp() / ("fresh" + std::to_string(version)) / "store.sqlite"))
        << "from version " << version;
  }
}

TEST_F(store_test, a_store_from_a_newer_kblaster_is_refused) {
  { store st(store_dir()); }
  {
    connection db(store_dir() / "store.sqlite", 10000);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    store st(store_dir());
    FAIL() << "opened a store of a newer schema";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("newer kblaster"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace kb::store::testing
