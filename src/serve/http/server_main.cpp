// kblaster-serve: the dashboard's HTTP server (`kblaster serve` runs it). A separate executable,
// so that only it links the HTTP library (docs/serve.md says why). It serves the pages and their
// JSON API read-only from the store; every page's script comes from the assets folder, and the
// Content-Security-Policy forbids inline script, so nothing a candidate wrote can run in the page.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "serve/serve.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <pthread.h>
#include <thread>

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct options {
  std::string store;
  std::string bind = "127.0.0.1";
  std::vector<std::string> allow_hosts; // more names the Host header may carry
  int port = 8765;
  std::optional<fs::path> root;
  fs::path assets;
  std::optional<fs::path> bench;
  std::optional<fs::path> port_file;
};

const char* const content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string mime_of(const fs::path& p) {
  static const std::map<std::string, std::string> types = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".png", "image/png"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"}};
  const auto it = types.find(p.extension().string());
  return it == types.end() ? "application/octet-stream" : it->second;
}

// Every file under the assets folder, read once at start: requests name one of these or get 404,
// so no request path ever reaches the filesystem.
std::map<std::string, std::string> load_assets(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::is_directory(dir)) {
    kb::fail_input("no dashboard assets at {} (build the kblaster-serve target, or pass --assets)",
                   dir.string());
  }
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      out["/" + fs::relative(e.path(), dir).generic_string()] = kb::read_file(e.path());
    }
  }
  if (!out.contains("/index.html")) {
    kb::fail_input("the assets folder {} has no index.html", dir.string());
  }
  return out;
}

// One store connection per server thread (a connection must not be shared between threads).
class store_pool {
public:
  explicit store_pool(fs::path dir) : m_dir(std::move(dir)) {}
  kb::store::store& get() {
    thread_local std::unique_ptr<kb::store::store> st;
    thread_local fs::path opened;
    if (!st || opened != m_dir) {
      kb::store::open_options o;
      o.dir = m_dir;
      o.read_only = true; // never created, migrated or reaped by a reader
      st = std::make_unique<kb::store::store>(o);
      opened = m_dir;
    }
    return *st;
  }

private:
  fs::path m_dir;
};

void send_json(httplib::Response& res, const json& j) {
  res.set_header("Cache-Control", "no-store");
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string param(const httplib::Request& req, const char* key) {
  return req.has_param(key) ? req.get_param_value(key) : "";
}

int64_t number(const std::string& s) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) {
      return v;
    }
  } catch (const std::exception&) {
  }
  throw kb::serve::not_found(fmt::format("not a number: {}", s));
}

// ---- Access control ----

// The access token: $KBLASTER_SERVE_TOKEN (at least 16 characters), else 32 random bytes in hex.
std::string access_token() {
  if (const char* env = std::getenv("KBLASTER_SERVE_TOKEN"); env != nullptr && *env != '\0') {
    const std::string t = env;
    if (t.size() < 16 || t.find_first_of(" \t\r\n;,\"") != std::string::npos) {
      kb::fail_input("KBLASTER_SERVE_TOKEN must be at least 16 characters, without spaces, ';', "
                     "',' or quotes");
    }
    return t;
  }
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[32] = {};
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    kb::fail("cannot read /dev/urandom for the access token");
  }
  std::string t;
  for (const unsigned char b : bytes) {
    t += fmt::format("{:02x}", b);
  }
  return t;
}

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) {
    return false;
  }
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// The host part of a Host header ("127.0.0.1:8765" -> "127.0.0.1", "[::1]:80" -> "::1").
std::string host_of(const std::string& header) {
  std::string h = header;
  if (h.starts_with("[")) {
    const auto end = h.find(']');
    return end == std::string::npos ? h : h.substr(1, end - 1);
  }
  if (const auto colon = h.rfind(':'); colon != std::string::npos) {
    h = h.substr(0, colon);
  }
  for (char& c : h) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return h;
}

