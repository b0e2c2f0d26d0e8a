#include "store/detail/schema.hpp"

#include "common/error.hpp"

#include <array>
#include <string_view>

namespace kb::store::detail {
namespace {

// Append only: a released step never changes, since stores in the field have already run it.
// Every column that names a blob references blobs(digest); verify, gc and evidence export find
// the blob columns through those foreign keys. Columns ending in _json hold JSON text.
constexpr std::array<std::string_view, 5> migrations = {
    // 1: the record of runs, candidates, builds and evaluations.
    R"sql(
CREATE TABLE blobs (
  digest TEXT PRIMARY KEY CHECK (length(digest) = 64),
  size INTEGER NOT NULL CHECK (size >= 0)
) WITHOUT ROWID;

CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL,
  suite TEXT NOT NULL,
  family TEXT NOT NULL,
  contract_digest TEXT NOT NULL,
  contract_blob TEXT NOT NULL REFERENCES blobs (digest),
  UNIQUE (task_id, contract_digest)
);

CREATE TABLE environments (
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  gpu_name TEXT NOT NULL,
  gpu_uuid TEXT NOT NULL,
  sm_count INTEGER NOT NULL,
  sm_clock_mhz INTEGER NOT NULL,
  memory_clock_mhz INTEGER NOT NULL,
  driver TEXT NOT NULL,
  cuda_runtime TEXT NOT NULL,
  nvcc_version TEXT NOT NULL,
  hostname TEXT NOT NULL,
  environment_json TEXT NOT NULL
);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind <> ''),
  args_json TEXT NOT NULL,
  started TEXT NOT NULL,
  finished TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
  outcome TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  tool_version TEXT NOT NULL
);

CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  task INTEGER NOT NULL REFERENCES tasks (id),
  source_digest TEXT NOT NULL REFERENCES blobs (digest),
  origin TEXT NOT NULL CHECK (origin IN ('baseline', 'portfolio', 'proposer', 'import', 'adversarial')),
  strategy TEXT NOT NULL,
  params_json TEXT NOT NULL,
  parent INTEGER REFERENCES candidates (id),
  created TEXT NOT NULL,
  UNIQUE (task, source_digest)
);

CREATE TABLE builds (
  id INTEGER PRIMARY KEY,
  source_digest TEXT NOT NULL REFERENCES blobs (digest),
  flags TEXT NOT NULL,
  toolkit TEXT NOT NULL,
  arch TEXT NOT NULL,
  binary_digest TEXT REFERENCES blobs (digest),
  log_digest TEXT REFERENCES blobs (digest),
  outcome TEXT NOT NULL,
  reason TEXT NOT NULL,
  seconds REAL,
  created TEXT NOT NULL,
  CHECK (outcome <> 'ok' OR binary_digest IS NOT NULL)
);
CREATE INDEX builds_by_key ON builds (source_digest, flags, toolkit, arch);

CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL REFERENCES runs (id),
  candidate INTEGER NOT NULL REFERENCES candidates (id),
  baseline INTEGER REFERENCES candidates (id),
  environment INTEGER REFERENCES environments (id),
  build INTEGER REFERENCES builds (id),
  shape TEXT NOT NULL,
  verdict TEXT NOT NULL
    CHECK (verdict IN ('improved', 'same', 'regressed', 'inconclusive', 'rejected', 'error', 'blocked')),
  reason TEXT NOT NULL,
  candidate_median REAL,
  baseline_median REAL,
  speedup REAL,
  ci_low REAL,
  ci_high REAL,
  p_value REAL,
  floor_fraction REAL,
  samples_digest TEXT REFERENCES blobs (digest),
  correctness_json TEXT NOT NULL,
  detail_digest TEXT NOT NULL REFERENCES blobs (digest),
  sandboxed INTEGER NOT NULL CHECK (sandboxed IN (0, 1)),
  created TEXT NOT NULL
);
CREATE INDEX evaluations_by_run ON evaluations (run);
CREATE INDEX evaluations_by_candidate ON evaluations (candidate);

CREATE TABLE outcomes (
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL REFERENCES runs (id),
  task INTEGER NOT NULL REFERENCES tasks (id),
  outcome TEXT NOT NULL,
  reason TEXT NOT NULL,
  best_candidate INTEGER REFERENCES candidates (id),
  created TEXT NOT NULL,
  UNIQUE (run, task)
);
)sql",
    // 2: the optimization memory.
    R"sql(
CREATE TABLE experiences (
  id INTEGER PRIMARY KEY,
  run INTEGER REFERENCES runs (id),
  task_id TEXT NOT NULL,
  family TEXT NOT NULL,
  op_features_json TEXT NOT NULL,
  shape TEXT NOT NULL,
  dtype TEXT NOT NULL,
  gpu TEXT NOT NULL,
  environment INTEGER REFERENCES environments (id),
  state_before TEXT NOT NULL,
  strategy TEXT NOT NULL,
  params_json TEXT NOT NULL,
  predicted_speedup REAL,
  measured_speedup REAL,
  correct INTEGER NOT NULL CHECK (correct IN (0, 1)),
  failure_reason TEXT NOT NULL,
  created TEXT NOT NULL
);
CREATE INDEX experiences_by_family_gpu_strategy ON experiences (family, gpu, strategy);
)sql",
    // 3: which process owns a running run (so a run whose process died is found and marked
    // interrupted), and named blobs attached to a run (profiler reports, logs).
    R"sql(
