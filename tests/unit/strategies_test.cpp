// The strategy library on the CPU: which strategies each task is offered, parameter handling, the
// generated sources (no shape baked in), and every offered strategy compiling for every task at
// its default point, with the corners of each strategy's space on one task of its family. The
// compiled candidates are loaded to check their exports and their host-side checks (refusals,
// workspace sizes) without a GPU.
#include "build/build.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <kblaster/candidate.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

namespace kb::search {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path test_tasks = root / "tests" / "data" / "tasks";

std::vector<task::contract> test_contracts() {
  std::vector<task::contract> out;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(test_tasks)) {
    dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    out.push_back(task::load_contract(d / "task.toml"));
  }
  return out;
}

// The made-up tasks first (they cover dtypes and layouts the repository's tasks do not), then
// the repository's own, by id: tasks a user adds to tasks/ or through --tasks do not change what
// these tests check.
const std::vector<std::string> repository_ids = {"004", "007", "019", "023", "026", "036", "040",
                                                 "047", "088", "095", "101", "102", "103"};

const std::vector<task::contract>& every_task() {
  static const std::vector<task::contract> tasks = [] {
    auto all = test_contracts();
    for (const auto& id : repository_ids) {
      all.push_back(task::find_task(root, id));
    }
    return all;
  }();
  return tasks;
}

const task::contract& task_by_id(const std::string& id) {
  for (const auto& c : every_task()) {
    if (c.id == id) {
      return c;
    }
  }
  throw std::runtime_error("no task " + id);
}

std::set<std::string> offered(const task::contract& c) {
  std::set<std::string> names;
  for (const auto* s : strategies_for(c)) {
    names.insert(s->name);
  }
  return names;
}

TEST(strategy_library, names_defaults_and_headers_are_consistent) {
  std::set<std::string> names;
  for (const auto& s : all_strategies()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(s.name.substr(0, s.name.find('.')), task::to_string(s.fam)) << s.name;
    EXPECT_TRUE(fs::is_regular_file(root / "include" / s.header)) << s.header;
    EXPECT_FALSE(s.description.empty() || s.applies_to.empty() || s.rationale.empty()) << s.name;
    ASSERT_FALSE(s.space.empty()) << s.name;
    EXPECT_EQ(s.defaults.size(), s.space.size()) << s.name;
    EXPECT_EQ(resolve_params(s, s.defaults), s.defaults) << s.name;
    for (const auto& a : s.space) {
      EXPECT_GE(a.values.size(), 2u) << s.name << "." << a.name;
      EXPECT_FALSE(a.description.empty()) << s.name << "." << a.name;
      for (const auto& v : a.values) {
        EXPECT_TRUE(a.cpp_enum.empty() ? v.is_number_integer() : v.is_string())
            << s.name << "." << a.name;
      }
    }
    EXPECT_EQ(&find_strategy(s.name), &s);
  }
  EXPECT_GE(all_strategies().size(), 15u);
  EXPECT_THROW(find_strategy("normalize.no_such_thing"), input_error);
}

