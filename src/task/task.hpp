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
enum class family { elementwise, normalize, reduce, loss, matmul, pool, scan, argreduce, conv };
std::string to_string(family f);
std::optional<family> family_from_string(const std::string& s);

// Family `pool` (TOML table [pool]): PyTorch's MaxPool1d/2d/3d and AvgPool1d/2d/3d over the last
// `rank` dims of the input `x` (N, C, spatial... contiguous; the dims before the spatial ones are
// independent planes). Per spatial dim (outermost first): kernel, stride (default: the kernel),
// padding (implicit -inf for max, 0 for avg) and dilation (max only).
enum class pool_kind { max, avg };
std::string to_string(pool_kind k);
struct pool_params {
  pool_kind kind = pool_kind::max;
  int rank = 2; // spatial dims, 1-3
  std::vector<int> kernel;
  std::vector<int> stride;
  std::vector<int> padding;
  std::vector<int> dilation;
  bool ceil_mode = false;
  bool count_include_pad = true; // avg: padded positions count in the divisor
  int divisor_override = 0;      // avg: the divisor when > 0
};
// The output extent of one spatial dim (PyTorch's pooling_output_shape): floor or ceil of
// (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, and with ceil_mode the last window must
// start inside the input or its left padding.
int64_t pool_output_size(int64_t in, int kernel, int stride, int padding, int dilation,
                         bool ceil_mode);
// The output shape for input shape `x` (its last p.rank dims pooled; the others kept).
std::vector<int64_t> pool_output_shape(const pool_params& p, const std::vector<int64_t>& x);

// Family `scan` (TOML table [scan]): cumulative sum or product of `x` along `dim`, optionally
// from the end (reverse), exclusive (each output leaves out its own element) and masked (x times
// an input with role "mask" of x's shape, as torch.cumsum(x * mask, dim)). Output: x's shape.
enum class scan_op { sum, prod };
std::string to_string(scan_op o);
struct scan_params {
  scan_op op = scan_op::sum;
  int dim = 0; // an axis of x (negative values in the TOML count from the end)
  bool reverse = false;
  bool exclusive = false;
  bool masked = false;
};

// Family `argreduce` (TOML table [argreduce]): torch.argmax / torch.argmin of `x` over `dim`,
// an int64 output of x's shape without `dim` (or with 1 there under keepdim). Ties give the first
// index; NaN counts as the largest (argmax) and the smallest (argmin) value, as PyTorch.
enum class argreduce_op { argmax, argmin };
std::string to_string(argreduce_op o);
struct argreduce_params {
  argreduce_op op = argreduce_op::argmax;
  int dim = 0; // an axis of x (negative values in the TOML count from the end)
  bool keepdim = false;
};

// The header every pool, scan and argreduce task's math is by default (the families' operation
// is fully described by their parameters): kb_op<A>::epilogue, the identity, applied to each
// output value of pool and scan (a math file of one's own may fuse an elementwise epilogue).
std::string default_family_math_source(family f);

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

// The matmul family's forms, from the contract's [matmul] table (docs/task-format.md, "Matmul
// forms"); include/kblaster/device/families/matmul.cuh defines the same semantics on the device.
enum class matmul_mask { none, lower, upper }; // lower keeps c[m][n] with n <= m (tril), upper n >= m
std::string to_string(matmul_mask m);
std::optional<matmul_mask> matmul_mask_from_string(const std::string& s);

struct matmul_params {
  bool batch = false;   // leading dims of a and/or b are batch dims (one of them may lack them)
  bool trans_a = false; // a holds A transposed: its last two dims are (K, M)
  bool trans_b = false; // b holds B transposed: (N, K)
  double alpha = 1.0;   // c = epilogue(alpha * (A @ B))
  matmul_mask mask = matmul_mask::none;
  bool diag_a = false;  // a is the diagonal of A, a vector of K values (M = K): a row scaling
  bool operator==(const matmul_params&) const = default;
};

