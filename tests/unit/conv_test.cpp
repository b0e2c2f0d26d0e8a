// The conv family on the CPU: the output-size formulas, the implicit GEMM's index math (m and k
// decomposition, the loader's running k with carries, the transposed gather's stride condition,
// the weight and output offsets) simulated thread by thread as the kernel walks them and checked
// against the convolution as defined, the transposed convolution as the adjoint of the forward
// one, the [conv] table's errors, and the float64 oracle's CPU path against values by hand.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "task/task.hpp"

#include <kblaster/device/families/conv_index.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>
#include <fstream>
#include <random>
#include <vector>

namespace kb::conv {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

// A convolution case at rank 3 (leading unit dims for lower ranks).
struct conv_case {
  bool transposed = false;
  int groups = 1;
  int64_t n = 1, cin = 1, cout = 1;
  int64_t in[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1};
  int stride[3] = {1, 1, 1};
  int pad[3] = {0, 0, 0};
  int dil[3] = {1, 1, 1};
  int out_pad[3] = {0, 0, 0};

  geometry geo() const {
    geometry g{};
    g.transposed = transposed ? 1 : 0;
    g.groups = groups;
    g.n = n;
    g.cin = cin;
    g.cout = cout;
    for (int d = 0; d < 3; ++d) {
      g.in[d] = in[d];
      g.k[d] = k[d];
      g.stride[d] = stride[d];
      g.pad[d] = pad[d];
      g.dil[d] = dil[d];
      g.out[d] = output_size(in[d], k[d], stride[d], pad[d], dil[d], out_pad[d], transposed);
    }
    return g;
  }
  int64_t weight_size() const { return cin * (cout / groups) * k[0] * k[1] * k[2]; }
};

// The convolution as defined (PyTorch's semantics, written out without conv_index.h): the
// forward one slides the kernel, the transposed one scatters each input value times the kernel.
std::vector<double> reference(const conv_case& c, const std::vector<double>& x,
                              const std::vector<double>& w) {
  const geometry g = c.geo();
  const int64_t cg = c.cin / c.groups;
  const int64_t og = c.cout / c.groups;
  std::vector<double> y(static_cast<size_t>(c.n * c.cout * g.out_volume()), 0.0);
  const auto xi = [&](int64_t b, int64_t ch, const int64_t* p) {
    return ((b * c.cin + ch) * c.in[0] + p[0]) * c.in[1] * c.in[2] + p[1] * c.in[2] + p[2];
  };
  const auto yi = [&](int64_t b, int64_t ch, const int64_t* p) {
    return ((b * c.cout + ch) * g.out[0] + p[0]) * g.out[1] * g.out[2] + p[1] * g.out[2] + p[2];
  };
  for (int64_t b = 0; b < c.n; ++b) {
    for (int64_t grp = 0; grp < c.groups; ++grp) {
      for (int64_t ci = 0; ci < cg; ++ci) {
        for (int64_t n = 0; n < og; ++n) {
          for (int64_t t0 = 0; t0 < c.k[0]; ++t0) {
            for (int64_t t1 = 0; t1 < c.k[1]; ++t1) {
              for (int64_t t2 = 0; t2 < c.k[2]; ++t2) {
                const int64_t tap = (t0 * c.k[1] + t1) * c.k[2] + t2;
                const int64_t t[3] = {t0, t1, t2};
                const double wv =
                    c.transposed
                        ? w[static_cast<size_t>(((grp * cg + ci) * og + n) * g.kernel_volume() + tap)]
                        : w[static_cast<size_t>(((grp * og + n) * cg + ci) * g.kernel_volume() + tap)];
                // Walk the output (forward) or the input (transposed) positions.
                const int64_t* range = c.transposed ? c.in : g.out;
                for (int64_t p0 = 0; p0 < range[0]; ++p0) {
                  for (int64_t p1 = 0; p1 < range[1]; ++p1) {
                    for (int64_t p2 = 0; p2 < range[2]; ++p2) {
                      const int64_t p[3] = {p0, p1, p2};
                      int64_t q[3];
                      bool inside = true;
                      for (int d = 0; d < 3; ++d) {
                        q[d] = p[d] * c.stride[d] - c.pad[d] + t[d] * c.dil[d];
                        const int64_t limit = c.transposed ? g.out[d] : c.in[d];
                        inside = inside && q[d] >= 0 && q[d] < limit;
                      }
                      if (!inside) {
                        continue;
                      }
                      if (c.transposed) {
                        y[static_cast<size_t>(yi(b, grp * og + n, q))] +=
                            x[static_cast<size_t>(xi(b, grp * cg + ci, p))] * wv;
                      } else {
                        y[static_cast<size_t>(yi(b, grp * og + n, p))] +=
                            x[static_cast<size_t>(xi(b, grp * cg + ci, q))] * wv;
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return y;
}

// The implicit GEMM as the kernel computes it (include/kblaster/device/strategies/conv.cuh):
// 256 threads per block, each owning row tid % bm of the block's M tile and walking k from
// tid / bm in steps of 256 / bm with k_state's carries, chunk by chunk over its split of K; the
// gathered A times the weights at b_offset, written at c_offset. Also checks that no A element
// past K or past M is read.
std::vector<double> implicit_gemm(const conv_case& c, const std::vector<double>& x,
                                  const std::vector<double>& w, int bm, int bk, int splits) {
  const geometry g = c.geo();
  const int64_t M = g.gemm_m();
  const int64_t N = g.gemm_n();
  const int64_t K = g.gemm_k();
  const int64_t chunks = (K + bk - 1) / bk;
  const int64_t per_split = (chunks + splits - 1) / splits;
  std::vector<double> y(static_cast<size_t>(c.n * c.cout * g.out_volume()), -1e300);
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    for (int64_t m0 = 0; m0 < M; m0 += bm) {
      // A of this tile over the whole K, filled by the simulated loaders of every split.
      std::vector<double> a(static_cast<size_t>(bm * chunks * bk), 0.0);
      std::vector<int> written(a.size(), 0);
      for (int z = 0; z < splits; ++z) {
        const int64_t begin = z * per_split;
        const int64_t end = std::min(chunks, begin + per_split);
        for (int tid = 0; tid < 256; ++tid) {
          const int row = tid % bm;
          const int k0 = tid / bm;
          const int step = 256 / bm;
          const int64_t am = m0 + row;
          const bool row_ok = am < M;
          const m_index mi = split_m(g, row_ok ? am : 0);
          int64_t base[3];
          for (int d = 0; d < 3; ++d) {
            base[d] = g.transposed ? mi.o[d] + g.pad[d] : mi.o[d] * g.stride[d] - g.pad[d];
          }
          const k_index first = split_k(g, begin * bk + k0);
          k_state ks{static_cast<int>(first.c), static_cast<int>(first.t[0]),
                     static_cast<int>(first.t[1]), static_cast<int>(first.t[2])};
          for (int64_t chunk = begin; chunk < end; ++chunk) {
            for (int e = 0; e < bm * bk / 256; ++e) {
              const int64_t k = chunk * bk + k0 + e * step;
              // The running state is the decomposition of k.
              const k_index ki = split_k(g, k);
              EXPECT_EQ(ks.c, ki.c);
              EXPECT_EQ(ks.kw, ki.t[2]);
              const auto pos = [&](int d, int t) {
                return g.transposed
                           ? tap_position<true>(base[d], int64_t{t} * g.dil[d], g.stride[d], g.in[d])
                           : tap_position<false>(base[d], int64_t{t} * g.dil[d], g.stride[d], g.in[d]);
              };
              const int id = pos(0, ks.kd);
              const int ih = pos(1, ks.kh);
              const int iw = pos(2, ks.kw);
              const bool valid = row_ok && ks.c < g.cin_group() && id >= 0 && ih >= 0 && iw >= 0;
              if (valid) {
                EXPECT_LT(k, K);
                const int64_t off = ((int64_t{ks.c} * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw;
                const int64_t x_row = (mi.b * g.cin + grp * g.cin_group()) * g.in_volume();
                EXPECT_EQ(x_row + off, a_offset(g, grp, mi, ki));
                a[static_cast<size_t>(row * chunks * bk + k)] = x[static_cast<size_t>(x_row + off)];
              } else if (row_ok && k < K) {
                EXPECT_EQ(a_offset(g, grp, mi, ki), -1);
              }
              written[static_cast<size_t>(row * chunks * bk + k)] += 1;
              ks.advance(step, g);
            }
          }
        }
      }
      for (size_t i = 0; i < written.size(); ++i) {
        EXPECT_EQ(written[i], 1) << "A element " << i << " loaded " << written[i] << " times";
      }
      for (int row = 0; row < bm && m0 + row < M; ++row) {
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) {
            acc += a[static_cast<size_t>(row * chunks * bk + k)] *
                   w[static_cast<size_t>(b_offset(g, grp, k, n))];
          }
          y[static_cast<size_t>(c_offset(g, grp, m0 + row, n))] = acc;
        }
      }
    }
  }
  return y;
}

std::vector<double> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) {
    e = u(gen);
  }
  return v;
}

std::vector<conv_case> cases() {
  std::vector<conv_case> out;
  const auto add = [&](conv_case c) { out.push_back(c); };
  conv_case c;
  // 1D, stride 2, padding 1, dilation 2.
  c = {};
  c.n = 2, c.cin = 3, c.cout = 5, c.in[2] = 11, c.k[2] = 3, c.stride[2] = 2, c.pad[2] = 1, c.dil[2] = 2;
  add(c);
  // 2D asymmetric kernel, stride, padding and dilation; channels past one tile of k.
  c = {};
  c.n = 1, c.cin = 7, c.cout = 4, c.in[1] = 6, c.in[2] = 9, c.k[1] = 3, c.k[2] = 5, c.stride[2] = 2,
  c.pad[1] = 1, c.pad[2] = 2, c.dil[1] = 2;
  add(c);
  // 3D, grouped.
  c = {};
  c.n = 2, c.cin = 4, c.cout = 6, c.groups = 2, c.in[0] = 3, c.in[1] = 4, c.in[2] = 5,
  c.k[0] = 2, c.k[1] = 3, c.k[2] = 2, c.pad[0] = 1, c.pad[2] = 1;
  add(c);
  // Depthwise and pointwise.
  c = {};
  c.n = 2, c.cin = 3, c.cout = 6, c.groups = 3, c.in[1] = 5, c.in[2] = 4, c.k[1] = 3, c.k[2] = 3,
  c.pad[1] = 1, c.pad[2] = 1;
  add(c);
  c = {};
  c.n = 3, c.cin = 9, c.cout = 2, c.in[1] = 3, c.in[2] = 7;
  add(c);
  // Transposed: 1D with stride 3, padding 2, dilation 2, output padding 1.
  c = {};
  c.transposed = true, c.n = 2, c.cin = 3, c.cout = 2, c.in[2] = 5, c.k[2] = 5, c.stride[2] = 3,
  c.pad[2] = 2, c.dil[2] = 2, c.out_pad[2] = 1;
  add(c);
  // Transposed 2D, grouped, stride 2, asymmetric kernel and dilation, output padding (1, 0).
  c = {};
  c.transposed = true, c.n = 1, c.cin = 4, c.cout = 6, c.groups = 2, c.in[1] = 3, c.in[2] = 4,
  c.k[1] = 3, c.k[2] = 4, c.stride[1] = 2, c.stride[2] = 2, c.pad[1] = 1, c.pad[2] = 1,
  c.dil[2] = 2, c.out_pad[1] = 1;
  add(c);
  // Transposed 3D, stride 2 in two dims.
  c = {};
  c.transposed = true, c.n = 1, c.cin = 2, c.cout = 3, c.in[0] = 2, c.in[1] = 3, c.in[2] = 2,
  c.k[0] = 3, c.k[1] = 2, c.k[2] = 3, c.stride[0] = 2, c.stride[2] = 2, c.pad[0] = 1;
  add(c);
  return out;
}

TEST(conv_index, output_sizes_follow_pytorch_and_transposed_inverts_forward) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int s = 1; s <= 3; ++s) {
        for (int p = 0; p <= 2; ++p) {
          for (int d = 1; d <= 3; ++d) {
            // Forward: the number of window positions inside the padded input.
            int64_t count = 0;
            while (count * s + d * (k - 1) <= in + 2 * p - 1) {
              ++count;
            }
            EXPECT_EQ(std::max<int64_t>(output_size(in, k, s, p, d, 0, false), 0), count);
            EXPECT_EQ(task::conv_output_size(in, k, s, p, d, 0, false), count);
            for (int op = 0; op < std::max(s, d); ++op) {
              const int64_t t = output_size(in, k, s, p, d, op, true);
              EXPECT_EQ(task::conv_output_size(in, k, s, p, d, op, true), t);
              if (t >= 1 && op < s) {
                // The transposed convolution is the forward one's gradient: the forward
                // convolution of its output has the input's size again.
                EXPECT_EQ(output_size(t, k, s, p, d, 0, false), in)
                    << in << " " << k << " " << s << " " << p << " " << d << " " << op;
              }
            }
          }
        }
      }
    }
  }
}

TEST(conv_index, k_state_walks_the_decomposition_of_k) {
  conv_case c;
  c.cin = 5, c.k[0] = 2, c.k[1] = 3, c.k[2] = 1;
  const geometry g = c.geo();
  for (int step : {1, 2, 4, 7}) {
    k_state ks{0, 0, 0, 0};
    for (int64_t k = 0; k < g.gemm_k() + 8; k += step) {
      const k_index ki = split_k(g, k);
      EXPECT_EQ(ks.c, ki.c) << k;
      EXPECT_EQ(ks.kd, ki.t[0]) << k;
      EXPECT_EQ(ks.kh, ki.t[1]) << k;
      EXPECT_EQ(ks.kw, ki.t[2]) << k;
      ks.advance(step, g);
    }
  }
  // k = ((c KD + kd) KH + kh) KW + kw.
  const k_index ki = split_k(g, ((3 * 2 + 1) * 3 + 2) * 1 + 0);
  EXPECT_EQ(ki.c, 3);
  EXPECT_EQ(ki.t[0], 1);
  EXPECT_EQ(ki.t[1], 2);
  EXPECT_EQ(ki.t[2], 0);
}

TEST(conv_index, transposed_gather_reads_where_the_stride_divides) {
  conv_case c;
  c.transposed = true, c.in[2] = 4, c.k[2] = 3, c.stride[2] = 2, c.pad[2] = 1, c.dil[2] = 2;
  const geometry g = c.geo();
  for (int64_t o = 0; o < g.out[2]; ++o) {
    for (int64_t t = 0; t < 3; ++t) {
      const int64_t q = o + 1 - 2 * t;
      const int64_t want = q >= 0 && q % 2 == 0 && q / 2 < 4 ? q / 2 : -1;
      EXPECT_EQ(input_position(g, 2, o, t), want) << o << " " << t;
      EXPECT_EQ(tap_position<true>(o + 1, 2 * t, 2, 4), want);
    }
  }
}

TEST(conv_index, implicit_gemm_matches_the_definition) {
  unsigned seed = 1;
  for (const auto& c : cases()) {
    const geometry g = c.geo();
    const auto x = random_values(static_cast<size_t>(c.n * c.cin * g.in_volume()), seed++);
    const auto w = random_values(static_cast<size_t>(c.weight_size()), seed++);
    const auto want = reference(c, x, w);
    for (const auto& [bm, bk, splits] :
         {std::tuple{128, 32, 1}, std::tuple{64, 16, 1}, std::tuple{64, 16, 3},
          std::tuple{128, 16, 2}}) {
      const auto got = implicit_gemm(c, x, w, bm, bk, splits);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-12) << "case " << seed << " bm " << bm << " bk " << bk
                                            << " splits " << splits << " element " << i;
      }
    }
  }
}

TEST(conv_index, transposed_is_the_adjoint_of_forward) {
  // <conv(x), y> = <x, conv_transposed(y)> with the same weight tensor (transposed reads it
  // as [Cin', Cout'/groups, k] with Cin' = the forward's Cout).
  unsigned seed = 100;
  for (const auto& f : cases()) {
    if (f.transposed) {
      continue;
    }
    conv_case t = f;
    t.transposed = true;
    t.cin = f.cout;
    t.cout = f.cin;
    const geometry gf = f.geo();
    for (int d = 0; d < 3; ++d) {
      t.in[d] = gf.out[d];
      // The output padding that gives back the forward input's size.
      t.out_pad[d] = static_cast<int>(f.in[d] - output_size(t.in[d], f.k[d], f.stride[d], f.pad[d],
                                                            f.dil[d], 0, true));
    }
    const geometry gt = t.geo();
    for (int d = 0; d < 3; ++d) {
      ASSERT_EQ(gt.out[d], f.in[d]);
    }
    const auto x = random_values(static_cast<size_t>(f.n * f.cin * gf.in_volume()), seed++);
    const auto y = random_values(static_cast<size_t>(f.n * f.cout * gf.out_volume()), seed++);
    const auto w = random_values(static_cast<size_t>(f.weight_size()), seed++);
    const auto fx = implicit_gemm(f, x, w, 64, 16, 1);
    const auto ty = implicit_gemm(t, y, w, 128, 32, 2);
    double lhs = 0;
    double rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      lhs += fx[i] * y[i];
    }
    for (size_t i = 0; i < x.size(); ++i) {
      rhs += x[i] * ty[i];
    }
    EXPECT_NEAR(lhs, rhs, 1e-9 * std::max(1.0, std::abs(lhs)));
  }
}

// ---- the [conv] table ------------------------------------------------------------------------

class conv_contract : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::make_unique<temp_dir>("kb-conv-test");
    std::ofstream(dir->path() / "math.cuh") << "// math\n";
    std::ofstream(dir->path() / "baseline.cu") << "// baseline\n";
  }
  std::string load_error(const std::string& toml) {
    std::ofstream(dir->path() / "task.toml") << toml;
    try {
      task::load_contract(dir->path() / "task.toml");
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  }
  task::contract load(const std::string& toml) {
    std::ofstream(dir->path() / "task.toml") << toml;
    return task::load_contract(dir->path() / "task.toml");
  }
  std::unique_ptr<temp_dir> dir;
};

const char* conv_task = R"toml(
id = "939"
name = "t"
suite = "s"
family = "conv"
pytorch = "torch.nn.Conv2d(C, F, (3, 5), stride=(1, 2), padding=(1, 2), groups=2, bias=True)"
[conv]
in_channels = "C"
out_channels = "F"
kernel = [3, 5]
stride = [1, 2]
padding = [1, 2]
groups = 2
bias = true
[[inputs]]
name = "x"
role = "x"
dtype = "float32"
shape = ["N", "C", "H", "W"]
distributions = ["normal"]
[[inputs]]
name = "weight"
role = "weight"
dtype = "float32"
shape = ["F", "C/2", 3, 5]
distributions = ["normal"]
[[inputs]]
name = "bias"
role = "bias"
dtype = "float32"
shape = ["F"]
distributions = ["normal"]
[[outputs]]
name = "y"
dtype = "float32"
shape = ["N", "F", "H", "(W - 1)/2 + 1"]
[[shapes]]
role = "official"
dims = { N = 2, C = 8, F = 6, H = 10, W = 11 }
[[shapes]]
role = "check"
dims = { N = 1, C = 2, F = 4, H = 1, W = 2 }
[tolerance]
atol = 1e-4
rtol = 1e-4
rel_l2 = 1e-5
[roofline]
bytes = "4*N*C*H*W"
flops = "N"
)toml";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST_F(conv_contract, valid_table_loads_and_binds_the_config) {
  ASSERT_EQ(load_error(conv_task), "no error");
  const auto c = load(conv_task);
  ASSERT_TRUE(c.conv.has_value());
  EXPECT_EQ(c.conv->rank, 2);
  EXPECT_FALSE(c.conv->transposed);
  EXPECT_EQ(c.conv->kernel, (std::vector<std::string>{"3", "5"}));
  EXPECT_EQ(c.conv->stride, (std::vector<int>{1, 2}));
  EXPECT_EQ(c.conv->dilation, (std::vector<int>{1, 1}));
  EXPECT_EQ(c.conv->groups, "2");
  EXPECT_TRUE(c.conv->bias);
  EXPECT_TRUE(c.roof.tensor_cores);
  EXPECT_EQ(task::family_config_source(c),
            "static constexpr kb::conv::config kb_family_config{0, 1, 2, -1, 2, 0, {1, 2, 1}, "
            "{1, 2, 0}, {1, 1, 1}, {0, 0, 0}};\n");
  EXPECT_NE(task::oracle_module_source(c).find("KB_CONV_ORACLE(kb_op, kb_family_config)"),
            std::string::npos);
  EXPECT_EQ(task::to_json(c).at("conv").at("groups"), "2");
}

