#include "gpu/device_ops.hpp"

namespace kb::gpu {

void cpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) {
    write_from_double(data, dtype, i, sample(d, seed, static_cast<uint64_t>(i)));
  }
}

poison_pattern draw_poison(std::mt19937_64& rng) {
  // A quiet NaN: `quiet` (exponent all ones, quiet bit), a random sign and a payload of `bits`
  // bits in [1, 2^bits - 2]. One draw each, in a fixed order, so that a seed gives one pattern.
  const auto nan = [&](uint64_t quiet, int sign_at, int bits) {
    const uint64_t sign = (rng() & 1) << sign_at;
    const uint64_t payload = 1 + rng() % ((uint64_t{1} << bits) - 2);
    return sign | quiet | payload;
  };
  poison_pattern p{};
  p.f32 = static_cast<uint32_t>(nan(0x7FC00000u, 31, 22));
  p.f64 = nan(0x7FF8000000000000ull, 63, 51);
  p.f16 = static_cast<uint16_t>(nan(0x7E00u, 15, 9));
  p.bf16 = static_cast<uint16_t>(nan(0x7FC0u, 15, 6));
  p.i64 = 0x8000000000000000ull | (rng() & 0x3FFFFFFFFFFFFFFFull);
  p.i32 = static_cast<uint32_t>(0x80000000u | (rng() & 0x3FFFFFFFu));
  return p;
}

void cpu_fill_poison(void* data, kb_dtype dtype, int64_t n, const poison_pattern& poison) {
  for (int64_t i = 0; i < n; ++i) {
    write_poison(data, dtype, i, poison);
  }
}

void cpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value) {
  for (int64_t i = 0; i < n; ++i) {
    write_from_double(data, dtype, i, value);
  }
}

void cpu_copy_cyclic(const void* src, kb_dtype sd, int64_t sn, void* dst, kb_dtype dd, int64_t dn) {
  for (int64_t i = 0; i < dn; ++i) {
    write_from_double(dst, dd, i, read_as_double(src, sd, i % sn));
  }
}

uint64_t cpu_digest(const void* data, uint64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  const uint64_t words = bytes / 8;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w;
    memcpy(&w, p + 8 * i, 8);
    acc += hash_word(w, i);
  }
  if (bytes % 8 != 0) {
    uint64_t w = 0;
    memcpy(&w, p + 8 * words, bytes % 8);
    acc += hash_word(w, words);
  }
  return acc;
}

moments cpu_moments(const double* ref, int64_t n) {
  moments m{0, 0};
  for (int64_t i = 0; i < n; ++i) {
    if (is_finite(ref[i])) {
      m.sum += ref[i];
      m.sum_sq += ref[i] * ref[i];
    }
  }
  return m;
}

error_metrics cpu_compare(const void* y, kb_dtype dtype, const double* ref, int64_t n,
                          const tolerance_spec& t, const poison_pattern& pattern) {
  error_metrics m;
  reset(m);
  for (int64_t i = 0; i < n; ++i) {
    bool poison = false;
    const double v = read_as_double(y, dtype, i, pattern, &poison);
    const int bin = accumulate(m, v, ref[i], poison, t, static_cast<uint64_t>(i));
    if (bin >= 0) {
      m.histogram[bin] += 1;
    }
  }
  return m;
}

} // namespace kb::gpu
