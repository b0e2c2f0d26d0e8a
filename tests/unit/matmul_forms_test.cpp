// The matmul family's forms on the CPU: the [matmul] table's parsing and its errors, the product
// dims every form gives (task::matmul_shape_of, the strategies' features), the family config and
// generated baseline bound to the form, and the float64 CPU oracle of every form against a direct
// reference that materializes A and B (transposes, diagonal, batch broadcast) and masks the
// product, at small shapes with random inputs.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

namespace kb::task {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path test_tasks = root / "tests" / "data" / "tasks";

contract test_task(const std::string& folder) {
  return load_contract(test_tasks / folder / "task.toml");
}

TEST(matmul_params, are_read_from_the_matmul_table) {
  EXPECT_FALSE(test_task("907_matmul_leaky_relu").matmul.has_value());
  const auto batched = test_task("939_matmul_batched");
  ASSERT_TRUE(batched.matmul.has_value());
  EXPECT_TRUE(batched.matmul->batch);
  EXPECT_FALSE(batched.matmul->trans_a || batched.matmul->trans_b || batched.matmul->diag_a);
  const auto both = test_task("924_matmul_trans_both_scaled");
  ASSERT_TRUE(both.matmul.has_value());
  EXPECT_TRUE(both.matmul->trans_a && both.matmul->trans_b);
  EXPECT_EQ(both.matmul->alpha, -0.5);
  EXPECT_EQ(both.matmul->mask, matmul_mask::none);
  EXPECT_EQ(test_task("927_matmul_tril").matmul->mask, matmul_mask::lower);
  EXPECT_EQ(test_task("928_matmul_triu_batched").matmul->mask, matmul_mask::upper);
  EXPECT_TRUE(test_task("926_matmul_diag").matmul->diag_a);
  EXPECT_EQ(to_json(both).at("matmul").at("alpha"), -0.5);
  EXPECT_EQ(to_json(test_task("927_matmul_tril")).at("matmul").at("mask"), "lower");
  for (const char* m : {"none", "lower", "upper"}) {
    EXPECT_EQ(to_string(*matmul_mask_from_string(m)), m);
  }
  EXPECT_FALSE(matmul_mask_from_string("tril").has_value());
}

TEST(matmul_params, bind_the_family_config_and_the_generated_baseline) {
  // The plain product keeps the two-field config the hand-written kernels were written against.
  EXPECT_EQ(family_config_source(test_task("907_matmul_leaky_relu")),
            "static constexpr kb::matmul::config kb_family_config{0, 1};\n");
  const auto both = test_task("924_matmul_trans_both_scaled");
  const std::string cfg = family_config_source(both);
  EXPECT_NE(cfg.find("kb_family_config{0, 1, /*trans_a=*/1, /*trans_b=*/1, /*alpha=*/-0.5, "
                     "kb::matmul::mask_none, /*diag_a=*/0}"),
            std::string::npos)
      << cfg;
  EXPECT_NE(family_config_source(test_task("928_matmul_triu_batched")).find("kb::matmul::mask_upper"),
            std::string::npos);
  EXPECT_NE(family_config_source(test_task("926_matmul_diag")).find("/*diag_a=*/1"),
            std::string::npos);
  // No baseline.cu in the task folder: the family's driver bound to the same config.
  EXPECT_FALSE(fs::exists(both.dir / "baseline.cu"));
  const std::string baseline = read_file(both.baseline);
  EXPECT_NE(baseline.find(cfg), std::string::npos) << baseline;
  EXPECT_NE(baseline.find("KB_MATMUL_BASELINE(kb_op, kb_family_config)"), std::string::npos);
  EXPECT_NE(oracle_module_source(both).find(cfg), std::string::npos);
}

TEST(matmul_shape, gives_the_per_batch_product_of_every_form) {
  const auto dims_of = [](const std::string& folder, const std::string& shape) {
    const auto c = test_task(folder);
    std::string why;
    const auto r = matmul_shape_of(c, c.shape(shape), &why);
    EXPECT_TRUE(r.has_value()) << folder << ": " << why;
    return r.value_or(matmul_shape{});
  };
  const auto expect = [](const matmul_shape& s, int64_t batch, int64_t m, int64_t n, int64_t k) {
    EXPECT_EQ(s.batch, batch);
    EXPECT_EQ(s.m, m);
    EXPECT_EQ(s.n, n);
    EXPECT_EQ(s.k, k);
  };
  expect(dims_of("907_matmul_leaky_relu", "odd"), 1, 100, 77, 64);
  expect(dims_of("939_matmul_batched", "odd"), 3, 33, 65, 17);
  expect(dims_of("922_matmul_trans_a", "odd"), 1, 100, 77, 37);
  expect(dims_of("923_matmul_trans_b", "odd"), 1, 100, 77, 37);
  expect(dims_of("924_matmul_trans_both_scaled", "odd"), 1, 100, 77, 37);
  // A batched A times a plain B is one product with the batches' rows.
  expect(dims_of("925_matmul_tensor4d", "odd"), 1, 2 * 3 * 11, 37, 19);
  expect(dims_of("926_matmul_diag", "odd"), 1, 37, 101, 37);
  expect(dims_of("927_matmul_tril", "odd"), 1, 131, 131, 131);
  // With a mask the batches stay separate (the mask is per matrix).
  expect(dims_of("928_matmul_triu_batched", "odd"), 3, 70, 45, 33);
  expect(dims_of("929_matvec_batched", "odd"), 3, 37, 1, 1001);

  const auto f = search::features_of(test_task("939_matmul_batched"),
                                     test_task("939_matmul_batched").official());
  EXPECT_EQ(f.batch, 32);
  EXPECT_EQ(f.m, 512);
  EXPECT_EQ(f.n, 1024);
  EXPECT_EQ(f.k, 1024);
  EXPECT_TRUE(f.supported_dtypes);
  const auto diag = search::features_of(test_task("926_matmul_diag"),
                                        test_task("926_matmul_diag").official());
  EXPECT_TRUE(diag.diag);
  EXPECT_EQ(diag.m, 4096);
}

TEST(matmul_shape, transposes_change_which_dims_must_agree) {
  // 922 without trans_a: A (K x M) @ B (K x N) needs M == K, false at the odd shape.
  auto c = test_task("922_matmul_trans_a");
  c.matmul->trans_a = false;
  std::string why;
  EXPECT_FALSE(matmul_shape_of(c, c.shape("odd"), &why).has_value());
  EXPECT_NE(why.find("K = 100"), std::string::npos) << why;
  EXPECT_FALSE(search::features_of(c, c.official()).supported_dtypes);
  EXPECT_TRUE(search::strategies_for(c).empty());
}

class matmul_table : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / fmt::format("kb-matmul-forms-{}", ::getpid());
    fs::create_directories(dir);
    std::ofstream(dir / "math.cuh") << "#pragma once\n#include <kblaster/device/core.cuh>\n"
                                       "template <class A> struct kb_op { static KB_HD A "
                                       "epilogue(A acc) { return acc; } };\n";
  }
  void TearDown() override { fs::remove_all(dir); }

  // A batched product task with `table` as its [matmul] table (and `family` as its family).
  std::string load_error(const std::string& table, const std::string& a_shape = R"(["Z", "M", "K"])",
                         const std::string& family = "matmul") {
    // A family other than matmul needs its own baseline (no [matmul] table generates one).
    if (family != "matmul") {
      std::ofstream(dir / "baseline.cu") << "// a baseline\n";
    } else {
      fs::remove(dir / "baseline.cu");
    }
    std::ofstream(dir / "task.toml") << fmt::format(R"toml(
id = "990"
name = "t"
suite = "s"
family = "{}"
pytorch = "torch.bmm(A, B)"
reduce_dims = [1]
{}
[[inputs]]
name = "A"
role = "a"
dtype = "float32"
shape = {}
distributions = ["normal", "uniform01", "heavy_tailed"]
[[inputs]]
name = "B"
role = "b"
dtype = "float32"
shape = ["Z", "K", "N"]
distributions = ["normal", "uniform01", "heavy_tailed"]
[[outputs]]
name = "C"
dtype = "float32"
shape = ["Z", "M", "N"]
[[shapes]]
role = "official"
dims = {{ Z = 2, M = 8, K = 4, N = 8 }}
[[shapes]]
role = "check"
dims = {{ Z = 2, M = 3, K = 5, N = 7 }}
[tolerance]
atol = 1e-4
rtol = 1e-4
rel_l2 = 1e-5
[roofline]
bytes = "4*Z*M*K + 4*Z*K*N + 4*Z*M*N"
flops = "2*Z*M*N*K"
)toml",
                                                    family, table, a_shape);
    try {
      const auto c = load_contract(dir / "task.toml");
      (void)c;
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir;
};

