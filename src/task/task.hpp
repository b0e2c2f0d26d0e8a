// Task contracts: what to compute, on which shapes and dtypes, how to check it and what the
// roofline floor is. A contract is data (tasks/<suite>/<id>_<name>/task.toml, documented in
// docs/task-format.md); this module parses and validates it, evaluates its shape expressions and
// generates the sources that bind a task's math to its op family.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::task {

namespace fs = std::filesystem;

enum class dtype { float32, float16, bfloat16, float64, int64, int32 };
std::string to_string(dtype d);
std::optional<dtype> dtype_from_string(const std::string& s);
size_t dtype_size(dtype d);
bool is_floating(dtype d);
// The kb_dtype value of include/kblaster/candidate.h.
int abi_dtype(dtype d);

// The op families the search knows. Each names the device functions a task's math file provides
// (include/kblaster/device/families/<family>.cuh documents them).
enum class family { elementwise, normalize, reduce, loss, matmul };
std::string to_string(family f);
std::optional<family> family_from_string(const std::string& s);

// How input values are drawn. The same counter-based generator runs on the CPU and the GPU.
struct distribution {
  enum class kind { uniform, normal, student_t, constant, randint };
  kind k = kind::uniform;
  double a = 0; // uniform: low;  normal: mean; student_t: nu; constant: value; randint: low
  double b =
      1; // uniform: high; normal: std;  student_t: scale;               randint: high (exclusive)
  std::string b_expr; // randint's high may be a shape expression ("C")
  std::string label;  // as written in the contract
};
std::string to_string(const distribution& d);

struct tensor_spec {
  std::string name;
  std::string role; // x, weight, bias, target, a, b, y (family specific; docs/task-format.md)
  dtype type = dtype::float32;
  std::string layout = "contiguous";
  std::vector<std::string> shape;          // expressions over the shape's dims
  std::vector<distribution> distributions; // inputs only; [0] is the official one
};

struct param_spec {
  std::string name;
  double value = 0;
};

struct shape_case {
  std::string name; // "official", "check-1", "t4096-h8192" ...
  std::string role; // official | bench | check
  std::map<std::string, int64_t> dims;
};

struct tolerance {
  double atol = 1e-4;   // times the scale (RMS of the reference output)
  double rtol = 1e-4;   // times |ref|
  double rel_l2 = 1e-4; // ||y - ref|| / ||ref||
  bool deterministic = true;
};

struct roofline {
  std::string bytes_expr; // minimum bytes moved: each input read once, each output written once
  std::string flops_expr;
  // Whether the task's tolerances admit tensor-core math (fp16/bf16/tf32 products): then the
  // FLOP ceiling is the fastest of fp32 FMA and the tensor-core rates. Default: matmul tasks.
  bool tensor_cores = false;
};

// Where a task's reference comes from: the family's float64 oracle over the task's math (native),
// or a PyTorch module evaluated by scripts/pytorch_oracle.py (pytorch, written by
// `kblaster tasks import`; docs/task-format.md).
enum class task_kind { native, pytorch };
std::string to_string(task_kind k);

// The PyTorch side of a `pytorch` task: the module's source (carried in the task folder), its
// class and the arguments it is built with (expressions over the shape's dims, or literals).
struct module_spec {
  fs::path source;                  // absolute path of the module file
  std::string class_name = "Model"; // the nn.Module subclass
  // Positional: {"dim": expression over the shape's dims} or {"value": literal}.
  nlohmann::json init_args = nlohmann::json::array();
  int level = 0; // KernelBench level, when imported from it
  // The forward's positional arguments by name (inputs and params), when a number is among
  // them; empty: the inputs in order.
  std::vector<std::string> forward;
};

struct contract {
  fs::path dir;  // the task's folder
  fs::path file; // its task.toml
  std::string id;
  std::string name;
  std::string suite;
  std::string title;
  task_kind kind = task_kind::native;
  family fam = family::elementwise;  // native and lowered tasks
  std::vector<int> reduce_dims;      // normalize/reduce/loss: the reduced axes of the `x` input
  std::string pytorch;               // the PyTorch expression the task mirrors
  std::string kernelbench;           // the KernelBench problem it mirrors, when it does
  fs::path math;                     // absolute path of the math header (native tasks)
  fs::path baseline;                 // absolute path of the baseline candidate (native tasks)
  std::optional<module_spec> module; // pytorch tasks
  // pytorch tasks: whether DIR/resolved.json (pytorch_oracle.py describe) gave the module's state
  // (inputs after the forward's, role "state") and outputs; `oracle` is the generated source of
  // the oracle module and `runtime_paths` the folders its modules read at run time (the Python
  // installation), both set by pytorch::make_ready.
  bool resolved = false;
  fs::path oracle;
  std::vector<fs::path> runtime_paths;
  // Why the official inputs alone cannot tell a correct kernel from a trivial one (e.g. "relu is
  // the identity on uniform01 inputs"), from the contract's `degenerate` list and the checker
  // self-test's selftest.json in the task folder. Verification then relies on the other
  // distributions, which such a contract must have.
  std::vector<std::string> degenerate;
  std::vector<param_spec> params;
  std::vector<tensor_spec> inputs;
  std::vector<tensor_spec> outputs;
  std::vector<shape_case> shapes;
  tolerance tol;
  roofline roof;
  std::string digest; // SHA-256 over task.toml, the math header and the baseline
  // A pytorch task lowered onto a family (src/graph/lower.hpp): the name of the rule that matched
  // ("elementwise:sigmoid"); empty for tasks that are not lowered. A lowered task's fam,
  // reduce_dims, input roles and math are what a native task.toml of that family would give; its
  // oracle and baseline stay PyTorch's.
  std::string lowering;
  // Why a pytorch task with an op graph was not lowered: one line per unsupported op, naming it
  // and the reason ("nn.Conv2d: no_lowering (a convolution ...)").
  std::vector<std::string> not_lowered;
  // Whether the task has a family (native, or lowered): strategies and family configs apply.
  bool has_family() const { return kind == task_kind::native || !lowering.empty(); }

