// The sandbox's policy, piece by piece: environment filter, device list, bwrap arguments,
// reachability check, stored names, the fail-closed decision and the --no-sandbox flag.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "sandbox/detail/sandbox_detail.hpp"
#include "sandbox/sandbox.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

namespace kb::sandbox {
namespace {

// Index of the first occurrence of `values` as consecutive arguments, or npos.
size_t find_args(const std::vector<std::string>& args, std::vector<std::string> values) {
  const auto it = std::search(args.begin(), args.end(), values.begin(), values.end());
  return it == args.end() ? std::string::npos : static_cast<size_t>(it - args.begin());
}

TEST(sandbox_policy, secret_names_are_recognised) {
  for (const char* name :
       {"OPENAI_API_KEY", "anthropic_api_key", "KBLASTER_APIKEY", "GITHUB_TOKEN", "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "DB_PASSWORD", "http_proxy", "HTTPS_PROXY",
        "ALL_PROXY", "no_proxy", "XAUTHORITY", "GOOGLE_APPLICATION_CREDENTIALS"}) {
    EXPECT_TRUE(detail::is_secret_name(name)) << name;
  }
  for (const char* name :
       {"PATH", "HOME", "LANG", "CUDA_VISIBLE_DEVICES", "KB_RESULT_FD", "TMPDIR"}) {
    EXPECT_FALSE(detail::is_secret_name(name)) << name;
  }
}

TEST(sandbox_policy, environment_keeps_only_the_allow_list_and_explicit_variables) {
  process_spec spec;
  spec.env = std::map<std::string, std::string>{{"PATH", "/home/user/bin:/usr/bin"},
                                                {"HOME", "/home/user"},
                                                {"LANG", "de_DE.UTF-8"},
                                                {"CUDA_VISIBLE_DEVICES", "1"},
                                                {"OPENAI_API_KEY", "sk-parent"},
                                                {"https_proxy", "http://proxy:3128"},
                                                {"LD_PRELOAD", "/home/user/hook.so"},
                                                {"KBLASTER_HOME", "/home/user/store"}};
  spec.env_overrides = {{"KB_RESULT_FD", "3"}, {"MY_SECRET", "x"}, {"HF_TOKEN", "hf_x"}};
  policy rules;
  rules.env_allow.push_back("OPENAI_API_KEY"); // an allow-list entry cannot let a secret through
  const auto env = detail::sandbox_environment(spec, rules);
  EXPECT_EQ(env.at("LANG"), "de_DE.UTF-8");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(env.at("KB_RESULT_FD"), "3");
  EXPECT_EQ(env.at("HOME"), work_dir);
  EXPECT_EQ(env.at("TMPDIR"), work_dir);
  EXPECT_EQ(env.at("PATH").find("/home/user"), std::string::npos);
  EXPECT_NE(env.at("PATH").find("/usr/bin"), std::string::npos);
  for (const char* gone :
       {"OPENAI_API_KEY", "https_proxy", "LD_PRELOAD", "KBLASTER_HOME", "MY_SECRET", "HF_TOKEN"}) {
    EXPECT_EQ(env.count(gone), 0u) << gone;
  }
}

TEST(sandbox_policy, gpu_device_files_are_the_nvidia_nodes_only) {
  temp_dir dev("kb-fake-dev");
  for (const char* name : {"nvidia0", "nvidia7", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                           "nvidia-modeset", "nvme0", "sda", "null"}) {
    std::ofstream(dev.path() / name) << "";
  }
  fs::create_directory(dev.path() / "nvidia-caps");
  std::vector<std::string> names;
  for (const auto& p : detail::gpu_device_files(dev.path())) {
    names.push_back(p.filename().string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"nvidia-caps", "nvidia-uvm", "nvidia-uvm-tools",
                                             "nvidia0", "nvidia7", "nvidiactl"}));
  EXPECT_TRUE(detail::gpu_device_files(dev.path() / "missing").empty());
}

TEST(sandbox_policy, bwrap_arguments_isolate_in_the_right_order) {
  temp_dir dir("kb-policy");
  fs::create_directories(dir.path() / "task" / "out");
  process_spec spec;
  spec.argv = {"nvcc", "--version"};
  policy rules;
  rules.read_only = {dir.path() / "task", "/usr/local/cuda/include"};
  rules.writable = {dir.path() / "task" / "out"};
  rules.work_size = 12345;
  const auto args = detail::bwrap_arguments(spec, rules, identity::nobody);
  for (const auto& flag : std::vector<std::vector<std::string>>{
           {"--unshare-all", "--unshare-user", "--disable-userns"},
           {"--uid", "65534", "--gid", "65534"},
           {"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"},
           {"--proc", "/proc", "--dev", "/dev"},
           {"--size", "12345", "--tmpfs", "/tmp"},
           {"--ro-bind", "/usr", "/usr"},
           {"--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--", "nvcc",
            "--version"}}) {
    EXPECT_NE(find_args(args, flag), std::string::npos) << flag.front();
  }
  const auto task = (dir.path() / "task").string();
  const auto out = (dir.path() / "task" / "out").string();
  const size_t tmpfs = find_args(args, {"--tmpfs", "/tmp"});
  const size_t input = find_args(args, {"--ro-bind", task, task});
  const size_t output = find_args(args, {"--bind", out, out});
  const size_t remount = find_args(args, {"--remount-ro", "/"});
  ASSERT_NE(input, std::string::npos);
  ASSERT_NE(output, std::string::npos);
  EXPECT_LT(tmpfs, input);  // binds under /tmp land in the private tmpfs, not under it
  EXPECT_LT(input, output); // the output is mounted on top of its read-only parent
  EXPECT_LT(output, remount);
  // Covered by the read-only /usr: not bound twice.
  EXPECT_EQ(find_args(args, {"--ro-bind", "/usr/local/cuda/include"}), std::string::npos);
  // Without a GPU no device file is passed; the secrets of /etc are not there at all.
  EXPECT_EQ(find_args(args, {"--dev-bind"}), std::string::npos);
  for (const char* hidden : {"/etc", "/etc/shadow", "/etc/passwd", "/home", "/root"}) {
    EXPECT_EQ(find_args(args, {"--ro-bind", hidden}), std::string::npos) << hidden;
  }

  const auto plain = detail::bwrap_arguments(spec, rules, identity::root);
  EXPECT_EQ(find_args(plain, {"--unshare-user"}), std::string::npos);
  EXPECT_EQ(find_args(plain, {"--uid"}), std::string::npos);
  EXPECT_NE(find_args(plain, {"--unshare-net"}), std::string::npos);
  EXPECT_NE(find_args(plain, {"--cap-drop", "ALL"}), std::string::npos);
}

TEST(sandbox_policy, gpu_policy_binds_device_files_with_dev_bind) {
  policy rules;
  rules.gpu = true;
  process_spec spec;
  spec.argv = {"true"};
  const auto args = detail::bwrap_arguments(spec, rules, identity::caller);
  for (const auto& dev : detail::gpu_device_files("/dev")) {
    EXPECT_NE(find_args(args, {"--dev-bind", dev.string(), dev.string()}), std::string::npos);
  }
  EXPECT_NE(find_args(args, {"--ro-bind", "/sys", "/sys"}), std::string::npos);
  EXPECT_LT(find_args(args, {"--ro-bind", "/sys"}), find_args(args, {"--remount-ro", "/dev"}));
}

TEST(sandbox_policy, reachability_follows_the_permission_bits) {
  temp_dir dir("kb-reach");
  chmod(dir.path().c_str(), 0755);
  const fs::path open_dir = dir.path() / "open";
  const fs::path closed_dir = dir.path() / "closed";
  fs::create_directories(open_dir);
  fs::create_directories(closed_dir);
  chmod(open_dir.c_str(), 0755);
  chmod(closed_dir.c_str(), 0700);
  std::ofstream(open_dir / "file") << "x";
  std::ofstream(closed_dir / "file") << "x";
  chmod((open_dir / "file").c_str(), 0644);
  EXPECT_EQ(detail::unreachable_for_sandbox_user(open_dir / "file", false), std::nullopt);
  EXPECT_NE(detail::unreachable_for_sandbox_user(open_dir / "file", true), std::nullopt);
  const auto why = detail::unreachable_for_sandbox_user(closed_dir / "file", false);
  ASSERT_NE(why, std::nullopt);
  EXPECT_NE(why->find(closed_dir.string()), std::string::npos) << *why;
  EXPECT_NE(detail::unreachable_for_sandbox_user(dir.path() / "missing", false), std::nullopt);
  EXPECT_EQ(detail::unreachable_for_sandbox_user("/usr/bin/true", false), std::nullopt);
}

TEST(sandbox_policy, output_dir_belongs_to_the_sandbox_user_under_nobody) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "handing a folder to uid 65534 needs root";
  }
  temp_dir dir("kb-outdir");
  make_output_dir(dir.path() / "a" / "out", identity::nobody);
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "a" / "out").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, sandbox_uid);
  EXPECT_EQ(st.st_gid, sandbox_gid);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(detail::unreachable_for_sandbox_user(dir.path() / "a" / "out", true).has_value(),
            true); // dir is 0700 root: still unreachable until its parents are searchable
  chmod(dir.path().c_str(), 0755);
  chmod((dir.path() / "a").c_str(), 0755);
  EXPECT_EQ(detail::unreachable_for_sandbox_user(dir.path() / "a" / "out", true), std::nullopt);
}