// The token a request carries: ?token=, the cookie that sets, or Authorization: Bearer.
std::string token_of(const httplib::Request& req) {
  if (req.has_param("token")) {
    return req.get_param_value("token");
  }
  const std::string auth = req.get_header_value("Authorization");
  if (auth.starts_with("Bearer ")) {
    return auth.substr(7);
  }
  const std::string cookies = req.get_header_value("Cookie");
  size_t at = 0;
  while (at < cookies.size()) {
    size_t end = cookies.find(';', at);
    if (end == std::string::npos) {
      end = cookies.size();
    }
    std::string pair = cookies.substr(at, end - at);
    pair.erase(0, pair.find_first_not_of(' '));
    if (pair.starts_with("kblaster_token=")) {
      return pair.substr(15);
    }
    at = end + 1;
  }
  return "";
}

void refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(json{{"error", message}}.dump(), "application/json");
}

int serve(const options& o) {
  if (o.store.rfind("postgres://", 0) == 0 || o.store.rfind("postgresql://", 0) == 0) {
    kb::fail_input("this kblaster reads SQLite stores only; {} is not a folder", o.store);
  }
  const fs::path dir =
      kb::store::resolve_dir(o.store.empty() ? std::nullopt : std::optional<fs::path>(o.store));
  if (!fs::is_directory(dir)) {
    kb::fail_input("no store at {}", dir.string());
  }
  store_pool pool(dir);
  pool.get(); // fail now, with a clear message, if the store cannot be opened
  const std::string token = access_token();
  // Names a browser may use for this server: loopback ones, the bound address and --allow-host.
  // Any other Host (a DNS name an attacker's page points at 127.0.0.1) is refused.
  std::set<std::string> hosts = {"localhost", "127.0.0.1", "::1", host_of(o.bind)};
  for (const auto& h : o.allow_hosts) {
    hosts.insert(host_of(h));
  }
  const auto assets = load_assets(o.assets);
  kb::serve::dashboard_options dopt;
  dopt.project_root = o.root;
  dopt.bench_json = o.bench;

  httplib::Server svr;
  svr.set_default_headers({{"Content-Security-Policy", content_security_policy},
                           {"X-Content-Type-Options", "nosniff"},
                           {"Referrer-Policy", "no-referrer"},
                           {"X-Frame-Options", "DENY"}});
  // Every request: a Host of the allow-list, then the token. A request carrying the token as
  // ?token= gets it back as a cookie (HttpOnly, SameSite=Strict), so the pages' own requests
  // carry it from then on.
  svr.set_pre_routing_handler([&hosts, &token](const httplib::Request& req,
                                               httplib::Response& res) {
    if (!hosts.contains(host_of(req.get_header_value("Host")))) {
      refuse(res, 403, "this server answers to its own address only (see kblaster serve "
                       "--allow-host)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!same_secret(token_of(req), token)) {
      refuse(res, 401, "an access token is needed: open the address kblaster serve printed");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_param("token")) {
      res.set_header("Set-Cookie",
                     "kblaster_token=" + token + "; Path=/; HttpOnly; SameSite=Strict");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors say what was not found; anything else is a generic message (the details go to the
  // server's own stderr, not to the page).
  svr.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        int status = 500;
        try {
          std::rethrow_exception(ep);
        } catch (const kb::serve::not_found& e) {
          status = 404;
          what = e.what();
        } catch (const std::exception& e) {
          fmt::print(stderr, "kblaster serve: {} {}: {}\n", req.method, req.path, e.what());
        } catch (...) {
          fmt::print(stderr, "kblaster serve: {} {}: unknown error\n", req.method, req.path);
        }
        res.status = status;
        send_json(res, {{"error", what}});
      });
  auto with_dashboard = [&pool, dopt](auto body) {
    return [&pool, dopt, body](const httplib::Request& req, httplib::Response& res) {
      kb::serve::dashboard d(pool.get(), dopt);
      send_json(res, body(d, req));
    };
  };
  svr.Get("/api/version", with_dashboard([](const kb::serve::dashboard& d, const auto&) {
            return json{{"version", d.version()}};
          }));
  svr.Get("/api/runs", with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            kb::serve::run_filter f;
            f.task = param(req, "task");
            f.outcome = param(req, "outcome");
            f.kind = param(req, "kind");
            f.status = param(req, "status");
            f.since = param(req, "since");
            f.until = param(req, "until");
            if (const auto l = param(req, "limit"); !l.empty()) {
              f.limit = static_cast<int>(std::clamp<int64_t>(number(l), 1, 100000));
            }
            return d.runs(f);
          }));
  svr.Get(R"(/api/runs/(\d+))", with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            return d.run(number(req.matches[1]));
          }));
  svr.Get(R"(/api/runs/(\d+)/tasks/([A-Za-z0-9_.-]+))",
          with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            return d.search(number(req.matches[1]), req.matches[2]);
          }));
  svr.Get(R"(/api/runs/(\d+)/tasks/([A-Za-z0-9_.-]+)/roofline)",
          with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            return d.roofline(number(req.matches[1]), req.matches[2]);
          }));
  svr.Get(R"(/api/runs/(\d+)/evaluations/(\d+))",
          with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            return d.evaluation(number(req.matches[1]), number(req.matches[2]));
          }));
  svr.Get("/api/suite", with_dashboard([](const kb::serve::dashboard& d, const auto& req) {
            const auto r = param(req, "run");
            return d.suite(r.empty() ? std::nullopt : std::optional<int64_t>(number(r)));
          }));
  svr.Get(R"(/api/runs/(\d+)/evidence\.tar)",
          [&pool](const httplib::Request& req, httplib::Response& res) {
            const int64_t run = number(req.matches[1]);
            res.set_header("Content-Disposition",
                           fmt::format("attachment; filename=\"run-{}-evidence.tar\"", run));
            res.set_content(kb::serve::evidence_archive(pool.get(), run), "application/x-tar");
          });
  svr.Get(R"(/api/.*)", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 404;
    send_json(res, {{"error", fmt::format("no such endpoint: {}", req.path)}});
  });
  svr.Get(R"(/.*)", [&assets](const httplib::Request& req, httplib::Response& res) {
    const std::string path = req.path == "/" ? "/index.html" : req.path;
    const auto it = assets.find(path);
    if (it == assets.end()) {
      res.status = 404;
      res.set_content("not found", "text/plain; charset=utf-8");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_content(it->second, mime_of(path));
  });

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.bind);
    if (port < 0) {
      kb::fail_input("cannot bind to {}", o.bind);
    }
  } else if (!svr.bind_to_port(o.bind, port)) {
    kb::fail_input("cannot bind to {}:{} (in use, or not an address of this machine)", o.bind,
                   port);
  }
  if (o.port_file) {
    kb::write_file_atomic(*o.port_file, std::to_string(port) + "\n");
  }
  const std::string host = o.bind.find(':') != std::string::npos ? "[" + o.bind + "]" : o.bind;
  fmt::print("kblaster serve: store {} (read-only; Ctrl-C stops)\n  open "
             "http://{}:{}/?token={}\n",
             dir.string(), host, port, token);
  std::fflush(stdout);

  // SIGINT and SIGTERM stop the server cleanly: one thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread waiter([&svr, set] {
    int sig = 0;
    sigwait(&set, &sig);
    svr.stop();
  });
  waiter.detach();
  svr.listen_after_bind();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kblaster-serve: the dashboard over a KernelBlaster store (see kblaster serve)"};
  options o;
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  o.assets = exe.parent_path() / "web";
  app.add_option("--store", o.store, "store folder (else $KBLASTER_HOME, else the default)");
  app.add_option("--bind", o.bind, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", o.port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--root", o.root, "project folder with tasks/ (for the roofline)");
  app.add_option("--assets", o.assets, "folder of the pages and scripts (default: web/ beside)");
  app.add_option("--bench", o.bench, "bench.json of `kblaster bench` for the suite page");
  app.add_option("--port-file", o.port_file, "write the port listened on to this file");
  app.add_option("--allow-host", o.allow_hosts,
                 "another name browsers reach this server by (repeatable; default: loopback "
                 "names and the --bind address)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kb::exit_code::usage;
  }
  try {
    return serve(o);
  } catch (const kb::input_error& e) {
    fmt::print(stderr, "kblaster serve: error: {}\n", e.what());
    return kb::exit_code::input;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kblaster serve: internal error: {}\n", e.what());
    return kb::exit_code::tool;
  }
}