TEST(strategy_library, offers_each_task_the_strategies_for_its_shape) {
  const std::map<std::string, std::set<std::string>> expected = {
      {"019", {"elementwise.vectorized"}},
      {"026", {"elementwise.vectorized"}},
      {"088", {"elementwise.vectorized"}},
      {"023", {"normalize.cluster_row", "normalize.split_row"}}, // 1.5 MB rows
      {"036", {"normalize.strided_columns"}},                    // 64 channels, stride H*W
      {"040", {"normalize.split_row"}},                          // 16 rows of 16 MB
      {"047", {"reduce.columns", "reduce.split_columns"}},       // inner 4095
      {"095", {"loss.warp_row", "loss.block_row"}},              // 4096 classes
      {"004", {"matmul.matvec"}},
      {"007", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"101", {"normalize.warp_row", "normalize.block_row"}}, // LLM rows of 4096
      {"102", {"normalize.warp_row", "normalize.block_row"}},
      {"103", {"normalize.warp_row", "normalize.block_row"}},
      {"901", {"elementwise.vectorized"}},
      {"902", {"normalize.warp_row", "normalize.block_row"}},
      {"903", {"reduce.rows"}},
      {"904", {"reduce.columns", "reduce.split_columns"}},
      {"905", {"loss.columns"}},
      {"906", {"loss.warp_row", "loss.block_row"}},
      {"907", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"908", {"matmul.matvec"}},
      {"909", {"reduce.split_row"}},
      {"910", {"loss.pointwise"}},
      {"911", {"loss.pointwise"}},
      {"940", {"loss.pointwise"}}, // the target broadcast over the rows
      {"912", {"normalize.strided_columns"}}, // 036 at another shape, bfloat16
      {"913", {"argreduce.rows"}},
      {"914", {"argreduce.columns"}},             // argmin over a middle dim, inner 4096
      {"915", {"pool.direct", "pool.tiled"}},     // overlapping dilated windows
      {"916", {"pool.direct", "pool.tiled"}},     // kernel 4, stride 3
      {"917", {"pool.direct"}},                   // kernel 2, stride 2: no overlap
      {"918", {"pool.direct", "pool.tiled"}},
      {"919", {"scan.block_rows", "scan.split_row"}}, // 32 rows of 256Ki
      {"920", {"scan.block_rows"}},
      {"921", {"scan.columns"}},                  // cumprod over a middle dim, inner 4096
      // The matmul forms: every GEMM strategy takes batches, transposes, factors and masks;
      // diag(a) @ B is a row scaling only.
      {"939", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"922", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"923", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"924", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"925", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"926", {"matmul.row_scale"}},
      {"927", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"928", {"matmul.register_tiled", "matmul.tensor_core"}},
      {"929", {"matmul.matvec"}},
      {"930", {"conv.implicit_gemm"}},          // Conv1d, K = 64 x 3
      {"931", {"conv.implicit_gemm"}},
      {"932", {"conv.implicit_gemm"}},
      {"933", {"conv.implicit_gemm"}}, // transposed, 4 groups
      {"934", {"conv.implicit_gemm"}},
      {"935", {"conv.implicit_gemm"}},
      {"936", {"conv.direct"}}, // depthwise: K = 9, N = 1
      {"937", {"conv.implicit_gemm"}},
      {"938", {"conv.implicit_gemm"}},
      // Channel rows (batch norms) go to the one strategy that walks them, whatever the runs.
      {"941", {"normalize.channel_split"}}, // runs of 56 x 56
      {"942", {"normalize.channel_split"}}, // [batch, features]: runs of one element
      // Groups (a group norm) are plain rows; the strided columns refuse them.
      {"943", {"normalize.cluster_row", "normalize.split_row"}}, // 64 rows of 256 KiB
      {"944", {"normalize.warp_row", "normalize.block_row"}},    // 1024 rows of 16 KiB
      // A per-column epilogue operand, N = 1000: no tile may evaluate the epilogue past N.
      {"945", {"matmul.register_tiled", "matmul.tensor_core"}},
  };
  std::set<std::string> covered;
  for (const auto& c : every_task()) {
    const auto it = expected.find(c.id);
    ASSERT_NE(it, expected.end()) << "no expectation for task " << c.id;
    EXPECT_EQ(offered(c), it->second) << "task " << c.id;
    covered.insert(it->second.begin(), it->second.end());
  }
  for (const auto& s : all_strategies()) {
    EXPECT_TRUE(covered.count(s.name)) << s.name << " is offered for no task";
  }
}

TEST(strategy_library, inapplicable_strategies_are_not_offered) {
  for (const auto& c : every_task()) {
    const auto names = offered(c);
    for (const auto& s : all_strategies()) {
      if (s.fam != c.fam) {
        EXPECT_FALSE(names.count(s.name)) << s.name << " offered for " << c.id;
        EXPECT_FALSE(applies(s, c, c.official()));
        EXPECT_THROW(generate(c, s, s.defaults), input_error)
            << s.name << " generated for " << c.id;
      } else {
        EXPECT_EQ(names.count(s.name) == 1, s.fits(features_of(c, c.official())))
            << s.name << " " << c.id;
      }
    }
  }
  // Storage the kernels do not instantiate (float64) gets no strategy at all.
  for (const char* id : {"019", "023", "047", "095", "007"}) {
    task::contract c = task_by_id(id);
    for (auto& t : c.inputs) {
      if (t.type == task::dtype::float32) {
        t.type = task::dtype::float64;
      }
    }
    for (auto& t : c.outputs) {
      t.type = task::dtype::float64;
    }
    EXPECT_TRUE(strategies_for(c).empty()) << id;
  }
  // A normalize task whose output dtype differs from x.
  task::contract mixed = task_by_id("102");
  mixed.outputs[0].type = task::dtype::float32;
  EXPECT_TRUE(strategies_for(mixed).empty());
}

