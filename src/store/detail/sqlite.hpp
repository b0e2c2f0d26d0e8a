// A small RAII layer over the SQLite C API: one connection, prepared statements with typed
// binding, and write transactions that take the write lock up front (BEGIN IMMEDIATE), so that a
// writer waits for the lock under the busy timeout instead of failing halfway through.
#pragma once

#include "common/error.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kb::store::detail {

// The write lock stayed with another connection for longer than the busy timeout.
class busy_error : public error {
public:
  using error::error;
};

class connection {
public:
  connection(const std::filesystem::path& file, int busy_timeout_ms);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Runs one or more statements that return no rows.
  void exec(const std::string& sql);
  // For destructors: reports failure instead of throwing.
  bool try_exec(const std::string& sql) noexcept;
  int64_t last_insert_rowid() const;
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  sqlite3* handle() const { return m_db; }
  // Depth of open transactions (savepoints inside the outermost one).
  int& depth() { return m_depth; }

private:
  sqlite3* m_db = nullptr;
  int m_depth = 0;
};

class statement {
public:
  statement(connection& db, std::string_view sql);
  ~statement();
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  // Parameters are numbered from 1, as in SQL.
  statement& bind(int index, int64_t value);
  statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  statement& bind(int index, bool value) {
    return bind(index, static_cast<int64_t>(value ? 1 : 0));
  }
  statement& bind(int index, double value);
  statement& bind(int index, std::string_view value);
  statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  statement& bind(int index, std::nullopt_t);
  template <class T> statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }
  // Binds the arguments to parameters 1, 2, ...
  template <class... Args> statement& bind_all(const Args&... args) {
    int index = 0;
    (bind(++index, args), ...);
    return *this;
  }

  // Advances to the next row; false when there is none.
  bool step();
  // Steps through to the end (statements that return no rows).
  void run();
  void reset();

  int column_count() const;
  std::string column_name(int column) const;
  bool is_null(int column) const;
  bool is_integer(int column) const;
  bool is_real(int column) const;
  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  std::optional<int64_t> column_optional_int(int column) const;
  std::optional<double> column_optional_double(int column) const;
  std::optional<std::string> column_optional_text(int column) const;

private:
  connection& m_db;
  sqlite3_stmt* m_stmt = nullptr;
};

// BEGIN IMMEDIATE for the outermost transaction, a savepoint inside it; rolled back unless
// committed.
class transaction {
public:
  explicit transaction(connection& db);
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

private:
  connection& m_db;
  int m_level = 0;
  bool m_done = false;
};

// A consistent view for several reads (BEGIN DEFERRED); nothing to do inside a transaction.
class read_snapshot {
public:
  explicit read_snapshot(connection& db);
  ~read_snapshot();
  read_snapshot(const read_snapshot&) = delete;
  read_snapshot& operator=(const read_snapshot&) = delete;

private:
  connection& m_db;
  bool m_open = false;
};

// The value of `PRAGMA name` (first column of the first row) as text.
std::string pragma(connection& db, const std::string& name);

} // namespace kb::store::detail
