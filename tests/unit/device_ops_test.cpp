// The harness's CPU twins of the GPU kernels (src/gpu/host_ops.cpp): the digest against a
// reference written the plain way, at every alignment, and the poison pattern of an evaluation
// (drawn per job, quiet NaNs with a payload of their own, large negative integers) as the fill
// and the compare see it. tests/gpu/device_ops_gpu_test.cpp holds the GPU side to the same values.
#include "gpu/device_ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace kb::gpu {
namespace {

// Sum over 8-byte little-endian words (the last one zero-padded) of hash_word(word, index),
// assembled byte by byte.
uint64_t reference_digest(const unsigned char* p, uint64_t bytes) {
  uint64_t acc = 0;
  for (uint64_t i = 0; 8 * i < bytes; ++i) {
    uint64_t w = 0;
    for (uint64_t b = 0; b < 8 && 8 * i + b < bytes; ++b) {
      w |= static_cast<uint64_t>(p[8 * i + b]) << (8 * b);
    }
    acc += hash_word(w, i);
  }
  return acc;
}

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& c : v) {
    c = static_cast<unsigned char>(rng());
  }
  return v;
}

TEST(cpu_digest, equals_the_plain_sum_at_every_size_and_offset) {
  const auto data = random_bytes(4096 + 64, 1);
  for (uint64_t bytes : {0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 100, 1000, 4095, 4096}) {
    for (size_t offset : {0, 1, 3, 8, 15, 16, 24}) {
      const unsigned char* p = data.data() + offset;
      EXPECT_EQ(cpu_digest(p, bytes), reference_digest(p, bytes))
          << bytes << " bytes at offset " << offset;
    }
  }
}

TEST(cpu_digest, depends_on_the_bytes_not_on_their_address) {
  const auto data = random_bytes(1000, 2);
  std::vector<unsigned char> shifted(1000 + 16);
  for (size_t offset : {1, 8, 13, 16}) {
    std::memcpy(shifted.data() + offset, data.data(), 1000);
    for (uint64_t bytes : {0, 5, 8, 999, 1000}) {
      EXPECT_EQ(cpu_digest(shifted.data() + offset, bytes), cpu_digest(data.data(), bytes));
    }
  }
}

TEST(cpu_digest, sees_a_changed_moved_or_appended_byte) {
  auto data = random_bytes(257, 3);
  const uint64_t d = cpu_digest(data.data(), data.size());
  EXPECT_NE(cpu_digest(data.data(), data.size() - 1), d);
  data[200] ^= 1;
  EXPECT_NE(cpu_digest(data.data(), data.size()), d);
  data[200] ^= 1;
  std::swap(data[0], data[8]);
  if (data[0] != data[8]) {
    EXPECT_NE(cpu_digest(data.data(), data.size()), d);
  }
}

TEST(poison_pattern, floats_are_quiet_nans_with_a_payload_of_their_own) {
  std::mt19937_64 rng(42);
  for (int k = 0; k < 2000; ++k) {
    const poison_pattern p = draw_poison(rng);
    float f;
    std::memcpy(&f, &p.f32, 4);
    EXPECT_TRUE(std::isnan(f));
    EXPECT_EQ(p.f32 & 0x7FC00000u, 0x7FC00000u); // exponent all ones, quiet bit
    const uint32_t f32_payload = p.f32 & 0x003FFFFFu;
    EXPECT_TRUE(f32_payload != 0 && f32_payload != 0x003FFFFFu) << std::hex << p.f32;

    double d;
    std::memcpy(&d, &p.f64, 8);
    EXPECT_TRUE(std::isnan(d));
    EXPECT_EQ(p.f64 & 0x7FF8000000000000ull, 0x7FF8000000000000ull);
    const uint64_t f64_payload = p.f64 & 0x0007FFFFFFFFFFFFull;
    EXPECT_TRUE(f64_payload != 0 && f64_payload != 0x0007FFFFFFFFFFFFull) << std::hex << p.f64;

    EXPECT_EQ(p.f16 & 0x7E00u, 0x7E00u);
    const unsigned f16_payload = p.f16 & 0x01FFu;
    EXPECT_TRUE(f16_payload != 0 && f16_payload != 0x01FFu) << std::hex << p.f16;
    EXPECT_TRUE(std::isnan(read_as_double(&p.f16, KB_FLOAT16, 0)));

    EXPECT_EQ(p.bf16 & 0x7FC0u, 0x7FC0u);
    const unsigned bf16_payload = p.bf16 & 0x003Fu;
    EXPECT_TRUE(bf16_payload != 0 && bf16_payload != 0x003Fu) << std::hex << p.bf16;
    EXPECT_TRUE(std::isnan(read_as_double(&p.bf16, KB_BFLOAT16, 0)));

    // Integers: far below any index or count.
    EXPECT_LE(static_cast<int64_t>(p.i64), -(int64_t{1} << 62) - 1);
    EXPECT_LE(static_cast<int32_t>(p.i32), -(int32_t{1} << 30) - 1);
  }
}

