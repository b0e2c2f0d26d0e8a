// Decisions of the timing protocol that need no GPU, so that they can be tested alone.
#pragma once

#include <cstdint>

namespace kb::gpu::detail {

// A call broke the ABI's "kb_launch only enqueues, on the given stream" when one of its host
// times (inside kb_launch; the device busy after the given stream was idle; device work after
// the window) exceeds the empty call's by more than max(200 us, half the GPU window). [ns]
struct host_work_rule {
  int64_t floor_ns = 200'000;
  double window_fraction = 0.5;
  bool violated(int64_t round_trip_ns, int64_t empty_round_trip_ns, int64_t window_ns) const {
    const int64_t excess = round_trip_ns - empty_round_trip_ns;
    const auto allowed = static_cast<int64_t>(window_fraction * static_cast<double>(window_ns));
    return excess > (allowed > floor_ns ? allowed : floor_ns);
  }
};

// A window's sample with the scheme's calibrated overhead taken off, never below 0.1 us. [s]
inline double net_sample(double window_s, double overhead_s) {
  const double t = window_s - overhead_s;
  return t > 1e-7 ? t : 1e-7;
}

} // namespace kb::gpu::detail
