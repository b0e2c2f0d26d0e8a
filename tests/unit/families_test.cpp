// The pool, scan and argreduce families on the CPU: PyTorch's pooling output sizes, the [pool],
// [scan] and [argreduce] tables (parsed into the contract, bad values rejected with errors naming
// the field), the generated family configs, and each family's float64 CPU oracle (through the same
// oracle module the GPU worker loads) against a plain reference written here from PyTorch's
// definitions, at small shapes with ties, NaN, padding, dilation and ceil_mode.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "search/state.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <kblaster/device/core.cuh>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>

namespace kb::task {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path test_tasks = root / "tests" / "data" / "tasks";

fs::path cache_dir() {
  const char* env = std::getenv("KBLASTER_CACHE");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / "kblaster-test-cache";
}

contract test_task(const std::string& folder) { return load_contract(test_tasks / folder / "task.toml"); }

TEST(divider, divides_by_multiply_and_shift_like_the_hardware_division) {
  // The normalize family's groups look each position's channel up with it (n < 2^31).
  std::mt19937 rng(7);
  std::vector<uint32_t> divisors{1, 2, 3, 5, 7, 35, 64, 90300, 262144, 1000003, (1u << 31) - 1,
                                 1u << 31};
  for (int i = 0; i < 200; ++i) {
    divisors.push_back(1 + rng() % (1u << 31));
  }
  for (const uint32_t d : divisors) {
    const kb::divider by(d);
    std::vector<uint32_t> ns{0, 1, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 1 - d};
    for (int i = 0; i < 2000; ++i) {
      ns.push_back(rng() % (1u << 31));
    }
    for (const uint32_t n : ns) {
      if (n < (1u << 31)) {
        ASSERT_EQ(by.div(n), n / d) << n << " / " << d;
      }
    }
  }
}

TEST(pool_output_size, follows_pytorch) {
  // floor((in + 2p - d(k - 1) - 1) / s) + 1
  EXPECT_EQ(pool_output_size(224, 3, 2, 1, 1, false), 112);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 1, false), 2);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 1, true), 3);  // ceil: the last window starts at 4 < 5
  EXPECT_EQ(pool_output_size(4, 2, 2, 0, 1, true), 2);  // ceil adds nothing when it divides
  EXPECT_EQ(pool_output_size(6, 3, 3, 1, 1, true), 3);  // (6 + 2 - 3 + 2) / 3 + 1 = 3
  EXPECT_EQ(pool_output_size(5, 3, 3, 1, 1, true), 2);  // 3 would start at 6 >= 5 + 1: dropped
  EXPECT_EQ(pool_output_size(10, 3, 1, 0, 2, false), 6); // effective window 5
  EXPECT_EQ(pool_output_size(2, 3, 1, 0, 1, false), 0);  // the window does not fit
  pool_params p;
  p.rank = 2;
  p.kernel = {3, 2};
  p.stride = {2, 1};
  p.padding = {1, 1};
  p.dilation = {2, 1};
  p.ceil_mode = true;
  EXPECT_EQ(pool_output_shape(p, {2, 3, 8, 9}), (std::vector<int64_t>{2, 3, 4, 10}));
}

