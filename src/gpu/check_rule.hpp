// The pass/fail decision of one check from its error metrics, shared by the GPU worker and the
// CPU path so both apply the same rule.
#pragma once

#include <kblaster/device/core.cuh>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kb::gpu {

struct check_outcome {
  bool passed = true;
  std::string reason; // verify.unwritten | verify.nonfinite | verify.mismatch | verify.rel_l2
  std::string message;
  nlohmann::json outputs = nlohmann::json::array(); // the metrics of every output
};

// `scales` are the RMS of each reference output; `names` the outputs' names.
check_outcome judge(const std::vector<error_metrics>& metrics, const std::vector<double>& scales,
                    const std::vector<std::string>& names, double rel_l2_limit);

} // namespace kb::gpu