TEST(poison_pattern, is_drawn_from_the_seed_and_differs_between_seeds) {
  std::mt19937_64 a(7);
  std::mt19937_64 b(7);
  std::mt19937_64 c(8);
  const poison_pattern pa = draw_poison(a);
  const poison_pattern pb = draw_poison(b);
  const poison_pattern pc = draw_poison(c);
  EXPECT_EQ(std::memcmp(&pa, &pb, sizeof pa), 0);
  EXPECT_NE(pa.f32, pc.f32);
  EXPECT_NE(pa.f64, pc.f64);
  EXPECT_NE(pa.i64, pc.i64);
  // None of them is a NaN the hardware or a conversion makes.
  for (const poison_pattern& p : {pa, pc}) {
    EXPECT_NE(p.f32, 0x7FFFFFFFu);
    EXPECT_NE(p.f32, 0x7FC00000u);
    EXPECT_NE(p.f32, 0xFFC00000u);
    EXPECT_NE(p.f16, 0x7FFFu);
    EXPECT_NE(p.bf16, 0x7FFFu);
    EXPECT_NE(p.f64, 0xFFF8000000000000ull);
    EXPECT_NE(p.f64, 0x7FF8000000000000ull);
  }
}

TEST(poison_pattern, fill_and_compare_see_only_this_evaluations_pattern) {
  std::mt19937_64 rng(9);
  const poison_pattern mine = draw_poison(rng);
  const poison_pattern other = draw_poison(rng);
  const int64_t n = 37;
  const std::vector<double> ref(n, 1.0);
  const tolerance_spec tol{1e-3, 1e-3, 1.0};
  for (kb_dtype d : {KB_FLOAT32, KB_FLOAT64, KB_FLOAT16, KB_BFLOAT16, KB_INT64, KB_INT32}) {
    const int eb = dtype_bytes(d);
    std::vector<unsigned char> y(static_cast<size_t>(n * eb));
    cpu_fill_value(y.data(), d, n, 1.0);
    cpu_fill_poison(y.data() + 5 * eb, d, 3, mine); // elements 5, 6, 7 never written
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t bits = poison_bits(mine, d);
      EXPECT_EQ(std::memcmp(y.data() + i * eb, &bits, static_cast<size_t>(eb)) == 0,
                i >= 5 && i < 8)
          << d << " " << i;
    }
    const error_metrics m = cpu_compare(y.data(), d, ref.data(), n, tol, mine);
    EXPECT_EQ(m.unwritten, 3u) << d;
    EXPECT_EQ(m.violations, 3u) << d;
    EXPECT_EQ(m.worst_index, 5u) << d;
    // Under another pattern they are ordinary values: NaN (non-finite) or a wrong integer.
    const error_metrics o = cpu_compare(y.data(), d, ref.data(), n, tol, other);
    EXPECT_EQ(o.unwritten, 0u) << d;
    EXPECT_EQ(o.violations, 3u) << d;
    for (int64_t i = 0; i < n; ++i) {
      bool poison = true;
      const double v = read_as_double(y.data(), d, i, mine, &poison);
      EXPECT_EQ(poison, i >= 5 && i < 8);
      const double plain = read_as_double(y.data(), d, i);
      EXPECT_TRUE(v == plain || (std::isnan(v) && std::isnan(plain)));
    }
  }
}

} // namespace
} // namespace kb::gpu