// The official shape of `id` replaced by `dims`.
task::contract with_official(const std::string& id, const std::map<std::string, int64_t>& dims) {
  task::contract c = task_by_id(id);
  for (auto& s : c.shapes) {
    if (s.role == "official") {
      s.dims = dims;
    }
  }
  return c;
}

TEST(strategy_library, every_shape_of_a_family_is_offered_a_strategy) {
  const std::vector<int64_t> sizes = {1,     13,    100,    1000,   5000,
                                      20000, 50000, 100000, 393216, 4194304};
  for (const int64_t m : {int64_t{1}, int64_t{16}, int64_t{4096}}) {
    for (const int64_t n : sizes) {
      // Rows of fp32, fp16 and bf16: (task, rows dim, row length dim).
      for (const auto& [id, rows, cols] :
           {std::tuple{"023", "M", "N"}, std::tuple{"902", "T", "H"}, std::tuple{"903", "M", "N"},
            std::tuple{"909", "M", "N"}, std::tuple{"095", "N", "C"},
            std::tuple{"906", "N", "C"}}) {
        EXPECT_FALSE(strategies_for(with_official(id, {{rows, m}, {cols, n}})).empty())
            << id << " " << m << " x " << n;
      }
      EXPECT_FALSE(strategies_for(with_official("007", {{"M", m}, {"N", n}, {"K", 64}})).empty())
          << m << " x " << n;
      EXPECT_FALSE(strategies_for(with_official("019", {{"M", m}, {"N", n}})).empty());
    }
  }
  for (const int64_t hw : {int64_t{1}, int64_t{4}, int64_t{31}, int64_t{32}, int64_t{4096}}) {
    EXPECT_FALSE(
        strategies_for(with_official("036", {{"B", 2}, {"C", 64}, {"H", 1}, {"W", hw}})).empty())
        << hw;
    EXPECT_FALSE(strategies_for(with_official("047", {{"B", 2}, {"R", 300}, {"N", hw}})).empty())
        << hw;
    EXPECT_FALSE(strategies_for(with_official("905", {{"N", 2}, {"C", 300}, {"L", hw}})).empty())
        << hw;
    EXPECT_FALSE(strategies_for(with_official("942", {{"N", 64}, {"F", 300}, {"L", hw}})).empty())
        << hw;
  }
  // Convolutions: every channel count, forward and transposed.
  for (const int64_t ch : {int64_t{1}, int64_t{4}, int64_t{7}, int64_t{64}, int64_t{300}}) {
    for (const int64_t f : {int64_t{4}, int64_t{8}, int64_t{200}}) {
      EXPECT_FALSE(strategies_for(with_official("931", {{"N", 2}, {"C", ch}, {"F", f}, {"H", 9},
                                                        {"W", 9}}))
                       .empty())
          << ch << " " << f;
      EXPECT_FALSE(strategies_for(with_official("933", {{"N", 2}, {"C", 4 * ch}, {"F", f},
                                                        {"H", 9}, {"W", 9}}))
                       .empty())
          << ch << " " << f;
    }
    EXPECT_FALSE(
        strategies_for(with_official("936", {{"N", 2}, {"C", ch}, {"H", 9}, {"W", 9}})).empty());
  }
}

TEST(strategy_library, features_follow_the_reduced_axes) {
  const auto rms = features_of(task_by_id("036"), task_by_id("036").official());
  EXPECT_EQ(rms.outer, 112);
  EXPECT_EQ(rms.extent, 64);
  EXPECT_EQ(rms.inner, 512 * 512);
  const auto ln = features_of(task_by_id("040"), task_by_id("040").official());
  EXPECT_EQ(ln.outer, 16);
  EXPECT_EQ(ln.extent, 64 * 256 * 256);
  EXPECT_EQ(ln.inner, 1);
  EXPECT_TRUE(ln.has_weight && ln.has_bias);
  const auto mv = features_of(task_by_id("004"), task_by_id("004").official());
  EXPECT_EQ(mv.m, 2048);
  EXPECT_EQ(mv.n, 1);
  EXPECT_EQ(mv.k, 1048576);
  // Channel rows: the kept axis in the middle, reduced over the outer and inner ones.
  const auto bn = features_of(task_by_id("941"), task_by_id("941").official());
  EXPECT_TRUE(bn.channel_rows);
  EXPECT_EQ(bn.outer, 32);
  EXPECT_EQ(bn.extent, 64);
  EXPECT_EQ(bn.inner, 56 * 56);
  EXPECT_FALSE(ln.channel_rows);
  // Groups: a row is one group of one sample (16 samples x 4 groups of 16 channels x 64 x 64).
  const auto gn = features_of(task_by_id("943"), task_by_id("943").official());
  EXPECT_EQ(gn.groups, 4);
  EXPECT_EQ(gn.outer, 16 * 4);
  EXPECT_EQ(gn.extent, 16 * 64 * 64);
  EXPECT_EQ(gn.inner, 1);
  EXPECT_FALSE(gn.channel_rows);
  const auto half = features_of(task_by_id("902"), task_by_id("902").official());
  EXPECT_EQ(half.storage, task::dtype::float16);
  EXPECT_EQ(half.row_bytes(), 3072 * 2);
}

