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

#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <pthread.h>
#include <thread>

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct options {
  std::string store;
  std::string bind = "127.0.0.1";
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
      st = std::make_unique<kb::store::store>(m_dir);
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

int serve(const options& o) {
  if (o.store.rfind("postgres://", 0) == 0 || o.store.rfind("postgresql://", 0) == 0) {
    kb::fail_input("this kblaster reads SQLite stores only; {} is not a folder", o.store);
  }
  const fs::path dir =
      kb::store::resolve_dir(o.store.empty() ? std::nullopt : std::optional<fs::path>(o.store));
  store_pool pool(dir);
  pool.get(); // fail now, with a clear message, if the store cannot be opened
  const auto assets = load_assets(o.assets);
  kb::serve::dashboard_options dopt;
  dopt.project_root = o.root;
  dopt.bench_json = o.bench;

  httplib::Server svr;
  svr.set_default_headers({{"Content-Security-Policy", content_security_policy},
                           {"X-Content-Type-Options", "nosniff"},
                           {"Referrer-Policy", "no-referrer"},
                           {"X-Frame-Options", "DENY"}});
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        int status = 500;
        try {
          std::rethrow_exception(ep);
        } catch (const kb::serve::not_found& e) {
          status = 404;
          what = e.what();
        } catch (const std::exception& e) {
          what = e.what();
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
  fmt::print("kblaster serve: store {} at http://{}:{}/ (read-only; Ctrl-C stops)\n", dir.string(),
             host, port);
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
