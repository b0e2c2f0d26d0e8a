// Kernels of the GPU-side processes themselves.
#pragma once

#include <cuda_runtime.h>

namespace kb::gpu::detail {

// One block of one thread that does nothing: the empty candidate that calibrates the timing
// scheme's overhead, launched by a runner through the same path as any candidate.
int launch_empty(cudaStream_t stream);

} // namespace kb::gpu::detail
