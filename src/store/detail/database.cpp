#include "store/detail/database.hpp"

#include "common/error.hpp"

#include <cctype>
#include <chrono>
#include <thread>

namespace kb::store::detail {

connection::connection(const std::filesystem::path& file, int busy_timeout_ms)
    : m_db(open_sqlite(file, busy_timeout_ms)) {}

connection::connection(std::unique_ptr<backend> db) : m_db(std::move(db)) {}

connection::~connection() = default;

void connection::exec(const std::string& sql) {
  m_db->exec(sql);
}

bool connection::try_exec(const std::string& sql) noexcept {
  return m_db->try_exec(sql);
}

int64_t connection::changes() const {
  return m_db->changes();
}

statement::statement(connection& db, std::string_view sql) : m_cursor(db.db().prepare(sql)) {}
statement::~statement() = default;

statement& statement::bind(int index, int64_t value) {
  m_cursor->bind_int(index, value);
  return *this;
}
statement& statement::bind(int index, double value) {
  m_cursor->bind_double(index, value);
  return *this;
}
statement& statement::bind(int index, std::string_view value) {
  m_cursor->bind_text(index, value);
  return *this;
}
statement& statement::bind(int index, std::nullopt_t) {
  m_cursor->bind_null(index);
  return *this;
}
bool statement::step() {
  return m_cursor->step();
}
void statement::run() {
  while (step()) {
  }
}
void statement::reset() {
  m_cursor->reset();
}
int statement::column_count() const {
  return m_cursor->column_count();
}
std::string statement::column_name(int column) const {
  return m_cursor->column_name(column);
}
bool statement::is_null(int column) const {
  return m_cursor->is_null(column);
}
bool statement::is_integer(int column) const {
  return m_cursor->is_integer(column);
}
bool statement::is_real(int column) const {
  return m_cursor->is_real(column);
}
int64_t statement::column_int(int column) const {
  return m_cursor->column_int(column);
}
double statement::column_double(int column) const {
  return m_cursor->column_double(column);
}
std::string statement::column_text(int column) const {
  return m_cursor->column_text(column);
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
  // SQLite: take the write lock now. PostgreSQL locks rows as they are written.
  const char* begin = db.kind() == dialect::sqlite ? "BEGIN IMMEDIATE" : "BEGIN";
  if (m_level == 0) {
    // A writer waits its turn, each try under the busy timeout, for up to ten minutes in all: a
    // long transaction of another process (gc, an export) delays a record but never loses it.
    const auto deadline = std::chrono::steady_clock::now() + transaction_lock_wait;
    while (true) {
      try {
        db.exec(begin);
        break;
      } catch (const busy_error&) {
        if (std::chrono::steady_clock::now() >= deadline) {
          throw;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  } else {
    db.exec("SAVEPOINT kb_" + std::to_string(m_level));
  }
  ++db.depth();
}

transaction::~transaction() {
  if (m_done) {
    return;
  }
  --m_db.depth();
  // A failed rollback leaves nothing to do here: the database rolls an unfinished transaction
  // back when the connection closes.
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
    db.exec(db.kind() == dialect::sqlite ? "BEGIN DEFERRED"
                                         : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    m_open = true;
  }
}

read_snapshot::~read_snapshot() {
  if (m_open) {
    m_db.try_exec("COMMIT");
  }
}

std::string pragma(connection& db, const std::string& name) {
  if (db.kind() != dialect::sqlite) {
    fail("store database: PRAGMA {} is SQLite's", name);
  }
  statement s(db, "PRAGMA " + name);
  return s.step() && !s.is_null(0) ? s.column_text(0) : std::string();
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string redact_url(const std::string& url) {
  // scheme://user:password@host -> scheme://user:***@host, and ?password=... (or sslpassword=)
  // -> ?password=***
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    return url;
  }
  std::string out = url;
  const auto query = out.find('?', scheme + 3);
  const auto at = out.rfind('@', query == std::string::npos ? std::string::npos : query);
  const auto colon = out.find(':', scheme + 3);
  if (at != std::string::npos && at > scheme && colon != std::string::npos && colon < at) {
    out = out.substr(0, colon + 1) + "***" + out.substr(at);
  }
  const auto q = out.find('?', scheme + 3);
  if (q == std::string::npos) {
    return out;
  }
  std::string redacted = out.substr(0, q + 1);
  size_t start = q + 1;
  while (start <= out.size()) {
    size_t end = out.find('&', start);
    if (end == std::string::npos) {
      end = out.size();
    }
    const std::string pair = out.substr(start, end - start);
    const auto eq = pair.find('=');
    std::string name = pair.substr(0, eq);
    for (char& c : name) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    const bool secret = name.find("password") != std::string::npos || name == "passfile" ||
                        name == "sslkey" || name.find("secret") != std::string::npos ||
                        name.find("token") != std::string::npos;
    redacted += secret && eq != std::string::npos ? pair.substr(0, eq + 1) + "***" : pair;
    if (end < out.size()) {
      redacted += '&';
    }
    start = end + 1;
  }
  return redacted;
}

} // namespace kb::store::detail