TEST(family_tables, parse_into_the_contract) {
  const auto am = test_task("913_argmax_lastdim");
  EXPECT_EQ(am.fam, family::argreduce);
  ASSERT_TRUE(am.argreduce.has_value());
  EXPECT_EQ(am.argreduce->op, argreduce_op::argmax);
  EXPECT_EQ(am.argreduce->dim, 1); // -1 of a 2-d x
  EXPECT_EQ(am.reduce_dims, std::vector<int>{1});
  EXPECT_EQ(family_config_source(am),
            "static constexpr kb::argreduce::config kb_family_config{1, kb::argreduce::argmax, 0};\n");
  EXPECT_NE(read_file(am.math).find("epilogue"), std::string::npos);
  EXPECT_NE(read_file(am.baseline).find("KB_ARGREDUCE_BASELINE(kb_op, kb_family_config)"), std::string::npos);
  EXPECT_EQ(to_json(am)["argreduce"]["op"], "argmax");

  const auto mp = test_task("915_maxpool2d_dilated_ceil");
  ASSERT_TRUE(mp.pool.has_value());
  EXPECT_EQ(mp.pool->kind, pool_kind::max);
  EXPECT_EQ(mp.pool->rank, 2);
  EXPECT_EQ(mp.pool->dilation, (std::vector<int>{2, 1}));
  EXPECT_TRUE(mp.pool->ceil_mode);
  EXPECT_EQ(family_config_source(mp), "static constexpr kb::pool::config kb_family_config{kb::pool::max, 2, "
                                      "{1, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 2, 1}, 1, 1, 0, 0};\n");
  const auto ap = test_task("916_avgpool1d_bf16");
  EXPECT_EQ(ap.pool->rank, 1);
  EXPECT_EQ(ap.pool->stride, std::vector<int>{3});
  EXPECT_FALSE(ap.pool->count_include_pad);
  EXPECT_EQ(test_task("918_avgpool2d_divisor").pool->divisor_override, 5);
  EXPECT_EQ(test_task("917_maxpool3d_f16").pool->stride, (std::vector<int>{2, 2, 2}));

  const auto ms = test_task("920_masked_cumsum_bf16");
  ASSERT_TRUE(ms.scan.has_value());
  EXPECT_TRUE(ms.scan->masked);
  EXPECT_EQ(ms.scan->dim, 1);
  EXPECT_EQ(family_config_source(ms), "static constexpr kb::scan::config kb_family_config{1, kb::scan::sum, 0, 0, 0, 1};\n");
  const auto rs = test_task("919_cumsum_reverse_exclusive");
  EXPECT_TRUE(rs.scan->reverse && rs.scan->exclusive);
  EXPECT_EQ(test_task("921_cumprod_middim").scan->op, scan_op::prod);
  EXPECT_EQ(family_from_string("pool"), family::pool);
  EXPECT_EQ(to_string(family::scan), "scan");
}

TEST(family_features, key_the_memory_by_layout_and_window) {
  const auto mp = test_task("915_maxpool2d_dilated_ceil");
  const auto f = search::features_of(mp, mp.official());
  EXPECT_TRUE(f.supported_dtypes);
  EXPECT_EQ(f.pool_rank, 2);
  EXPECT_EQ(f.outer, 16 * 64);
  EXPECT_EQ(f.extent, 128 * 128);
  EXPECT_EQ(f.window, 6);
  EXPECT_TRUE(f.overlapping);
  EXPECT_EQ(search::classify_shape(f).to_string(), "pool/float32/pool2d-overlap/14.10.3");
  const auto p3 = test_task("917_maxpool3d_f16");
  EXPECT_EQ(search::classify_shape(search::features_of(p3, p3.official())).to_string(), "pool/float16/pool3d/17.8.3");
  const auto am = test_task("913_argmax_lastdim");
  EXPECT_EQ(search::classify_shape(search::features_of(am, am.official())).to_string(), "argreduce/float32/rows/12.13");
  // A batch norm's memory neighbours are other batch norms: its own layout, channels and the
  // values of each (64 channels of 32 x 56 x 56).
  const auto bn = test_task("941_batchnorm2d");
  EXPECT_EQ(search::classify_shape(search::features_of(bn, bn.official())).to_string(), "normalize/float32/channels/6.17");
  const auto cp = test_task("921_cumprod_middim");
  EXPECT_EQ(search::classify_shape(search::features_of(cp, cp.official())).to_string(), "scan/float32/strided/9.16");
  // An int64 index output is what argreduce strategies write; anything else is not offered.
  auto wrong = am;
  wrong.outputs[0].type = dtype::float32;
  EXPECT_FALSE(search::features_of(wrong, wrong.official()).supported_dtypes);
  EXPECT_TRUE(search::strategies_for(wrong).empty());
}

class family_table : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::make_unique<temp_dir>("kb-family-test");
    std::ofstream(dir->path() / "math.cuh") << "// math\n";
    std::ofstream(dir->path() / "baseline.cu") << "// baseline\n";
  }
  std::string load_error(const std::string& toml) {
    std::ofstream(dir->path() / "task.toml") << toml;
    try {
      load_contract(dir->path() / "task.toml");
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  }
  std::unique_ptr<temp_dir> dir;
};

