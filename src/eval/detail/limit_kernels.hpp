// The measuring kernels of the device calibration (device_limits.cu), behind a plain interface
// that CUDA and C++ sources both compile.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kb::eval::detail {

struct measured_rates {
  double copy_bandwidth = 0;    // [bytes/s] bytes read + written
  double read_bandwidth = 0;    // [bytes/s]
  double fp32_flops = 0;        // [FLOP/s]
  double fp16_tensor_flops = 0; // [FLOP/s] 0: not measured (no tensor cores for the type)
  double bf16_tensor_flops = 0;
  double tf32_tensor_flops = 0;
  // Every way each bandwidth was measured, with its rate [bytes/s]; the ceiling is the best.
  std::vector<std::pair<std::string, double>> copy_methods;
  std::vector<std::pair<std::string, double>> read_methods;
  size_t buffer_bytes = 0;
  int sm_count = 0;
  std::string gpu_name;
};

// Runs the kernels on the current device; throws kb::error when CUDA fails.
measured_rates run_limit_kernels();

} // namespace kb::eval::detail
