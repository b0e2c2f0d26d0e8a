#include "pytorch/pytorch.hpp"

#include "common/environment.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"
#include "common/text.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

namespace kb::pytorch {

using nlohmann::json;

parsed_problem parsed_problem_from_json(const json& j) {
  try {
    parsed_problem p;
    p.file = j.at("file").get<std::string>();
    p.name = j.value("name", p.file.stem().string());
    p.status = j.at("status").get<std::string>();
    p.reason = j.value("reason", "");
    p.level = j.value("level", 0);
    p.class_name = j.value("class", "Model");
    if (p.status != "ok") {
      return p;
    }
    for (const auto& i : j.at("inputs")) {
      parsed_input in;
      in.name = i.at("name").get<std::string>();
      if (i.contains("scalar")) {
        in.scalar = i.at("scalar").get<double>();
        p.inputs.push_back(std::move(in));
        continue;
      }
      in.dtype = i.at("dtype").get<std::string>();
      in.shape = i.at("shape").get<std::vector<std::string>>();
      in.distribution = i.at("distribution");
      p.inputs.push_back(std::move(in));
    }
    for (const auto& a : j.at("init_args")) {
      parsed_init_arg arg;
      if (a.contains("expr")) {
        arg.dim = a.at("expr").get<std::string>();
      } else if (a.contains("exprs")) {
        arg.dims = a.at("exprs").get<std::vector<std::string>>();
      } else {
        arg.value = a.at("value");
      }
      p.init_args.push_back(std::move(arg));
    }
    p.dims = j.at("dims").get<std::map<std::string, int64_t>>();
    for (const auto& s : j.at("check_shapes")) {
      p.check_shapes.push_back(
          {s.at("name").get<std::string>(), s.at("dims").get<std::map<std::string, int64_t>>()});
    }
    p.degenerate = j.value("degenerate", std::vector<std::string>{});
    p.ops = j.value("ops", std::vector<std::string>{});
    if (j.contains("graph") && j.at("graph").is_object()) {
      p.graph = j.at("graph");
    }
    return p;
  } catch (const json::exception& e) {
    fail_input("problem analysis {}: not the parser's format ({})", j.dump().substr(0, 200),
               e.what());
  }
}

std::string to_string(import_status v) {
  return std::string(import_status_names.name(v));
}

json import_result::to_json() const {
  json j{{"file", file.string()}, {"status", to_string(status)}, {"reason", reason}};
  if (!task_id.empty()) {
    j["task"] = task_id;
  }
  if (!task_dir.empty()) {
    j["dir"] = task_dir.string();
  }
  j["degenerate"] = degenerate;
  return j;
}

namespace {

// TOML basic strings take JSON's escapes.
std::string quote(const std::string& s) {
  return json(s).dump();
}

std::string toml_value(const json& v) {
  if (v.is_string()) {
    return quote(v.get<std::string>());
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      out += (i ? ", " : "") + toml_value(v[i]);
    }
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{ ";
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      out += (first ? "" : ", ") + k + " = " + toml_value(e);
      first = false;
    }
    return out + " }";
  }
  if (v.is_number_float()) {
    std::string s = v.dump();
    if (s.find_first_of(".eE") == std::string::npos) {
      s += ".0";
    }
    return s;
  }
  if (v.is_null()) {
    fail_input("a null value cannot be written to a contract");
  }
  return v.dump();
}

std::string dims_table(const std::map<std::string, int64_t>& dims) {
  std::string out = "{ ";
  bool first = true;
  for (const auto& [k, v] : dims) {
    out += fmt::format("{}{} = {}", first ? "" : ", ", k, v);
    first = false;
  }
  return out + " }";
}

const char* element_size(const std::string& dtype) {
  if (dtype == "float16" || dtype == "bfloat16") {
    return "2";
  }
  if (dtype == "float64" || dtype == "int64") {
    return "8";
  }
  return "4";
}

// The project's adversarial verification distributions, after KernelBench's own.
std::vector<json> distributions_for(const parsed_input& in) {
  std::vector<json> out{in.distribution};
  if (in.dtype == "int64" || in.dtype == "int32") {
    return out;
  }
  for (const json& d : {json("normal"), json("heavy_tailed"),
                        json{{"kind", "uniform"}, {"low", -2.0}, {"high", 2.0}}}) {
    if (d != in.distribution) {
      out.push_back(d);
    }
  }
  return out;
}

} // namespace

