// Exploit: skips part of the work on timed calls and forges the output digest. After its first 48
// calls (verification, the warm-ups, the allocation probe) every call leaves 64 words of its
// output (128 elements, one at the start of every 64 Ki words) unwritten, still holding the
// judge's poison, which the kernel reads from the output itself, and writes one more word so
// that the unkeyed digest the judge used to compare (sum over words of splitmix64(w ^
// splitmix64(i + c)), an invertible mix) equals the digest of the right answer. A judge that
// only compares that digest after timed calls sees the verified answer. Every timed call's
// outputs are now checked whole for poison, and digested with a key the runner never sees:
// `verify.unwritten`, `timing.stale_output` or `timing.work_outside_stream`.
#include <kblaster/candidate.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr uint64_t skipped_words = 64;
constexpr uint64_t skip_stride = 65536; // [words]
constexpr uint64_t fix_word = 1;        // the word written to balance the digest

__host__ __device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ uint64_t inverse_odd(uint64_t m) {
  uint64_t inv = m; // Newton's iteration doubles the correct low bits each step
  for (int k = 0; k < 6; ++k) inv *= 2 - m * inv;
  return inv;
}

__device__ uint64_t unshift(uint64_t y, int s) {
  uint64_t x = y;
  for (int k = 0; k < 64 / s + 1; ++k) x = y ^ (x >> s);
  return x;
}

__device__ uint64_t splitmix64_inverse(uint64_t z) {
  z = unshift(z, 31);
  z *= inverse_odd(0x94D049BB133111EBull);
  z = unshift(z, 27);
  z *= inverse_odd(0xBF58476D1CE4E5B9ull);
  z = unshift(z, 30);
  return z - 0x9E3779B97F4A7C15ull;
}

__device__ uint64_t hash_word(uint64_t w, uint64_t i) {
  return splitmix64(w ^ splitmix64(i + 0x51ED270B27A3D4ull));
}

__device__ uint64_t relu_word(const float* x, uint64_t i) {
  float a = x[2 * i] > 0.f ? x[2 * i] : 0.f;
  float b = x[2 * i + 1] > 0.f ? x[2 * i + 1] : 0.f;
  return (uint64_t)__float_as_uint(a) | ((uint64_t)__float_as_uint(b) << 32);
}

__device__ bool skipped(uint64_t w, uint64_t words) {
  return w % skip_stride == 0 && w / skip_stride < skipped_words && w < words && w != fix_word;
}

__global__ void relu_skipping(const float* x, float* y, int64_t n, bool skip) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (skip && skipped(static_cast<uint64_t>(i) / 2, static_cast<uint64_t>(n) / 2)) return;
  if (skip && static_cast<uint64_t>(i) / 2 == fix_word) return;
  y[i] = x[i] > 0.f ? x[i] : 0.f;
}

// One thread: the word that makes the sum of hashes what the right answer's is.
__global__ void balance(const float* x, float* y, int64_t n) {
  const uint64_t words = static_cast<uint64_t>(n) / 2;
  auto* yw = reinterpret_cast<uint64_t*>(y);
  uint64_t need = hash_word(relu_word(x, fix_word), fix_word);
  for (uint64_t k = 0; k < skipped_words; ++k) {
    const uint64_t w = k * skip_stride;
    if (!skipped(w, words)) continue;
    need += hash_word(relu_word(x, w), w) - hash_word(yw[w], w); // yw[w] holds the poison
  }
  yw[fix_word] = splitmix64_inverse(need) ^ splitmix64(fix_word + 0x51ED270B27A3D4ull);
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static int calls = 0;
  ++calls;
  int64_t n = 1;
  for (int i = 0; i < a->inputs[0].ndim; ++i) n *= a->inputs[0].shape[i];
  const bool skip = calls > 48 && n % 2 == 0 && n >= 4;
  const auto* x = (const float*)a->inputs[0].data;
  auto* y = (float*)a->outputs[0].data;
  auto s = (cudaStream_t)a->stream;
  relu_skipping<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, n, skip);
  if (skip) balance<<<1, 1, 0, s>>>(x, y, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
