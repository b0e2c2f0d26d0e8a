// The judge's per-device lock between processes: a second judge on the same device waits, then
// is told the device is busy; the lock is free again once its holder lets go or dies; another
// device's lock is its own.
#include "gpu/detail/device_lock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace kb::gpu::detail {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

struct temp_folder {
  fs::path path;
  temp_folder() {
    path = fs::temp_directory_path() / ("kb-device-lock-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~temp_folder() { fs::remove_all(path); }
};

// A child process that takes the lock, says so on a pipe and holds it until killed or until
// `hold` has passed. Returns its pid once it holds the lock.
pid_t holder(const fs::path& file, milliseconds hold) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    device_lock lock;
    const auto got = lock.acquire(file, milliseconds(2000));
    const char word = got == lock_result::held ? 'y' : 'n';
    (void)::write(p[1], &word, 1);
    ::close(p[1]);
    std::this_thread::sleep_for(hold);
    ::_exit(0);
  }
  ::close(p[1]);
  char word = 0;
  EXPECT_EQ(::read(p[0], &word, 1), 1);
  ::close(p[0]);
  EXPECT_EQ(word, 'y');
  return pid;
}

TEST(DeviceLock, ASecondJudgeOnTheSameDeviceIsToldItIsBusy) {
  temp_folder dir;
  const auto file = device_lock_path("GPU-2f1c0a7e-1234-5678-9abc-def012345678", dir.path);
  EXPECT_EQ(file.parent_path(), dir.path);
  EXPECT_EQ(file.filename().string(),
            "kblaster-device-GPU-2f1c0a7e-1234-5678-9abc-def012345678.lock");
  const pid_t other = holder(file, milliseconds(60'000));
  device_lock lock;
  int words = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lock.acquire(file, milliseconds(1300), milliseconds(20),
                         [&](milliseconds waited) {
                           ++words;
                           EXPECT_GE(waited.count(), 900);
                         }),
            lock_result::busy);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(1300));
  EXPECT_GE(words, 1); // a sign of life while it waited
  EXPECT_FALSE(lock.held());
  // Another device's lock is its own.
  device_lock elsewhere;
  EXPECT_EQ(elsewhere.acquire(device_lock_path("GPU-other", dir.path), milliseconds(0)),
            lock_result::held);
  // The holder dies (a judge killed mid-job): the lock is free at once.
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
  EXPECT_EQ(lock.acquire(file, milliseconds(2000)), lock_result::held);
  EXPECT_TRUE(lock.held());
  // Now this process holds it: another process is refused.
  const pid_t child = ::fork();
  if (child == 0) {
    device_lock again;
    ::_exit(again.acquire(file, milliseconds(100)) == lock_result::busy ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Released, the other process gets it.
  lock.release();
  EXPECT_FALSE(lock.held());
  const pid_t next = holder(file, milliseconds(0));
  ::waitpid(next, nullptr, 0);
}

TEST(DeviceLock, AWaitingJudgeGetsTheLockWhenTheHolderEndsItsJob) {
  temp_folder dir;
  const auto file = device_lock_path("GPU-a", dir.path);
  const pid_t other = holder(file, milliseconds(300)); // a short job
  device_lock lock;
  EXPECT_EQ(lock.acquire(file, milliseconds(5000)), lock_result::held);
  ::waitpid(other, nullptr, 0);
}

TEST(DeviceLock, NamesAreSafeAndAFolderThatIsNotThereFailsWithItsPath) {
  EXPECT_EQ(device_lock_path("GPU/../x y", "/tmp").filename().string(),
            "kblaster-device-GPU_.._x_y.lock");
  EXPECT_EQ(device_lock_path("", "/tmp").filename().string(), "kblaster-device-unknown.lock");
  device_lock lock;
  const fs::path missing = "/nonexistent-kb-folder/kblaster-device-GPU-a.lock";
  EXPECT_EQ(lock.acquire(missing, milliseconds(0)), lock_result::failed);
  EXPECT_NE(lock.error().find(missing.string()), std::string::npos) << lock.error();
  EXPECT_FALSE(lock.held());
}

TEST(DeviceLock, TheFolderComesFromTheEnvironmentElseTmp) {
  ::setenv("KBLASTER_DEVICE_LOCK_DIR", "/var/lock/kb", 1);
  EXPECT_EQ(device_lock_dir(), fs::path("/var/lock/kb"));
  ::unsetenv("KBLASTER_DEVICE_LOCK_DIR");
  EXPECT_EQ(device_lock_dir(), fs::path("/tmp"));
}

} // namespace
} // namespace kb::gpu::detail