TEST_F(conv_contract, errors_name_the_field_and_the_expectation) {
  const auto expect = [&](const std::string& toml, const std::string& field,
                          const std::string& words) {
    const std::string e = load_error(toml);
    EXPECT_NE(e.find(field), std::string::npos) << e;
    EXPECT_NE(e.find(words), std::string::npos) << e;
  };
  expect(replace(conv_task, "[conv]\n", "[convolution]\n"), "'conv'", "required for family conv");
  expect(replace(conv_task, "stride = [1, 2]", "stride = [1]"), "conv.stride",
         "2 entries, one per spatial dim");
  expect(replace(conv_task, "stride = [1, 2]", "stride = [1, 0]"), "conv.stride",
         "an integer >= 1");
  expect(replace(conv_task, "padding = [1, 2]", "padding = [1, 2]\noutput_padding = 1"),
         "conv.output_padding", "transposed convolution's");
  expect(replace(replace(conv_task, "padding = [1, 2]",
                         "padding = [1, 2]\ntransposed = true\noutput_padding = [0, 2]"),
                 "shape = [\"F\", \"C/2\", 3, 5]", "shape = [\"C\", \"F/2\", 3, 5]"),
         "conv.output_padding", "below its stride or its dilation");
  expect(replace(conv_task, "groups = 2", "groups = 3"), "conv.groups",
         "a divisor of in_channels (8)");
  expect(replace(conv_task, "shape = [\"F\", \"C/2\", 3, 5]", "shape = [\"F\", \"C\", 3, 5]"),
         "weight.shape", "[6, 4, kernel...]");
  expect(replace(conv_task, "shape = [\"F\", \"C/2\", 3, 5]", "shape = [\"F\", \"C/2\", 3, 3]"),
         "weight.shape[3]", "the kernel size 5");
  expect(replace(conv_task, "\"(W - 1)/2 + 1\"", "\"W\""), "y.shape[3]",
         "the convolution's output size");
  expect(replace(conv_task, "groups = 2", "groups = 2\nstrides = [1, 1]"), "conv.strides",
         "no such field");
  expect(replace(conv_task, "kernel = [3, 5]", "kernel = [3, 5, 1, 1]"), "conv.kernel",
         "one to three sizes");
  expect(replace(conv_task, "bias = true", "bias = false"), "conv.bias", "role = \"bias\"");
  expect(replace(conv_task, "in_channels = \"C\"", "in_channels = \"Q\""),
         "conv.in_channels at shape 'official'", "unknown dim 'Q'");
  expect(replace(conv_task, "dims = { N = 1, C = 2, F = 4, H = 1, W = 2 }",
                 "dims = { N = 1, C = 2, F = 5, H = 1, W = 2 }"),
         "conv.groups", "at shape 'check-1'");
  expect(replace(conv_task, "family = \"conv\"", "family = \"elementwise\""), "'conv'",
         "family = \"conv\"");
}

