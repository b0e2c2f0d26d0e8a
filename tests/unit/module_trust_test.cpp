// An imported problem's model.py is code that runs with the user's rights: it runs only once its
// bytes are trusted (`tasks import --trust`, the question on a terminal, `tasks trust`), a
// changed file is refused again, and the processes that run it (pytorch_oracle.py describe, the
// judge that embeds the oracle) get an explicit environment without the model's API key.
#include "common/environment.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"
#include "eval/session.hpp"
#include "pytorch/pytorch.hpp"
#include "search/builtin_proposer.hpp"
#include "search/memory.hpp"
#include "search/optimize.hpp"
#include "search_test_support.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

namespace kb::pytorch {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;
const fs::path problems = root / "tests" / "data" / "kernelbench" / "level1";
const fs::path some_candidate = root / "tasks" / "core10" / "019_relu" / "baseline.cu";

process_result kblaster(std::vector<std::string> args, std::map<std::string, std::string> env) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout = std::chrono::seconds(300);
  spec.env_overrides = std::move(env);
  return run_process(spec);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets an environment variable for one scope and puts the old value back.
class scoped_env {
public:
  scoped_env(std::string name, const std::string& value) : m_name(std::move(name)) {
    if (const char* old = std::getenv(m_name.c_str()); old != nullptr) {
      m_old = old;
    }
    setenv(m_name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    if (m_old) {
      setenv(m_name.c_str(), m_old->c_str(), 1);
    } else {
      unsetenv(m_name.c_str());
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

private:
  std::string m_name;
  std::optional<std::string> m_old;
};

// A shell script standing in for an interpreter or a worker: `body` after the shebang.
fs::path script(const fs::path& dir, const std::string& name, const std::string& body) {
  const fs::path file = dir / name;
  write_file_atomic(file, "#!/bin/sh\n" + body, 0755);
  return file;
}

std::string quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

TEST(module_trust, an_untrusted_module_is_refused_and_a_changed_one_is_refused_again) {
  temp_dir dir("kb-trust");
  const fs::path tasks = dir.path() / "tasks";
  const fs::path trust = dir.path() / "home" / "trusted_modules";
  // No interpreter at all: once the trust gate passes, the next reason is blocked.no_python, so
  // nothing here can run the module whatever the gate does.
  const std::map<std::string, std::string> env{{"KBLASTER_TRUST_FILE", trust.string()},
                                               {"KBLASTER_HOME", (dir.path() / "home").string()},
                                               {"KBLASTER_PYTHON", "/nonexistent/python3"}};
  const auto imp =
      kblaster({"tasks", "import", "--out", tasks.string(), (problems / "3_Matmul.py").string()},
               env);
  ASSERT_EQ(imp.exit_code, 0) << imp.output;
  // Not a terminal, no --trust: nothing is trusted, and the command says how to trust.
  EXPECT_TRUE(contains(imp.output, "not trusted")) << imp.output;
  EXPECT_TRUE(contains(imp.output, "kblaster tasks trust")) << imp.output;
  EXPECT_FALSE(fs::exists(trust));
  const fs::path task_dir = tasks / "L1_003_Matmul";
  const fs::path model = task_dir / "model.py";
  ASSERT_TRUE(fs::is_regular_file(model));

  const auto eval = [&] {
    return kblaster({"--tasks", tasks.string(), "--store", (dir.path() / "store").string(), "eval",
                     "--task", "L1_003", "--candidate", some_candidate.string()},
                    env);
  };
  auto ev = eval();
  EXPECT_EQ(ev.exit_code, exit_code::blocked) << ev.output;
  EXPECT_TRUE(contains(ev.output, "blocked.untrusted_module")) << ev.output;
  EXPECT_TRUE(contains(ev.output, model.string())) << ev.output;
  EXPECT_TRUE(contains(ev.output, "kblaster tasks trust " + model.string())) << ev.output;
  const auto check = kblaster({"--tasks", tasks.string(), "check", "--task", "L1_003"}, env);
  EXPECT_EQ(check.exit_code, exit_code::blocked) << check.output;
  EXPECT_TRUE(contains(check.output, "pytorch task: blocked.untrusted_module")) << check.output;

  // Trusted by its folder: its digest is listed in a file only its owner reads.
  const auto tr = kblaster({"tasks", "trust", task_dir.string()}, env);
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  const std::string digest = sha256_file(model);
  EXPECT_TRUE(contains(tr.output, digest)) << tr.output;
  ASSERT_TRUE(fs::is_regular_file(trust));
  EXPECT_TRUE(contains(read_file(trust), digest));
  struct stat st {};
  ASSERT_EQ(stat(trust.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ev = eval();
  EXPECT_EQ(ev.exit_code, exit_code::blocked) << ev.output;
  EXPECT_TRUE(contains(ev.output, "blocked.no_python")) << ev.output;
  EXPECT_FALSE(contains(ev.output, "untrusted")) << ev.output;

  // Other bytes under the same name are another module: refused until trusted again.
  const std::string text = read_file(model);
  write_file_atomic(model, text + "\nimport os  # changed\n");
  ev = eval();
  EXPECT_EQ(ev.exit_code, exit_code::blocked) << ev.output;
  EXPECT_TRUE(contains(ev.output, "blocked.untrusted_module")) << ev.output;
  ASSERT_EQ(kblaster({"tasks", "trust", model.string()}, env).exit_code, 0);
  ev = eval();
  EXPECT_TRUE(contains(ev.output, "blocked.no_python")) << ev.output;
  // The original bytes stay trusted: trust is by digest, not by name.
  write_file_atomic(model, text);
  ev = eval();
  EXPECT_TRUE(contains(ev.output, "blocked.no_python")) << ev.output;

  // A path that is neither a module nor a task folder with one is an input error.
  EXPECT_EQ(kblaster({"tasks", "trust", (dir.path() / "nothing").string()}, env).exit_code,
            exit_code::input);
}

TEST(module_trust, import_with_trust_records_every_written_module) {
  temp_dir dir("kb-trust-batch");
  const fs::path trust = dir.path() / "trusted_modules";
  const std::map<std::string, std::string> env{{"KBLASTER_TRUST_FILE", trust.string()}};
  const auto imp = kblaster({"tasks", "import", "--trust", "--out", (dir.path() / "t").string(),
                             (problems / "1_ReLU.py").string(),
                             (problems / "2_SumOverDim.py").string()},
                            env);
  ASSERT_EQ(imp.exit_code, 0) << imp.output;
  EXPECT_FALSE(contains(imp.output, "not trusted")) << imp.output;
  const std::string listed = read_file(trust);
  for (const auto* folder : {"L1_001_ReLU", "L1_002_SumOverDim"}) {
    const fs::path model = dir.path() / "t" / folder / "model.py";
    EXPECT_TRUE(contains(listed, sha256_file(model) + "  ")) << listed;
    scoped_env file("KBLASTER_TRUST_FILE", trust.string());
    EXPECT_TRUE(is_trusted(model));
  }
  // Trusting again adds nothing.
  ASSERT_EQ(kblaster({"tasks", "trust", (dir.path() / "t" / "L1_001_ReLU").string()}, env)
                .exit_code,
            0);
  EXPECT_EQ(read_file(trust), listed);
}

// On a terminal the import asks once per file; "y" trusts that file, anything else does not.
// util-linux's `script` gives the command a terminal.
TEST(module_trust, import_asks_once_per_file_on_a_terminal) {
  if (!fs::exists("/usr/bin/script")) {
    GTEST_SKIP() << "no /usr/bin/script (util-linux) to give the import a terminal";
  }
  temp_dir dir("kb-trust-ask");
  const fs::path trust = dir.path() / "trusted_modules";
  const fs::path out = dir.path() / "t";
  const auto ask = [&] {
    process_spec spec;
    spec.argv = {"/usr/bin/script", "-qec",
                 std::string(KBLASTER_BINARY) + " tasks import --out " + out.string() + " " +
                     (problems / "1_ReLU.py").string() + " " +
                     (problems / "2_SumOverDim.py").string(),
                 "/dev/null"};
    spec.env_overrides = {{"KBLASTER_TRUST_FILE", trust.string()}};
    spec.stdin_data = "y\nn\n";
    spec.timeout = std::chrono::seconds(300);
    return run_process(spec);
  };
  auto r = ask();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "L1_001_ReLU/model.py (imported from")) << r.output;
  EXPECT_TRUE(contains(r.output, "Trust it? [y/N]")) << r.output;
  EXPECT_TRUE(contains(r.output, "1 imported model.py file(s) are not trusted")) << r.output;
  {
    scoped_env file("KBLASTER_TRUST_FILE", trust.string());
    EXPECT_TRUE(is_trusted(out / "L1_001_ReLU" / "model.py"));
    EXPECT_FALSE(is_trusted(out / "L1_002_SumOverDim" / "model.py"));
  }
  // Imported again: the trusted file is not asked about, the other one is.
  r = ask();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "L1_001_ReLU/model.py (imported from")) << r.output;
  EXPECT_TRUE(contains(r.output, "L1_002_SumOverDim/model.py (imported from")) << r.output;
}

// 1_ReLU.py imported into `dir` with an empty trust file (KBLASTER_TRUST_FILE, set by the
// caller): its task folder, whose module is not trusted.
fs::path import_untrusted(const temp_dir& dir) {
  import_options opt;
  opt.out = dir.path() / "t";
  const auto results = import_files(root, {problems / "1_ReLU.py"}, opt);
  EXPECT_EQ(results.size(), 1u);
  EXPECT_FALSE(results.empty() || results[0].task_dir.empty());
  return results.empty() ? fs::path() : results[0].task_dir;
}

TEST(module_trust, make_ready_refuses_before_anything_runs) {
  temp_dir dir("kb-trust-ready");
  scoped_env file("KBLASTER_TRUST_FILE", (dir.path() / "trusted_modules").string());
  const fs::path task_dir = import_untrusted(dir);
  ASSERT_FALSE(task_dir.empty());
  auto c = task::load_contract(task_dir / "task.toml");
  const auto ready = make_ready(root, c);
  EXPECT_FALSE(ready.ok);
  EXPECT_EQ(ready.reason, "blocked.untrusted_module");
  EXPECT_TRUE(contains(ready.message, (task_dir / "model.py").string())) << ready.message;
  EXPECT_TRUE(c.oracle.empty()) << "an oracle was generated for an untrusted module";
  EXPECT_FALSE(fs::exists(task_dir / "resolved.json"));
}

// optimize on a task that cannot be made ready ends at once, blocked, with what stopped it in
// the task's result and its message: nothing reaches the GPU.
TEST(module_trust, optimize_says_why_a_task_is_not_ready) {
  temp_dir dir("kb-trust-optimize");
  scoped_env file("KBLASTER_TRUST_FILE", (dir.path() / "trusted_modules").string());
  const fs::path task_dir = import_untrusted(dir);
  ASSERT_FALSE(task_dir.empty());
  const auto c = task::load_contract(task_dir / "task.toml");
  store::store st(dir.path() / "store");
  search::memory mem(st);
  search::builtin_proposer prop(mem);
  search::testing::scripted_gpu gpu;
  std::vector<std::string> said;
  search::optimizer o(st, st.begin_run("optimize", nlohmann::json::object()), mem, prop, {},
                      "gpu", std::ref(gpu), {},
                      [&](const std::string& line) { said.push_back(line); });
  const auto r = o.optimize(c);
  EXPECT_EQ(r.final, search::outcome::blocked);
  EXPECT_EQ(r.reason, "blocked.untrusted_module");
  EXPECT_TRUE(contains(r.detail, (task_dir / "model.py").string())) << r.detail;
  EXPECT_EQ(r.to_json()["detail"], r.detail);
  EXPECT_EQ(gpu.calls, 0);
  bool told = false;
  for (const auto& line : said) {
    told = told || contains(line, "kblaster tasks trust");
  }
  EXPECT_TRUE(told) << "the progress lines do not say how to trust the module";
}

// The variables that hold the model's API key (the default name, the fallback, any other
// credential-looking name) and anything else of the caller's stay out of the module's process.
TEST(module_trust, the_module_environment_is_explicit) {
  scoped_env key("KBLASTER_LLM_API_KEY", "sk-module-test-1");
  scoped_env fallback("OPENAI_API_KEY", "sk-module-test-2");
  scoped_env other("KB_MODULE_TEST_UNLISTED", "unlisted");
  scoped_env python("KBLASTER_PYTHON", "/opt/py/bin/python3");
  scoped_env device("CUDA_VISIBLE_DEVICES", "GPU-1234");
  const auto env = module_environment();
  EXPECT_EQ(env.count("KBLASTER_LLM_API_KEY"), 0u);
  EXPECT_EQ(env.count("OPENAI_API_KEY"), 0u);
  EXPECT_EQ(env.count("KB_MODULE_TEST_UNLISTED"), 0u);
  for (const auto& [name, value] : env) {
    EXPECT_FALSE(contains(value, "sk-module-test")) << name;
  }
  EXPECT_EQ(env.at("KBLASTER_PYTHON"), "/opt/py/bin/python3");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "GPU-1234");
  if (std::getenv("PATH") != nullptr) {
    EXPECT_EQ(env.at("PATH"), std::getenv("PATH"));
  }
}

// The describe step runs the module in a process of its own; an interpreter that records its
// environment (what a model.py reading os.environ would see) sees no API key. The probe too.
TEST(module_trust, the_describe_process_gets_no_api_key) {
  temp_dir dir("kb-trust-env");
  const fs::path seen = dir.path() / "seen";
  fs::create_directories(seen);
  const fs::path python =
      script(dir.path(), "python3",
             "case \"$2\" in\n"
             "probe) env > " + quoted(seen / "probe.env") + "\n"
             "  echo '{\"torch\": \"0\", \"cuda\": \"0\", \"python\": \"3\", "
             "\"libpython\": \"/nonexistent/libpython3.so\", \"sys_path\": []}' ;;\n"
             "describe) env > " + quoted(seen / "describe.env") + "\n"
             "  echo 'no describing here' >&2; exit 1 ;;\n"
             "*) exit 2 ;;\n"
             "esac\n");
  const fs::path trust = dir.path() / "trusted_modules";
  const std::map<std::string, std::string> env{{"KBLASTER_TRUST_FILE", trust.string()},
                                               {"KBLASTER_HOME", (dir.path() / "home").string()},
                                               {"KBLASTER_PYTHON", python.string()},
                                               {"KBLASTER_LLM_API_KEY", "sk-describe-secret-1"},
                                               {"OPENAI_API_KEY", "sk-describe-secret-2"},
                                               {"DATABASE_PASSWORD", "pw-describe-secret-3"}};
  const fs::path tasks = dir.path() / "t";
  ASSERT_EQ(kblaster({"tasks", "import", "--trust", "--out", tasks.string(),
                      (problems / "1_ReLU.py").string()},
                     env)
                .exit_code,
            0);
  const auto ev = kblaster({"--tasks", tasks.string(), "--store", (dir.path() / "store").string(),
                            "eval", "--task", "L1_001", "--candidate", some_candidate.string()},
                           env);
  EXPECT_EQ(ev.exit_code, exit_code::input) << ev.output;
  EXPECT_TRUE(contains(ev.output, "task.pytorch_describe_failed")) << ev.output;
  EXPECT_TRUE(contains(ev.output, "no describing here")) << ev.output;
  for (const auto* name : {"probe.env", "describe.env"}) {
    ASSERT_TRUE(fs::is_regular_file(seen / name)) << name << ": the step did not run";
    const std::string text = read_file(seen / name);
    EXPECT_FALSE(contains(text, "secret")) << name << ":\n" << text;
    EXPECT_TRUE(contains(text, "KBLASTER_PYTHON=" + python.string())) << name << ":\n" << text;
    EXPECT_TRUE(contains(text, "\nPATH=") || text.starts_with("PATH=")) << name << ":\n" << text;
  }
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

// With PyTorch: a trusted model.py that writes os.environ to a file as describe runs it finds
// no API key there, and the interpreter it needs still works.
TEST(module_trust, a_module_run_by_describe_reads_no_api_key_from_its_environment) {
  const std::string python = python_with_torch();
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch here (scripts/install-deps.sh --tests installs it)";
  }
  temp_dir dir("kb-trust-environ");
  const fs::path seen = dir.path() / "environ.json";
  // Written where it is imported, then it stops: describe fails at once, nothing else runs it.
  std::ofstream(dir.path() / "1_Environ.py")
      << "import json, os\nimport torch\nimport torch.nn as nn\n"
      << "json.dump(dict(os.environ), open(" << nlohmann::json(seen.string()).dump()
      << ", 'w'))\nraise SystemExit('environment written')\n"
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
  const std::map<std::string, std::string> env{
      {"KBLASTER_TRUST_FILE", (dir.path() / "trusted_modules").string()},
      {"KBLASTER_HOME", (dir.path() / "home").string()},
      {"KBLASTER_PYTHON", python},
      {"KBLASTER_LLM_API_KEY", "sk-environ-secret-1"},
      {"OPENAI_API_KEY", "sk-environ-secret-2"}};
  const fs::path tasks = dir.path() / "t";
  const auto imp = kblaster({"tasks", "import", "--trust", "--out", tasks.string(),
                             (dir.path() / "1_Environ.py").string()},
                            env);
  ASSERT_EQ(imp.exit_code, 0) << imp.output;
  const auto ev = kblaster({"--tasks", tasks.string(), "--store", (dir.path() / "store").string(),
                            "eval", "--task", "KB_001", "--candidate", some_candidate.string()},
                           env);
  EXPECT_TRUE(contains(ev.output, "task.pytorch_describe_failed")) << ev.output;
  EXPECT_TRUE(contains(ev.output, "environment written")) << ev.output;
  ASSERT_TRUE(fs::is_regular_file(seen)) << "the module did not run: " << ev.output;
  const auto environ = nlohmann::json::parse(read_file(seen));
  EXPECT_FALSE(environ.contains("KBLASTER_LLM_API_KEY")) << environ.dump(1);
  EXPECT_FALSE(environ.contains("OPENAI_API_KEY")) << environ.dump(1);
  EXPECT_FALSE(contains(environ.dump(), "secret")) << environ.dump(1);
  EXPECT_EQ(environ.value("KBLASTER_PYTHON", ""), python);
}

// The judge embeds a pytorch task's oracle (the module in float64): it is started with the same
// explicit environment.
TEST(module_trust, the_judge_gets_no_api_key) {
  temp_dir dir("kb-trust-judge");
  const fs::path seen = dir.path() / "judge.env";
  const fs::path judge = script(dir.path(), "kblaster", "env > " + quoted(seen) + "\n");
  scoped_env exe("KBLASTER_WORKER_EXE", judge.string());
  scoped_env key("KBLASTER_LLM_API_KEY", "sk-judge-secret-1");
  scoped_env fallback("OPENAI_API_KEY", "sk-judge-secret-2");
  eval::detail::worker_launch launch;
  launch.log_path = dir.path() / "judge.log";
  auto started = eval::detail::start_worker(launch);
  ASSERT_TRUE(started.child);
  const auto status = started.child->wait(std::chrono::seconds(30));
  EXPECT_TRUE(status.ok()) << status.describe();
  ASSERT_TRUE(fs::is_regular_file(seen));
  const std::string text = read_file(seen);
  EXPECT_FALSE(contains(text, "secret")) << text;
  // What the judge needs still arrives: its result descriptor's variable and the worker binary.
  EXPECT_TRUE(contains(text, "KBLASTER_RESULT_FD=")) << text;
  EXPECT_TRUE(contains(text, "KBLASTER_WORKER_EXE=" + judge.string())) << text;
}

} // namespace
} // namespace kb::pytorch
