// A small RAII layer over the store's database: one connection, prepared statements with typed
// binding, and write transactions that take the write lock up front (BEGIN IMMEDIATE on SQLite),
// so that a writer waits for the lock under the busy timeout instead of failing halfway through.
// Two backends implement it: SQLite (embedded, the default) and PostgreSQL (libpq, loaded at run
// time). SQL is written once with `?` parameters; the PostgreSQL backend numbers them ($1, $2, ...)
// and maps the few type names that differ (see postgres.cpp).
#pragma once

#include "common/error.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kb::store::detail {

enum class dialect { sqlite, postgres };

// One prepared statement of a backend.
class cursor {
public:
  virtual ~cursor() = default;
  virtual void bind_int(int index, int64_t value) = 0;
  virtual void bind_double(int index, double value) = 0;
  virtual void bind_text(int index, std::string_view value) = 0;
  virtual void bind_null(int index) = 0;
  virtual bool step() = 0;
  virtual void reset() = 0;
  virtual int column_count() const = 0;
  virtual std::string column_name(int column) const = 0;
  virtual bool is_null(int column) const = 0;
  virtual bool is_integer(int column) const = 0;
  virtual bool is_real(int column) const = 0;
  virtual int64_t column_int(int column) const = 0;
  virtual double column_double(int column) const = 0;
  virtual std::string column_text(int column) const = 0;
};

// One connection to a database.
class backend {
public:
  virtual ~backend() = default;
  virtual dialect kind() const = 0;
  virtual void exec(const std::string& sql) = 0;
  virtual bool try_exec(const std::string& sql) noexcept = 0;
  virtual int64_t changes() const = 0;
  virtual std::unique_ptr<cursor> prepare(std::string_view sql) = 0;
};

std::unique_ptr<backend> open_sqlite(const std::filesystem::path& file, int busy_timeout_ms);
// `url`: postgresql://user:password@host:port/database?... (libpq's connection URI). libpq is
// loaded when the first such store is opened; without it, a kb::input_error says what to install.
std::unique_ptr<backend> open_postgres(const std::string& url, int busy_timeout_ms);
// Whether `location` names a PostgreSQL database rather than a folder.
bool is_postgres_url(std::string_view location);
// The URL with its password replaced by "***", for messages.
std::string redact_url(const std::string& url);

// The write lock stayed with another connection for longer than the busy timeout.
class busy_error : public error {
public:
  using error::error;
};

class connection {
public:
  // SQLite database in `file`.
  connection(const std::filesystem::path& file, int busy_timeout_ms);
  explicit connection(std::unique_ptr<backend> db);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Runs one or more statements that return no rows.
  void exec(const std::string& sql);
  // For destructors: reports failure instead of throwing.
  bool try_exec(const std::string& sql) noexcept;
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  dialect kind() const { return m_db->kind(); }
  backend& db() { return *m_db; }
  // Depth of open transactions (savepoints inside the outermost one).
  int& depth() { return m_depth; }

private:
  std::unique_ptr<backend> m_db;
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
  std::unique_ptr<cursor> m_cursor;
};

// BEGIN IMMEDIATE for the outermost transaction, a savepoint inside it; rolled back unless
// committed.
// How long the outermost transaction waits for the write lock in all (each try waits up to the
// connection's busy timeout).
inline constexpr std::chrono::seconds transaction_lock_wait{600};

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

// The value of `PRAGMA name` (first column of the first row) as text (SQLite only).
std::string pragma(connection& db, const std::string& name);

// Runs an INSERT ... RETURNING id and returns the id.
template <class... Args>
int64_t insert_returning_id(connection& db, std::string_view sql, const Args&... args) {
  statement s(db, sql);
  s.bind_all(args...);
  if (!s.step()) {
    fail("store database: an insert returned no id");
  }
  const int64_t id = s.column_int(0);
  s.run();
  return id;
}

// One INSERT ... RETURNING id in a transaction of its own; returns the id.
template <class... Args>
int64_t insert_one(connection& db, std::string_view sql, const Args&... args) {
  transaction tx(db);
  const int64_t id = insert_returning_id(db, sql, args...);
  tx.commit();
  return id;
}

} // namespace kb::store::detail
