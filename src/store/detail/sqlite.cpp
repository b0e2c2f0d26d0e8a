// The SQLite backend of the store's database layer.
#include "store/detail/database.hpp"

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

void check_bind(sqlite3* db, int rc) {
  if (rc != SQLITE_OK) {
    fail_sqlite(db, rc, "binding a parameter");
  }
}

class sqlite_cursor final : public cursor {
public:
  sqlite_cursor(sqlite3* db, std::string_view sql) : m_db(db) {
    const int rc =
        sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &m_stmt, nullptr);
    if (rc != SQLITE_OK) {
      fail_sqlite(db, rc, std::string(sql.substr(0, 80)));
    }
  }
  ~sqlite_cursor() override { sqlite3_finalize(m_stmt); }

  void bind_int(int index, int64_t value) override {
    check_bind(m_db, sqlite3_bind_int64(m_stmt, index, value));
  }
  void bind_double(int index, double value) override {
    check_bind(m_db, sqlite3_bind_double(m_stmt, index, value));
  }
  void bind_text(int index, std::string_view value) override {
    check_bind(m_db, sqlite3_bind_text64(m_stmt, index, value.data(), value.size(),
                                         SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void bind_null(int index) override { check_bind(m_db, sqlite3_bind_null(m_stmt, index)); }

  bool step() override {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
      return true;
    }
    if (rc == SQLITE_DONE) {
      return false;
    }
    fail_sqlite(m_db, rc,
                sqlite3_sql(m_stmt) != nullptr ? std::string(sqlite3_sql(m_stmt)).substr(0, 80)
                                               : "");
  }
  void reset() override {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
  int column_count() const override { return sqlite3_column_count(m_stmt); }
  std::string column_name(int column) const override { return sqlite3_column_name(m_stmt, column); }
  bool is_null(int column) const override {
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
  }
  bool is_integer(int column) const override {
    return sqlite3_column_type(m_stmt, column) == SQLITE_INTEGER;
  }
  bool is_real(int column) const override {
    return sqlite3_column_type(m_stmt, column) == SQLITE_FLOAT;
  }
  int64_t column_int(int column) const override { return sqlite3_column_int64(m_stmt, column); }
  double column_double(int column) const override { return sqlite3_column_double(m_stmt, column); }
  std::string column_text(int column) const override {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, column));
    return text != nullptr
               ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(m_stmt, column)))
               : std::string();
  }

private:
  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
};

class sqlite_backend final : public backend {
public:
  sqlite_backend(const std::filesystem::path& file, int busy_timeout_ms) {
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
  ~sqlite_backend() override { sqlite3_close_v2(m_db); }

  dialect kind() const override { return dialect::sqlite; }
  void exec(const std::string& sql) override {
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message);
    sqlite3_free(message);
    if (rc != SQLITE_OK) {
      fail_sqlite(m_db, rc, sql.substr(0, 80));
    }
  }
  bool try_exec(const std::string& sql) noexcept override {
    return sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  int64_t changes() const override { return sqlite3_changes64(m_db); }
  std::unique_ptr<cursor> prepare(std::string_view sql) override {
    return std::make_unique<sqlite_cursor>(m_db, sql);
  }

private:
  sqlite3* m_db = nullptr;
};

} // namespace

std::unique_ptr<backend> open_sqlite(const std::filesystem::path& file, int busy_timeout_ms) {
  return std::make_unique<sqlite_backend>(file, busy_timeout_ms);
}

} // namespace kb::store::detail