TEST(strategy_params, are_completed_with_defaults_and_validated) {
  const strategy& s = find_strategy("normalize.block_row");
  const auto p = resolve_params(s, {{"block", 1024}, {"cache", "shared"}});
  EXPECT_EQ(p.at("block"), 1024);
  EXPECT_EQ(p.at("cache"), "shared");
  EXPECT_EQ(p.at("vector_bytes"), s.defaults.at("vector_bytes"));
  EXPECT_EQ(resolve_params(s, nlohmann::json()), s.defaults);
  EXPECT_THROW(resolve_params(s, {{"block", 100}}), input_error);
  EXPECT_THROW(resolve_params(s, {{"cache", "l1"}}), input_error);
  EXPECT_THROW(resolve_params(s, {{"cache", 1}}), input_error);
  EXPECT_THROW(resolve_params(s, {{"no_such_axis", 1}}), input_error);
  EXPECT_THROW(resolve_params(s, nlohmann::json::array({1, 2})), input_error);
  EXPECT_EQ(candidate_info(s, p),
            "normalize.block_row block=1024 vector_bytes=16 cache=shared items_per_thread=16");
}

TEST(strategy_params, corner_points_are_distinct_valid_points) {
  for (const auto& s : all_strategies()) {
    const auto points = corner_points(s);
    EXPECT_EQ(points.front(), s.defaults);
    std::set<std::string> seen;
    for (const auto& p : points) {
      EXPECT_EQ(resolve_params(s, p), p) << s.name;
      EXPECT_TRUE(seen.insert(p.dump()).second) << s.name;
    }
    EXPECT_LE(points.size(), 2 * s.space.size() + 3);
    EXPECT_GE(points.size(), 3u) << s.name;
  }
}

// The same contract with every shape scaled: a source that depends on a shape differs.
task::contract rescaled(task::contract c) {
  for (auto& s : c.shapes) {
    for (auto& [name, v] : s.dims) {
      v = v * 3 + 1;
    }
  }
  return c;
}

TEST(strategy_generate, sources_carry_no_shape) {
  for (const auto& c : every_task()) {
    const auto other = rescaled(c);
    std::set<std::string> dims;
    for (const auto& s : c.shapes) {
      for (const auto& [name, v] : s.dims) {
        if (v > 64) {
          dims.insert(std::to_string(v));
        }
      }
    }
    for (const auto* s : strategies_for(c)) {
      for (const auto& point : corner_points(*s)) {
        const std::string src = generate(c, *s, point);
        EXPECT_EQ(src, generate(other, *s, point)) << c.id << " " << s->name;
        std::set<std::string> params;
        for (const auto& [k, v] : point.items()) {
          params.insert(v.dump());
        }
        const std::regex number("[0-9]+");
        for (auto it = std::sregex_iterator(src.begin(), src.end(), number);
             it != std::sregex_iterator(); ++it) {
          const std::string n = it->str();
          EXPECT_TRUE(!dims.count(n) || params.count(n))
              << c.id << " " << s->name << ": the source contains the dim " << n;
        }
      }
    }
  }
}

