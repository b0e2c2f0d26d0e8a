// The judge's shareable device memory and guarded tensor buffers (memory.hpp).
#include "gpu/detail/memory.hpp"

#include "gpu/device_ops.hpp"

#include "common/error.hpp"

#include "gpu/detail/driver.hpp"

#include <algorithm>
#include <utility>

#include <unistd.h>

namespace kb::gpu::detail {

std::atomic<int64_t>& judge_device_bytes() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}

void driver_check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    KB_CU(cuGetErrorName)(r, &name);
    fail("CUDA driver error in the harness ({}): {}", what, name != nullptr ? name : "?");
  }
}

shared_memory::shared_memory(size_t bytes, bool runner_read_only)
    : m_runner_read_only(runner_read_only) {
  static uint32_t next_id = 0;
  CUdevice dev = 0;
  // cuCtxGetDevice is looked up by version, and its CUDA 13 entry point takes a context too:
  // the runtime's current device ordinal names the same device.
  int ordinal = 0;
  cuda_check(cudaGetDevice(&ordinal), "device");
  driver_check(KB_CU(cuDeviceGet)(&dev, ordinal), "cuDeviceGet");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  driver_check(
      KB_CU(cuMemGetAllocationGranularity)(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "granularity");
  m_granularity = granularity;
  m_bytes = (std::max<size_t>(bytes, 1) + granularity - 1) / granularity * granularity;
  if (const CUresult r = KB_CU(cuMemCreate)(&m_handle, m_bytes, &prop, 0); r != CUDA_SUCCESS) {
    const std::string what =
        fmt::format("cannot allocate {} bytes of shareable device memory for the harness", m_bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      throw out_of_device_memory(what);
    }
    fail("{}", what);
  }
  driver_check(KB_CU(cuMemExportToShareableHandle)(&m_fd, m_handle,
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
               "cuMemExportToShareableHandle");
  driver_check(KB_CU(cuMemAddressReserve)(&m_ptr, m_bytes, 0, 0, 0), "cuMemAddressReserve");
  driver_check(KB_CU(cuMemMap)(m_ptr, m_bytes, 0, m_handle, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  driver_check(KB_CU(cuMemSetAccess)(m_ptr, m_bytes, &access, 1), "cuMemSetAccess");
  judge_device_bytes() += static_cast<int64_t>(m_bytes);
  m_id = ++next_id;
}

shared_memory& shared_memory::operator=(shared_memory&& o) noexcept {
  std::swap(m_handle, o.m_handle);
  std::swap(m_ptr, o.m_ptr);
  std::swap(m_bytes, o.m_bytes);
  std::swap(m_fd, o.m_fd);
  std::swap(m_id, o.m_id);
  std::swap(m_granularity, o.m_granularity);
  std::swap(m_runner_read_only, o.m_runner_read_only);
  return *this;
}

void shared_memory::release() {
  if (m_ptr != 0) {
    cudaDeviceSynchronize();
    KB_CU(cuMemUnmap)(m_ptr, m_bytes);
    KB_CU(cuMemAddressFree)(m_ptr, m_bytes);
    KB_CU(cuMemRelease)(m_handle);
    judge_device_bytes() -= static_cast<int64_t>(m_bytes);
    m_ptr = 0;
  }
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

namespace {

size_t span_of(size_t bytes) {
  return (bytes + tensor_align - 1) / tensor_align * tensor_align;
}

uint64_t guard_digest(size_t n) {
  std::vector<unsigned char> g(n, guard_byte);
  return cpu_digest(g.data(), g.size());
}

} // namespace

guarded_buffer::guarded_buffer(size_t bytes, bool host_mirror)
    : m_mem(guard_bytes + span_of(bytes)), m_base(m_mem.data()), m_bytes(bytes) {
  m_offset = m_mem.bytes() - span_of(bytes);
  restore_guards();
  if (host_mirror) {
    m_host.resize(std::max<size_t>(bytes, 8));
  }
}

guarded_buffer& guarded_buffer::operator=(guarded_buffer&& o) noexcept {
  std::swap(m_mem, o.m_mem);
  std::swap(m_base, o.m_base);
  std::swap(m_bytes, o.m_bytes);
  std::swap(m_offset, o.m_offset);
  std::swap(m_host, o.m_host);
  return *this;
}

bool guarded_buffer::guards_intact(cudaStream_t s) const {
  static const uint64_t expected_head = guard_digest(guard_bytes);
  if (gpu_digest(head(), guard_bytes, s) != expected_head) {
    return false;
  }
  return slack() == 0 || gpu_digest(tail(), slack(), s) == guard_digest(slack());
}

void guarded_buffer::restore_guards() const {
  cuda_check(cudaMemset(head(), guard_byte, guard_bytes), "guard");
  if (slack() > 0) {
    cuda_check(cudaMemset(tail(), guard_byte, slack()), "guard");
  }
  // cudaMemset is asynchronous and on the legacy stream, which the judge's non-blocking streams
  // (and the runner, another process) do not wait for: finish it before anything reads the guards.
  cuda_check(cudaDeviceSynchronize(), "guard");
}

bool guarded_buffer::guards_intact_host_check() const {
  std::vector<unsigned char> g(guard_bytes);
  for (const auto& [p, n] : {std::pair<const void*, size_t>{head(), guard_bytes},
                             std::pair<const void*, size_t>{tail(), slack()}}) {
    if (n == 0) {
      continue;
    }
    if (cudaMemcpy(g.data(), p, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return false;
    }
    if (std::any_of(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(n),
                    [](unsigned char c) { return c != guard_byte; })) {
      return false;
    }
  }
  return true;
}

} // namespace kb::gpu::detail
