// kblaster serve: runs kblaster-serve, the dashboard's HTTP server, installed beside this binary
// (a separate executable, so that kblaster itself does not link the HTTP library).
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace kb::cli {

void add_serve_commands(CLI::App& app, const global_options& globals, int* result) {
  struct options {
    std::string store;
    std::string bind = "127.0.0.1";
    int port = 8765;
    std::optional<std::filesystem::path> bench;
    std::optional<std::filesystem::path> port_file;
    std::vector<std::string> allow_hosts;
  };
  auto opts = std::make_shared<options>();
  auto* cmd = app.add_subcommand("serve", "a read-only web dashboard over the store");
  cmd->add_option("--store", opts->store,
                  "store folder (else --store before serve, "
                  "$KBLASTER_HOME, ~/.local/share/kblaster)");
  cmd->add_option("--port", opts->port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--bind", opts->bind, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--bench", opts->bench, "bench.json of `kblaster bench` for the suite page");
  cmd->add_option("--port-file", opts->port_file, "write the port listened on to this file");
  cmd->add_option("--allow-host", opts->allow_hosts,
                  "another name browsers reach the dashboard by (repeatable)");
  cmd->callback([&globals, result, opts] {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::filesystem::path server = self.parent_path() / "kblaster-serve";
    if (!std::filesystem::exists(server)) {
      fail_input("{} is missing: build the kblaster-serve target", server.string());
    }
    std::vector<std::string> args{server.string(), "--bind", opts->bind, "--port",
                                  std::to_string(opts->port)};
    std::string store = opts->store;
    if (store.empty()) {
      store = store::resolve_dir(globals.store).string();
    }
    args.insert(args.end(), {"--store", store});
    try {
      args.insert(args.end(), {"--root", find_project_root(globals.root).string()});
    } catch (const input_error&) {
      // No project folder here: the dashboard shows no roofline.
    }
    if (opts->bench) {
      args.insert(args.end(), {"--bench", opts->bench->string()});
    }
    if (opts->port_file) {
      args.insert(args.end(), {"--port-file", opts->port_file->string()});
    }
    for (const auto& h : opts->allow_hosts) {
      args.insert(args.end(), {"--allow-host", h});
    }
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::fflush(stdout);
    execv(server.c_str(), argv.data());
    fail("cannot run {}: {}", server.string(), std::strerror(errno));
    *result = exit_code::tool;
  });
}

} // namespace kb::cli