TEST(sandbox_policy, wrap_runs_bwrap_with_an_empty_environment_and_the_limits) {
  process_spec spec;
  spec.argv = {"nvcc", "-E", "x.cu"};
  spec.timeout = std::chrono::seconds(7);
  spec.rlimits.cpu_time = 5;
  policy rules;
  rules.who = geteuid() == 0 ? identity::nobody : identity::caller;
  rules.limits.processes = 40;
  const auto wrapped = wrap(spec, rules);
  EXPECT_NE(wrapped.argv.front().find("bwrap"), std::string::npos);
  EXPECT_EQ(std::vector<std::string>(wrapped.argv.end() - 3, wrapped.argv.end()), spec.argv);
  ASSERT_TRUE(wrapped.env.has_value());
  EXPECT_TRUE(wrapped.env->empty());
  EXPECT_TRUE(wrapped.env_overrides.empty());
  EXPECT_EQ(wrapped.timeout, spec.timeout);
  EXPECT_EQ(wrapped.rlimits.cpu_time, 5u);               // the spec's own limit wins
  EXPECT_EQ(wrapped.rlimits.core_size, 0u);              // the policy fills the rest
  EXPECT_GE(wrapped.rlimits.processes.value_or(0), 40u); // on top of running tasks
  EXPECT_EQ(wrapped.run_as.has_value(), rules.who == identity::nobody);

  policy missing = rules;
  missing.bwrap = "/nonexistent/bwrap";
  EXPECT_THROW(wrap(spec, missing), error);
  policy no_output = rules;
  no_output.writable = {"/nonexistent/out"};
  EXPECT_THROW(wrap(spec, no_output), error);
}

