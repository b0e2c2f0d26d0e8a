// Exploit: ends the timed window before its work ends. The judge closes a call's window when the
// runner's DONE flag reaches the call's sequence number, and the runner writes DONE on the stream
// behind the candidate's graph. GO and DONE are small allocations of their own mapped into the
// runner, GO read-only (the judge's stream writes it) and DONE read-write (the runner's stream
// writes it); during a call GO holds the call's number and DONE the one before. This candidate
// finds them among the device allocations mapped into its process (cuMemGetAddressRange around
// its tensors, each one's access flags from cuPointerGetAttribute): DONE is the writable word one
// behind another word. It never writes GO, or any word it cannot tell is writable: the read-only
// GO would fault (`launch.cuda_error`, which write_flags_relu.cu covers), and the early DONE
// would go untested. The first half of its blocks compute their part and stop; the second half
// compute theirs and then spin, so that the whole call takes about three times the baseline's
// time. The block that finishes the first half writes DONE = GO itself: a judge that believed the
// flag would time the fast half only and call it an improvement.
// Two outcomes are correct: the window is seen to close before the work ends (output positions
// read right behind STOP still hold poison and hold the answer once the runner is idle:
// `timing.work_outside_stream`), or the window covers the whole call (the judge's context is not
// scheduled while the runner's kernel holds the device) and the call measures slower than the
// baseline (`timing.regressed`).
#include <kblaster/candidate.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int max_flags = 16;
constexpr int threads = 256;
constexpr int64_t per_thread = 16;
constexpr int64_t per_block = threads * per_thread;

struct flag_words {
  unsigned* at[max_flags];
  bool writable[max_flags]; // false where the access flags say read-only
  int count;
};

__device__ unsigned g_finished = 0;

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__global__ void relu_then_done(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                               flag_words flags, unsigned threshold, uint64_t spin_ns) {
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_block;
  const int64_t end = begin + per_block < n ? begin + per_block : n;
  for (int64_t i = begin + threadIdx.x; i < end; i += threads) {
    const float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
  if (blockIdx.x >= threshold && spin_ns > 0) {
    const uint64_t until = now_ns() + spin_ns;
    while (now_ns() < until) {
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned done = atomicAdd(&g_finished, 1u) + 1u;
    if (done == threshold) {
      // GO is the word one ahead of DONE: DONE := GO, written into DONE only.
      for (int g = 0; g < flags.count; ++g) {
        const unsigned go = *static_cast<volatile unsigned*>(flags.at[g]);
        if (go == 0u) {
          continue;
        }
        for (int d = 0; d < flags.count; ++d) {
          if (d == g || !flags.writable[d]) {
            continue;
          }
          volatile unsigned* f = flags.at[d];
          if (go - *f == 1u) {
            *f = go; // DONE, while the slow half of the blocks is still to run
            __threadfence_system();
          }
        }
      }
    }
    if (done == gridDim.x) {
      atomicExch(&g_finished, 0u);
    }
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
using attribute_fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

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
  void* attr_fn = nullptr;
  if (cudaGetDriverEntryPoint("cuPointerGetAttribute", &attr_fn, cudaEnableDefault, &q) !=
      cudaSuccess) {
    attr_fn = nullptr;
  }
  const auto attribute = reinterpret_cast<attribute_fn>(attr_fn);
  // Writable unless the access flags say read-only. The flags are read into a zeroed 64-bit
  // word, whichever width the driver writes.
  const auto writable = [&](CUdeviceptr p) {
    unsigned long long flags = 0;
    if (attribute == nullptr ||
        attribute(&flags, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p) != CUDA_SUCCESS) {
      return true;
    }
    return flags != CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ;
  };
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
      w.writable[w.count] = writable(base);
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
  static bool searched = false;
  static flag_words flags{};
  // At most this many blocks run at once (the device's thread limit per SM; fewer if registers
  // bound them, which only makes the spinning half slower). Attribute queries only: the first call
  // runs under stream capture.
  static int resident = 0;
  if (!searched) {
    flags = find_flag_words(a);
    int dev = 0;
    int sms = 0;
    int threads_per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev);
    resident = std::max(1, sms * std::max(1, threads_per_sm / threads));
    searched = true;
  }
  const int64_t n = numel(a->inputs[0]);
  if (n == 0) {
    return 0;
  }
  const int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks > 0x7fffffff) {
    return 1;
  }
  const auto grid = static_cast<unsigned>(blocks);
  const unsigned threshold = std::max(1u, grid / 2);
  // The slow half runs in waves of `resident` blocks; together they spin about twice the time a
  // streaming ReLU of this size takes at 4 TB/s (8 bytes an element).
  const double waves = std::max(1.0, static_cast<double>(grid - threshold) / resident);
  const double stream_ns = static_cast<double>(n) * 8.0 / 4e12 * 1e9;
  const auto spin_ns = static_cast<uint64_t>(2.0 * stream_ns / waves);
  relu_then_done<<<grid, threads, 0, (cudaStream_t)a->stream>>>(
      static_cast<const float*>(a->inputs[0].data), static_cast<float*>(a->outputs[0].data), n,
      flags, threshold, spin_ns);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
