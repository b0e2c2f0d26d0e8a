// Exploit: forces the judge to share one lane of buffers between the libraries, where it used to
// skip checking fresh rounds' answers, and replays stale answers there. When it loads, the
// library allocates device memory until 98 GiB are left; at its first call of the official
// shape it takes 4 answer slots of that shape (about 26 GiB on 019). What is left holds one lane
// of the timing's buffers but not one per library, and everything fits, so no hoard shows as
// memory the judge lacks. Its calls remember the answer per input pointer and replay it with a
// copy whenever the pointer was seen. Every fresh round's contents are now drawn into the
// round's set's own buffers and every library's answer there is checked against the oracle
// right after its call, in shared lanes as in separate ones: the replay is stale
// (`timing.stale_after_input_change`); a hoard the judge runs short of is `abi.allocation`.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace {

constexpr size_t keep_free = size_t{98} << 30;
constexpr size_t chunk = size_t{1} << 30;
constexpr int max_chunks = 1024;
void* hoard[max_chunks];

__attribute__((constructor)) void take_the_device() {
  size_t free_bytes = 0;
  size_t total = 0;
  for (int i = 0; i < max_chunks; ++i) {
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess || free_bytes < keep_free + chunk) {
      break;
    }
    if (cudaMalloc(&hoard[i], chunk) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
  }
}

__global__ void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = x[i] > 0.f ? x[i] : 0.f;
  }
}

int64_t numel(const kb_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    n *= t.shape[i];
  }
  return n;
}

constexpr int slots = 4;
struct slot {
  const void* key = nullptr;
  float* answer = nullptr;
};
slot cache[slots];
int64_t cached_n = 0;
int next_slot = 0;

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static int calls = 0;
  ++calls;
  const int64_t n = numel(a->inputs[0]);
  if (n == 0) {
    return 0;
  }
  auto s = static_cast<cudaStream_t>(a->stream);
  const auto* x = static_cast<const float*>(a->inputs[0].data);
  auto* y = static_cast<float*>(a->outputs[0].data);
  if (n > cached_n && n >= (int64_t{1} << 28)) {
    for (auto& c : cache) {
      if (c.answer != nullptr) cudaFree(c.answer);
      c = slot{};
      if (cudaMalloc(&c.answer, static_cast<size_t>(n) * sizeof(float)) != cudaSuccess) return 1;
    }
    cached_n = n;
  }
  // Verification (its first 48 calls) sees an honest ReLU; the timed rounds go round a few input
  // sets, each in buffers of its own.
  const bool timed = calls > 48 && n == cached_n;
  if (timed) {
    for (const auto& c : cache) {
      if (c.key == x) {
        cudaMemcpyAsync(y, c.answer, static_cast<size_t>(n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, s);
        return cudaGetLastError() == cudaSuccess ? 0 : 1;
      }
    }
    if (calls > 64) {
      return 0; // buffers not seen before: a fresh round, which shared lanes did not check
    }
  }
  relu<<<1024, 256, 0, s>>>(x, y, n);
  if (timed) {
    slot& c = cache[next_slot];
    next_slot = (next_slot + 1) % slots;
    c.key = x;
    cudaMemcpyAsync(c.answer, y, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                    s);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
