// The CUDA driver API functions the judge and the runner use, resolved through the runtime
// (cudaGetDriverEntryPoint) instead of linking libcuda: kblaster starts on machines without a
// GPU driver, and only the GPU processes need these.
#pragma once

#include "common/error.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

namespace kb::gpu::detail {

template <class F> F driver_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // The version of the declarations this file was compiled against, so the types match.
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &found) !=
          cudaSuccess ||
      p == nullptr) {
    fail("the CUDA driver has no {}", name);
  }
  return reinterpret_cast<F>(p);
}

} // namespace kb::gpu::detail

// KB_CU(cuMemCreate)(...): the driver's function, looked up once per call site.
#define KB_CU(fn)                                                                                  \
  ([] {                                                                                            \
    static const auto entry = ::kb::gpu::detail::driver_entry<decltype(&fn)>(#fn);                 \
    return entry;                                                                                  \
  }())
