// `kblaster tasks import` over problem files in KernelBench's format written for these tests
// (tests/data/kernelbench: level 1 elementwise, reduction, matmul, conv, a loss and a softmax;
// level 2 fused ops with init args; level 3 a small network; one file that needs executing and
// one that is not a problem), the pytorch contracts it writes, the harness's generator library
// that scripts/pytorch_oracle.py calls, and the LLM prompt of an imported task.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "gpu/device_ops.hpp"
#include "llm/llm.hpp"
#include "llm_test_support.hpp"
#include "pytorch/pytorch.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

namespace kb::pytorch {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path problems = root / "tests" / "data" / "kernelbench";

process_result kblaster(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(300);
  spec.env_overrides = std::move(env);
  return run_process(spec);
}

// An interpreter with PyTorch: $KBLASTER_PYTHON, else Debian's python3 (python3-torch, which
// scripts/install-deps.sh --tests installs). Empty when there is none.
std::string python_with_torch() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("KBLASTER_PYTHON"); p != nullptr && *p != '\0') {
    candidates.emplace_back(p);
  }
  candidates.emplace_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    process_spec spec;
    spec.argv = {py, "-c", "import torch"};
    spec.timeout = std::chrono::seconds(120);
    if (run_process(spec).ok()) {
      return py;
    }
  }
  return "";
}

std::vector<std::string> problem_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(problems)) {
    // tests/data/kernelbench/lowering holds the lowering's problem files (lowering_test.cpp).
    if (e.path().extension() == ".py" &&
        e.path().string().find("/lowering/") == std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class imported : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    out = std::make_unique<temp_dir>("kb-import");
    // The project's own problem files are trusted to run (--trust), in a trust file of the
    // test's that every later command of this process sees.
    trust = std::make_unique<temp_dir>("kb-import-trust");
    setenv("KBLASTER_TRUST_FILE", (trust->path() / "trusted_modules").c_str(), 1);
    std::vector<std::string> args{"tasks", "import", "--trust", "--out", out->path().string(),
                                  "--json"};
    for (const auto& f : problem_files()) {
      args.push_back(f);
    }
    result = kblaster(args);
  }
  static void TearDownTestSuite() {
    out.reset();
    unsetenv("KBLASTER_TRUST_FILE");
    trust.reset();
  }

  static task::contract task(const std::string& folder) {
    return task::load_contract(out->path() / folder / "task.toml");
  }

  static inline std::unique_ptr<temp_dir> out;
  static inline std::unique_ptr<temp_dir> trust;
  static inline process_result result;
};

TEST_F(imported, every_file_gets_a_result_with_its_reason) {
  // One file is not a problem: the import says so and exits 65; the others are written.
  EXPECT_EQ(result.exit_code, exit_code::input) << result.output;
  const auto j = nlohmann::json::parse(read_file(out->path() / "import.json"));
  std::map<std::string, std::pair<std::string, std::string>> by_file;
  for (const auto& r : j) {
    by_file[fs::path(r.at("file").get<std::string>()).filename().string()] = {r.at("status"),
                                                                              r.value("task", "")};
  }
  ASSERT_EQ(by_file.size(), problem_files().size());
  const std::map<std::string, std::pair<std::string, std::string>> expected{
      {"1_ReLU.py", {"flagged", "L1_001"}},
      {"2_SumOverDim.py", {"imported", "L1_002"}},
      {"3_Matmul.py", {"imported", "L1_003"}},
      {"4_Conv2dSquare.py", {"imported", "L1_004"}},
      {"5_MeanSquaredError.py", {"imported", "L1_005"}},
      {"6_SoftmaxRows.py", {"imported", "L1_006"}},
      {"11_NoModel.py", {"failed", ""}},
      {"7_Gemm_Scale_GELU.py", {"imported", "L2_007"}},
      {"8_Conv_BatchNorm_ReLU.py", {"imported", "L2_008"}},
      {"9_SmallMLP.py", {"imported", "L3_009"}},
      {"10_ListInputs.py", {"needs_gpu_evaluation", "L3_010"}},
      {"12_TupleShapeCNN.py", {"imported", "L3_012"}},
      {"13_LayerNormTuple.py", {"imported", "L1_013"}},
      {"14_SoftsignArith.py", {"imported", "L1_014"}},
      {"15_ScaleByNumber.py", {"imported", "L1_015"}},
      {"16_DilatedConv2d.py", {"imported", "L1_016"}},
      {"17_Attention.py", {"imported", "L1_017"}},
  };
  EXPECT_EQ(by_file, expected);
  for (const auto& r : j) {
    if (r.at("status") != "imported") {
      EXPECT_FALSE(r.at("reason").get<std::string>().empty()) << r.dump();
    }
  }
  EXPECT_NE(j.dump().find("no class Model"), std::string::npos);
  EXPECT_NE(j.dump().find("execute the file on the GPU machine"), std::string::npos);
}