TEST_F(matmul_table, valid_forms_load) {
  EXPECT_EQ(load_error("[matmul]\nbatch = true\n"), "no error");
  EXPECT_EQ(load_error("[matmul]\nbatch = true\nmask = \"upper\"\nalpha = 2\n"), "no error");
  EXPECT_EQ(load_error("[matmul]\nbatch = true\ntrans_a = true\n", R"(["Z", "K", "M"])"),
            "no error");
}

TEST_F(matmul_table, errors_name_the_field_and_what_was_expected) {
  const auto has = [](const std::string& e, const std::string& what) {
    EXPECT_NE(e.find(what), std::string::npos) << "'" << what << "' not in: " << e;
  };
  const std::string unknown = load_error("[matmul]\nbatch = true\ntranspose_a = true\n");
  has(unknown, "matmul.transpose_a");
  has(unknown, "unknown key");
  has(unknown, "task.toml");
  const std::string mask = load_error("[matmul]\nbatch = true\nmask = \"tril\"\n");
  has(mask, "matmul.mask");
  has(mask, "none, lower or upper");
  has(mask, "tril");
  has(load_error("[matmul]\nbatch = true\nalpha = \"half\"\n"), "matmul.alpha");
  has(load_error("[matmul]\nbatch = true\nalpha = nan\n"), "a finite number");
  has(load_error("[matmul]\nbatch = 1\n"), "true or false");
  has(load_error("matmul = 3\n"), "'matmul'");
  has(load_error("[matmul]\nbatch = true\ndiag_a = true\n"), "matmul.diag_a");
  const std::string family = load_error("[matmul]\nbatch = true\n", R"(["Z", "M", "K"])", "reduce");
  has(family, "family = \"matmul\"");
  // Rank-3 operands without batch = true; a plain A shared by B's batches is fine.
  const std::string no_batch = load_error("[matmul]\nmask = \"none\"\n");
  has(no_batch, "batch = true");
  has(no_batch, "[2, 8, 4]");
  has(load_error("[matmul]\nbatch = true\n", R"(["M", "K"])"), "no error");
  // K of a transposed A is its second-to-last dim: 8 against B's 4 at the official shape.
  const std::string k = load_error("[matmul]\nbatch = true\ntrans_a = true\n");
  has(k, "at shape 'official'");
  has(k, "K = 8");
  has(k, "transposes");
  // Without a [matmul] table the task needs its own baseline.cu (none in this folder).
  has(load_error(""), "baseline.cu does not exist");
  // Different batch dims.
  const std::string batches =
      load_error("[matmul]\nbatch = true\n", R"(["Z", "Z", "M", "K"])");
  has(batches, "the same batch dims");
}

