// What the tests against real services share: a fresh PostgreSQL database per test, created on
// the server named by $KBLASTER_TEST_POSTGRES (scripts/services.sh starts one and exports it).
// Without it the tests fail, unless $KBLASTER_TEST_NO_POSTGRES=1 says this machine has no
// PostgreSQL (a developer machine): then they are skipped with that reason.
#pragma once

#include "common/fs.hpp"
#include "store/detail/database.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace kb::testing {

inline std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : fallback;
}

// The admin URL, or "" when the machine declares PostgreSQL absent.
inline std::string postgres_admin_url() {
  const std::string url = env_or("KBLASTER_TEST_POSTGRES");
  if (url.empty() && env_or("KBLASTER_TEST_NO_POSTGRES") != "1") {
    ADD_FAILURE() << "KBLASTER_TEST_POSTGRES is not set: start PostgreSQL (scripts/services.sh "
                     "start) and export its URL, or set KBLASTER_TEST_NO_POSTGRES=1 on a "
                     "machine without it";
  }
  return url;
}

// URL of `base` with another database name.
inline std::string with_database(const std::string& base, const std::string& name) {
  const auto scheme = base.find("://");
  const auto slash = base.find('/', scheme + 3);
  const auto query = base.find('?', scheme + 3);
  std::string head = base.substr(0, slash == std::string::npos ? query : slash);
  std::string tail = query == std::string::npos ? "" : base.substr(query);
  return head + "/" + name + tail;
}

// A database of its own, dropped at the end.
class scratch_database {
public:
  explicit scratch_database(const std::string& admin) : m_admin(admin) {
    static std::atomic<int> counter{0};
    m_name = "kbtest_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    store::detail::connection db(store::detail::open_postgres(admin, 10000));
    db.exec("DROP DATABASE IF EXISTS " + m_name);
    db.exec("CREATE DATABASE " + m_name + " TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'");
    m_url = with_database(admin, m_name);
  }
  ~scratch_database() {
    try {
      store::detail::connection db(store::detail::open_postgres(m_admin, 10000));
      db.try_exec("DROP DATABASE IF EXISTS " + m_name + " WITH (FORCE)");
    } catch (...) {
    }
  }
  const std::string& url() const { return m_url; }

private:
  std::string m_admin;
  std::string m_name;
  std::string m_url;
};

} // namespace kb::testing