// A number among get_inputs() is a param of the contract (kb_args.scalars), in the forward's
// position: A * s takes the tensor, then the float.
TEST_F(imported, a_number_among_the_inputs_is_a_param_in_the_forwards_position) {
  const auto c = task("L1_015_ScaleByNumber");
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].name, "A");
  ASSERT_EQ(c.params.size(), 1u);
  EXPECT_EQ(c.params[0].name, "s");
  EXPECT_DOUBLE_EQ(c.params[0].value, 2.5);
  ASSERT_TRUE(c.module);
  EXPECT_EQ(c.module->forward, (std::vector<std::string>{"A", "s"}));
  // A forward order that leaves out an input, or names something unknown, does not load.
  const fs::path dir = out->path() / "L1_015_ScaleByNumber";
  const std::string toml = read_file(dir / "task.toml");
  for (const auto& [bad, words] : std::vector<std::pair<std::string, std::string>>{
           {"forward = [\"s\"]", "every input once"}, {"forward = [\"A\", \"t\"]", "neither"}}) {
    temp_dir copy("kb-forward");
    fs::copy(dir, copy.path() / "t", fs::copy_options::recursive);
    std::string edited = toml;
    edited.replace(edited.find("forward = [\"A\", \"s\"]"),
                   std::string("forward = [\"A\", \"s\"]").size(), bad);
    write_file_atomic(copy.path() / "t" / "task.toml", edited);
    try {
      task::load_contract(copy.path() / "t" / "task.toml");
      ADD_FAILURE() << bad << " loaded";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST_F(imported, contracts_carry_the_official_shapes_distributions_and_module) {
  const auto mm = task("L1_003_Matmul");
  EXPECT_EQ(mm.kind, task::task_kind::pytorch);
  EXPECT_EQ(mm.suite, "kernelbench");
  EXPECT_EQ(mm.kernelbench, "level1/3_Matmul.py");
  ASSERT_EQ(mm.inputs.size(), 2u);
  EXPECT_EQ(mm.inputs[0].name, "A");
  EXPECT_EQ(mm.inputs[0].shape, (std::vector<std::string>{"M", "K"}));
  EXPECT_EQ(mm.inputs[1].shape, (std::vector<std::string>{"K", "N"}));
  EXPECT_EQ(mm.official().dims,
            (std::map<std::string, int64_t>{{"K", 4096}, {"M", 2048}, {"N", 1984}}));
  std::vector<std::string> labels;
  for (const auto& d : mm.inputs[0].distributions) {
    labels.push_back(d.label);
  }
  EXPECT_EQ(labels.front(), "uniform01"); // KernelBench's torch.rand, timed
  EXPECT_NE(std::find(labels.begin(), labels.end(), "normal"), labels.end());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "heavy_tailed"), labels.end());
  EXPECT_EQ(read_file(mm.module->source), read_file(problems / "level1" / "3_Matmul.py"));
  EXPECT_TRUE(mm.degenerate.empty());
  // Check shapes are small and keep the structure; `tail` makes the free dims odd.
  for (const auto& t : task::concrete_inputs(mm, mm.shape("small"))) {
    EXPECT_LE(t.numel(), 1 << 15);
  }
  for (const auto& t : task::concrete_inputs(mm, mm.shape("tail"))) {
    EXPECT_LE(t.numel(), 1 << 17);
  }
  const auto& tail = mm.shape("tail");
  EXPECT_EQ(tail.dims.at("M") % 2, 1);

  const auto mse = task("L1_005_MeanSquaredError");
  EXPECT_EQ(mse.inputs[0].distributions[0].label, "normal(0,2)"); // torch.randn(...) * 2
  EXPECT_EQ(mse.inputs[1].distributions[0].label, "normal");
  EXPECT_EQ(mse.inputs[0].shape, (std::vector<std::string>{"batch_size", "input_shape_0"}));
  EXPECT_EQ(mse.official().dims.at("input_shape_0"), 4096);
}

