#include "gpu/detail/nvml.hpp"

#include <dlfcn.h>

namespace kb::gpu::detail {

namespace {

using nvml_return = int; // nvmlReturn_t; 0 is NVML_SUCCESS
using nvml_device = void*;
constexpr int clock_sm = 1;  // NVML_CLOCK_SM
constexpr int clock_mem = 2; // NVML_CLOCK_MEM

template <class F> F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

} // namespace

nvml::nvml(const std::string& pci_bus_id) {
  m_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (m_lib == nullptr) {
    m_error = "libnvidia-ml.so.1 not found";
    return;
  }
  auto init = symbol<nvml_return (*)()>(m_lib, "nvmlInit_v2");
  auto by_bus =
      symbol<nvml_return (*)(const char*, nvml_device*)>(m_lib, "nvmlDeviceGetHandleByPciBusId_v2");
  if (init == nullptr || by_bus == nullptr || init() != 0) {
    m_error = "NVML did not initialise";
    return;
  }
  nvml_device dev = nullptr;
  if (by_bus(pci_bus_id.c_str(), &dev) != 0) {
    m_error = "NVML does not know device " + pci_bus_id;
    return;
  }
  m_device = dev;
}

nvml::~nvml() {
  if (m_lib != nullptr) {
    if (auto shutdown = symbol<nvml_return (*)()>(m_lib, "nvmlShutdown");
        shutdown != nullptr && m_device != nullptr) {
      shutdown();
    }
    dlclose(m_lib);
  }
}

std::optional<unsigned> nvml::sm_clock_mhz() const {
  if (m_device == nullptr) {
    return std::nullopt;
  }
  auto f = symbol<nvml_return (*)(nvml_device, int, unsigned*)>(m_lib, "nvmlDeviceGetClockInfo");
  unsigned mhz = 0;
  if (f == nullptr || f(m_device, clock_sm, &mhz) != 0) {
    return std::nullopt;
  }
  return mhz;
}

std::optional<unsigned> nvml::max_sm_clock_mhz() const {
  if (m_device == nullptr) {
    return std::nullopt;
  }
  auto f = symbol<nvml_return (*)(nvml_device, int, unsigned*)>(m_lib, "nvmlDeviceGetMaxClockInfo");
  unsigned mhz = 0;
  if (f == nullptr || f(m_device, clock_sm, &mhz) != 0) {
    return std::nullopt;
  }
  return mhz;
}

std::optional<unsigned> nvml::memory_clock_mhz() const {
  if (m_device == nullptr) {
    return std::nullopt;
  }
  auto f = symbol<nvml_return (*)(nvml_device, int, unsigned*)>(m_lib, "nvmlDeviceGetClockInfo");
  unsigned mhz = 0;
  if (f == nullptr || f(m_device, clock_mem, &mhz) != 0) {
    return std::nullopt;
  }
  return mhz;
}

std::optional<unsigned long long> nvml::clocks_event_reasons() const {
  if (m_device == nullptr) {
    return std::nullopt;
  }
  auto f = symbol<nvml_return (*)(nvml_device, unsigned long long*)>(
      m_lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (f == nullptr) { // drivers before 535 name it by its older name
    f = symbol<nvml_return (*)(nvml_device, unsigned long long*)>(
        m_lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  unsigned long long reasons = 0;
  if (f == nullptr || f(m_device, &reasons) != 0) {
    return std::nullopt;
  }
  return reasons;
}

std::string nvml::driver_version() const {
  if (m_lib == nullptr || m_device == nullptr) {
    return "";
  }
  auto f = symbol<nvml_return (*)(char*, unsigned)>(m_lib, "nvmlSystemGetDriverVersion");
  char buf[96] = {0};
  if (f == nullptr || f(buf, sizeof buf) != 0) {
    return "";
  }
  return buf;
}

} // namespace kb::gpu::detail