std::string task_id_for(const parsed_problem& p) {
  std::smatch m;
  const std::string name = p.name;
  if (std::regex_search(name, m, std::regex("^([0-9]+)_"))) {
    return fmt::format("{}_{:03d}", p.level > 0 ? fmt::format("L{}", p.level) : std::string("KB"),
                       std::stoi(m[1]));
  }
  std::string id = (p.level > 0 ? fmt::format("L{}_", p.level) : std::string()) + name;
  for (auto& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      c = '_';
    }
  }
  return id;
}

std::string contract_toml(const parsed_problem& p, const std::string& suite,
                          const std::string& id) {
  std::ostringstream o;
  const std::string rel = p.level > 0
                              ? fmt::format("level{}/{}", p.level, p.file.filename().string())
                              : p.file.filename().string();
  o << "# Imported by `kblaster tasks import` from " << p.file.filename().string()
    << " (KernelBench format).\n"
    << "# The reference is the PyTorch module in model.py (docs/task-format.md).\n";
  o << "id = " << quote(id) << "\nname = " << quote(p.name) << "\nsuite = " << quote(suite)
    << "\ntitle = " << quote("KernelBench " + rel)
    << "\nkind = \"pytorch\"\nkernelbench = " << quote(rel) << "\n";
  if (!p.degenerate.empty()) {
    o << "degenerate = " << toml_value(p.degenerate) << "\n";
  }
  o << "\n[module]\nsource = \"model.py\"\nclass = " << quote(p.class_name)
    << "\nlevel = " << p.level << "\ninit_args = [";
  for (size_t i = 0; i < p.init_args.size(); ++i) {
    const auto& a = p.init_args[i];
    o << (i ? ", " : "")
      << (a.dim    ? "{ dim = " + quote(*a.dim) + " }"
          : a.dims ? "{ dims = " + toml_value(*a.dims) + " }"
                   : "{ value = " + toml_value(a.value) + " }");
  }
  o << "]\n";
  // A number among the forward's arguments is a param (kb_args.scalars); `forward` gives the
  // forward's argument order, inputs and params by name.
  if (std::any_of(p.inputs.begin(), p.inputs.end(), [](const auto& in) { return in.scalar; })) {
    std::vector<std::string> order;
    for (const auto& in : p.inputs) {
      order.push_back(in.name);
    }
    o << "forward = " << toml_value(order) << "\n";
    for (const auto& in : p.inputs) {
      if (in.scalar) {
        o << "\n[[params]]\nname = " << quote(in.name) << "\nvalue = " << toml_value(*in.scalar)
          << "\n";
      }
    }
  }
  std::vector<std::string> bytes;
  for (const auto& in : p.inputs) {
    if (in.scalar) {
      continue;
    }
    o << "\n[[inputs]]\nname = " << quote(in.name) << "\nrole = " << quote(in.name)
      << "\ndtype = " << quote(in.dtype) << "\nshape = " << toml_value(in.shape)
      << "\ndistributions = " << toml_value(distributions_for(in)) << "\n";
    std::string b = element_size(in.dtype);
    for (const auto& e : in.shape) {
      b += "*" + e;
    }
    bytes.push_back(b);
  }
  o << "\n[[shapes]]\nrole = \"official\"\ndims = " << dims_table(p.dims) << "\n";
  for (const auto& s : p.check_shapes) {
    o << "\n[[shapes]]\nrole = \"check\"\nname = " << quote(s.name)
      << "\ndims = " << dims_table(s.dims) << "\n";
  }
  // Level 1 is one operator; deeper graphs accumulate more rounding in float32, and so does an
  // operator that is itself a chain of reductions: attention, two products around a softmax,
  // whose eager float32 falls outside 1e-4 of the float64 module on heavy-tailed inputs.
  const bool composite =
      std::find(p.ops.begin(), p.ops.end(), "scaled_dot_product_attention") != p.ops.end();
  const double tol = p.level >= 2 || composite ? 1e-3 : 1e-4;
  o << "\n[tolerance]\natol = " << tol << "\nrtol = " << tol << "\nrel_l2 = " << tol
    << "\ndeterministic = true\n";
  std::string all_bytes;
  for (const auto& b : bytes) {
    all_bytes += (all_bytes.empty() ? "" : " + ") + b;
  }
  o << "\n# A lower bound known without running the module: every input read once.\n"
    << "[roofline]\nbytes = " << quote(all_bytes.empty() ? "0" : all_bytes) << "\nflops = \"0\"\n";
  return o.str();
}