TEST(strategy_generate, source_binds_the_task_and_the_strategy) {
  const auto& c = task_by_id("040");
  const strategy& s = find_strategy("normalize.split_row");
  const auto src = generate(c, s, {{"chunk", 16384}});
  EXPECT_NE(src.find("#include KB_TASK_MATH"), std::string::npos);
  EXPECT_NE(src.find("#include <kblaster/device/strategies/normalize.cuh>"), std::string::npos);
  EXPECT_NE(src.find(task::family_config_source(c)), std::string::npos);
  EXPECT_NE(src.find("static constexpr int chunk = 16384;"), std::string::npos);
  EXPECT_NE(src.find("kb::strategies::normalize::split_row<kb_op, kb_strategy_params>"),
            std::string::npos);
  EXPECT_NE(src.find("kb_strategy::workspace_bytes(args, kb_family_config, bytes)"),
            std::string::npos);
  EXPECT_NE(src.find('"' + candidate_info(s, {{"chunk", 16384}}) + '"'), std::string::npos);

  const auto ew =
      generate(task_by_id("019"), find_strategy("elementwise.vectorized"), {{"hint", "streaming"}});
  EXPECT_EQ(ew.find("kb_family_config"), std::string::npos);
  EXPECT_NE(ew.find("static constexpr kb::strategies::cache_hint hint = "
                    "kb::strategies::cache_hint::streaming;"),
            std::string::npos);
  EXPECT_NE(ew.find("return kb_strategy::launch(args); }"), std::string::npos);
}

// A task's candidates are compiled with its dtypes (KB_TASK_DTYPES), and a strategy's dtype
// dispatch then compiles kernels for those only: the same source compiled without the define has
// the kernels of every storage type. 937 is a bf16 convolution (bf16 inputs and output); the
// float64 oracle module is compiled for every dtype.
TEST(strategy_build, compiles_kernels_for_the_tasks_dtypes_only) {
  const auto& c = task_by_id("937");
  EXPECT_EQ(task::abi_dtype_mask(c), 1u << KB_BFLOAT16);
  EXPECT_EQ(task::abi_dtype_mask(task_by_id("019")), 1u << KB_FLOAT32);
  const auto src = generate(c, find_strategy("conv.implicit_gemm"), {});
  const auto masked = build::candidate_request(root, c, src, "candidate.cu");
  const std::string define = fmt::format("KB_TASK_DTYPES=0x{:x}u", 1u << KB_BFLOAT16);
  EXPECT_NE(std::find(masked.defines.begin(), masked.defines.end(), define), masked.defines.end());
  const auto oracle = build::oracle_request(root, c);
  EXPECT_EQ(std::count_if(oracle.defines.begin(), oracle.defines.end(),
                          [](const std::string& d) { return d.rfind("KB_TASK_DTYPES", 0) == 0; }),
            0);
  auto every_dtype = masked;
  every_dtype.defines.erase(
      std::find(every_dtype.defines.begin(), every_dtype.defines.end(), define));

  build::compiler comp(build::detect_toolchain(), default_cache_dir());
  // ptxas -v names each kernel it compiles; the storage type is in the kernel's mangled name.
  const auto kernels = [&](const build::request& req) {
    const auto res = comp.compile(req);
    EXPECT_TRUE(res.ok()) << res.log;
    std::map<std::string, int> by_type;
    const std::regex entry("Compiling entry function '([^']+)'");
    for (auto it = std::sregex_iterator(res.log.begin(), res.log.end(), entry);
         it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      ++by_type[name.find("bfloat16") != std::string::npos ? "bf16"
                : name.find("__half") != std::string::npos ? "f16"
                                                            : "other"];
    }
    return by_type;
  };
  auto only = kernels(masked);
  auto all = kernels(every_dtype);
  EXPECT_GT(only["bf16"], 0);
  EXPECT_EQ(only["f16"], 0) << "fp16 kernels compiled for a bf16 task";
  EXPECT_EQ(all["bf16"], only["bf16"]);
  EXPECT_GT(all["f16"], 0);
  EXPECT_GT(all["other"], only["other"]);
}

TEST(strategy_cli, generates_the_library_source_and_rejects_bad_parameters) {
  const auto run = [](std::vector<std::string> args) {
    process_spec spec;
    spec.argv = {KBLASTER_BINARY, "--root", root.string()};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = std::chrono::seconds(60);
    return run_process(spec);
  };
  const auto gen = run({"strategies", "generate", "--task",
                        (test_tasks / "902_layernorm_lastdim_f16").string(), "--strategy",
                        "normalize.block_row", "--param", "cache=shared", "--param", "block=1024"});
  ASSERT_TRUE(gen.ok()) << gen.output;
  EXPECT_EQ(gen.output, generate(task_by_id("902"), find_strategy("normalize.block_row"),
                                 {{"cache", "shared"}, {"block", 1024}}));
  const auto listed = run({"strategies", "list", "--task", "036", "--json"});
  ASSERT_TRUE(listed.ok()) << listed.output;
  const auto j = nlohmann::json::parse(listed.output);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].at("name"), "normalize.strided_columns");
  const auto bad = run({"strategies", "generate", "--task", "019", "--strategy",
                        "elementwise.vectorized", "--param", "block=100"});
  EXPECT_EQ(bad.exit_code, exit_code::input) << bad.output;
  EXPECT_NE(bad.output.find("not one of"), std::string::npos) << bad.output;
}

