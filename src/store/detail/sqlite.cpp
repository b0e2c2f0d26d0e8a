#include "store/detail/sqlite.hpp"

#include "common/error.hpp"

#include <sqlite3.h>

namespace kb::store::detail {
namespace {

[[noreturn]] void fail_sqlite(sqlite3* db, int rc, std::string_view doing) {
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    throw busy_error(
        fmt::format("store is busy: another kblaster process held the store's write lock for "
                    "longer than the busy timeout ({})",
                    doing));
  }
  fail("store database: {} ({}: {})", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
       doing, sqlite3_errstr(rc));
}

} // namespace

connection::connection(const std::filesystem::path& file, int busy_timeout_ms) {
  const int rc =
      sqlite3_open_v2(file.c_str(), &m_db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = m_db != nullptr ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
    sqlite3_close_v2(m_db);
    m_db = nullptr;
    fail("cannot open the store database {}: {}", file.string(), message);
  }
  sqlite3_extended_result_codes(m_db, 1);
  sqlite3_busy_timeout(m_db, busy_timeout_ms);
}

connection::~connection() {
  sqlite3_close_v2(m_db);
}

void connection::exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);
  if (rc != SQLITE_OK) {
    fail_sqlite(m_db, rc, sql.substr(0, 80));
  }
}

bool connection::try_exec(const std::string& sql) noexcept {
  return sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
}

int64_t connection::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(m_db);
}
int64_t connection::changes() const {
  return sqlite3_changes64(m_db);
}

statement::statement(connection& db, std::string_view sql) : m_db(db) {
  const int rc =
      sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &m_stmt, nullptr);
  if (rc != SQLITE_OK) {
    fail_sqlite(db.handle(), rc, std::string(sql.substr(0, 80)));
  }
}

statement::~statement() {
  sqlite3_finalize(m_stmt);
}

namespace {

void check_bind(sqlite3* db, int rc) {
  if (rc != SQLITE_OK) {
    fail_sqlite(db, rc, "binding a parameter");
  }
}

} // namespace

statement& statement::bind(int index, int64_t value) {
  check_bind(m_db.handle(), sqlite3_bind_int64(m_stmt, index, value));
  return *this;
}

statement& statement::bind(int index, double value) {
  check_bind(m_db.handle(), sqlite3_bind_double(m_stmt, index, value));
  return *this;
}

statement& statement::bind(int index, std::string_view value) {
  check_bind(m_db.handle(), sqlite3_bind_text64(m_stmt, index, value.data(), value.size(),
                                                SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

statement& statement::bind(int index, std::nullopt_t) {
  check_bind(m_db.handle(), sqlite3_bind_null(m_stmt, index));
  return *this;
}

bool statement::step() {
  const int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  fail_sqlite(m_db.handle(), rc,
              sqlite3_sql(m_stmt) != nullptr ? std::string(sqlite3_sql(m_stmt)).substr(0, 80) : "");
}

void statement::run() {
  while (step()) {
  }
}

void statement::reset() {
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
}

int statement::column_count() const {
  return sqlite3_column_count(m_stmt);
}
std::string statement::column_name(int column) const {
  return sqlite3_column_name(m_stmt, column);
}
bool statement::is_null(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}
bool statement::is_integer(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_INTEGER;
}
bool statement::is_real(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_FLOAT;
}
int64_t statement::column_int(int column) const {
  return sqlite3_column_int64(m_stmt, column);
}
double statement::column_double(int column) const {
  return sqlite3_column_double(m_stmt, column);
}

std::string statement::column_text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, column));
  return text != nullptr
             ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(m_stmt, column)))
             : std::string();
}

std::optional<int64_t> statement::column_optional_int(int column) const {
  return is_null(column) ? std::nullopt : std::optional<int64_t>(column_int(column));
}

std::optional<double> statement::column_optional_double(int column) const {
  return is_null(column) ? std::nullopt : std::optional<double>(column_double(column));
}

std::optional<std::string> statement::column_optional_text(int column) const {
  return is_null(column) ? std::nullopt : std::optional<std::string>(column_text(column));
}

transaction::transaction(connection& db) : m_db(db), m_level(db.depth()) {
  db.exec(m_level == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT kb_" + std::to_string(m_level));
  ++db.depth();
}

transaction::~transaction() {
  if (m_done) {
    return;
  }
  --m_db.depth();
  // A failed rollback leaves nothing to do here: SQLite rolls an unfinished transaction back
  // when the connection closes.
  const std::string sql = m_level == 0 ? "ROLLBACK"
                                       : "ROLLBACK TO kb_" + std::to_string(m_level) +
                                             "; RELEASE kb_" + std::to_string(m_level);
  m_db.try_exec(sql);
}

void transaction::commit() {
  m_db.exec(m_level == 0 ? "COMMIT" : "RELEASE kb_" + std::to_string(m_level));
  m_done = true;
  --m_db.depth();
}

read_snapshot::read_snapshot(connection& db) : m_db(db) {
  if (db.depth() == 0) {
    db.exec("BEGIN DEFERRED");
    m_open = true;
  }
}

read_snapshot::~read_snapshot() {
  if (m_open) {
    m_db.try_exec("COMMIT");
  }
}

std::string pragma(connection& db, const std::string& name) {
  statement s(db, "PRAGMA " + name);
  return s.step() && !s.is_null(0) ? s.column_text(0) : std::string();
}

} // namespace kb::store::detail