std::vector<import_result> import_files(const fs::path& root, const std::vector<fs::path>& files,
                                        const import_options& opt) {
  if (opt.out.empty()) {
    fail_input("tasks import: --out DIR is required (the folder the contracts are written to)");
  }
  json analysis;
  if (opt.analysis) {
    try {
      analysis = json::parse(read_file(*opt.analysis));
    } catch (const json::exception& e) {
      fail_input("{}: not JSON ({})", opt.analysis->string(), e.what());
    }
  } else {
    if (files.empty()) {
      fail_input("tasks import: give at least one KernelBench problem file");
    }
    for (const auto& f : files) {
      if (!fs::is_regular_file(f)) {
        fail_input("tasks import: {} is not a file", f.string());
      }
    }
    fs::create_directories(opt.out);
    const fs::path result = opt.out / ".parse.json";
    process_spec spec;
    spec.argv = {opt.python, (root / "scripts" / "kernelbench_parse.py").string(), "--out",
                 result.string()};
    for (const auto& f : files) {
      spec.argv.push_back(fs::absolute(f).string());
    }
    spec.timeout = std::chrono::seconds(300);
    const auto r = run_process(spec);
    if (!r.ok()) {
      fail("scripts/kernelbench_parse.py failed ({}):\n{}", r.describe(), r.output);
    }
    analysis = json::parse(read_file(result));
    fs::remove(result);
  }
  if (!analysis.is_array()) {
    fail_input("problem analysis: expected a JSON array of problems");
  }
  fs::create_directories(opt.out);
  std::vector<import_result> out;
  std::set<std::string> ids;
  for (const auto& j : analysis) {
    const parsed_problem p = parsed_problem_from_json(j);
    import_result r;
    r.file = p.file;
    r.reason = p.reason;
    if (p.status == "failed" || !fs::is_regular_file(p.file)) {
      r.status = import_status::failed;
      if (r.reason.empty()) {
        r.reason = "cannot read " + p.file.string();
      }
      out.push_back(r);
      continue;
    }
    r.task_id = task_id_for(p);
    if (!ids.insert(r.task_id).second) {
      r.status = import_status::failed;
      r.reason = "task id " + r.task_id + " given to two files of this import";
      out.push_back(r);
      continue;
    }
    r.task_dir = opt.out / (r.task_id + "_" + p.name.substr(p.name.find('_') + 1));
    fs::create_directories(r.task_dir);
    write_file_atomic(r.task_dir / "model.py", read_file(p.file));
    if (p.status == "needs_gpu_evaluation") {
      r.status = import_status::needs_gpu_evaluation;
      out.push_back(r);
      continue;
    }
    if (p.status != "ok") {
      r.status = import_status::failed;
      r.reason = "unknown parser status " + p.status;
      out.push_back(r);
      continue;
    }
    write_file_atomic(r.task_dir / "task.toml", contract_toml(p, opt.suite, r.task_id));
    // The forward's op graph, for the lowering (src/graph); a stale one is removed.
    if (p.graph.is_object()) {
      write_file_atomic(r.task_dir / "graph.json", p.graph.dump(1) + "\n");
    } else {
      fs::remove(r.task_dir / "graph.json");
    }
    try {
      const auto c = task::load_contract(r.task_dir / "task.toml");
      r.degenerate = c.degenerate;
      r.status = c.degenerate.empty() ? import_status::imported : import_status::flagged;
      if (!c.degenerate.empty()) {
        r.reason = c.degenerate.front();
      }
    } catch (const input_error& e) {
      fs::remove(r.task_dir / "task.toml");
      r.status = import_status::failed;
      r.reason = std::string("the contract written does not load: ") + e.what();
    }
    out.push_back(r);
  }
  json report = json::array();
  for (const auto& r : out) {
    report.push_back(r.to_json());
  }
  write_file_atomic(opt.out / "import.json", report.dump(2) + "\n");
  return out;
}

