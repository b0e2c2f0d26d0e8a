// The dashboard's access control, against the real server (`kblaster serve`): loopback by
// default, the access token it prints on every request, a Host allow-list against DNS
// rebinding, a read-only store (never created, migrated or reaped by it) and error pages that
// tell nothing of the server's insides.
#include "common/process.hpp"
#include "store/detail/schema.hpp"
#include "store_test_support.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <thread>

namespace kb::store::testing {
namespace {

using namespace std::chrono_literals;

const std::string test_token = "kb45-test-token-0123456789abcdef";

class serve_access_test : public store_test {
protected:
  // Starts `kblaster serve` on a free loopback port; returns false when it exits first.
  bool start(const std::vector<std::string>& extra = {}) {
    const fs::path port_file = tmp() / "port";
    process_spec spec;
    spec.argv = {KBLASTER_BINARY, "serve", "--store", store_dir().string(), "--port", "0",
                 "--port-file", port_file.string()};
    spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
    spec.env_overrides["KBLASTER_SERVE_TOKEN"] = test_token;
    m_log = tmp() / "serve.log";
    m_server = std::make_unique<child_process>(spec, m_log, "KBLASTER_UNUSED_FD");
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      if (fs::exists(port_file) && !read_file(port_file).empty()) {
        m_port = std::stoi(read_file(port_file));
        return true;
      }
      if (!m_server->running()) {
        return false;
      }
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  void TearDown() override {
    if (m_server) {
      m_server->kill();
    }
  }
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client cli("127.0.0.1", m_port);
    cli.set_connection_timeout(5);
    cli.set_read_timeout(10);
    return cli.Get(path, headers);
  }
  std::string log() const { return fs::exists(m_log) ? read_file(m_log) : ""; }

  std::unique_ptr<child_process> m_server;
  fs::path m_log;
  int m_port = 0;
};

TEST_F(serve_access_test, every_request_needs_the_printed_token_and_a_host_of_its_own) {
  {
    store st(store_dir());
    record_sample_run(st);
  }
  ASSERT_TRUE(start()) << log();
  // The address with its token is printed at start.
  EXPECT_NE(log().find("?token=" + test_token), std::string::npos) << log();
  EXPECT_NE(log().find("http://127.0.0.1:"), std::string::npos) << log();
  const httplib::Headers bearer{{"Authorization", "Bearer " + test_token}};
  for (const char* path : {"/", "/api/runs", "/index.html"}) {
    const auto none = get(path);
    ASSERT_TRUE(none) << path;
    EXPECT_EQ(none->status, 401) << path;
    const auto wrong = get(path, {{"Authorization", "Bearer " + std::string(32, 'x')}});
    EXPECT_EQ(wrong->status, 401) << path;
    const auto ok = get(path, bearer);
    EXPECT_EQ(ok->status, 200) << path;
  }
  // ?token= sets a cookie that carries it from then on.
  const auto first = get("/?token=" + test_token);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  const std::string cookie = first->get_header_value("Set-Cookie");
  EXPECT_NE(cookie.find("kblaster_token=" + test_token), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos) << cookie;
  EXPECT_EQ(get("/api/runs", {{"Cookie", "kblaster_token=" + test_token}})->status, 200);
  // DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own name as Host.
  auto rebound = bearer;
  rebound.emplace("Host", "evil.example");
  EXPECT_EQ(get("/api/runs", rebound)->status, 403);
  auto named = bearer;
  named.emplace("Host", fmt::format("localhost:{}", m_port));
  EXPECT_EQ(get("/api/runs", named)->status, 200);
  // Errors: what was not found, nothing of the server's insides.
  const auto missing = get("/api/runs/999999", bearer);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body.find(store_dir().string()), std::string::npos) << missing->body;
}

TEST_F(serve_access_test, another_host_name_is_served_only_when_allowed) {
  {
    store st(store_dir());
    record_sample_run(st);
  }
  ASSERT_TRUE(start({"--allow-host", "dash.example"})) << log();
  httplib::Headers h{{"Authorization", "Bearer " + test_token}, {"Host", "dash.example"}};
  EXPECT_EQ(get("/api/runs", h)->status, 200);
}

// A row whose JSON does not parse (edited by hand, a disk error) breaks no page: the pages that
// show it, and the others, are served.
TEST_F(serve_access_test, one_unreadable_json_row_breaks_no_page) {
  recorded_run first;
  {
    store st(store_dir());
    first = record_sample_run(st, "a");
    record_sample_run(st, "b");
  }
  {
    detail::connection db(store_dir() / "store.sqlite", 1000);
    db.exec(fmt::format("UPDATE runs SET args_json = '{{not json' WHERE id = {}", first.run));
    db.exec(
        fmt::format("UPDATE candidates SET params_json = '[1,' WHERE id = {}", first.candidate));
    db.exec(fmt::format("UPDATE evaluations SET correctness_json = 'nan' WHERE id = {}",
                        first.evaluation));
  }
  ASSERT_TRUE(start()) << log();
  const httplib::Headers bearer{{"Authorization", "Bearer " + test_token}};
  for (const std::string path :
       {std::string("/"), std::string("/api/runs"), std::string("/api/suite"),
        fmt::format("/api/runs/{}", first.run), fmt::format("/api/runs/{}", first.run + 1),
        fmt::format("/api/runs/{}/tasks/023", first.run),
        fmt::format("/api/runs/{}/evaluations/{}", first.run, first.evaluation)}) {
    const auto r = get(path, bearer);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body.substr(0, 300) << "\n" << log();
  }
  const auto runs = nlohmann::json::parse(get("/api/runs", bearer)->body);
  EXPECT_NE(runs.dump().find("unreadable_json"), std::string::npos) << runs.dump().substr(0, 600);
}

TEST_F(serve_access_test, the_store_is_read_only_it_is_neither_created_nor_migrated) {
  // No store folder: an error, and no folder made.
  EXPECT_FALSE(start()) << log();
  EXPECT_FALSE(fs::exists(store_dir()));
  EXPECT_NE(log().find("no store at"), std::string::npos) << log();
  // A store of an older schema stays as it is.
  {
    store st(store_dir());
    record_sample_run(st);
  }
  {
    detail::connection db(store_dir() / "store.sqlite", 1000);
    db.exec(fmt::format("PRAGMA user_version = {}", detail::latest_schema_version() - 1));
  }
  EXPECT_FALSE(start()) << log();
  EXPECT_NE(log().find("schema version"), std::string::npos) << log();
  detail::connection db(store_dir() / "store.sqlite", 1000);
  EXPECT_EQ(detail::schema_version(db), detail::latest_schema_version() - 1);
}

} // namespace
} // namespace kb::store::testing