TEST_F(imported, a_shape_given_as_a_tuple_constant_becomes_its_dims) {
  // torch.rand(input_shape), input_shape = (batch_size, 3, 32, 32): one dim per element.
  const auto c = task("L3_012_TupleShapeCNN");
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].shape, (std::vector<std::string>{"input_shape_0", "input_shape_1",
                                                         "input_shape_2", "input_shape_3"}));
  const auto& dims = c.official().dims;
  EXPECT_EQ(dims.at("input_shape_0"), 4);
  EXPECT_EQ(dims.at("input_shape_3"), 32);
}

TEST_F(imported, init_args_are_dim_expressions_or_literals) {
  const auto conv = task("L2_008_Conv_BatchNorm_ReLU");
  EXPECT_EQ(conv.module->level, 2);
  EXPECT_EQ(conv.module->init_args,
            nlohmann::json::parse(R"([{"dim":"in_channels"},{"dim":"out_channels"},
                                      {"dim":"kernel_size"},{"value":0.001}])"));
  // The kernel size keeps its value at the check shapes; channels and spatial dims shrink.
  for (const auto* s : conv.shapes_with_role("check")) {
    EXPECT_EQ(s->dims.at("kernel_size"), 3);
    EXPECT_LT(s->dims.at("height"), 64);
  }
  const auto mlp = task("L3_009_SmallMLP");
  EXPECT_EQ(mlp.module->init_args[1], (nlohmann::json{{"value", {400, 800}}}));
  const auto gemm = task("L2_007_Gemm_Scale_GELU");
  EXPECT_EQ(gemm.module->init_args[2], (nlohmann::json{{"value", 0.5}}));
  EXPECT_EQ(gemm.tol.atol, 1e-3); // deeper graphs: a looser float32 tolerance
  const auto sum = task("L1_002_SumOverDim");
  EXPECT_EQ(sum.module->init_args[0], (nlohmann::json{{"dim", "reduce_dim"}}));
  EXPECT_EQ(sum.tol.atol, 1e-4);
  // One operator that is two products around a softmax: the deeper graphs' tolerance.
  EXPECT_EQ(task("L1_017_Attention").tol.atol, 1e-3);
  // A tuple of sizes is a tuple of dims: the check shapes shrink the module with its input.
  const auto ln = task("L1_013_LayerNormTuple");
  EXPECT_EQ(ln.module->init_args,
            nlohmann::json::parse(R"([{"dims":["features","dim1","dim2"]}])"));
  for (const auto* s : ln.shapes_with_role("check")) {
    EXPECT_LT(s->dims.at("dim1"), 256);
    const auto x = task::concrete_inputs(ln, *s)[0];
    EXPECT_EQ(x.shape[1], s->dims.at("features"));
    EXPECT_EQ(x.shape[2], s->dims.at("dim1"));
  }
  // A dilated kernel spans dilation * (kernel - 1) + 1: the spatial extents of the check shapes
  // keep at least the widest span (25 columns), so that the module accepts them; the channels
  // still shrink.
  const auto dilated = task("L1_016_DilatedConv2d");
  ASSERT_FALSE(dilated.shapes_with_role("check").empty());
  for (const auto* s : dilated.shapes_with_role("check")) {
    EXPECT_GE(s->dims.at("height"), 25) << s->name;
    EXPECT_GE(s->dims.at("width"), 25) << s->name;
    EXPECT_LT(s->dims.at("width"), 256) << s->name;
    EXPECT_LT(s->dims.at("in_channels"), 16) << s->name;
  }
}

