// The harness's GPU kernels against their CPU twins (src/gpu/device_ops.cu, host_ops.cpp): the
// digest at every size and alignment (16-byte vector path, 8-byte aligned head, bytewise fallback)
// gives the CPU digest's value; the poison fill (16-byte stores when aligned) writes exactly the
// CPU fill's bytes and nothing past the end; the compare counts the same unwritten elements. The
// digest's bandwidth on a large buffer is printed and kept as evidence.
#include "eval/eval.hpp"
#include "gpu/device_ops.hpp"
#include "gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace kb::gpu {
namespace {

struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(size_t bytes) { cuda_check(cudaMalloc(&p, bytes), "test alloc"); }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  unsigned char* bytes() const { return static_cast<unsigned char*>(p); }
};

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t w = rng();
    std::memcpy(v.data() + i, &w, 8);
  }
  for (size_t i = n - n % 8; i < n; ++i) {
    v[i] = static_cast<unsigned char>(rng());
  }
  return v;
}

class device_ops_gpu : public ::testing::Test {
protected:
  void SetUp() override {
    const auto probe = eval::probe_device();
    if (!probe.available) {
      GTEST_SKIP() << probe.reason;
    }
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  }
  void TearDown() override {
    if (stream != nullptr) {
      cudaStreamDestroy(stream);
    }
  }
  cudaStream_t stream = nullptr;
};

TEST_F(device_ops_gpu, digest_equals_the_cpu_digest_at_every_size_and_offset) {
  const size_t most = (size_t{1} << 22) + 64;
  const auto host = random_bytes(most, 5);
  device_buffer dev(most);
  cuda_check(cudaMemcpy(dev.p, host.data(), most, cudaMemcpyHostToDevice), "upload");
  cuda_check(cudaDeviceSynchronize(), "ordered before the stream's work");
  for (uint64_t bytes :
       {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{9}, uint64_t{15}, uint64_t{16},
        uint64_t{17}, uint64_t{24}, uint64_t{31}, uint64_t{33}, uint64_t{63}, uint64_t{1000},
        uint64_t{4096 + 5}, uint64_t{65536}, uint64_t{(1u << 20) + 3}, uint64_t{(1u << 20) + 8},
        uint64_t{1u << 22}}) {
    for (size_t offset : {0, 1, 4, 8, 16, 24, 40}) {
      ASSERT_LE(offset + bytes, most);
      EXPECT_EQ(gpu_digest(dev.bytes() + offset, bytes, stream),
                cpu_digest(host.data() + offset, bytes))
          << bytes << " bytes at offset " << offset;
    }
  }
}

TEST_F(device_ops_gpu, digest_runs_near_memory_bandwidth) {
  const size_t bytes = size_t{4} << 30; // 4 GiB
  device_buffer dev(bytes + 16);
  cuda_check(cudaMemset(dev.p, 0x3C, bytes + 16), "fill");
  cuda_check(cudaDeviceSynchronize(), "ordered before the stream's work");
  uint64_t expected = 0;
  for (uint64_t i = 0; i < bytes / 8; ++i) {
    expected += hash_word(0x3C3C3C3C3C3C3C3Cull, i);
  }
  // Offsets 0 and 8 take the 16-byte path; 1 the bytewise fallback, for comparison.
  nlohmann::json record;
  for (size_t offset : {0, 8, 1}) {
    EXPECT_EQ(gpu_digest(dev.bytes() + offset, bytes, stream), expected) << offset; // warm-up
    double best = 1e30;
    for (int k = 0; k < 5; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const uint64_t d = gpu_digest(dev.bytes() + offset, bytes, stream);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(d, expected);
      best = std::min(best, s);
    }
    const double gbps = static_cast<double>(bytes) / best / 1e9;
    std::printf("digest of 4 GiB at offset %zu: %.3f ms, %.0f GB/s\n", offset, best * 1e3, gbps);
    record[std::to_string(offset)] = {{"seconds", best}, {"gb_per_s", gbps}};
  }
  // The fixed cost of one call (launch, copy back, synchronisation) on a 64 KiB guard.
  const int calls = 200;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < calls; ++k) {
    gpu_digest(dev.bytes(), 64 << 10, stream);
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      calls;
  std::printf("digest of 64 KiB: %.1f us a call\n", us);
  record["64KiB_us_per_call"] = us;
  gpu_test::keep("digest_bandwidth", record);
}

TEST_F(device_ops_gpu, poison_fill_writes_the_cpu_fills_bytes_and_nothing_more) {
  std::mt19937_64 rng(11);
  const poison_pattern p = draw_poison(rng);
  const size_t room = 16384; // 1001 elements of 8 bytes at offset 24, and the bytes after them
  device_buffer dev(room);
  for (kb_dtype d : {KB_FLOAT32, KB_FLOAT64, KB_FLOAT16, KB_BFLOAT16, KB_INT64, KB_INT32}) {
    const size_t eb = static_cast<size_t>(dtype_bytes(d));
    for (int64_t n : {0, 1, 3, 7, 8, 9, 15, 17, 100, 1001}) {
      for (size_t offset : {size_t{0}, eb, size_t{16}, 3 * eb}) {
        std::vector<unsigned char> expected(room, 0xA5);
        cpu_fill_poison(expected.data() + offset, d, n, p);
        cuda_check(cudaMemset(dev.p, 0xA5, room), "clear");
        cuda_check(cudaDeviceSynchronize(), "ordered before the stream's work");
        gpu_fill_poison(dev.bytes() + offset, d, n, p, stream);
        std::vector<unsigned char> got(room);
        cuda_check(cudaStreamSynchronize(stream), "fill");
        cuda_check(cudaMemcpy(got.data(), dev.p, room, cudaMemcpyDeviceToHost), "download");
        EXPECT_EQ(got, expected) << "dtype " << d << " n " << n << " offset " << offset;
      }
    }
  }
}