ALTER TABLE runs ADD COLUMN owner TEXT;

CREATE TABLE artifacts (
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL REFERENCES runs (id),
  name TEXT NOT NULL,
  digest TEXT NOT NULL REFERENCES blobs (digest),
  created TEXT NOT NULL,
  UNIQUE (run, name)
);
)sql",
    // 4: what a device can do (measured copy and read bandwidth, fp32 FMA and tensor-core rates)
    // and how well its timing gate behaves (A/A false-positive rate, spread, the delta it sets),
    // keyed by the device's UUID; the newest row of a key wins.
    R"sql(
CREATE TABLE device_limits (
  id INTEGER PRIMARY KEY,
  gpu_uuid TEXT NOT NULL CHECK (gpu_uuid <> ''),
  gpu_name TEXT NOT NULL,
  driver TEXT NOT NULL,
  toolkit TEXT NOT NULL,
  copy_bandwidth REAL NOT NULL CHECK (copy_bandwidth > 0),
  read_bandwidth REAL NOT NULL CHECK (read_bandwidth > 0),
  fp32_flops REAL NOT NULL CHECK (fp32_flops > 0),
  fp16_tensor_flops REAL,
  bf16_tensor_flops REAL,
  tf32_tensor_flops REAL,
  detail_json TEXT NOT NULL,
  created TEXT NOT NULL
);
CREATE INDEX device_limits_by_uuid ON device_limits (gpu_uuid, driver, toolkit);

CREATE TABLE gate_calibrations (
  id INTEGER PRIMARY KEY,
  gpu_uuid TEXT NOT NULL CHECK (gpu_uuid <> ''),
  run INTEGER REFERENCES runs (id),
  comparisons INTEGER NOT NULL CHECK (comparisons > 0),
  false_positive_rate REAL NOT NULL,
  not_same_rate REAL NOT NULL,
  spread REAL NOT NULL CHECK (spread >= 0),
  delta REAL NOT NULL CHECK (delta > 0),
  detail_json TEXT NOT NULL,
  created TEXT NOT NULL
);
CREATE INDEX gate_calibrations_by_uuid ON gate_calibrations (gpu_uuid);
)sql",
    // 5: the job queue. Evaluation jobs are keyed by (task, candidate, protocol): a job enqueued
    // twice, by two runs sharing the store, is one job, evaluated once. A worker takes a job with
    // a lease [ms since the epoch]; a job whose lease expired is taken again.
    R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  run INTEGER REFERENCES runs (id),
  task TEXT NOT NULL,
  candidate_digest TEXT NOT NULL,
  protocol TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
  worker TEXT NOT NULL DEFAULT '',
  lease_expires INTEGER NOT NULL DEFAULT 0,
  result_json TEXT,
  reason TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL,
  updated TEXT NOT NULL,
  UNIQUE (task, candidate_digest, protocol)
);
CREATE INDEX jobs_by_state ON jobs (state, id);
)sql",
};

// PostgreSQL has no user_version: one row in kb_schema holds it.
void ensure_version_table(connection& db) {
  db.exec("CREATE TABLE IF NOT EXISTS kb_schema (version INTEGER NOT NULL)");
  statement s(db, "SELECT count(*) FROM kb_schema");
  if (s.step() && s.column_int(0) == 0) {
    db.exec("INSERT INTO kb_schema (version) VALUES (0)");
  }
}

void set_schema_version(connection& db, int version) {
  if (db.kind() == dialect::sqlite) {
    db.exec("PRAGMA user_version = " + std::to_string(version));
  } else {
    db.exec("UPDATE kb_schema SET version = " + std::to_string(version));
  }
}

// Serializes migrations between processes for the rest of the transaction.
void lock_schema(connection& db) {
  if (db.kind() == dialect::postgres) {
    db.exec("SELECT pg_advisory_xact_lock(4244521)");
    ensure_version_table(db);
  }
}

} // namespace

int latest_schema_version() {
  return static_cast<int>(migrations.size());
}

int schema_version(connection& db) {
  if (db.kind() == dialect::sqlite) {
    return std::stoi(pragma(db, "user_version"));
  }
  statement exists(db, "SELECT to_regclass('kb_schema') IS NOT NULL");
  if (!exists.step() || exists.column_text(0) != "t") {
    return 0;
  }
  statement s(db, "SELECT max(version) FROM kb_schema");
  return s.step() && !s.is_null(0) ? static_cast<int>(s.column_int(0)) : 0;
}

void migrate(connection& db, int target) {
  if (target > latest_schema_version()) {
    fail("no store schema version {} (the latest is {})", target, latest_schema_version());
  }
  if (schema_version(db) >= target && schema_version(db) <= latest_schema_version()) {
    return;
  }
  for (int step = 1; step <= target; ++step) {
    transaction tx(db);
    lock_schema(db);
    // Read under the write lock: another process may have migrated meanwhile.
    const int current = schema_version(db);
    if (current > latest_schema_version()) {
      fail_input(
          "the store was written by a newer kblaster (schema version {}, this one knows up to {}); "
          "upgrade kblaster or use another --store",
          current, latest_schema_version());
    }
    if (current >= step) {
      continue;
    }
    db.exec(std::string(migrations[static_cast<size_t>(step - 1)]));
    set_schema_version(db, step);
    tx.commit();
  }
}

} // namespace kb::store::detail
