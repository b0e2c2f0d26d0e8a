#include "eval/detail/device_ops.hpp"

namespace kb::eval::detail {

void cpu_fill_random(void* data, kb_dtype dtype, int64_t n, const distribution& d, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) {
    write_from_double(data, dtype, i, sample(d, seed, static_cast<uint64_t>(i)));
  }
}

void cpu_fill_poison(void* data, kb_dtype dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case KB_FLOAT32:
      static_cast<uint32_t*>(data)[i] = poison_f32;
      break;
    case KB_FLOAT64:
      static_cast<uint64_t*>(data)[i] = poison_f64;
      break;
    case KB_FLOAT16:
      static_cast<uint16_t*>(data)[i] = poison_f16;
      break;
    case KB_BFLOAT16:
      static_cast<uint16_t*>(data)[i] = poison_bf16;
      break;
    case KB_INT64:
      static_cast<uint64_t*>(data)[i] = poison_i64;
      break;
    case KB_INT32:
      static_cast<uint32_t*>(data)[i] = 0x5A5A5A5Au;
      break;
    }
  }
}

void cpu_fill_value(void* data, kb_dtype dtype, int64_t n, double value) {
  for (int64_t i = 0; i < n; ++i) {
    write_from_double(data, dtype, i, value);
  }
}

void cpu_copy_cyclic(const void* src, kb_dtype sd, int64_t sn, void* dst, kb_dtype dd, int64_t dn) {
  for (int64_t i = 0; i < dn; ++i) {
    bool poison = false;
    write_from_double(dst, dd, i, read_as_double(src, sd, i % sn, &poison));
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
                          const tolerance_spec& t) {
  error_metrics m;
  reset(m);
  for (int64_t i = 0; i < n; ++i) {
    bool poison = false;
    const double v = read_as_double(y, dtype, i, &poison);
    const int bin = accumulate(m, v, ref[i], poison, t, static_cast<uint64_t>(i));
    if (bin >= 0) {
      m.histogram[bin] += 1;
    }
  }
  return m;
}

} // namespace kb::eval::detail