fs::path trust_file() {
  if (const char* env = std::getenv("KBLASTER_TRUST_FILE"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* env = std::getenv("KBLASTER_HOME"); env != nullptr && *env != '\0') {
    return fs::path(env) / "trusted_modules";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    fail_input("cannot place the trust file: HOME is not set; set KBLASTER_TRUST_FILE");
  }
  return fs::path(home) / ".local" / "share" / "kblaster" / "trusted_modules";
}

std::string module_digest(const fs::path& module) {
  if (!fs::is_regular_file(module)) {
    fail_input("{}: no such module file", module.string());
  }
  return sha256_file(module);
}

namespace {

// The digests listed in the trust file: the first word of each line; '#' starts a comment.
std::set<std::string> trusted_digests() {
  std::set<std::string> out;
  const fs::path file = trust_file();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return out;
  }
  std::istringstream in(read_file(file));
  std::string line;
  while (std::getline(in, line)) {
    const auto begin = line.find_first_not_of(" \t");
    if (begin == std::string::npos || line[begin] == '#') {
      continue;
    }
    const auto end = line.find_first_of(" \t", begin);
    out.insert(line.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
  }
  return out;
}

} // namespace

bool is_trusted(const fs::path& module) {
  std::error_code ec;
  if (!fs::is_regular_file(module, ec)) {
    return false;
  }
  return trusted_digests().count(module_digest(module)) != 0;
}

std::string trust_module(const fs::path& module) {
  const std::string digest = module_digest(module);
  if (trusted_digests().count(digest) != 0) {
    return digest;
  }
  const fs::path file = trust_file();
  if (file.has_parent_path() && !fs::is_directory(file.parent_path())) {
    fs::create_directories(file.parent_path());
    fs::permissions(file.parent_path(), fs::perms::owner_all, fs::perm_options::replace);
  }
  std::string text;
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    text = read_file(file);
    if (!text.empty() && text.back() != '\n') {
      text += '\n';
    }
  } else {
    text = "# SHA-256 of PyTorch modules trusted to run (kblaster tasks import / tasks trust)\n";
  }
  text += digest + "  " + fs::absolute(module).lexically_normal().string() + "\n";
  write_file_atomic(file, text, 0600);
  return digest;
}

fs::path module_file(const task::contract& c) {
  if (c.module && !c.module->source.empty()) {
    return c.module->source.is_absolute() ? c.module->source : c.dir / c.module->source;
  }
  return c.dir / "model.py";
}

const availability& probe(const fs::path& root) {
  static std::once_flag once;
  static availability a;
  std::call_once(once, [&] {
    const char* py = std::getenv("KBLASTER_PYTHON");
    a.python = py != nullptr && *py != '\0' ? py : "python3";
    process_spec spec;
    spec.argv = {a.python, (root / "scripts" / "pytorch_oracle.py").string(), "probe", "--json"};
    spec.env = module_environment(); // as describe and the judge will see the interpreter
    spec.timeout = std::chrono::seconds(120);
    const auto r = run_process(spec);
    if (r.spawn_failed) {
      a.reason = "blocked.no_python";
      a.detail = a.python + " cannot be started";
      return;
    }
    std::string last = r.output;
    while (!last.empty() && last.back() == '\n') {
      last.pop_back();
    }
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    if (!r.ok()) {
      a.reason = "blocked.no_pytorch";
      a.detail = last.empty() ? r.describe() : last;
      return;
    }
    try {
      const auto j = json::parse(last);
      a.detail = fmt::format("torch {} cuda {} (Python {})", j.at("torch").get<std::string>(),
                             j.at("cuda").get<std::string>(), j.value("python", "?"));
      a.libpython = j.value("libpython", std::string());
      for (const auto& p : j.value("sys_path", json::array())) {
        a.paths.emplace_back(p.get<std::string>());
      }
    } catch (const json::exception& e) {
      a.reason = "blocked.no_pytorch";
      a.detail = "the probe printed no description: " + last;
      return;
    }
    if (a.libpython.empty()) {
      a.reason = "blocked.no_libpython";
      a.detail += "; this Python has no shared libpython to embed (install the libpython3.X "
                  "package of its version, or set KBLASTER_PYTHON to one that has it)";
      return;
    }
    a.available = true;
  });
  return a;
}

namespace {

std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\{:03o}", u);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The end of a process's output as printable ASCII (a model file may print anything).
std::string py_string(const std::string& s) {
  return json(s).dump(); // a JSON string is a valid Python string literal
}

} // namespace