TEST_F(imported, an_identity_on_the_official_inputs_is_flagged) {
  const auto relu = task("L1_001_ReLU");
  ASSERT_EQ(relu.degenerate.size(), 1u);
  EXPECT_NE(relu.degenerate[0].find("identity"), std::string::npos);
  EXPECT_GE(relu.inputs[0].distributions.size(), 2u);
  // The relu inside the conv/batchnorm graph is not an identity of the inputs.
  EXPECT_TRUE(task("L2_008_Conv_BatchNorm_ReLU").degenerate.empty());
  // The self-test's findings join the contract's through selftest.json.
  const fs::path dir = out->path() / "L1_006_SoftmaxRows";
  write_file_atomic(dir / "selftest.json",
                    R"({"degenerate": ["constant_passes_official: at shape small"]})");
  EXPECT_EQ(task("L1_006_SoftmaxRows").degenerate,
            (std::vector<std::string>{"constant_passes_official: at shape small"}));
  fs::remove(dir / "selftest.json");
}

TEST_F(imported, the_tasks_load_through_the_tasks_flag_and_say_blocked) {
  const auto list =
      kblaster({"--tasks", out->path().string(), "tasks", "list", "--suite", "kernelbench"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("L3_009"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("pytorch"), std::string::npos) << list.output;
  const auto show =
      kblaster({"--tasks", out->path().string(), "tasks", "show", "kernelbench/L1_001"});
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("degenerate"), std::string::npos) << show.output;
  // Without an interpreter, or one without PyTorch: a stable reason, nothing else breaks.
  temp_dir store("kb-import-store");
  for (const auto& [python, reason] :
       {std::pair{std::string("/nonexistent/python3"), std::string("blocked.no_python")},
        std::pair{std::string("false"), std::string("blocked.no_pytorch")}}) {
    const std::map<std::string, std::string> env{{"KBLASTER_PYTHON", python}};
    const auto ev = kblaster({"--tasks", out->path().string(), "--store", store.path().string(),
                              "eval", "--task", "L1_003", "--candidate",
                              (root / "tasks" / "core10" / "019_relu" / "baseline.cu").string()},
                             env);
    EXPECT_EQ(ev.exit_code, exit_code::blocked) << ev.output;
    EXPECT_NE(ev.output.find(reason), std::string::npos) << ev.output;
    const auto check =
        kblaster({"--tasks", out->path().string(), "check", "--task", "L1_003"}, env);
    EXPECT_EQ(check.exit_code, exit_code::blocked) << check.output;
    EXPECT_NE(check.output.find("pytorch task: " + reason), std::string::npos) << check.output;
  }
}

// Where PyTorch is installed, a pytorch task is verified like a native one: `check` describes
// the module (resolved.json: its state and outputs join the contract), compiles the generated
// oracle module and eager baseline, and runs the checker self-test on the CPU with the module
// in float64 as the oracle, embedded in kblaster's process.
TEST_F(imported, with_pytorch_the_module_is_the_oracle_of_the_cpu_check) {
  const std::string python = python_with_torch();
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch here (scripts/install-deps.sh --tests installs it)";
  }
  const std::map<std::string, std::string> env{{"KBLASTER_PYTHON", python}};
  const fs::path conv = out->path() / "L1_004_Conv2dSquare";
  fs::remove(conv / "resolved.json");
  const auto check =
      kblaster({"--tasks", out->path().string(), "check", "--task", "L1_004", "--task", "L1_003",
                "--task", "L1_001", "--task", "L1_013", "--task", "L1_015", "--task", "L1_016"},
               env);
  // Only the GPU stages are missing on a machine without a GPU.
  EXPECT_TRUE(check.exit_code == exit_code::blocked || check.exit_code == exit_code::ok)
      << check.output;
  for (const std::string id : {"L1_004", "L1_003", "L1_001", "L1_013", "L1_015", "L1_016"}) {
    const auto line = check.output.find("\n" + id + " ");
    ASSERT_NE(line, std::string::npos) << check.output;
    const std::string row = check.output.substr(line + 1, check.output.find('\n', line + 1) - line);
    EXPECT_NE(row.find("ok        ok"), std::string::npos) << row;
    EXPECT_NE(row.find("rejects zeros"), std::string::npos) << row;
  }
  // The conv's weight became an input after x, drawn from PyTorch's own initialisation range,
  // and its output is sized per shape.
  const auto c = task("L1_004_Conv2dSquare");
  ASSERT_TRUE(c.resolved);
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[1].name, "state_conv_weight");
  EXPECT_EQ(c.inputs[1].role, "state");
  ASSERT_EQ(c.inputs[1].distributions.size(), 1u);
  EXPECT_LT(c.inputs[1].distributions[0].a, 0.0);
  EXPECT_GT(c.inputs[1].distributions[0].b, 0.0);
  ASSERT_EQ(c.outputs.size(), 1u);
  const auto& official = c.official();
  const auto outs = task::concrete_outputs(c, official);
  EXPECT_EQ(outs[0].shape,
            (std::vector<int64_t>{official.dims.at("batch_size"), official.dims.at("out_channels"),
                                  official.dims.at("height") - 2, official.dims.at("width") - 2}));
  // The roofline reads the state and writes the outputs too.
  EXPECT_NE(c.roof.bytes_expr.find("state_conv_weight_0"), std::string::npos) << c.roof.bytes_expr;
  EXPECT_NE(c.roof.bytes_expr.find("out0_3"), std::string::npos) << c.roof.bytes_expr;
  // A changed model.py makes the resolution stale: the task is unresolved until described again.
  const std::string model = read_file(conv / "model.py");
  write_file_atomic(conv / "model.py", model + "\n# changed\n");
  EXPECT_FALSE(task("L1_004_Conv2dSquare").resolved);
  write_file_atomic(conv / "model.py", model);
  EXPECT_TRUE(task("L1_004_Conv2dSquare").resolved);
}