TEST(sandbox_policy, wrap_unprotected_keeps_the_command_but_scrubs_and_limits) {
  process_spec spec;
  spec.argv = {"env"};
  spec.env = std::map<std::string, std::string>{{"OPENAI_API_KEY", "sk-x"}, {"LANG", "C"}};
  spec.env_overrides = {{"KB_RESULT_FD", "3"}};
  const auto out = wrap_unprotected(spec, policy{});
  EXPECT_EQ(out.argv, spec.argv);
  ASSERT_TRUE(out.env.has_value());
  EXPECT_EQ(out.env->count("OPENAI_API_KEY"), 0u);
  EXPECT_EQ(out.env->at("KB_RESULT_FD"), "3");
  EXPECT_EQ(out.rlimits.core_size, 0u);
  const auto r = run_process(out);
  ASSERT_TRUE(r.ok()) << r.output;
  EXPECT_EQ(r.output.find("sk-x"), std::string::npos);
  EXPECT_NE(r.output.find("KB_RESULT_FD=3"), std::string::npos);
}

TEST(sandbox_policy, unwrap_turns_bwraps_signal_status_back_into_the_signal) {
  process_result killed;
  killed.exit_code = 128 + SIGXCPU;
  const auto r = unwrap(killed);
  EXPECT_EQ(r.signal, SIGXCPU);
  EXPECT_EQ(r.describe(), "killed by SIGXCPU");
  process_result failed;
  failed.exit_code = 1;
  EXPECT_EQ(unwrap(failed).describe(), "exit 1");
  process_result late;
  late.timed_out = true;
  late.exit_code = 137;
  EXPECT_EQ(unwrap(late).signal, 0);
}

TEST(sandbox_policy, names_round_trip_through_strings) {
  for (const auto who : {identity::automatic, identity::nobody, identity::caller,
                         identity::root_mapped, identity::root}) {
    EXPECT_EQ(identity_from_string(to_string(who)), who);
  }
  for (const auto level : {isolation::sandboxed, isolation::unprotected, isolation::blocked}) {
    EXPECT_EQ(isolation_from_string(to_string(level)), level);
  }
  EXPECT_EQ(to_string(identity::root_mapped), "root-mapped");
  EXPECT_THROW(identity_from_string("superuser"), input_error);
  EXPECT_THROW(isolation_from_string("maybe"), input_error);
}

TEST(sandbox_policy, decision_fails_closed) {
  probe_result missing;
  missing.reason = "bwrap not found on PATH";
  const auto blocked = decide(missing, false);
  EXPECT_EQ(blocked.level, isolation::blocked);
  EXPECT_EQ(blocked.detail, missing.reason);
  const auto forced = decide(missing, true);
  EXPECT_EQ(forced.level, isolation::unprotected);
  EXPECT_NE(forced.detail.find("--no-sandbox"), std::string::npos);

  probe_result working;
  working.available = true;
  working.who = identity::nobody;
  working.process_limit_enforced = true;
  EXPECT_EQ(decide(working, false).level, isolation::sandboxed);
  EXPECT_EQ(decide(working, false).detail, "nobody");
  EXPECT_EQ(decide(working, true).level, isolation::unprotected); // the user's choice is kept
  working.who = identity::root_mapped;
  working.process_limit_enforced = false;
  EXPECT_NE(decide(working, false).detail.find("not enforced"), std::string::npos);
}

TEST(sandbox_policy, no_sandbox_flag_is_off_unless_given) {
  for (const bool given : {false, true}) {
    CLI::App app;
    auto* eval = app.add_subcommand("eval");
    bool no_sandbox = false;
    add_no_sandbox_flag(*eval, &no_sandbox);
    std::vector<std::string> args{"eval"};
    if (given) {
      args.push_back("--no-sandbox");
    }
    std::reverse(args.begin(), args.end()); // CLI11 takes them last first
    app.parse(args);
    EXPECT_EQ(no_sandbox, given);
  }
}

} // namespace
} // namespace kb::sandbox
