// NVML, loaded at run time (the driver ships it; machines without a driver have none), for the
// SM and memory clocks of every timing sample, why they are low, and the driver version.
#pragma once

#include <optional>
#include <string>

namespace kb::gpu::detail {

class nvml {
public:
  // Binds to the device with this PCI bus id ("0000:19:00.0"); inert when NVML is missing.
  explicit nvml(const std::string& pci_bus_id);
  ~nvml();
  nvml(const nvml&) = delete;
  nvml& operator=(const nvml&) = delete;

  bool available() const { return m_device != nullptr; }
  std::optional<unsigned> sm_clock_mhz() const;
  std::optional<unsigned> max_sm_clock_mhz() const;
  std::optional<unsigned> memory_clock_mhz() const;
  // Why the clocks are below their maximum now: NVML's clocks event reasons, a bit mask (idle,
  // application setting, power cap, thermal and power-brake slowdowns...).
  std::optional<unsigned long long> clocks_event_reasons() const;
  std::string driver_version() const;
  std::string error() const { return m_error; }

private:
  void* m_lib = nullptr;
  void* m_device = nullptr;
  std::string m_error;
};

} // namespace kb::gpu::detail