// A contract with only what the generated modules read (its id and folder), and an interpreter.
struct module_inputs {
  task::contract c;
  availability a;
  module_inputs(const std::string& id, const std::string& libpython) {
    c.id = id;
    c.dir = "/tasks/" + id + "_x";
    a.available = true;
    a.libpython = libpython;
  }
};

TEST(pytorch_modules, the_generated_sources_embed_the_interpreter_and_call_kb_call) {
  module_inputs m("L1_042", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0");
  const task::contract& c = m.c;
  availability& a = m.a;
  a.paths = {"/usr/lib/python3/dist-packages"};
  const std::string oracle = module_source(root, c, a, "oracle");
  const std::string baseline = module_source(root, c, a, "baseline");
  for (const auto* s : {&oracle, &baseline}) {
    EXPECT_NE(s->find("\"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0\""), std::string::npos);
    EXPECT_NE(s->find("/usr/lib/python3/dist-packages"), std::string::npos);
    EXPECT_NE(s->find((root / "scripts").string()), std::string::npos);
    EXPECT_NE(s->find("\"/tasks/L1_042_x\""), std::string::npos);
  }
  EXPECT_NE(oracle.find("kbt_oracle("), std::string::npos);
  EXPECT_NE(oracle.find("\"reference\""), std::string::npos);
  EXPECT_EQ(oracle.find("kb_launch("), std::string::npos);
  EXPECT_NE(baseline.find("kb_launch("), std::string::npos);
  EXPECT_NE(baseline.find("\"eager\""), std::string::npos);
  EXPECT_NE(baseline.find("kb_workspace_bytes("), std::string::npos);
}

// The judge keeps room for what the float64 module allocates during a call (a float64 copy of
// each tensor and two intermediates the size of the largest): the generated oracle says so.
TEST(pytorch_modules, the_oracle_states_the_device_memory_a_call_allocates) {
  // The interpreter is never loaded: the query needs none.
  const module_inputs m("L1_019", "/nonexistent/libpython.so");
  temp_dir dir("kb-oracle-transient");
  write_file_atomic(dir.path() / "oracle.cpp", module_source(root, m.c, m.a, "oracle"));
  process_spec cc;
  cc.argv = {"c++", "-std=c++17", "-shared", "-fPIC", "-I" + (root / "include").string(),
             (dir.path() / "oracle.cpp").string(), "-o", (dir.path() / "oracle.so").string()};
  cc.timeout = std::chrono::seconds(120);
  const auto built = run_process(cc);
  ASSERT_TRUE(built.ok()) << built.output;
  void* h = dlopen((dir.path() / "oracle.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using query_fn = int (*)(const kb_args*, uint64_t*);
  const auto transient = reinterpret_cast<query_fn>(dlsym(h, "kbt_oracle_transient_bytes"));
  ASSERT_NE(transient, nullptr);
  // x [4096, 393216] float32 in, the same out (KernelBench's ReLU): 12.9 GB each in float64.
  const std::vector<kb_tensor> ins{gpu::contiguous_view(nullptr, KB_FLOAT32, {4096, 393216})};
  const std::vector<kb_tensor> outs{gpu::contiguous_view(nullptr, KB_FLOAT32, {4096, 393216})};
  const kb_args args = gpu::make_args(ins, outs, {}, nullptr, 0, nullptr);
  uint64_t bytes = 0;
  ASSERT_EQ(transient(&args, &bytes), 0);
  const uint64_t f64 = uint64_t{4096} * 393216 * 8;
  EXPECT_EQ(bytes, 4 * f64);
  dlclose(h);
}

TEST(kernelbench_import, never_executes_the_file) {
  temp_dir dir("kb-import-noexec");
  const fs::path marker = dir.path() / "executed";
  std::ofstream(dir.path() / "1_Trap.py")
      << "import torch\nimport torch.nn as nn\n"
      << "open(" << nlohmann::json(marker.string()).dump() << ", 'w').write('x')\n"
      << R"(
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.tanh(x)

n = 4096

def get_inputs():
    return [torch.randn(n)]

def get_init_inputs():
    return []
)";
  const auto r = kblaster({"tasks", "import", "--out", (dir.path() / "out").string(),
                           (dir.path() / "1_Trap.py").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(marker)) << "the problem file was executed";
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "KB_001_Trap" / "task.toml")) << r.output;
}

TEST(kernelbench_import, bad_command_lines_are_usage_errors) {
  EXPECT_EQ(kblaster({"tasks", "import", "x.py"}).exit_code, exit_code::usage); // no --out
  temp_dir dir("kb-import-bad");
  const auto missing =
      kblaster({"tasks", "import", "--out", dir.path().string(), "/nonexistent/1_X.py"});
  EXPECT_EQ(missing.exit_code, exit_code::input) << missing.output;
}

// ---- the harness's generator for the PyTorch side ----------------------------------------------

TEST(generator_library, draws_the_harness_values_from_c_and_python) {
  const fs::path lib = fs::path(KBLASTER_BINARY).parent_path() / "lib" / "libkblaster_generator.so";
  ASSERT_TRUE(fs::exists(lib)) << lib;
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using fill_fn = int (*)(void*, int, int64_t, int, double, double, uint64_t);
  using seed_fn = uint64_t (*)(uint64_t, int);
  const auto fill = reinterpret_cast<fill_fn>(dlsym(h, "kb_gen_fill_host"));
  const auto tseed = reinterpret_cast<seed_fn>(dlsym(h, "kb_gen_tensor_seed"));
  ASSERT_TRUE(fill != nullptr && tseed != nullptr);
  EXPECT_EQ(tseed(7, 1), kb::tensor_seed(7, 1));
  for (const kb::distribution d :
       {kb::distribution{KB_DIST_UNIFORM, 0, 1}, kb::distribution{KB_DIST_NORMAL, 0, 2},
        kb::distribution{KB_DIST_STUDENT_T, 3, 1}}) {
    std::vector<float> mine(1000);
    std::vector<float> harness(1000);
    ASSERT_EQ(fill(mine.data(), KB_FLOAT32, 1000, d.kind, d.a, d.b, tseed(7, 1)), 0);
    gpu::cpu_fill_random(harness.data(), KB_FLOAT32, 1000, d, kb::tensor_seed(7, 1));
    EXPECT_EQ(std::memcmp(mine.data(), harness.data(), 4000), 0) << d.kind;
  }
  EXPECT_NE(fill(nullptr, KB_FLOAT32, 10, 0, 0, 1, 1), 0);
  EXPECT_NE(fill(reinterpret_cast<void*>(8), 99, 10, 0, 0, 1, 1), 0);

  // Python's ctypes sees the same bits (scripts/pytorch_oracle.py calls it this way).
  std::vector<float> harness(4);
  gpu::cpu_fill_random(harness.data(), KB_FLOAT32, 4, {KB_DIST_NORMAL, 0, 1},
                       kb::tensor_seed(11, 0));
  process_spec spec;
  spec.argv = {"python3", "-c", R"(
import ctypes, struct, sys
lib = ctypes.CDLL(sys.argv[1])
lib.kb_gen_tensor_seed.restype = ctypes.c_uint64
lib.kb_gen_tensor_seed.argtypes = [ctypes.c_uint64, ctypes.c_int]
lib.kb_gen_fill_host.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                 ctypes.c_double, ctypes.c_double, ctypes.c_uint64]
buf = (ctypes.c_float * 4)()
assert lib.kb_gen_fill_host(buf, 0, 4, 1, 0.0, 1.0, lib.kb_gen_tensor_seed(11, 0)) == 0
print(bytes(buf).hex())
)",
               lib.string()};
  const auto r = run_process(spec);
  ASSERT_TRUE(r.ok()) << r.output;
  std::string hex;
  for (size_t i = 0; i < 16; ++i) {
    hex += fmt::format("{:02x}", reinterpret_cast<const unsigned char*>(harness.data())[i]);
  }
  EXPECT_EQ(r.output, hex + "\n");
  dlclose(h);
}

