// Internals of the CUPTI collection that the tests reach.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kb::profile::detail {

// CUPTI_ERROR_INSUFFICIENT_PRIVILEGES and its virtualised twin: the driver forbids counters to
// this user (what Nsight Compute reports as ERR_NVGPUCTRPERM).
bool is_permission_error(int cupti_result);

// "ERR_NVGPUCTRPERM: ..." for a permission error, else "<call> failed: <text>".
std::string cupti_failure_reason(int cupti_result, std::string_view call, std::string_view text);

// The unit CUPTI reports for a metric when it gives none, from Nsight Compute's naming: "%" for
// percentages, "nsecond" for durations, "byte/second" for byte rates, "" otherwise.
std::string default_unit(std::string_view metric);

// Loads libcupti from the first of `paths` that opens and resolves every entry point the
// profiler uses: "" when that works, else why not.
std::string cupti_load_error(const std::vector<std::string>& paths);

} // namespace kb::profile::detail