  const shape_case& official() const;
  const shape_case& shape(const std::string& name) const;
  std::vector<const shape_case*> shapes_with_role(const std::string& role) const;
};

// A contract's figures at one shape.
struct concrete_tensor {
  std::string name;
  dtype type;
  std::vector<int64_t> shape;
  int64_t numel() const;
  uint64_t bytes() const;
};

std::vector<concrete_tensor> concrete_inputs(const contract& c, const shape_case& s);
std::vector<concrete_tensor> concrete_outputs(const contract& c, const shape_case& s);
double roofline_bytes(const contract& c, const shape_case& s);
double roofline_flops(const contract& c, const shape_case& s);

// Evaluates an integer expression (+ - * / parentheses, integers, dim names) over the dims.
int64_t eval_expr(const std::string& expr, const std::map<std::string, int64_t>& dims);

// Loading. Errors name the file, the field and what was expected (kb::input_error).
contract load_contract(const fs::path& task_toml);

// Folders searched for tasks besides <root>/tasks (`kblaster --tasks DIR`, $KBLASTER_TASKS),
// set by the command line before any task is loaded. Each must be an existing folder.
void set_extra_task_dirs(std::vector<fs::path> dirs);
const std::vector<fs::path>& extra_task_dirs();
// <root>/tasks followed by the extra folders.
std::vector<fs::path> task_dirs(const fs::path& root);

// All tasks under the task folders, sorted by suite then id. Ids are unique across all of them:
// a repeated id is an error naming both files.
std::vector<contract> load_all(const fs::path& root);
std::vector<contract> load_suite(const fs::path& root, const std::string& suite);
// By id ("023"), "suite/id" ("core10/023", "core10/023_softmax") or folder name ("023_softmax").
contract find_task(const fs::path& root, const std::string& id);

nlohmann::json to_json(const contract& c);

// The hand-written candidates of a task: <root>/portfolio/<suite>/<id>_*.cu, sorted.
std::vector<fs::path> portfolio_files(const fs::path& root, const contract& c);

// The roofline ceilings the floor and the physical limit are computed against. Measured per
// device by `kblaster calibrate --device` (eval::device_ceilings reads them from the store). The
// default-constructed value is the conservative default used when a device has no calibration:
// ceilings above any current GPU's (so no honest kernel is flagged as faster than the hardware),
// which make floors optimistic; every output that uses it names it as such in `source`.
struct ceilings {
  double bandwidth = 8e12;       // [bytes/s] device-to-device copy, bytes read + written
  double peak_bandwidth = 10e12; // [bytes/s] read-only stream: no kernel moves bytes faster
  double fp32_flops = 150e12;    // [FLOP/s] fp32 FMA (2 FLOP per FMA)
  double tensor_flops = 5e15;    // [FLOP/s] fastest tensor-core rate (fp16, bf16, tf32); 0: none
  // The physical limit's FLOP rates: the measured ones with headroom for what the measuring
  // kernels do not reach (eval::ceilings_from documents the factors).
  double peak_fp32_flops = 150e12; // [FLOP/s]
  double peak_tensor_flops = 5e15; // [FLOP/s]
  bool measured = false;
  std::string source = "conservative default (this device has no calibration: generous "
                       "ceilings no current GPU reaches; run `kblaster calibrate --device`)";
  static ceilings conservative_default();
};
nlohmann::json to_json(const ceilings& ceil);
// The inverse of to_json; throws nlohmann::json's exceptions for a document that is not one.
ceilings ceilings_from_json(const nlohmann::json& j);
// The FLOP rate a task can reach: fp32 FMA, or the fastest tensor-core rate when the task allows
// (`peak`: the physical limit's rates).
double flop_ceiling(const contract& c, const ceilings& ceil, bool peak = false);
double floor_seconds(const contract& c, const shape_case& s, const ceilings& ceil);
// The physical limit: the same figures against the datasheet peaks. A read-mostly kernel can beat
// the copy-bandwidth floor (reads stream faster than a copy); nothing beats this one.
double limit_seconds(const contract& c, const shape_case& s, const ceilings& ceil);

// `kb_family_config`, the family driver's configuration for this task (reduced axes, which input
// plays which role), as C++ source; empty for families that need none.
std::string family_config_source(const contract& c);

// Source of the task's oracle module: the family's float64 oracles (GPU and CPU) bound to the
// task's math. Compiled once per (task digest, toolkit, architecture) by build/.
std::string oracle_module_source(const contract& c);

} // namespace kb::task
