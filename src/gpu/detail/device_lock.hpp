// One judge per GPU. A judge holds an exclusive lock (flock) on a file named by its device's UUID
// for the life of each job, so that two judges (of two kblaster processes, two users or two
// executors on one host) never verify or time on the same GPU at once: another judge's calls
// would share the device with this one's windows and move its samples. A judge that finds the
// lock held waits for it a while (the other judge's job may be about to end), then gives up,
// and its evaluation ends `blocked.device_busy`. The lock needs no GPU, so that it can be
// tested between processes on any machine; the judge names the device (judge.cpp).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace kb::gpu::detail {

// How long a judge waits for another judge's job on its device to end before it gives up, and
// how often it tries again meanwhile.
inline constexpr std::chrono::milliseconds device_lock_wait{60'000};
inline constexpr std::chrono::milliseconds device_lock_poll{50};

// The folder of the lock files: $KBLASTER_DEVICE_LOCK_DIR where set, else /tmp, which every user
// of the host shares (a per-user $XDG_RUNTIME_DIR would let two users' judges share a GPU).
std::filesystem::path device_lock_dir();

// The lock file of the device `id` (its UUID, "GPU-2f1c..."; any character but letters, digits,
// '.', '-' and '_' becomes '_') in `dir`.
std::filesystem::path device_lock_path(const std::string& id, const std::filesystem::path& dir);

enum class lock_result {
  held,   // this object holds the lock
  busy,   // another holder kept it for the whole wait
  failed, // the file could not be opened or locked (error() says why)
};

class device_lock {
public:
  device_lock() = default;
  ~device_lock() { release(); }
  device_lock(device_lock&& o) noexcept { *this = std::move(o); }
  device_lock& operator=(device_lock&& o) noexcept;
  device_lock(const device_lock&) = delete;
  device_lock& operator=(const device_lock&) = delete;

  // Takes the lock on `file` (created, readable by every user, where it does not exist) without
  // blocking, and again every `poll` until `wait` has passed; `waiting` is called about once a
  // second meanwhile with the time waited so far (the judge's sign of life to its parent). The
  // descriptor is closed on exec, so no process the holder starts keeps the lock after it.
  lock_result acquire(const std::filesystem::path& file, std::chrono::milliseconds wait,
                      std::chrono::milliseconds poll = device_lock_poll,
                      const std::function<void(std::chrono::milliseconds)>& waiting = {});
  bool held() const { return m_fd >= 0; }
  const std::filesystem::path& file() const { return m_file; }
  const std::string& error() const { return m_error; }
  // Gives the lock up (also at the end of the object, or of its process).
  void release();

private:
  int m_fd = -1;
  std::filesystem::path m_file;
  std::string m_error;
};

} // namespace kb::gpu::detail