// ---- the LLM proposer on an imported task ---------------------------------------------------

TEST_F(imported, the_llm_prompt_carries_the_module_shapes_and_contract) {
  using namespace llm::testing;
  const auto c = task("L2_007_Gemm_Scale_GELU");
  search::proposal_context context;
  context.task = &c;
  context.shape = "official";
  context.gpu = "NVIDIA H200";
  const auto material = llm::load_prompt_material(root, c);
  const auto p = llm::build_prompt(context, material, llm::prompt_limits{})[1].content;
  for (const std::string expected :
       {"nn.Linear(in_features, out_features)",  // the module's source
        "Model(in_features, out_features, 0.5)", // how it is built
        "batch_size=128 in_features=1024 out_features=512", "kind = \"pytorch\"",
        "level2/7_Gemm_Scale_GELU.py", "atol 0.001", "KB_ABI_VERSION"}) {
    EXPECT_NE(p.find(expected), std::string::npos) << "the prompt lacks: " << expected << "\n" << p;
  }
  EXPECT_EQ(p.find("KB_TASK_MATH,"), std::string::npos);

  // End to end against the loopback server: the proposal comes back, the request held the prompt.
  fake_chat_server server([](const nlohmann::json&, int, httplib::Response& res) {
    reply_json(res, 200, completion({good_answer("pytorch.fused_gemm", 1.2, "imported")}));
  });
  llm::client client(test_config(server));
  llm::proposer_config config;
  config.project_root = root;
  llm::llm_proposer proposer(client, config);
  const auto r = proposer.propose(context);
  ASSERT_TRUE(r.candidate) << r.failure << ": " << r.message;
  EXPECT_NE(r.candidate->source.find("// imported"), std::string::npos);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].body["messages"][1]["content"].get<std::string>().find("nn.Linear"),
            std::string::npos);
}

} // namespace
} // namespace kb::pytorch