// ---- the CPU oracle of every form against a direct reference ---------------------------------

fs::path cache_dir() {
  const char* env = std::getenv("KBLASTER_CACHE");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / "kblaster-test-cache";
}

double epilogue_of(const std::string& folder, double v) {
  if (folder == "907_matmul_leaky_relu" || folder == "924_matmul_trans_both_scaled") {
    return v > 0 ? v : 0.01 * v; // leaky_relu
  }
  return v;
}

// C = mask(epilogue(alpha * A @ B)) with A and B first written out as full row-major matrices
// per batch, from the stored operands, independently of the family's index functions.
std::vector<double> direct_reference(const std::string& folder, const contract& c,
                                     const shape_case& s, const std::vector<double>& a_in,
                                     const std::vector<double>& b_in) {
  const matmul_params p = c.matmul.value_or(matmul_params{});
  const auto ins = concrete_inputs(c, s);
  const auto& as = ins[0].shape;
  const auto& bs = ins[1].shape;
  const auto outs = concrete_outputs(c, s);
  // Per-matrix dims of A and B.
  int64_t M = 0, K = 0, N = 0;
  int64_t batches_a = 1, batches_b = 1;
  if (p.diag_a) {
    M = K = as[0];
    N = p.trans_b ? bs[0] : bs[1];
  } else {
    M = p.trans_a ? as[as.size() - 1] : as[as.size() - 2];
    K = p.trans_a ? as[as.size() - 2] : as[as.size() - 1];
    N = p.trans_b ? bs[bs.size() - 2] : bs[bs.size() - 1];
    for (size_t i = 0; i + 2 < as.size(); ++i) {
      batches_a *= as[i];
    }
    for (size_t i = 0; i + 2 < bs.size(); ++i) {
      batches_b *= bs[i];
    }
  }
  const int64_t batches = std::max(batches_a, batches_b);
  std::vector<double> out;
  for (int64_t z = 0; z < batches; ++z) {
    std::vector<double> A(static_cast<size_t>(M * K));
    std::vector<double> B(static_cast<size_t>(K * N));
    const int64_t za = batches_a > 1 ? z : 0;
    const int64_t zb = batches_b > 1 ? z : 0;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t k = 0; k < K; ++k) {
        double v = 0;
        if (p.diag_a) {
          v = i == k ? a_in[static_cast<size_t>(i)] : 0.0;
        } else if (p.trans_a) {
          v = a_in[static_cast<size_t>(za * M * K + k * M + i)];
        } else {
          v = a_in[static_cast<size_t>(za * M * K + i * K + k)];
        }
        A[static_cast<size_t>(i * K + k)] = v;
      }
    }
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t j = 0; j < N; ++j) {
        B[static_cast<size_t>(k * N + j)] =
            p.trans_b ? b_in[static_cast<size_t>(zb * K * N + j * K + k)]
                      : b_in[static_cast<size_t>(zb * K * N + k * N + j)];
      }
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += A[static_cast<size_t>(i * K + k)] * B[static_cast<size_t>(k * N + j)];
        }
        const bool zero = (p.mask == matmul_mask::lower && j > i) ||
                          (p.mask == matmul_mask::upper && j < i);
        out.push_back(zero ? 0.0 : epilogue_of(folder, p.alpha * acc));
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(out.size()), outs[0].numel()) << folder;
  return out;
}

