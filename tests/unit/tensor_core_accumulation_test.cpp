// A host model of the fp32 accumulation inside the tensor core's mma.sync, and why the tensor-core
// strategies (matmul.tensor_core, conv.implicit_gemm) have the `flush` axis. The mma adds its
// exact products to the accumulator with the significands aligned to the largest exponent (bits
// shifted out past a few guard bits truncated) and normalizes the sum toward zero (Fasi, Higham,
// Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021). Every mma into
// a long-lived accumulator therefore shrinks it a little, always toward zero, and over K the
// shrinks add up coherently; products that start from a zeroed fragment per 8-deep k-step (or
// per chunk) and go into the fp32 totals by round-to-nearest adds do not. The model runs the
// strategies' 3xTF32 step (a_small * b_big, a_big * b_small, a_big * b_big) on K = 4096 random
// values and compares both schemes with a float64 dot product.
#include "search/strategies.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace kb::search {
namespace {

uint32_t bits_of(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float v = 0.0f;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// The TF32 mma reads the top 19 bits of a register.
float tf32_read(float v) { return float_of(bits_of(v) & 0xffffe000u); }

// cvt.rna.tf32.f32: to nearest, ties away from zero.
float tf32_rna(float v) { return float_of((bits_of(v) + 0x1000u) & 0xffffe000u); }

// x (a double) to fp32 toward zero.
float toward_zero(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) {
    f = std::nextafter(f, 0.0f);
  }
  return f;
}

// One accumulator element of mma.sync m16n8k8 (TF32 in, fp32 accumulation): c plus eight exact
// products, each term truncated at `guard_bits` below the fp32 precision of the largest one, the
// sum normalized toward zero.
float mma_element(float c, const float* a, const float* b, int guard_bits = 3) {
  double terms[9];
  terms[0] = c;
  for (int i = 0; i < 8; ++i) {
    terms[i + 1] = static_cast<double>(tf32_read(a[i])) * static_cast<double>(tf32_read(b[i]));
  }
  int emax = INT32_MIN;
  for (const double t : terms) {
    if (t != 0.0) {
      int e = 0;
      std::frexp(t, &e);
      emax = std::max(emax, e);
    }
  }
  if (emax == INT32_MIN) {
    return 0.0f;
  }
  const double quantum = std::ldexp(1.0, emax - 24 - guard_bits);
  double sum = 0.0; // exact: every term a multiple of quantum, below 2^(emax + 4)
  for (const double t : terms) {
    sum += std::trunc(t / quantum) * quantum;
  }
  return toward_zero(sum);
}

struct pair_split {
  float big;
  float small;
};

// The strategies' splits: 0 rounds big and small (cvt.rna); 1 clears big's low 13 bits and
// passes small = v - big whole (the mma then reads its top 19 bits).
pair_split split(float v, int mode) {
  if (mode == 1) {
    const float big = float_of(bits_of(v) & 0xffffe000u);
    return {big, v - big};
  }
  const float big = tf32_rna(v);
  return {big, tf32_rna(v - big)};
}

enum class data { normal, uniform01 };

// The relative L2 error over `outputs` dot products of length k against float64. flush_steps:
// 0 keeps one mma accumulator over all of K; n > 0 starts it from zero every n 8-deep k-steps
// and adds it to an fp32 total (round to nearest). fma_error, when given, receives the error of
// a plain fp32 FMA chain on the same data.
double rel_l2(int k, int mode, int flush_steps, data dist, double* fma_error = nullptr, int outputs = 128) {
  std::mt19937_64 rng(20260);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  double err2 = 0.0;
  double ref2 = 0.0;
  double fma2 = 0.0;
  std::vector<float> a(k);
  std::vector<float> b(k);
  for (int o = 0; o < outputs; ++o) {
    for (int i = 0; i < k; ++i) {
      a[i] = dist == data::normal ? normal(rng) : uniform(rng);
      b[i] = dist == data::normal ? normal(rng) : uniform(rng);
    }
    double ref = 0.0;
    float chain = 0.0f;
    for (int i = 0; i < k; ++i) {
      ref += static_cast<double>(a[i]) * static_cast<double>(b[i]);
      chain = std::fma(a[i], b[i], chain);
    }
    float total = 0.0f;
    float acc = 0.0f;
    int steps = 0;
    for (int k0 = 0; k0 < k; k0 += 8) {
      float ab[8], as[8], bb[8], bs[8];
      for (int i = 0; i < 8; ++i) {
        const pair_split x = split(k0 + i < k ? a[k0 + i] : 0.0f, mode);
        const pair_split y = split(k0 + i < k ? b[k0 + i] : 0.0f, mode);
        ab[i] = x.big;
        as[i] = x.small;
        bb[i] = y.big;
        bs[i] = y.small;
      }
      acc = mma_element(acc, as, bb);
      acc = mma_element(acc, ab, bs);
      acc = mma_element(acc, ab, bb);
      if (flush_steps > 0 && ++steps == flush_steps) {
        total += acc;
        acc = 0.0f;
        steps = 0;
      }
    }
    total += acc;
    err2 += (total - ref) * (total - ref);
    ref2 += ref * ref;
    fma2 += (chain - ref) * (chain - ref);
  }
  if (fma_error != nullptr) {
    *fma_error = std::sqrt(fma2 / ref2);
  }
  return std::sqrt(err2 / ref2);
}

constexpr double tolerance = 1e-5; // the rel_l2 limit of the project's fp32 matmul test tasks

TEST(TensorCoreAccumulation, ModelTruncatesTowardZero) {
  const float a[8] = {1.0f, 0, 0, 0, 0, 0, 0, 0};
  const float b[8] = {std::ldexp(1.0f, -30), 0, 0, 0, 0, 0, 0, 0};
  // 1 + 2^-30 rounds to 1 either way; -(1 + 2^-23) - 2^-30 keeps its magnitude toward zero.
  EXPECT_EQ(mma_element(1.0f, a, b), 1.0f);
  const float c = -(1.0f + std::ldexp(1.0f, -23));
  const float minus_b[8] = {-std::ldexp(1.0f, -24) * 1.5f, 0, 0, 0, 0, 0, 0, 0};
  // c - 1.5 2^-24: to nearest it would be c - 2^-23; toward zero it stays c.
  EXPECT_EQ(mma_element(c, a, minus_b), c);
  EXPECT_EQ(toward_zero(-1.0 - std::ldexp(1.0, -30)), -1.0f);
  EXPECT_EQ(toward_zero(std::nextafter(2.0, 0.0)), std::nextafter(2.0f, 0.0f));
}

TEST(TensorCoreAccumulation, UnflushedAccumulatorFailsFp32ToleranceAtLargeK) {
  // One accumulator over K = 4096: 1536 truncating mma, an error biased toward zero.
  for (const int mode : {0, 1}) {
    EXPECT_GT(rel_l2(4096, mode, 0, data::normal), 2 * tolerance) << "split " << mode;
    EXPECT_GT(rel_l2(4096, mode, 0, data::uniform01), 2 * tolerance) << "split " << mode;
  }
  // At K = 64 (the portfolio's 007) the same accumulation is well inside the limit.
  EXPECT_LT(rel_l2(64, 1, 0, data::normal), tolerance / 4);
}

TEST(TensorCoreAccumulation, FlushedSumsStayAtFmaChainAccuracy) {
  for (const int mode : {0, 1}) {
    for (const data dist : {data::normal, data::uniform01}) {
      double fma = 0.0;
      const double unflushed = rel_l2(4096, mode, 0, dist);
      const double per_step = rel_l2(4096, mode, 1, dist, &fma);
      const double per_chunk = rel_l2(4096, mode, 8, dist); // bk = 64: 8 k-steps
      EXPECT_LT(per_step, tolerance / 10) << "split " << mode;
      EXPECT_LT(per_chunk, tolerance / 5) << "split " << mode;
      EXPECT_LT(per_step, unflushed / 20) << "split " << mode;
      // About the error of the fp32 FMA chain the SIMT kernels compute (1e-6 here).
      EXPECT_LT(per_step, 2 * fma) << "split " << mode;
    }
  }
}

TEST(TensorCoreAccumulation, StrategyDefaultsFlush) {
  // The default points flush every k-step: the unflushed accumulation fails the fp32 test tasks
  // with K = 4096 (922 to 924, 927) and K = 1024 (939, 931's GEMM view).
  for (const char* name : {"matmul.tensor_core", "conv.implicit_gemm"}) {
    const strategy& st = find_strategy(name);
    ASSERT_TRUE(st.defaults.contains("flush")) << name;
    EXPECT_NE(st.defaults.at("flush").get<int>(), 0) << name;
    EXPECT_NO_THROW(st.axis("flush")) << name;
  }
}

} // namespace
} // namespace kb::search