// ---- compiling the generated candidates ------------------------------------------------------

struct compile_case {
  std::string task_id;
  std::string strategy;
  nlohmann::json params;
  std::string label;
};

std::vector<compile_case> compile_cases() {
  std::vector<compile_case> cases;
  for (const auto& c : every_task()) {
    for (const auto* s : strategies_for(c)) {
      cases.push_back({c.id, s->name, s->defaults, "default"});
    }
  }
  // Corners on the first task the strategy is offered for; KBLASTER_STRATEGY_POINTS=corners adds
  // every single-axis extreme as well.
  const char* env = std::getenv("KBLASTER_STRATEGY_POINTS");
  const bool all_corners = env != nullptr && std::string(env) == "corners";
  for (const auto& s : all_strategies()) {
    const task::contract* host = nullptr;
    for (const auto& c : every_task()) {
      if (applies(s, c, c.official())) {
        host = &c;
        break;
      }
    }
    if (host == nullptr) {
      continue; // reported by offers_each_task_the_strategies_for_its_shape
    }
    nlohmann::json first = s.defaults;
    nlohmann::json last = s.defaults;
    for (const auto& a : s.space) {
      first[a.name] = a.values.front();
      last[a.name] = a.values.back();
    }
    cases.push_back({host->id, s.name, first, "first"});
    cases.push_back({host->id, s.name, last, "last"});
    if (all_corners) {
      const auto points = corner_points(s);
      for (size_t i = 1; i < points.size(); ++i) {
        if (points[i] != first && points[i] != last) {
          cases.push_back({host->id, s.name, points[i], "corner" + std::to_string(i)});
        }
      }
    }
  }
  return cases;
}

// kb_args over the contract's tensors at one shape, with no device memory behind them: enough for
// the candidate's host-side checks, which run before anything touches the GPU.
struct fake_args {
  std::vector<kb_tensor> inputs;
  std::vector<kb_tensor> outputs;
  std::vector<double> scalars;
  kb_args args{};

  fake_args(const task::contract& c, const task::shape_case& s) {
    const auto fill = [](const std::vector<task::concrete_tensor>& ts,
                         std::vector<kb_tensor>& out) {
      for (const auto& t : ts) {
        kb_tensor k{};
        k.data =
            reinterpret_cast<void*>(uintptr_t{1} << 20); // aligned, never dereferenced on the host
        k.dtype = static_cast<kb_dtype>(task::abi_dtype(t.type));
        k.ndim = static_cast<int32_t>(t.shape.size());
        int64_t stride = 1;
        for (int i = k.ndim - 1; i >= 0; --i) {
          k.shape[i] = t.shape[i];
          k.strides[i] = stride;
          stride *= t.shape[i];
        }
        out.push_back(k);
      }
    };
    fill(task::concrete_inputs(c, s), inputs);
    fill(task::concrete_outputs(c, s), outputs);
    for (const auto& p : c.params) {
      scalars.push_back(p.value);
    }
    args.abi_version = KB_ABI_VERSION;
    args.num_inputs = static_cast<int32_t>(inputs.size());
    args.inputs = inputs.data();
    args.num_outputs = static_cast<int32_t>(outputs.size());
    args.outputs = outputs.data();
    args.num_scalars = static_cast<int32_t>(scalars.size());
    args.scalars = scalars.data();
  }

  void set_dtype(kb_dtype d) {
    for (auto& t : inputs) {
      if (t.dtype != KB_INT64) {
        t.dtype = d;
      }
    }
    for (auto& t : outputs) {
      t.dtype = d;
    }
  }
};

void PrintTo(const compile_case& info, std::ostream* os) {
  *os << info.task_id + " " + info.strategy + " " + info.params.dump();
}

class compiles : public ::testing::TestWithParam<compile_case> {};