TEST_F(device_ops_gpu, compare_counts_the_unwritten_elements_as_the_cpu_does) {
  std::mt19937_64 rng(12);
  const poison_pattern mine = draw_poison(rng);
  const poison_pattern other = draw_poison(rng);
  const int64_t n = 10000;
  const std::vector<double> ref(n, 1.0);
  device_buffer dref(n * sizeof(double));
  cuda_check(cudaMemcpy(dref.p, ref.data(), n * sizeof(double), cudaMemcpyHostToDevice), "upload");
  cuda_check(cudaDeviceSynchronize(), "ordered before the stream's work");
  device_buffer dy(n * 8);
  const tolerance_spec tol{1e-3, 1e-3, 1.0};
  for (kb_dtype d : {KB_FLOAT32, KB_FLOAT64, KB_FLOAT16, KB_BFLOAT16, KB_INT64, KB_INT32}) {
    const int64_t eb = dtype_bytes(d);
    std::vector<unsigned char> y(static_cast<size_t>(n * eb));
    cpu_fill_value(y.data(), d, n, 1.0);
    cpu_fill_poison(y.data() + 100 * eb, d, 17, mine);
    cuda_check(cudaMemcpy(dy.p, y.data(), y.size(), cudaMemcpyHostToDevice), "upload");
    cuda_check(cudaDeviceSynchronize(), "ordered before the stream's work");
    for (const poison_pattern* p : {&mine, &other}) {
      const auto* r = static_cast<const double*>(dref.p);
      const error_metrics g = gpu_compare(dy.p, d, r, n, tol, *p, stream);
      const error_metrics c = cpu_compare(y.data(), d, ref.data(), n, tol, *p);
      EXPECT_EQ(g.unwritten, c.unwritten) << d;
      EXPECT_EQ(g.unwritten, p == &mine ? 17u : 0u) << d;
      EXPECT_EQ(g.violations, c.violations) << d;
      EXPECT_EQ(g.nonfinite, c.nonfinite) << d;
      EXPECT_EQ(g.worst_index, c.worst_index) << d;
    }
  }
}

// The keyed check behind every timed call: the poison count is exact for every dtype and for
// sizes that end inside a word; the digest is the same for the same bytes and key, changes with
// one flipped bit, and changes with the key (so that nobody without it can compute it).
TEST_F(device_ops_gpu, keyed_check_counts_poison_and_digests_with_its_key) {
  std::mt19937_64 rng(13);
  const poison_pattern p = draw_poison(rng);
  const digest_key key{rng(), rng()};
  const digest_key other{rng(), rng()};
  device_buffer out(2 * sizeof(unsigned long long));
  auto* acc = static_cast<unsigned long long*>(out.p);
  // Uploads on the check's stream, complete before the next check reads them.
  const auto upload = [&](void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "upload");
    cuda_check(cudaStreamSynchronize(stream), "upload");
  };
  const auto run = [&](const void* data, uint64_t bytes, kb_dtype d, const digest_key& k) {
    // On the check's own stream: the stream is non-blocking, so a plain cudaMemset (legacy
    // stream) is not ordered before the kernel and can zero its sums after it ran.
    cuda_check(cudaMemsetAsync(acc, 0, 2 * sizeof(unsigned long long), stream), "clear");
    gpu_keyed_check(data, bytes, d, k, p, acc, stream);
    unsigned long long host[2];
    cuda_check(cudaStreamSynchronize(stream), "check");
    cuda_check(cudaMemcpy(host, acc, sizeof host, cudaMemcpyDeviceToHost), "download");
    return std::pair<uint64_t, uint64_t>{host[0], host[1]};
  };
  for (kb_dtype d : {KB_FLOAT32, KB_FLOAT64, KB_FLOAT16, KB_BFLOAT16, KB_INT64, KB_INT32}) {
    const int64_t eb = dtype_bytes(d);
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{1001}, int64_t{100003}}) {
      const size_t bytes = static_cast<size_t>(n * eb);
      std::vector<unsigned char> y(bytes);
      cpu_fill_value(y.data(), d, n, 1.0);
      const int64_t poisoned = std::min<int64_t>(n, 5);
      cpu_fill_poison(y.data() + (n - poisoned) * eb, d, poisoned, p); // up to the last element
      device_buffer dy(bytes);
      upload(dy.p, y.data(), bytes);
      const auto a = run(dy.p, bytes, d, key);
      EXPECT_EQ(a.second, static_cast<uint64_t>(poisoned)) << d << " n " << n;
      EXPECT_EQ(run(dy.p, bytes, d, key).first, a.first);
      EXPECT_NE(run(dy.p, bytes, d, other).first, a.first);
      y[0] ^= 1;
      upload(dy.p, y.data(), bytes);
      EXPECT_NE(run(dy.p, bytes, d, key).first, a.first) << d << " n " << n;
    }
  }
}

} // namespace
} // namespace kb::gpu