std::string module_source(const fs::path& root, const task::contract& c, const availability& a,
                          const std::string& role) {
  const bool oracle = role == "oracle";
  std::string path_setup = "import sys; sys.path[:0] = [";
  for (const fs::path& p : std::vector<fs::path>{root / "scripts"}) {
    path_setup += py_string(p.string()) + ", ";
  }
  for (const auto& p : a.paths) {
    path_setup += py_string(p.string()) + ", ";
  }
  path_setup += "]";
  const std::string entry =
      oracle ? "extern \"C\" KB_EXPORT int kbt_oracle(const kb_args* a, int on_device) {\n"
               "  return kb_pytorch_call(a, on_device, \"reference\");\n}\n"
               "extern \"C\" KB_EXPORT int kbt_oracle_workspace(const kb_args*, uint64_t* bytes) "
               "{\n  *bytes = 0;\n  return 0;\n}\n"
               "// The device memory one float64 call allocates itself: a float64 copy of every\n"
               "// input and output, and two intermediates the size of the largest tensor.\n"
               "extern \"C\" KB_EXPORT int kbt_oracle_transient_bytes(const kb_args* a, "
               "uint64_t* bytes) {\n"
               "  uint64_t all = 0, largest = 0;\n"
               "  for (int k = 0; k < a->num_inputs + a->num_outputs; ++k) {\n"
               "    const kb_tensor* t = k < a->num_inputs ? &a->inputs[k] : "
               "&a->outputs[k - a->num_inputs];\n"
               "    uint64_t n = 8;\n"
               "    for (int d = 0; d < t->ndim; ++d) n *= (uint64_t)t->shape[d];\n"
               "    all += n;\n"
               "    if (n > largest) largest = n;\n"
               "  }\n"
               "  *bytes = all + 2 * largest;\n"
               "  return 0;\n}\n"
             : "// The first query of a shape builds the module and runs it once, outside any "
               "capture and timed window.\n"
               "extern \"C\" KB_EXPORT int kb_workspace_bytes(const kb_args* a, uint64_t* bytes) "
               "{\n  *bytes = 0;\n  return kb_pytorch_call(a, 1, \"warmup\");\n}\n"
               "extern \"C\" KB_EXPORT int kb_launch(const kb_args* a) {\n"
               "  return kb_pytorch_call(a, 1, \"eager\");\n}\n"
               "extern \"C\" KB_EXPORT const char* kb_candidate_info(void) {\n"
               "  return \"eager PyTorch (the task's module in its dtype)\";\n}\n";
  return fmt::format(
      R"(// Generated by kblaster: the {role} of pytorch task {id} ({what}).
// It embeds {lib} and calls scripts/pytorch_oracle.py's kb_call on the harness's tensors.
#include <kblaster/candidate.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include <mutex>

namespace {{

struct python {{
  bool ok = false;
  void* fn = nullptr;
  int (*gil_ensure)() = nullptr;
  void (*gil_release)(int) = nullptr;
  void* (*call)(void*, const char*, ...) = nullptr;
  long (*as_long)(void*) = nullptr;
  void (*decref)(void*) = nullptr;
  void (*print_error)() = nullptr;
}};

template <class F> bool bind(void* h, const char* name, F& f) {{
  f = reinterpret_cast<F>(dlsym(h, name));
  if (f == nullptr) {{
    fprintf(stderr, "kblaster pytorch module: %s lacks %s\n", {lib}, name);
  }}
  return f != nullptr;
}}

python& interpreter() {{
  static python p;
  static std::once_flag once;
  std::call_once(once, [] {{
    void* h = dlopen({lib}, RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) {{
      fprintf(stderr, "kblaster pytorch module: cannot load %s: %s\n", {lib}, dlerror());
      return;
    }}
    int (*is_initialized)() = nullptr;
    void (*initialize)(int) = nullptr;
    int (*run)(const char*) = nullptr;
    void* (*import)(const char*) = nullptr;
    void* (*attr)(void*, const char*) = nullptr;
    void* (*save_thread)() = nullptr;
    if (!bind(h, "Py_IsInitialized", is_initialized) || !bind(h, "Py_InitializeEx", initialize) ||
        !bind(h, "PyRun_SimpleString", run) || !bind(h, "PyImport_ImportModule", import) ||
        !bind(h, "PyObject_GetAttrString", attr) || !bind(h, "PyEval_SaveThread", save_thread) ||
        !bind(h, "PyGILState_Ensure", p.gil_ensure) ||
        !bind(h, "PyGILState_Release", p.gil_release) ||
        !bind(h, "PyObject_CallFunction", p.call) || !bind(h, "PyLong_AsLong", p.as_long) ||
        !bind(h, "Py_DecRef", p.decref) || !bind(h, "PyErr_Print", p.print_error)) {{
      return;
    }}
    const bool fresh = is_initialized() == 0;
    int state = 0;
    if (fresh) {{
      initialize(0);
    }} else {{
      state = p.gil_ensure();
    }}
    if (run({setup}) == 0) {{
      void* m = import("pytorch_oracle");
      p.fn = m != nullptr ? attr(m, "kb_call") : nullptr;
      if (p.fn == nullptr) {{
        p.print_error();
      }}
    }}
    if (fresh) {{
      save_thread();
    }} else {{
      p.gil_release(state);
    }}
    p.ok = p.fn != nullptr;
  }});
  return p;
}}

int kb_pytorch_call(const kb_args* a, int on_device, const char* mode) {{
  python& p = interpreter();
  if (!p.ok) {{
    return 90;
  }}
  const int state = p.gil_ensure();
  void* r = p.call(p.fn, "ssKi", {task}, mode,
                   static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(a)), on_device);
  long rc = -1;
  if (r == nullptr) {{
    p.print_error();
  }} else {{
    rc = p.as_long(r);
    p.decref(r);
  }}
  p.gil_release(state);
  fflush(stderr);
  // 92: the device ran out of memory in the call (the judge's out_of_device_memory); 91: any
  // other failure, its traceback on stderr.
  return rc == 0 ? 0 : (rc == 2 ? 92 : 91);
}}

}} // namespace

{entry})",
      fmt::arg("role", oracle ? "oracle module" : "baseline"), fmt::arg("id", c.id),
      fmt::arg("what", oracle ? "the module in float64" : "eager PyTorch in the task's dtype"),
      fmt::arg("lib", c_string(a.libpython.string())), fmt::arg("setup", c_string(path_setup)),
      fmt::arg("task", c_string(c.dir.string())), fmt::arg("entry", entry));
}

