// The job queue: rows of the jobs table, taken by workers under a lease.
#include "store/store.hpp"

#include "common/error.hpp"
#include "store/detail/impl.hpp"

#include <algorithm>
#include <array>

namespace kb::store {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr const char* job_columns =
    "id, run, task, candidate_digest, protocol, payload_json, state, attempts, max_attempts, "
    "worker, lease_expires, result_json, reason";

job read_job(const detail::statement& s) {
  job j;
  j.id = s.column_int(0);
  j.run = s.column_optional_int(1);
  j.key = {s.column_text(2), s.column_text(3), s.column_text(4)};
  j.payload = nlohmann::json::parse(s.column_text(5));
  const auto state = job_state_from_string(s.column_text(6));
  if (!state) {
    fail("store database: unknown job state '{}'", s.column_text(6));
  }
  j.state = *state;
  j.attempts = static_cast<int>(s.column_int(7));
  j.max_attempts = static_cast<int>(s.column_int(8));
  j.worker = s.column_text(9);
  j.lease_expires = s.column_int(10);
  if (auto text = s.column_optional_text(11)) {
    j.result = nlohmann::json::parse(*text);
  }
  j.reason = s.column_text(12);
  return j;
}

} // namespace

std::string to_string(job_state s) {
  return std::string(job_state_names.name(s));
}

std::optional<job_state> job_state_from_string(const std::string& s) {
  return job_state_names.parse(s);
}

std::string to_string(enqueue_outcome o) {
  switch (o) {
  case enqueue_outcome::created:
    return "created";
  case enqueue_outcome::waiting:
    return "waiting";
  case enqueue_outcome::done:
    return "done";
  case enqueue_outcome::retried:
    return "retried";
  case enqueue_outcome::failed:
    return "failed";
  }
  return "failed";
}

int64_t store::enqueue(const job_key& key, const nlohmann::json& payload,
                       std::optional<int64_t> run, int max_attempts) {
  return submit(key, payload, run, max_attempts).id;
}

enqueue_result store::submit(const job_key& key, const nlohmann::json& payload,
                             std::optional<int64_t> run, int max_attempts, int max_retries) {
  if (key.task.empty() || key.candidate_digest.empty() || key.protocol.empty()) {
    fail_input("store: a job needs a task, a candidate digest and a protocol");
  }
  if (max_attempts < 1) {
    fail_input("store: a job needs at least one attempt");
  }
  auto& db = m_impl->db;
  detail::transaction tx(db);
  const std::string now = detail::now_utc();
  detail::statement(db,
                    "INSERT INTO jobs (run, task, candidate_digest, protocol, payload_json, state, "
                    "max_attempts, created, updated) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?) "
                    "ON CONFLICT (task, candidate_digest, protocol) DO NOTHING")
      .bind_all(run, key.task, key.candidate_digest, key.protocol, payload.dump(), max_attempts,
                now, now)
      .run();
  const bool created = db.changes() > 0;
  detail::statement s(db, "SELECT id, state, attempts, reason FROM jobs WHERE task = ? AND "
                          "candidate_digest = ? AND protocol = ?");
  s.bind_all(key.task, key.candidate_digest, key.protocol);
  if (!s.step()) {
    fail("store database: a job just enqueued is not there");
  }
  enqueue_result r;
  r.id = s.column_int(0);
  const auto state = job_state_from_string(s.column_text(1));
  r.attempts = static_cast<int>(s.column_int(2));
  r.reason = s.column_text(3);
  s.run();
  if (created) {
    r.outcome = enqueue_outcome::created;
  } else if (state == job_state::done) {
    r.outcome = enqueue_outcome::done;
  } else if (state == job_state::failed) {
    const int64_t cap = static_cast<int64_t>(max_attempts) * (1 + std::max(0, max_retries));
    if (r.attempts < cap) {
      detail::statement(db, "UPDATE jobs SET state = 'queued', max_attempts = attempts + ?, "
                            "worker = '', lease_expires = 0, updated = ? WHERE id = ? AND state "
                            "= 'failed'")
          .bind_all(max_attempts, now, r.id)
          .run();
      r.outcome = enqueue_outcome::retried;
    } else {
      r.outcome = enqueue_outcome::failed;
    }
  } else {
    r.outcome = enqueue_outcome::waiting;
  }
  tx.commit();
  return r;
}