// A `conv` task's convolution (the contract's [conv] table; docs/task-format.md): PyTorch's
// Conv1d/2d/3d and ConvTranspose1d/2d/3d hyperparameters. Channel counts and kernel sizes are
// expressions over the shape's dims (or integers); the per-dim lists have `rank` entries.
struct conv_params {
  int rank = 2;            // spatial dims, 1 to 3
  bool transposed = false; // ConvTranspose: the gradient of the forward convolution
  std::string in_channels;
  std::string out_channels;
  std::vector<std::string> kernel;
  std::vector<int> stride;
  std::vector<int> padding;
  std::vector<int> output_padding; // transposed only; each below its stride or its dilation
  std::vector<int> dilation;
  // An expression like the channels ("C" for a depthwise convolution); the kernels read it from
  // the tensors (in_channels / weight.shape[1], transposed out_channels / weight.shape[1]).
  std::string groups = "1";
  bool bias = false; // an input with role "bias" of shape [out_channels]
  // The convolution's input where it is not x as the call gives it: in a lowered chain whose
  // first kernels are passes over the forward's input (a pooling before the convolution), the
  // last pass's shape, as expressions of the task's dims. Empty: x's shape.
  std::vector<std::string> input;
};

// One spatial dim's output size of a convolution (PyTorch's formulas); <= 0 when none exists.
int64_t conv_output_size(int64_t in, int64_t kernel, int stride, int padding, int dilation,
                         int output_padding, bool transposed);

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
  // normalize: the rows are the axes outside reduce_dims (one consecutive span, a batch norm's
  // channels) and the weight and bias have one value per row; reduce_dims is every other axis.
  bool channel_rows = false;
  // normalize: > 0 cuts the first reduced axis (the channels) into that many groups, one row per
  // group of each outer position, with the weight and bias one value per channel (a group norm).
  int groups = 0;
  std::optional<pool_params> pool;           // family pool
  std::optional<scan_params> scan;           // family scan
  std::optional<argreduce_params> argreduce; // family argreduce
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
  std::optional<conv_params> conv; // family conv
  std::vector<param_spec> params;
  std::vector<tensor_spec> inputs;
  std::vector<tensor_spec> outputs;
  std::vector<shape_case> shapes;
  tolerance tol;
  roofline roof;
  std::string digest; // SHA-256 over task.toml, the math header and the baseline
  // family matmul: its form (absent: the plain product, matmul_params{}).
  std::optional<matmul_params> matmul;
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

// The product of a matmul task at one shape as the kernels see it: the batch count and the
// per-batch dims. A batched `a` times an unbatched `b`, with neither transposed nor a mask, folds
// its batches into m (a 3D or 4D tensor times a matrix is one product with more rows).
struct matmul_shape {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};
// std::nullopt, with *why saying what does not fit, when the inputs with roles a and b and the
// first output do not form a product of the task's form.
std::optional<matmul_shape> matmul_shape_of(const contract& c, const shape_case& s,
                                            std::string* why = nullptr);

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

// The axes [begin, end) of x that the row-wise families view as the middle of [outer, extent,
// inner]: the reduced axes (one consecutive span), or with channel_rows the kept ones (every
// axis outside reduce_dims). `rank` is x's; nullopt when reduce_dims is neither (the reduced axes
// not one span, or with channel_rows the kept axes not one span, or an axis past the rank).
struct row_span {
  int begin = 0;
  int end = 0;
};
std::optional<row_span> row_span_of(const std::vector<int>& reduce_dims, bool channel_rows,
                                    size_t rank);
// The contract's, at x's rank ({0, 0} for a family with no reduced axes).
row_span row_span_of(const contract& c);

// `kb_family_config`, the family driver's configuration for this task (reduced axes, which input
// plays which role), as C++ source; empty for families that need none.
std::string family_config_source(const contract& c);

// The mask of the kb_dtype values (1 << value) of the task's inputs and outputs: a candidate is
// compiled with it as KB_TASK_DTYPES, and the device headers' dtype dispatch
// (kblaster/device/core.cuh) then compiles kernels for those dtypes only.
unsigned abi_dtype_mask(const contract& c);

// Source of the task's oracle module: the family's float64 oracles (GPU and CPU) bound to the
// task's math. Compiled once per (task digest, toolkit, architecture) by build/.
std::string oracle_module_source(const contract& c);

} // namespace kb::task
