// Tasks whose reference is a PyTorch module (kind = "pytorch"): importing KernelBench problem
// files into such contracts (`kblaster tasks import`), and whether this machine can evaluate
// them. The Python side is shipped in scripts/: kernelbench_parse.py reads a problem file with
// Python's `ast` module, never executing it; pytorch_oracle.py builds the module and computes
// references on the GPU machine (docs/task-format.md describes both interfaces).
#pragma once

#include "common/names.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace kb::pytorch {

namespace fs = std::filesystem;

// ---- what kernelbench_parse.py (or pytorch_oracle.py resolve) found in one problem file ------

struct parsed_input {
  std::string name;
  std::string dtype;              // float32, float16, bfloat16, float64, int64, int32
  std::vector<std::string> shape; // dim expressions
  nlohmann::json distribution;    // a contract distribution ("uniform01", {kind = ...})
  std::optional<double> scalar;   // a number, not a tensor: a [[params]] entry of the contract
};

struct parsed_init_arg {
  std::optional<std::string> dim;               // a dim expression
  std::optional<std::vector<std::string>> dims; // else a tuple of dim expressions
  nlohmann::json value;                         // else a literal (number, bool, string, list)
};

struct parsed_shape {
  std::string name;
  std::map<std::string, int64_t> dims;
};

struct parsed_problem {
  fs::path file;
  std::string name;   // file stem, sanitised
  std::string status; // ok | needs_gpu_evaluation | failed
  std::string reason;
  int level = 0;
  std::string class_name = "Model";
  std::vector<parsed_input> inputs;
  std::vector<parsed_init_arg> init_args;
  std::map<std::string, int64_t> dims; // official
  std::vector<parsed_shape> check_shapes;
  std::vector<std::string> degenerate;
  std::vector<std::string> ops;
  // The forward as a typed op graph (docs/task-format.md, "The op graph"), written to the task
  // folder as graph.json and read by src/graph; null when the reader gave none.
  nlohmann::json graph;
};
// The one JSON mapping of the parser's output.
parsed_problem parsed_problem_from_json(const nlohmann::json& j);

// ---- import ---------------------------------------------------------------------------------

enum class import_status { imported, flagged, needs_gpu_evaluation, failed };
inline constexpr auto import_status_names =
    name_table<import_status>({{import_status::imported, "imported"},
                               {import_status::flagged, "flagged"},
                               {import_status::needs_gpu_evaluation, "needs_gpu_evaluation"},
                               {import_status::failed, "failed"}});
static_assert(import_status_names.well_formed());
std::string to_string(import_status s);

struct import_result {
  fs::path file;
  import_status status = import_status::failed;
  std::string reason; // why flagged, unresolved or failed
  std::string task_id;
  fs::path task_dir;
  std::vector<std::string> degenerate;
  nlohmann::json to_json() const;
};

struct import_options {
  std::string suite = "kernelbench";
  fs::path out;                     // the folder the contracts are written to
  std::optional<fs::path> analysis; // parser output to use instead of running the parser
  std::string python = "python3";
};

// Reads every file (through scripts/kernelbench_parse.py, or `analysis`) and writes one task
// folder per importable problem under opt.out: task.toml (kind = "pytorch"), model.py (the
// file as it is). A problem that cannot be read statically gets a folder with model.py only and
// status needs_gpu_evaluation. Each written contract is loaded back before it counts as
// imported. Writes <out>/import.json (every result) and returns the results.
std::vector<import_result> import_files(const fs::path& root, const std::vector<fs::path>& files,
                                        const import_options& opt);

// The TOML text of a pytorch contract for one parsed problem (exposed for tests).
std::string contract_toml(const parsed_problem& p, const std::string& suite, const std::string& id);
// "L1_019" for level1/19_ReLU.py; the file stem for files without a leading number.
std::string task_id_for(const parsed_problem& p);

// ---- can this machine evaluate pytorch tasks? -----------------------------------------------

struct availability {
  bool available = false;
  std::string reason;          // stable code when not: blocked.no_python, blocked.no_pytorch,
                               // blocked.no_libpython
  std::string detail;          // the probe's words (torch version, CUDA, the import error)
  std::string python;          // the interpreter: $KBLASTER_PYTHON, else python3
  fs::path libpython;          // the shared libpython the generated modules embed
  std::vector<fs::path> paths; // the interpreter's sys.path folders
};
// Runs `$KBLASTER_PYTHON scripts/pytorch_oracle.py probe --json` once per process (it runs no
// task's module).
const availability& probe(const fs::path& root);

// ---- trust: a task's module runs only once its bytes are trusted ---------------------------
// A pytorch task's module (model.py) is Python that runs with the user's rights when a command
// checks, evaluates or optimizes the task (describe, the oracle, the eager baseline). It runs
// only when its SHA-256 is listed in the user's trust file; `kblaster tasks import` asks once
// per file (or takes --trust), `kblaster tasks trust PATH` adds one. The list lives with the
// user, not with the task: whoever wrote a task folder could write a trust record beside it.

// $KBLASTER_TRUST_FILE, else $KBLASTER_HOME/trusted_modules, else
// ~/.local/share/kblaster/trusted_modules (beside the default store).
fs::path trust_file();
// Lower-case hex SHA-256 of the module file's bytes.
std::string module_digest(const fs::path& module);
// Whether the file's current bytes are listed in trust_file().
bool is_trusted(const fs::path& module);
// Lists the file's current bytes as trusted ("<digest>  <absolute path>" appended; the file is
// created with mode 0600, its folder 0700). Returns the digest.
std::string trust_module(const fs::path& module);
// The module file of a pytorch task: c.module->source, else DIR/model.py.
fs::path module_file(const task::contract& c);
inline constexpr const char* untrusted_reason = "blocked.untrusted_module";

// ---- evaluating a pytorch task --------------------------------------------------------------
// The judge verifies a pytorch task as a native one: the oracle module and the baseline are
// generated C++ that embed the interpreter's libpython and call scripts/pytorch_oracle.py's
// kb_call on the harness's tensors, in the judge's process (the reference: the module in float64)
// and in the baseline's runner (eager PyTorch in the task's dtype, on the runner's stream).

struct readiness {
  bool ok = false;
  std::string reason; // when not ok: blocked.* (no PyTorch here; blocked.untrusted_module: the
                      // module's bytes are not trusted) or task.pytorch_describe_failed
  std::string message;
};

// Makes `c` evaluable: refuses a module whose bytes are not trusted (blocked.untrusted_module,
// before anything runs it), describes the module where DIR/resolved.json is missing or stale (runs
// pytorch_oracle.py describe, which executes the task's model.py), loads the contract again with
// its state and outputs, and writes the oracle module's and the baseline's sources under the
// compile cache (c.oracle, c.baseline, c.runtime_paths).
readiness make_ready(const fs::path& root, task::contract& c);

// The generated sources (exposed for tests): role "oracle" (kbt_oracle, the module in float64)
// or "baseline" (kb_launch, eager in the task's dtype).
std::string module_source(const fs::path& root, const task::contract& c, const availability& a,
                          const std::string& role);

} // namespace kb::pytorch