std::string task_text(const std::string& family, const std::string& table, const std::string& out_dtype,
                      const std::string& out_shape, const std::string& extra_inputs = "") {
  return R"(
id = "990"
name = "t"
suite = "s"
family = ")" + family + R"("
pytorch = "x"
)" + table + R"(
[[inputs]]
name = "x"
role = "x"
dtype = "float32"
shape = ["N", "C", "L"]
distributions = ["uniform01", "normal", "heavy_tailed"]
)" + extra_inputs + R"(
[[outputs]]
name = "y"
dtype = ")" + out_dtype + R"("
shape = )" + out_shape + R"(
[[shapes]]
role = "official"
dims = { N = 4, C = 8, L = 100 }
[[shapes]]
role = "check"
dims = { N = 1, C = 2, L = 7 }
[tolerance]
atol = 0
rtol = 0
rel_l2 = 0
[roofline]
bytes = "8*N*C*L"
flops = "N*C*L"
)";
}

TEST_F(family_table, valid_tables_load) {
  EXPECT_EQ(load_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\n", "float32", "[\"N\", \"C\", \"L / 2\"]")),
            "no error");
  EXPECT_EQ(load_error(task_text("argreduce", "[argreduce]\nop = \"argmin\"\ndim = 1\n", "int64", "[\"N\", \"L\"]")),
            "no error");
  EXPECT_EQ(load_error(task_text("scan", "[scan]\nop = \"prod\"\ndim = -1\nreverse = true\n", "float32",
                                 "[\"N\", \"C\", \"L\"]")),
            "no error");
}

TEST_F(family_table, bad_values_are_rejected_naming_the_field) {
  const auto expect_error = [&](const std::string& toml, const std::string& field, const std::string& what) {
    const std::string e = load_error(toml);
    EXPECT_NE(e.find("task.toml"), std::string::npos) << e;
    EXPECT_NE(e.find("'" + field + "'"), std::string::npos) << "wanted field " << field << ": " << e;
    EXPECT_NE(e.find(what), std::string::npos) << "wanted '" << what << "': " << e;
  };
  const std::string pool_out = "[\"N\", \"C\", \"L / 2\"]";
  expect_error(task_text("pool", "", "float32", pool_out), "pool", "a table [pool]");
  expect_error(task_text("pool", "[pool]\nkind = \"min\"\nkernel = [2]\n", "float32", pool_out), "pool.kind", "max or avg");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = 2\n", "float32", pool_out), "pool.rank", "required");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2, 2, 2, 2]\n", "float32", pool_out), "pool.rank", "1, 2 or 3");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2, 2, 2]\n", "float32", pool_out), "pool",
               "an input x of 4 or 5 dims");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [0]\n", "float32", pool_out), "pool.kernel", "an integer >= 1");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\nstride = [1, 1]\n", "float32", pool_out), "pool.stride",
               "got 2 values");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\npadding = [2]\n", "float32", pool_out), "pool.padding",
               "at most half the kernel");
  expect_error(task_text("pool", "[pool]\nkind = \"avg\"\nkernel = [2]\ndilation = 2\n", "float32", pool_out), "pool.dilation",
               "no dilation");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\ndivisor_override = 3\n", "float32", pool_out),
               "pool.divisor_override", "max pooling has no");
  expect_error(task_text("pool", "[pool]\nkind = \"avg\"\nkernel = [2]\ndivisor_override = 0\n", "float32", pool_out),
               "pool.divisor_override", "a positive integer");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\nwindow = 3\n", "float32", pool_out), "pool.window",
               "unknown field");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\n", "float32", "[\"N\", \"C\", \"L\"]"),
               "outputs[0].shape", "[4, 8, 50] at shape 'official'");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [2]\n", "float16", pool_out), "outputs[0].dtype", "float32");
  expect_error(task_text("pool", "[pool]\nkind = \"max\"\nkernel = [9]\n", "float32", "[\"N\", \"C\", \"L / 2\"]"), "pool",
               "gives no output");
  expect_error(task_text("elementwise", "[pool]\nkind = \"max\"\nkernel = [2]\n", "float32", "[\"N\", \"C\", \"L\"]"), "pool",
               "family = \"pool\"");

  const std::string arg_out = "[\"N\", \"L\"]";
  expect_error(task_text("argreduce", "[argreduce]\nop = \"max\"\ndim = 1\n", "int64", arg_out), "argreduce.op", "argmax or argmin");
  expect_error(task_text("argreduce", "[argreduce]\nop = \"argmax\"\n", "int64", arg_out), "argreduce.dim", "required");
  expect_error(task_text("argreduce", "[argreduce]\nop = \"argmax\"\ndim = 3\n", "int64", arg_out), "argreduce.dim",
               "has 3 dims");
  expect_error(task_text("argreduce", "[argreduce]\nop = \"argmax\"\ndim = 1\n", "float32", arg_out), "outputs[0].dtype",
               "int64");
  expect_error(task_text("argreduce", "[argreduce]\nop = \"argmax\"\ndim = 1\nkeepdim = true\n", "int64", arg_out),
               "outputs[0].shape", "[4, 1, 100]");

  const std::string scan_out = "[\"N\", \"C\", \"L\"]";
  expect_error(task_text("scan", "[scan]\nop = \"max\"\ndim = 1\n", "float32", scan_out), "scan.op", "sum or prod");
  expect_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = -4\n", "float32", scan_out), "scan.dim", "an axis of x");
  expect_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = 1\nmasked = true\n", "float32", scan_out), "scan.masked",
               "role = \"mask\"");
  const std::string mask = "[[inputs]]\nname = \"m\"\nrole = \"mask\"\ndtype = \"int32\"\nshape = [\"N\", \"C\", \"L\"]\n"
                           "distributions = [{ kind = \"randint\", low = 0, high = 2 }]\n";
  expect_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = 1\n", "float32", scan_out, mask), "scan.masked", "true");
  EXPECT_EQ(load_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = 1\nmasked = true\n", "float32", scan_out, mask)), "no error");
  const std::string short_mask = "[[inputs]]\nname = \"m\"\nrole = \"mask\"\ndtype = \"int32\"\nshape = [\"N\", \"C\"]\n"
                                 "distributions = [{ kind = \"randint\", low = 0, high = 2 }]\n";
  expect_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = 1\nmasked = true\n", "float32", scan_out, short_mask), "m.shape",
               "x's shape");
  expect_error(task_text("scan", "[scan]\nop = \"sum\"\ndim = 1\n", "float32", "[\"N\", \"L\"]"), "outputs[0].shape",
               "[4, 8, 100]");
}