TEST_P(compiles, and_exports_the_candidate_abi) {
  const auto& cc = GetParam();
  const auto& c = task_by_id(cc.task_id);
  const strategy& s = find_strategy(cc.strategy);
  static build::compiler comp(build::detect_toolchain(), default_cache_dir());
  auto req = build::candidate_request(root, c, generate(c, s, cc.params), "candidate.cu");
  req.timeout = std::chrono::seconds(300);
  const auto res = comp.compile(req);
  ASSERT_TRUE(res.ok()) << cc.strategy << " " << cc.params.dump() << " on " << c.id << ":\n"
                        << res.log;
  EXPECT_EQ(res.log.find("warning"), std::string::npos) << res.log;

  void* lib = dlopen(res.binary.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const auto launch = reinterpret_cast<int (*)(const kb_args*)>(dlsym(lib, "kb_launch"));
  const auto workspace =
      reinterpret_cast<int (*)(const kb_args*, uint64_t*)>(dlsym(lib, "kb_workspace_bytes"));
  const auto info = reinterpret_cast<const char* (*)()>(dlsym(lib, "kb_candidate_info"));
  ASSERT_TRUE(launch != nullptr && workspace != nullptr && info != nullptr);
  EXPECT_EQ(std::string(info()), candidate_info(s, cc.params));

  // Float64 storage is refused before any device work; so is a missing output.
  fake_args f(c, c.official());
  f.set_dtype(KB_FLOAT64);
  EXPECT_NE(launch(&f.args), 0);
  fake_args none(c, c.official());
  none.args.num_outputs = 0;
  EXPECT_NE(launch(&none.args), 0);
  uint64_t bytes = 1;
  const int ws_rc = workspace(&none.args, &bytes);
  if (s.has_workspace) {
    EXPECT_NE(ws_rc, 0);
  } else {
    EXPECT_EQ(ws_rc, 0);
    EXPECT_EQ(bytes, 0u);
  }
  dlclose(lib);
}

std::string case_name(const ::testing::TestParamInfo<compile_case>& info) {
  std::string n = info.param.task_id + "_" + info.param.strategy + "_" + info.param.label;
  for (auto& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      ch = '_';
    }
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(strategies, compiles, ::testing::ValuesIn(compile_cases()), case_name);

// Workspace sizes follow the shape at run time (no GPU needed for these strategies).
TEST(strategy_workspace, sizes_follow_the_shape) {
  build::compiler comp(build::detect_toolchain(), default_cache_dir());
  const auto bytes_for = [&](const std::string& id, const std::string& name,
                             const nlohmann::json& params, const std::string& shape) {
    const auto& c = task_by_id(id);
    const auto res = comp.compile(build::candidate_request(
        root, c, generate(c, find_strategy(name), params), "candidate.cu"));
    EXPECT_TRUE(res.ok()) << res.log;
    void* lib = dlopen(res.binary.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib, nullptr);
    const auto workspace =
        reinterpret_cast<int (*)(const kb_args*, uint64_t*)>(dlsym(lib, "kb_workspace_bytes"));
    fake_args f(c, c.shape(shape));
    uint64_t bytes = 0;
    EXPECT_EQ(workspace(&f.args, &bytes), 0);
    dlclose(lib);
    return bytes;
  };
  // loss.warp_row: one double per rows_per_block rows; 32768 rows.
  EXPECT_EQ(bytes_for("095", "loss.warp_row", find_strategy("loss.warp_row").defaults, "official"),
            32768 / 32 * 8);
  // normalize.split_row: one Welford state (3 floats) per row and 16384-element chunk; 16 rows of
  // 4Mi. Applied by columns (040 has a weight and bias) each row's statistics (mean, rstd)
  // follow, 16-byte aligned; applied by rows (the default) there are none.
  const auto& split_row = find_strategy("normalize.split_row");
  EXPECT_EQ(bytes_for("040", "normalize.split_row", split_row.defaults, "official"), 16 * 256 * 12);
  EXPECT_EQ(bytes_for("040", "normalize.split_row", split_row.defaults, "odd"), 3 * 1 * 12);
  auto by_columns = split_row.defaults;
  by_columns["columns_apply"] = 1;
  EXPECT_EQ(bytes_for("040", "normalize.split_row", by_columns, "official"),
            16 * 256 * 12 + 16 * 8);
  EXPECT_EQ(bytes_for("040", "normalize.split_row", by_columns, "odd"), 48 + 3 * 8);
  // With groups, a row is a group (943: 64 rows of 65536, 4 chunks each), and the output pass
  // goes by rows even with columns_apply (each group reads its own channels' values).
  EXPECT_EQ(bytes_for("943", "normalize.split_row", split_row.defaults, "official"), 64 * 4 * 12);
  EXPECT_EQ(bytes_for("943", "normalize.split_row", by_columns, "official"), 64 * 4 * 12);
  // normalize.channel_split: a Welford state (3 floats) per part, then (16-byte aligned) each
  // channel's statistics (2 floats). 941 (runs of 3136, chunk 65536): 20 runs a part, 2 parts of
  // each of the 64 channels. Its long-runs shape (runs of 90300 > chunk): each run in 2 pieces
  // of 45152 (a multiple of 16), 2 x 2 parts of each of 3 channels. 942 (runs of one element,
  // columns form): 2048 outer rows a part, 4 parts of each of the 1024 columns.
  const auto& channel = find_strategy("normalize.channel_split");
  EXPECT_EQ(channel.defaults.at("chunk"), 65536);
  EXPECT_EQ(bytes_for("941", "normalize.channel_split", channel.defaults, "official"),
            64u * 2 * 12 + 64 * 8);
  EXPECT_EQ(bytes_for("941", "normalize.channel_split", channel.defaults, "long-runs"),
            (3u * 4 * 12 + 15) / 16 * 16 + 3 * 8);
  EXPECT_EQ(bytes_for("942", "normalize.channel_split", channel.defaults, "official"),
            1024u * 4 * 12 + 1024 * 8);
  // reduce.columns on 047 (inner 4095, 4096 lines): grouped (the default), 4 states (one float
  // each) per output; not grouped, or with 4-byte vectors (no groups), no workspace.
  const auto& columns = find_strategy("reduce.columns");
  EXPECT_EQ(columns.defaults.at("grouped"), 1);
  EXPECT_EQ(bytes_for("047", "reduce.columns", columns.defaults, "official"), 128u * 4095 * 4 * 4);
  auto ungrouped = columns.defaults;
  ungrouped["grouped"] = 0;
  EXPECT_EQ(bytes_for("047", "reduce.columns", ungrouped, "official"), 0u);
  auto scalar = columns.defaults;
  scalar["vector_bytes"] = 4;
  EXPECT_EQ(bytes_for("047", "reduce.columns", scalar, "official"), 0u);
  // matmul.matvec: one float per output and K chunk; no workspace with k_chunk = 0.
  EXPECT_EQ(bytes_for("004", "matmul.matvec", find_strategy("matmul.matvec").defaults, "official"),
            2048 * 16 * 4);
  EXPECT_EQ(bytes_for("004", "matmul.matvec", {{"k_chunk", 0}}, "official"), 0u);
  // The GEMM strategies' workspace holds the transposed operands (each rounded to 256 bytes):
  // A (4096 x 2048 fp32) for 922, A and B for 924; none for the plain, batched and diag forms.
  const uint64_t operand = 4096u * 2048 * 4;
  EXPECT_EQ(bytes_for("922", "matmul.tensor_core", find_strategy("matmul.tensor_core").defaults,
                      "official"),
            operand);
  EXPECT_EQ(bytes_for("924", "matmul.register_tiled",
                      find_strategy("matmul.register_tiled").defaults, "official"),
            2 * operand);
  // 37 x 100 and 77 x 37 fp32 at the odd shape: 14800 -> 14848 and 11396 -> 11520.
  EXPECT_EQ(bytes_for("924", "matmul.register_tiled",
                      find_strategy("matmul.register_tiled").defaults, "odd"),
            14848u + 11520u);
  EXPECT_EQ(bytes_for("939", "matmul.tensor_core", find_strategy("matmul.tensor_core").defaults,
                      "official"),
            0u);
  EXPECT_EQ(bytes_for("926", "matmul.row_scale", find_strategy("matmul.row_scale").defaults,
                      "official"),
            0u);
  // conv.implicit_gemm on 933 (transposed, 4 groups of 32 input and 32 output channels, a 3x4
  // kernel: N = 32, K = 384; output 4 x 128 x 64 x 67): no workspace at the default point; the
  // packed weights at bn = 64, bk = 32 (4 groups x 64 x 384 floats); two splits of K the
  // output's size twice.
  EXPECT_EQ(bytes_for("933", "conv.implicit_gemm", nlohmann::json::object(), "official"), 0u);
  EXPECT_EQ(bytes_for("933", "conv.implicit_gemm", {{"transform", 1}}, "official"),
            4u * 64 * 384 * 4);
  EXPECT_EQ(bytes_for("933", "conv.implicit_gemm", {{"split_k", 2}}, "official"),
            2u * 4 * 128 * 64 * 67 * 4);
  // 930 at its tiny check shape (K = 3): one chunk, so the splits fall back to one.
  EXPECT_EQ(bytes_for("930", "conv.implicit_gemm", {{"split_k", 8}}, "tiny"), 0u);
}

} // namespace
} // namespace kb::search