std::optional<job> store::claim(const std::string& worker, std::chrono::milliseconds lease,
                                std::optional<int64_t> only) {
  if (worker.empty()) {
    fail_input("store: a worker needs a name to take jobs");
  }
  auto& db = m_impl->db;
  const int64_t now = now_ms();
  detail::transaction tx(db);
  // Jobs whose holder vanished after their last attempt end here, with a reason.
  detail::statement(db, "UPDATE jobs SET state = 'failed', reason = 'queue.attempts_exhausted', "
                        "updated = ? WHERE state = 'running' AND lease_expires < ? AND "
                        "attempts >= max_attempts")
      .bind_all(detail::now_utc(), now)
      .run();
  // PostgreSQL: rows another worker is taking right now are skipped, not waited for. SQLite: the
  // write lock of this transaction already excludes every other taker.
  const std::string pick =
      std::string("SELECT id FROM jobs WHERE (state = 'queued' OR (state = 'running' AND "
                  "lease_expires < ?)) AND attempts < max_attempts" +
                  std::string(only ? " AND id = ?" : "") + " ORDER BY id LIMIT 1") +
      (db.kind() == detail::dialect::postgres ? " FOR UPDATE SKIP LOCKED" : "");
  detail::statement s(db, "UPDATE jobs SET state = 'running', worker = ?, attempts = attempts + 1, "
                          "lease_expires = ?, updated = ? WHERE id = (" +
                              pick + ") RETURNING " + job_columns);
  s.bind_all(worker, now + lease.count(), detail::now_utc(), now);
  if (only) {
    s.bind(5, *only);
  }
  std::optional<job> taken;
  if (s.step()) {
    taken = read_job(s);
  }
  s.run();
  tx.commit();
  return taken;
}

bool store::renew(int64_t id, const std::string& worker, std::chrono::milliseconds lease) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(db, "UPDATE jobs SET lease_expires = ?, updated = ? WHERE id = ? AND worker = "
                        "? AND state = 'running'")
      .bind_all(now_ms() + lease.count(), detail::now_utc(), id, worker)
      .run();
  const bool held = db.changes() > 0;
  tx.commit();
  return held;
}

bool store::complete(int64_t id, const std::string& worker, const nlohmann::json& result) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  // A worker whose lease expired may still finish first: its result counts, once.
  detail::statement(db, "UPDATE jobs SET state = 'done', worker = ?, result_json = ?, reason = '', "
                        "updated = ? WHERE id = ? AND state <> 'done'")
      .bind_all(worker, result.dump(), detail::now_utc(), id)
      .run();
  const bool finished = db.changes() > 0;
  tx.commit();
  return finished;
}

void store::release(int64_t id, const std::string& worker, const std::string& reason, bool retry) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(
      db, "UPDATE jobs SET state = CASE WHEN ? = 1 AND attempts < max_attempts THEN 'queued' "
          "ELSE 'failed' END, reason = ?, lease_expires = 0, updated = ? WHERE id = ? AND worker "
          "= ? AND state = 'running'")
      .bind_all(retry ? 1 : 0, reason, detail::now_utc(), id, worker)
      .run();
  tx.commit();
}

void store::requeue(int64_t id, const std::string& reason) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(db, "UPDATE jobs SET state = 'queued', attempts = 0, worker = '', "
                        "lease_expires = 0, reason = ?, updated = ? WHERE id = ? AND state <> "
                        "'done'")
      .bind_all(reason, detail::now_utc(), id)
      .run();
  tx.commit();
}

void store::abandon(int64_t id, const std::string& reason) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(db, "UPDATE jobs SET state = 'failed', reason = ?, lease_expires = 0, updated "
                        "= ? WHERE id = ? AND state <> 'done'")
      .bind_all(reason, detail::now_utc(), id)
      .run();
  tx.commit();
}

std::optional<job> store::find_job(int64_t id) const {
  detail::statement s(m_impl->db, std::string("SELECT ") + job_columns + " FROM jobs WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) {
    return std::nullopt;
  }
  return read_job(s);
}

std::optional<job> store::find_job(const job_key& key) const {
  detail::statement s(m_impl->db, std::string("SELECT ") + job_columns +
                                      " FROM jobs WHERE task = ? AND candidate_digest = ? AND "
                                      "protocol = ?");
  s.bind_all(key.task, key.candidate_digest, key.protocol);
  if (!s.step()) {
    return std::nullopt;
  }
  return read_job(s);
}

queue_counts store::count_jobs() const {
  detail::statement s(m_impl->db, "SELECT state, count(*) FROM jobs GROUP BY state");
  queue_counts c;
  while (s.step()) {
    const auto state = job_state_from_string(s.column_text(0));
    const int64_t n = s.column_int(1);
    if (!state) {
      continue;
    }
    switch (*state) {
    case job_state::queued:
      c.queued = n;
      break;
    case job_state::running:
      c.running = n;
      break;
    case job_state::done:
      c.done = n;
      break;
    case job_state::failed:
      c.failed = n;
      break;
    }
  }
  return c;
}

} // namespace kb::store