// ---- the CPU oracles against references written from PyTorch's definitions ---------------------

std::vector<std::vector<double>> oracle(const contract& c, const std::map<std::string, int64_t>& dims,
                                        const std::vector<std::vector<double>>& inputs) {
  const fs::path module = eval::build_oracle(root, c, cache_dir());
  const shape_case s{"hand", "check", dims};
  return eval::cpu_reference(module, c, s, inputs);
}

int64_t numel_of(const contract& c, const std::map<std::string, int64_t>& dims, size_t input) {
  int64_t n = 1;
  for (const auto& e : c.inputs.at(input).shape) {
    n *= eval_expr(e, dims);
  }
  return n;
}

std::vector<int64_t> shape_of(const tensor_spec& t, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> v;
  for (const auto& e : t.shape) {
    v.push_back(eval_expr(e, dims));
  }
  return v;
}

// Values exact in float16 and bfloat16 (multiples of 1/4 in [-4, 4]) with many ties.
std::vector<double> ties(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-16, 16);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = d(rng) / 4.0;
  }
  return v;
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
    }
  }
}

// torch.argmax / argmin over `dim`: the first index of the extreme value, NaN counting as extreme.
std::vector<double> argreduce_reference(const std::vector<double>& x, const std::vector<int64_t>& shape, int dim, bool argmax) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) {
    outer *= shape[i];
  }
  for (size_t i = dim + 1; i < shape.size(); ++i) {
    inner *= shape[i];
  }
  const int64_t extent = shape[dim];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = -1;
      for (int64_t r = 0; r < extent && best < 0; ++r) {
        if (std::isnan(x[(o * extent + r) * inner + i])) {
          best = r;
        }
      }
      if (best < 0) {
        best = 0;
        for (int64_t r = 1; r < extent; ++r) {
          const double v = x[(o * extent + r) * inner + i];
          const double b = x[(o * extent + best) * inner + i];
          if (argmax ? v > b : v < b) {
            best = r;
          }
        }
      }
      out.push_back(static_cast<double>(best));
    }
  }
  return out;
}

