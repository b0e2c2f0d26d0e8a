// The judge's device memory, the first stage of the protocol: every buffer a runner sees is an
// allocation of its own that the judge creates (cuMemCreate with a POSIX file-descriptor
// handle) and sends; the runner maps it read-only where the judge says so (GO), and with one
// granule of address space left unmapped after it. A tensor is placed at the end of its
// allocation, so that a read or write past its end faults in the runner in every run; guard
// bytes before it (and in the few bytes of alignment slack after it) catch writes that stay
// mapped. The judge counts what it allocates, so that what the runners hold can be told apart.
#pragma once

#include "common/error.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kb::gpu::detail {

inline constexpr size_t guard_bytes = 64 * 1024;  // [bytes] before every tensor
inline constexpr unsigned char guard_byte = 0xA5; // what guard bands hold
// A tensor's start is aligned to this: what vector loads and TMA descriptors need; a kernel
// that assumes more checks (the portfolio's fall back to scalar code). The slack after a tensor
// whose size is not a multiple of it (at most 15 bytes) is guard bytes, mapped.
inline constexpr size_t tensor_align = 16;

// Device memory the judge has allocated and holds (its buffers, references and oracle
// workspace), so that what the runners hold can be told from it. [bytes]
std::atomic<int64_t>& judge_device_bytes();

// Fails (kb::fail) with the driver's error name unless `r` is success.
void driver_check(CUresult r, const char* what);

// The device had no room for an allocation of the judge's own (its buffers, references,
// workspaces). Whether that is the device's size or a candidate's hoard is the worker's to tell
// (worker::hoard_took).
class out_of_device_memory : public kb::error {
public:
  using kb::error::error;
};

// The device cannot hold what one lane of a shape needs (inputs, outputs, float64 references, the
// oracle's own allocations) with nothing hoarded by a runner: the job is blocked there
// (blocked.device_memory), not failed; a device with more memory runs it.
class device_too_small : public kb::error {
public:
  using kb::error::error;
};

// Device memory a runner can import: cuMemCreate with a POSIX file-descriptor handle, rounded up
// to the allocation granularity, mapped read-write in the judge. `runner_read_only`: runners map
// it read-only (GO, which only the judge's stream writes).
class shared_memory {
public:
  shared_memory() = default;
  explicit shared_memory(size_t bytes, bool runner_read_only = false);
  ~shared_memory() { release(); }
  shared_memory(shared_memory&& o) noexcept { *this = std::move(o); }
  shared_memory& operator=(shared_memory&& o) noexcept;
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;
  void* data() const { return reinterpret_cast<void*>(m_ptr); }
  size_t bytes() const { return m_bytes; }
  size_t granularity() const { return m_granularity; }
  bool runner_read_only() const { return m_runner_read_only; }
  int fd() const { return m_fd; }
  uint32_t id() const { return m_id; }

private:
  void release();
  CUmemGenericAllocationHandle m_handle{};
  CUdeviceptr m_ptr = 0;
  size_t m_bytes = 0;
  int m_fd = -1;
  uint32_t m_id = 0;
  size_t m_granularity = 0;
  bool m_runner_read_only = false;
};

// A tensor's buffer: an allocation of its own with the tensor placed at its end (its start
// aligned to `tensor_align`), a guard band of `guard_bytes` before it and the slack between its
// end and the allocation's filled with the guard byte. `host_mirror`: a host copy of the bytes,
// for tasks whose references are computed on the host.
class guarded_buffer {
public:
  guarded_buffer() = default;
  guarded_buffer(size_t bytes, bool host_mirror);
  guarded_buffer(guarded_buffer&& o) noexcept { *this = std::move(o); }
  guarded_buffer& operator=(guarded_buffer&& o) noexcept;
  const shared_memory& memory() const { return m_mem; }
  uint64_t offset() const { return m_offset; }
  void* data() const { return static_cast<unsigned char*>(m_base) + m_offset; }
  void* host() { return m_host.data(); }
  size_t bytes() const { return m_bytes; }
  // Whether the guard bytes still hold the guard byte (GPU digests on `s`, or a host copy).
  bool guards_intact(cudaStream_t s) const;
  bool guards_intact_host_check() const;
  void restore_guards() const;

private:
  void* head() const { return static_cast<unsigned char*>(data()) - guard_bytes; }
  void* tail() const { return static_cast<unsigned char*>(data()) + m_bytes; }
  size_t slack() const { return m_mem.bytes() - m_offset - m_bytes; }
  shared_memory m_mem;
  void* m_base = nullptr;
  size_t m_bytes = 0;
  size_t m_offset = 0;
  std::vector<unsigned char> m_host;
};

} // namespace kb::gpu::detail
