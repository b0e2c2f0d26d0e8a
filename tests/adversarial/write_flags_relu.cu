// Exploit: writes the window's flags. The judge's stream writes GO to start a call's graph and
// waits for DONE, which the runner's stream writes behind the graph; both are small allocations
// of their own mapped into the runner, which this candidate finds among the allocations around
// its tensors (cuMemGetAddressRange). From its 49th call on (the timed rounds) its kernel adds
// one to the first word of each: GO armed in advance lets the next call's graph run before the
// judge's GO (its work outside the window), DONE moved on closes a window early. GO is mapped
// read-only in the runner now, so the write faults (`launch.cuda_error`); a window closed early
// leaves outputs unwritten at STOP (`timing.work_outside_stream`).
#include <kblaster/candidate.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int max_flags = 16;

struct flag_words {
  unsigned* at[max_flags];
  int count;
};

__global__ void relu_and_flags(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                               flag_words flags, bool meddle) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
  if (meddle && i == 0) {
    for (int k = 0; k < flags.count; ++k) {
      atomicAdd(flags.at[k], 1u);
    }
    __threadfence_system();
  }
}

int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    n *= t.shape[i];
  }
  return n;
}

using range_fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Small allocations that are none of the call's own tensors, found by walking the address space
// down from the lowest tensor and up from the highest, jumping over each allocation met.
flag_words find_flag_words(const kb_args* a) {
  flag_words w{};
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPoint("cuMemGetAddressRange", &fn, cudaEnableDefault, &q) != cudaSuccess ||
      fn == nullptr) {
    return w;
  }
  const auto range = reinterpret_cast<range_fn>(fn);
  constexpr CUdeviceptr step = CUdeviceptr{2} << 20;
  CUdeviceptr own[64];
  int owned = 0;
  CUdeviceptr low = ~CUdeviceptr{0};
  CUdeviceptr high = 0;
  const auto note_own = [&](const void* p) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (p != nullptr && range(&base, &size, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS) {
      if (owned < 64) {
        own[owned++] = base;
      }
      low = std::min(low, base);
      high = std::max(high, base + size);
    }
  };
  for (int i = 0; i < a->num_inputs; ++i) {
    note_own(a->inputs[i].data);
  }
  for (int i = 0; i < a->num_outputs; ++i) {
    note_own(a->outputs[i].data);
  }
  note_own(a->workspace);
  if (high == 0) {
    return w;
  }
  const auto consider = [&](CUdeviceptr base, size_t size) {
    for (int k = 0; k < owned; ++k) {
      if (own[k] == base) {
        return;
      }
    }
    if (size <= (size_t{64} << 20) && w.count < max_flags) {
      for (int k = 0; k < w.count; ++k) {
        if (reinterpret_cast<CUdeviceptr>(w.at[k]) == base) {
          return;
        }
      }
      w.at[w.count++] = reinterpret_cast<unsigned*>(base);
    }
  };
  CUdeviceptr at = low;
  for (int probes = 0; probes < 65536 && at > step; ++probes) {
    at -= step;
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range(&base, &size, at) == CUDA_SUCCESS) {
      consider(base, size);
      at = base;
    }
  }
  at = high;
  for (int probes = 0; probes < 65536; ++probes) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range(&base, &size, at) == CUDA_SUCCESS) {
      consider(base, size);
      at = base + size;
    } else {
      at += step;
    }
  }
  return w;
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static int calls = 0;
  static flag_words flags{};
  if (calls++ == 0) {
    flags = find_flag_words(a);
  }
  const int64_t n = numel(a->inputs[0]);
  if (n == 0) {
    return 0;
  }
  relu_and_flags<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)a->stream>>>(
      static_cast<const float*>(a->inputs[0].data), static_cast<float*>(a->outputs[0].data), n,
      flags, calls > 48);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