// ---- the float64 oracle's CPU path -----------------------------------------------------------

fs::path cache_dir() {
  const char* env = std::getenv("KBLASTER_CACHE");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / "kblaster-test-cache";
}

std::vector<std::vector<double>> run_test_task(const std::string& folder,
                                               std::map<std::string, int64_t> dims,
                                               const std::vector<std::vector<double>>& inputs) {
  const auto c = task::load_contract(root / "tests" / "data" / "tasks" / folder / "task.toml");
  const fs::path module = eval::build_oracle(root, c, cache_dir());
  task::shape_case s{"hand", "check", std::move(dims)};
  return eval::cpu_reference(module, c, s, inputs);
}

TEST(conv_oracle, transposed_1d_scatters_by_hand) {
  // ConvTranspose1d, kernel 5, stride 3, padding 2, dilation 2, output padding 1, one channel:
  // x = [1, 2] scatters x[i] w[t] to position 3 i - 2 + 2 t; the output has (2 - 1) 3 - 4 + 8 +
  // 1 + 1 = 9 positions. w = [1, 10, 100, 1000, 10000]:
  //   i = 0: t = 1..4 -> positions 0, 2, 4, 6 get 10, 100, 1000, 10000;
  //   i = 1: t = 0..4 -> positions 1, 3, 5, 7, 9 (9 is outside) get 2, 20, 200, 2000.
  const auto y = run_test_task("934_conv_transposed1d_dilated", {{"N", 1}, {"C", 1}, {"F", 1}, {"W", 2}},
                               {{1.0, 2.0}, {1.0, 10.0, 100.0, 1000.0, 10000.0}});
  ASSERT_EQ(y.size(), 1u);
  const std::vector<double> want = {10, 2, 100, 20, 1000, 200, 10000, 2000, 0};
  ASSERT_EQ(y[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_DOUBLE_EQ(y[0][i], want[i]) << i;
  }
}

TEST(conv_oracle, bias_scale_and_epilogue_apply_per_channel) {
  // 938: stride 2, padding 1, 3x3 kernel, then (acc + bias) * scale and ReLU. One input pixel
  // of value 2 in a 1x1 image, two output channels: only the centre tap reads it.
  std::vector<double> w(2 * 1 * 9, 0.0);
  w[4] = 3.0;      // channel 0, centre
  w[9 + 4] = -1.0; // channel 1, centre
  const auto y = run_test_task("938_conv2d_bias_scale_relu",
                               {{"N", 1}, {"C", 1}, {"F", 2}, {"H", 1}, {"W", 1}},
                               {{2.0}, w, {0.5, 1.0}, {2.0, 3.0}});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(y[0].size(), 2u);
  EXPECT_DOUBLE_EQ(y[0][0], (2.0 * 3.0 + 0.5) * 2.0); // 13
  EXPECT_DOUBLE_EQ(y[0][1], 0.0);                     // ReLU of (-2 + 1) * 3
}

TEST(conv_oracle, every_conv_test_task_checks_on_the_cpu) {
  // The oracle at each check shape on the CPU, and the checker rejecting trivial outputs.
  eval::options o;
  o.cache_dir = cache_dir();
  o.seeds = 1;
  int tasks = 0;
  for (const auto& e : fs::directory_iterator(root / "tests" / "data" / "tasks")) {
    if (e.path().filename().string().find("_conv") == std::string::npos) {
      continue;
    }
    ++tasks;
    const auto c = task::load_contract(e.path() / "task.toml");
    const auto report = eval::check_task_without_gpu(root, c, o);
    EXPECT_TRUE(report.value("ok", false)) << c.id << ": " << report.dump(2);
    EXPECT_GT(report["checker_selftest"].value("zeros_rejected_by", 0), 0) << c.id;
    EXPECT_GT(report["checker_selftest"].value("constant_rejected_by", 0), 0) << c.id;
  }
  EXPECT_EQ(tasks, 9);
}

} // namespace
} // namespace kb::conv