readiness make_ready(const fs::path& root, task::contract& c) {
  readiness r;
  if (c.kind != task::task_kind::pytorch) {
    r.ok = true;
    return r;
  }
  // Nothing runs the module before its bytes are trusted: not describe, not the oracle or the
  // baseline generated below.
  const fs::path module = module_file(c);
  if (!is_trusted(module)) {
    r.reason = untrusted_reason;
    r.message = fmt::format(
        "{} is not trusted to run: a task's module is Python that runs with your rights. Read it, "
        "then trust it with `kblaster tasks trust {}` (trusted digests are kept in {}; a changed "
        "file must be trusted again)",
        module.string(), module.string(), trust_file().string());
    return r;
  }
  const auto& a = probe(root);
  if (!a.available) {
    r.reason = a.reason;
    r.message = a.detail;
    return r;
  }
  if (!c.resolved) {
    process_spec spec;
    spec.argv = {a.python, (root / "scripts" / "pytorch_oracle.py").string(), "describe", "--task",
                 c.dir.string()};
    // An explicit environment: the model's API key and other credentials stay in this process.
    spec.env = module_environment();
    spec.timeout = std::chrono::minutes(10);
    const auto out = run_process(spec);
    if (!out.ok()) {
      r.reason = "task.pytorch_describe_failed";
      r.message = fmt::format("running the module to find its outputs and state failed ({}):\n{}",
                              out.describe(), printable_tail(out.output, 4000));
      return r;
    }
    c = task::load_contract(c.file);
    if (!c.resolved) {
      r.reason = "task.pytorch_describe_failed";
      r.message = "pytorch_oracle.py describe wrote no resolution of this task.toml and model.py";
      return r;
    }
  }
  const std::string oracle = module_source(root, c, a, "oracle");
  const std::string baseline = module_source(root, c, a, "baseline");
  const fs::path gen =
      default_cache_dir() / "generated" / sha256_builder().field(oracle).field(baseline).hex();
  fs::create_directories(gen);
  c.oracle = gen / ("oracle_" + c.id + ".cu");
  c.baseline = gen / "baseline.cu";
  write_file_if_changed(c.oracle, oracle);
  write_file_if_changed(c.baseline, baseline);
  c.runtime_paths = {root / "scripts", a.libpython.parent_path()};
  for (const auto& p : a.paths) {
    c.runtime_paths.push_back(p);
  }
  r.ok = true;
  return r;
}

} // namespace kb::pytorch