TEST(family_oracle, argreduce_matches_the_reference) {
  // Hand-worked: ties give the first index, NaN wins under both ops.
  const auto am = test_task("913_argmax_lastdim");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_same(oracle(am, {{"M", 3}, {"N", 4}}, {{1, 3, 3, 2, -1, -1, -2, -1, 0, nan, 5, nan}})[0], {1, 0, 1}, 0, "argmax");
  const auto an = test_task("914_argmin_middim_f16");
  // x (1, 3, 2): columns [2, -1, -1] and [nan, 0, -5]
  expect_same(oracle(an, {{"B", 1}, {"D", 3}, {"N", 2}}, {{2, nan, -1, 0, -1, -5}})[0], {1, 0}, 0, "argmin");
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const std::map<std::string, int64_t> d1{{"M", 5}, {"N", 37}};
    auto x = ties(numel_of(am, d1, 0), seed);
    x[7] = nan;
    expect_same(oracle(am, d1, {x})[0], argreduce_reference(x, {5, 37}, 1, true), 0, "913");
    const std::map<std::string, int64_t> d2{{"B", 3}, {"D", 11}, {"N", 6}};
    auto y = ties(numel_of(an, d2, 0), seed + 10);
    y[20] = nan;
    expect_same(oracle(an, d2, {y})[0], argreduce_reference(y, {3, 11, 6}, 1, false), 0, "914");
  }
}

// PyTorch's pooling on an explicitly padded input: max over the window's taps inside the input
// (padding never wins, a NaN does); avg over the window clipped to the input, divided by
// divisor_override, the window clipped to the padded input, or the window clipped to the input.
std::vector<double> pool_reference(const pool_params& p, const std::vector<double>& x, const std::vector<int64_t>& shape) {
  const size_t first = shape.size() - p.rank;
  int64_t planes = 1;
  for (size_t i = 0; i < first; ++i) {
    planes *= shape[i];
  }
  std::vector<int64_t> in(3, 1), out(3, 1), k(3, 1), s(3, 1), pad(3, 0), dil(3, 1);
  for (int i = 0; i < p.rank; ++i) {
    const size_t slot = static_cast<size_t>(3 - p.rank + i);
    in[slot] = shape[first + i];
    k[slot] = p.kernel[i];
    s[slot] = p.stride[i];
    pad[slot] = p.padding[i];
    dil[slot] = p.dilation[i];
    out[slot] = pool_output_size(in[slot], p.kernel[i], p.stride[i], p.padding[i], p.dilation[i], p.ceil_mode);
  }
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const auto at = [&](int64_t d, int64_t h, int64_t w) { return x[((pl * in[0] + d) * in[1] + h) * in[2] + w]; };
    for (int64_t od = 0; od < out[0]; ++od) {
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          if (p.kind == pool_kind::max) {
            double m = -INFINITY;
            bool has_nan = false;
            for (int64_t a = 0; a < k[0]; ++a) {
              for (int64_t b = 0; b < k[1]; ++b) {
                for (int64_t cc = 0; cc < k[2]; ++cc) {
                  const int64_t pos[3] = {o[0] * s[0] - pad[0] + a * dil[0], o[1] * s[1] - pad[1] + b * dil[1],
                                          o[2] * s[2] - pad[2] + cc * dil[2]};
                  bool inside = true;
                  for (int q = 0; q < 3; ++q) {
                    inside = inside && pos[q] >= 0 && pos[q] < in[q];
                  }
                  if (inside) {
                    const double v = at(pos[0], pos[1], pos[2]);
                    has_nan = has_nan || std::isnan(v);
                    m = std::max(m, v);
                  }
                }
              }
            }
            y.push_back(has_nan ? NAN : m);
          } else {
            double sum = 0;
            int64_t inside_count = 1;
            int64_t padded_count = 1;
            int64_t lo[3], hi[3];
            for (int q = 0; q < 3; ++q) {
              const int64_t start = o[q] * s[q] - pad[q];
              const int64_t end = std::min(start + k[q], in[q] + pad[q]);
              padded_count *= end - start;
              lo[q] = std::max<int64_t>(start, 0);
              hi[q] = std::min(end, in[q]);
              inside_count *= std::max<int64_t>(hi[q] - lo[q], 0);
            }
            for (int64_t a = lo[0]; a < hi[0]; ++a) {
              for (int64_t b = lo[1]; b < hi[1]; ++b) {
                for (int64_t cc = lo[2]; cc < hi[2]; ++cc) {
                  sum += at(a, b, cc);
                }
              }
            }
            const double div = p.divisor_override > 0 ? p.divisor_override : (p.count_include_pad ? padded_count : inside_count);
            y.push_back(inside_count == 0 ? 0.0 : sum / div);
          }
        }
      }
    }
  }
  return y;
}