class matmul_oracle : public ::testing::TestWithParam<std::string> {};

TEST_P(matmul_oracle, matches_a_direct_reference_at_the_check_shapes) {
  const std::string folder = GetParam();
  const auto c = test_task(folder);
  const fs::path module = eval::build_oracle(root, c, cache_dir());
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto* s : c.shapes_with_role("check")) {
    const auto ins = concrete_inputs(c, *s);
    std::vector<std::vector<double>> inputs;
    for (const auto& t : ins) {
      std::vector<double> v(static_cast<size_t>(t.numel()));
      for (auto& x : v) {
        x = static_cast<float>(normal(rng)); // exact in the fp32 storage
      }
      inputs.push_back(std::move(v));
    }
    const auto got = eval::cpu_reference(module, c, *s, inputs)[0];
    const auto want = direct_reference(folder, c, *s, inputs[0], inputs[1]);
    ASSERT_EQ(got.size(), want.size()) << folder << " at " << s->name;
    int zeros = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i])))
          << folder << " at " << s->name << ", element " << i;
      zeros += want[i] == 0.0;
    }
    if (c.matmul && c.matmul->mask != matmul_mask::none && s->name == "odd") {
      EXPECT_GT(zeros, 0) << folder; // the mask is exercised
    }
  }
}

INSTANTIATE_TEST_SUITE_P(forms, matmul_oracle,
                         ::testing::Values("907_matmul_leaky_relu", "939_matmul_batched",
                                           "922_matmul_trans_a", "923_matmul_trans_b",
                                           "924_matmul_trans_both_scaled", "925_matmul_tensor4d",
                                           "926_matmul_diag", "927_matmul_tril",
                                           "928_matmul_triu_batched", "929_matvec_batched"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return "t" + info.param.substr(0, 3);
                         });

// What a machine without a GPU checks for every form: oracle module and generated baseline
// compile, the CPU oracle runs at the check shapes and the checker rejects trivial outputs.
TEST(matmul_no_gpu, every_form_compiles_and_its_checker_rejects_trivial_outputs) {
  eval::options o;
  o.cache_dir = cache_dir();
  o.seeds = 1;
  for (const char* folder : {"939_matmul_batched", "924_matmul_trans_both_scaled",
                             "925_matmul_tensor4d", "926_matmul_diag", "928_matmul_triu_batched",
                             "929_matvec_batched"}) {
    const auto c = test_task(folder);
    const auto report = eval::check_task_without_gpu(root, c, o);
    EXPECT_TRUE(report.value("ok", false)) << folder << ": " << report.dump(2);
    EXPECT_GT(report["checker_selftest"].value("zeros_rejected_by", 0), 0) << folder;
  }
}

} // namespace
} // namespace kb::task
