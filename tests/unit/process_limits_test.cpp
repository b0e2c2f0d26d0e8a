// Resource limits, credentials and descriptor hygiene of child processes.
#include "common/process.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace kb {
namespace {

// The soft limit in /proc/self/limits for the row that starts with `name`.
std::string soft_limit(const std::string& limits, const std::string& name) {
  std::istringstream in(limits);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(name)) {
      std::istringstream fields(line.substr(name.size()));
      std::string soft;
      fields >> soft;
      return soft;
    }
  }
  return "";
}

TEST(process_limits, rlimits_reach_the_child_and_what_it_execs) {
  process_spec spec;
  spec.argv = {"sh", "-c", "cat /proc/self/limits"};
  spec.rlimits.cpu_time = 30;
  spec.rlimits.file_size = 1 << 20;
  spec.rlimits.processes = 5000;
  spec.rlimits.open_files = 77;
  spec.rlimits.core_size = 0;
  const auto r = run_process(spec);
  ASSERT_TRUE(r.ok()) << r.describe() << r.output;
  EXPECT_EQ(soft_limit(r.output, "Max cpu time"), "30");
  EXPECT_EQ(soft_limit(r.output, "Max file size"), std::to_string(1 << 20));
  EXPECT_EQ(soft_limit(r.output, "Max processes"), "5000");
  EXPECT_EQ(soft_limit(r.output, "Max open files"), "77");
  EXPECT_EQ(soft_limit(r.output, "Max core file size"), "0");
}

TEST(process_limits, cpu_limit_stops_a_busy_loop_with_sigxcpu) {
  process_spec spec;
  spec.argv = {"sh", "-c", "while :; do :; done"};
  spec.rlimits.cpu_time = 1;
  spec.timeout = std::chrono::seconds(20);
  const auto r = run_process(spec);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGXCPU) << r.describe();
}

TEST(process_limits, file_size_limit_stops_a_large_write) {
  process_spec spec;
  spec.argv = {"sh", "-c",
               "head -c 2000000 /dev/zero > /dev/null; head -c 2000000 /dev/zero > \"$0\"",
               ::testing::TempDir() + "kb-fsize-test"};
  spec.rlimits.file_size = 1 << 20;
  const auto r = run_process(spec);
  EXPECT_FALSE(r.ok());
  EXPECT_LE(std::filesystem::file_size(spec.argv[3]), 1u << 20);
  std::filesystem::remove(spec.argv[3]);
}

TEST(process_limits, parent_descriptors_do_not_leak_into_children) {
  const int leaked = open("/dev/null", O_RDONLY); // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 3);
  process_spec spec;
  // ls, a child of the shell, lists the shell's descriptors; ": " keeps sh from exec'ing ls.
  spec.argv = {"sh", "-c", "ls /proc/$$/fd; :"};
  const auto r = run_process(spec);
  close(leaked);
  ASSERT_TRUE(r.ok()) << r.output;
  std::istringstream fds(r.output);
  std::string fd;
  while (fds >> fd) {
    EXPECT_LE(std::stoi(fd), 2) << "descriptor " << fd << " leaked into the child";
  }
}

TEST(process_limits, child_process_keeps_only_its_result_descriptor) {
  const int leaked = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  const std::string log = ::testing::TempDir() + "kb-child-fd.log";
  process_spec spec;
  // ls, a child of the shell, lists the shell's descriptors into the log (the child's stdout).
  spec.argv = {"sh", "-c", "ls /proc/$$/fd; echo done >&$KB_TEST_FD"};
  child_process child(spec, log, "KB_TEST_FD");
  bool timed_out = false;
  const auto line = child.read_line(std::chrono::seconds(10), &timed_out);
  close(leaked);
  ASSERT_EQ(line, std::optional<std::string>("done"));
  child.wait(std::chrono::seconds(10));
  std::ifstream in(log);
  std::string fds((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(fds, "0\n1\n2\n3\n");
  std::filesystem::remove(log);
}

TEST(process_limits, writing_to_a_child_that_has_ended_fails_without_ending_the_writer) {
  const std::string log = ::testing::TempDir() + "kb-child-gone.log";
  process_spec spec;
  spec.argv = {"sh", "-c", "exec 0<&-; exit 0"};
  child_process child(spec, log, "KB_TEST_FD");
  bool timed_out = false;
  EXPECT_FALSE(child.read_line(std::chrono::seconds(10), &timed_out)); // its end
  EXPECT_FALSE(timed_out);
  for (int i = 0; i < 1000 && child.running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(child.running());
  // Its stdin has no reader any more: SIGPIPE would end this test; the write fails instead.
  EXPECT_FALSE(child.write_line(std::string(1 << 16, 'x')));
  EXPECT_FALSE(child.write_line("{}"));
  std::filesystem::remove(log);
}

TEST(process_limits, run_as_switches_user_and_drops_groups) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "switching user needs root";
  }
  process_spec spec;
  spec.argv = {"sh", "-c", "id -u; id -g; id -G"};
  spec.run_as = process_credentials{65534, 65534};
  const auto r = run_process(spec);
  ASSERT_TRUE(r.ok()) << r.output;
  EXPECT_EQ(r.output, "65534\n65534\n65534\n");
}

} // namespace
} // namespace kb