TEST(family_oracle, pool_matches_the_reference) {
  // Hand-worked max pool 2d (915: kernel (3, 2), stride (2, 1), padding 1, dilation (2, 1), ceil):
  // x (1, 1, 4, 1) = [1, 5, -2, 3]; output (2, 2). Row windows: taps -1, 1, 3 and 1, 3, 5;
  // column windows: taps -1, 0 and 0, 1. So every output is max(x[1], x[3]) = 5.
  const auto mp = test_task("915_maxpool2d_dilated_ceil");
  expect_same(oracle(mp, {{"N", 1}, {"C", 1}, {"H", 4}, {"W", 1}}, {{1, 5, -2, 3}})[0], {5, 5, 5, 5}, 0, "915 hand");
  // Hand-worked avg pool 1d (916: kernel 4, stride 3, padding 2, ceil, count_include_pad false):
  // L = 5 -> 3 outputs; windows [-2, 2) -> {0, 1}, [1, 5) -> {1..4}, [4, 8) -> {4}.
  const auto ap = test_task("916_avgpool1d_bf16");
  expect_same(oracle(ap, {{"N", 1}, {"C", 1}, {"L", 5}}, {{1, 2, 3, 4, 8}})[0], {1.5, 4.25, 8}, 0, "916 hand");
  // 918: kernel 3, padding 1, divisor_override 5: the corner of a 2x2 all-ones input sums 4.
  const auto dv = test_task("918_avgpool2d_divisor");
  expect_same(oracle(dv, {{"C", 1}, {"H", 2}, {"W", 2}}, {{1, 1, 1, 1}})[0], {0.8, 0.8, 0.8, 0.8}, 1e-15, "918 hand");

  const std::vector<std::pair<std::string, std::map<std::string, int64_t>>> cases = {
      {"915_maxpool2d_dilated_ceil", {{"N", 2}, {"C", 3}, {"H", 8}, {"W", 9}}},
      {"915_maxpool2d_dilated_ceil", {{"N", 1}, {"C", 1}, {"H", 11}, {"W", 2}}},
      {"916_avgpool1d_bf16", {{"N", 2}, {"C", 3}, {"L", 13}}},
      {"916_avgpool1d_bf16", {{"N", 1}, {"C", 2}, {"L", 2}}},
      {"917_maxpool3d_f16", {{"N", 1}, {"C", 3}, {"D", 5}, {"H", 7}, {"W", 9}}},
      {"918_avgpool2d_divisor", {{"C", 3}, {"H", 7}, {"W", 5}}},
  };
  uint32_t seed = 100;
  for (const auto& [folder, dims] : cases) {
    const auto c = test_task(folder);
    auto x = ties(numel_of(c, dims, 0), ++seed);
    if (c.pool->kind == pool_kind::max) {
      x[3] = std::numeric_limits<double>::quiet_NaN();
    }
    expect_same(oracle(c, dims, {x})[0], pool_reference(*c.pool, x, shape_of(c.inputs[0], dims)), 1e-12, folder);
  }
}

// torch.cumsum / cumprod of x * mask along dim, optionally flipped and made exclusive.
std::vector<double> scan_reference(const scan_params& p, std::vector<double> x, const std::vector<double>* mask,
                                   const std::vector<int64_t>& shape) {
  if (mask != nullptr) {
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] *= (*mask)[i];
    }
  }
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < p.dim; ++i) {
    outer *= shape[i];
  }
  for (size_t i = p.dim + 1; i < shape.size(); ++i) {
    inner *= shape[i];
  }
  const int64_t n = shape[p.dim];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line;
      for (int64_t r = 0; r < n; ++r) {
        line.push_back(x[(o * n + r) * inner + i]);
      }
      if (p.reverse) {
        std::reverse(line.begin(), line.end());
      }
      std::vector<double> acc(line.size());
      double a = p.op == scan_op::sum ? 0.0 : 1.0;
      for (size_t r = 0; r < line.size(); ++r) {
        const double before = a;
        a = p.op == scan_op::sum ? a + line[r] : a * line[r];
        acc[r] = p.exclusive ? before : a;
      }
      if (p.reverse) {
        std::reverse(acc.begin(), acc.end());
      }
      for (int64_t r = 0; r < n; ++r) {
        y[(o * n + r) * inner + i] = acc[r];
      }
    }
  }
  return y;
}

