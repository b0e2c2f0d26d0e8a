// The built-in kernel the access probe profiles: known to the tool, so a failure is the
// counters', never a candidate's.
#pragma once

namespace kb::profile::detail {

// Writes y[i] = i for i < n on `stream` (a cudaStream_t); returns the launch's cudaError_t.
int launch_probe_kernel(float* y, int n, void* stream);

} // namespace kb::profile::detail