TEST(family_oracle, scan_matches_the_reference) {
  // Hand-worked: reverse exclusive cumsum of [1, 2, 3, 4] is [9, 7, 4, 0].
  const auto rs = test_task("919_cumsum_reverse_exclusive");
  expect_same(oracle(rs, {{"M", 1}, {"N", 4}}, {{1, 2, 3, 4}})[0], {9, 7, 4, 0}, 0, "919 hand");
  // Masked cumsum: [1, 2, 3, 4] * [1, 0, 1, 1] -> [1, 1, 4, 8].
  const auto ms = test_task("920_masked_cumsum_bf16");
  expect_same(oracle(ms, {{"M", 1}, {"N", 4}}, {{1, 2, 3, 4}, {1, 0, 1, 1}})[0], {1, 1, 4, 8}, 0, "920 hand");
  // Cumprod over dim 1 of (1, 3, 2): columns [2, 3, 0.5] and [1, -1, 4].
  // A batch norm's memory neighbours are other batch norms: its own layout, channels and the
  // values of each (64 channels of 32 x 56 x 56).
  const auto bn = test_task("941_batchnorm2d");
  EXPECT_EQ(search::classify_shape(search::features_of(bn, bn.official())).to_string(), "normalize/float32/channels/6.17");
  const auto cp = test_task("921_cumprod_middim");
  expect_same(oracle(cp, {{"B", 1}, {"N", 3}, {"D", 2}}, {{2, 1, 3, -1, 0.5, 4}})[0], {2, 1, 6, -1, 3, -4}, 0, "921 hand");

  uint32_t seed = 200;
  for (const auto& [folder, dims] : std::vector<std::pair<std::string, std::map<std::string, int64_t>>>{
           {"919_cumsum_reverse_exclusive", {{"M", 3}, {"N", 17}}},
           {"920_masked_cumsum_bf16", {{"M", 2}, {"N", 33}}},
           {"921_cumprod_middim", {{"B", 2}, {"N", 5}, {"D", 3}}}}) {
    const auto c = test_task(folder);
    std::vector<std::vector<double>> inputs{ties(numel_of(c, dims, 0), ++seed)};
    if (c.scan->masked) {
      std::mt19937 rng(seed);
      std::vector<double> m(inputs[0].size());
      for (auto& v : m) {
        v = static_cast<double>(rng() % 2);
      }
      inputs.push_back(m);
    }
    expect_same(oracle(c, dims, inputs)[0],
                scan_reference(*c.scan, inputs[0], c.scan->masked ? &inputs[1] : nullptr, shape_of(c.inputs[0], dims)), 1e-12,
                folder);
  }
}

TEST(family_oracle, checkers_reject_trivial_outputs_on_the_cpu) {
  eval::options o;
  o.cache_dir = cache_dir();
  o.seeds = 2;
  for (const char* folder : {"913_argmax_lastdim", "914_argmin_middim_f16", "915_maxpool2d_dilated_ceil", "916_avgpool1d_bf16",
                             "917_maxpool3d_f16", "918_avgpool2d_divisor", "919_cumsum_reverse_exclusive",
                             "920_masked_cumsum_bf16", "921_cumprod_middim"}) {
    const auto report = eval::check_task_without_gpu(root, test_task(folder), o);
    EXPECT_TRUE(report.value("ok", false)) << folder << ": " << report.dump(2);
    EXPECT_GT(report["checker_selftest"].value("zeros_rejected_by", 0), 0) << folder;
    EXPECT_GT(report["checker_selftest"].value("constant_rejected_by", 0), 0) << folder;
  }
}

} // namespace
} // namespace kb::task
