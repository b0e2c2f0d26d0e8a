// Task authoring: extra task folders (--tasks, $KBLASTER_TASKS), unique ids across them,
// `suite/id` lookup, `check --task`, a task's math that does not compile (exit 65 with the
// compiler's words), per-command --help and option values checked before any work.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace kb::task {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

// A small valid elementwise task (y = 2x) written into `dir`/<folder>.
fs::path write_task(const fs::path& dir, const std::string& folder, const std::string& id,
                    const std::string& suite, const std::string& math = "") {
  const fs::path d = dir / folder;
  fs::create_directories(d);
  std::ofstream(d / "task.toml") << "id = \"" << id << "\"\nname = \"double\"\nsuite = \"" << suite
                                 << R"("
family = "elementwise"
pytorch = "2 * x"
[[inputs]]
name = "x"
dtype = "float32"
shape = ["N"]
distributions = ["uniform01", "normal", "heavy_tailed"]
[[outputs]]
name = "y"
dtype = "float32"
shape = ["N"]
[[shapes]]
role = "official"
dims = { N = 1048576 }
[[shapes]]
role = "check"
dims = { N = 1000 }
[tolerance]
atol = 1e-6
rtol = 1e-6
rel_l2 = 1e-6
[roofline]
bytes = "8*N"
flops = "N"
)";
  std::ofstream(d / "math.cuh")
      << (math.empty() ? "#pragma once\n#include <kblaster/device/core.cuh>\ntemplate <class A> "
                         "struct kb_op {\n  static KB_HD A map(A x) { return A(2) * x; }\n};\n"
                       : math);
  std::ofstream(d / "baseline.cu") << "#include <kblaster/device/families/elementwise.cuh>\n"
                                      "#include KB_TASK_MATH\nKB_ELEMENTWISE_BASELINE(kb_op)\n";
  return d;
}

struct extra_dirs_guard {
  ~extra_dirs_guard() { set_extra_task_dirs({}); }
};

TEST(task_roots, extra_folders_add_to_the_project_tasks) {
  extra_dirs_guard guard;
  temp_dir extra("kb-extra-tasks");
  write_task(extra.path(), "950_double", "950", "mine");
  const size_t before = load_all(root).size();
  set_extra_task_dirs({extra.path()});
  const auto all = load_all(root);
  EXPECT_EQ(all.size(), before + 1);
  EXPECT_EQ(find_task(root, "950").suite, "mine");
  EXPECT_EQ(find_task(root, "019").name, "relu"); // the project's tasks are still there
  EXPECT_EQ(load_suite(root, "mine").size(), 1u);
  EXPECT_THROW(set_extra_task_dirs({extra.path() / "missing"}), input_error);
}

TEST(task_roots, ids_are_unique_across_every_folder) {
  extra_dirs_guard guard;
  temp_dir a("kb-extra-a");
  temp_dir b("kb-extra-b");
  const auto first = write_task(a.path(), "951_double", "951", "one");
  const auto second = write_task(b.path(), "951_again", "951", "two");
  set_extra_task_dirs({a.path(), b.path()});
  try {
    load_all(root);
    FAIL() << "a repeated id loaded";
  } catch (const input_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((fs::weakly_canonical(first) / "task.toml").string()), std::string::npos)
        << what;
    EXPECT_NE(what.find((fs::weakly_canonical(second) / "task.toml").string()), std::string::npos)
        << what;
  }
  // A repeat of a project id is refused too.
  set_extra_task_dirs({});
  temp_dir c("kb-extra-c");
  write_task(c.path(), "019_mine", "019", "mine");
  set_extra_task_dirs({c.path()});
  EXPECT_THROW(load_all(root), input_error);
}

TEST(task_roots, suite_slash_id_finds_the_task) {
  EXPECT_EQ(find_task(root, "core10/023").name, "softmax");
  EXPECT_EQ(find_task(root, "core10/023_softmax").id, "023");
  EXPECT_EQ(find_task(root, "023_softmax").id, "023");
  EXPECT_THROW(find_task(root, "llm/023"), input_error);
  EXPECT_THROW(find_task(root, "nosuch/1"), input_error);
}

TEST(loss_expressions, are_checked_at_load) {
  temp_dir dir("kb-loss-expr");
  const std::string head = R"(id = "970"
name = "l"
suite = "s"
family = "loss"
reduce_dims = [1]
pytorch = "l"
[[inputs]]
name = "p"
role = "x"
dtype = "float32"
shape = ["B", "D"]
distributions = ["normal", "uniform01"]
[[inputs]]
name = "q"
role = "target"
dtype = "float32"
shape = ["B", "D"]
distributions = ["normal", "uniform01"]
[[outputs]]
name = "y"
dtype = "float32"
shape = []
[[shapes]]
role = "official"
dims = { B = 4, D = 4096 }
[[shapes]]
role = "check"
dims = { B = 3, D = 5 }
[tolerance]
atol = 1e-5
rtol = 1e-5
rel_l2 = 1e-5
[roofline]
bytes = "8*B*D"
flops = "B*D"
)";
  const auto error = [&](const std::string& loss) -> std::string {
    std::ofstream(dir.path() / "task.toml") << head << loss;
    try {
      load_contract(dir.path() / "task.toml");
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error("[loss]\nelem = \"x + y\"\n").find("unknown name 'y'"), std::string::npos);
  EXPECT_NE(error("[loss]\nelem = \"(x - t\"\n").find("balanced"), std::string::npos);
  EXPECT_NE(error("[loss]\nelem = \"x; system(1)\"\n").find("';' is not allowed"),
            std::string::npos);
  EXPECT_NE(error("[loss]\nelem = \"x * t\"\nfinalize = \"sum / x\"\n").find("unknown name 'x'"),
            std::string::npos);
  EXPECT_EQ(error("[loss]\nelem = \"max(x * t, 0)\"\nfinalize = \"sum / rows\"\n"), "no error");
  const auto c = load_contract(dir.path() / "task.toml");
  EXPECT_NE(read_file(c.math).find("kb::fn::max(x * t, A(0))"), std::string::npos);
  EXPECT_NE(read_file(c.baseline).find("KB_POINTWISE_LOSS_BASELINE"), std::string::npos);
  EXPECT_NE(oracle_module_source(c).find("KB_POINTWISE_LOSS_ORACLE"), std::string::npos);
  EXPECT_NE(family_config_source(c).find("kb::loss::pointwise_config"), std::string::npos);
}

process_result kblaster(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
  process_spec spec;
  spec.argv = {KBLASTER_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env_overrides = std::move(env);
  spec.timeout = std::chrono::seconds(600);
  return run_process(spec);
}

TEST(cli_authoring, tasks_flag_and_environment_add_folders) {
  temp_dir extra("kb-extra-cli");
  write_task(extra.path(), "952_double", "952", "mine");
  const auto flag = kblaster({"--tasks", extra.path().string(), "tasks", "show", "mine/952"});
  EXPECT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_NE(flag.output.find("task 952 (mine)"), std::string::npos) << flag.output;
  const auto env =
      kblaster({"tasks", "list", "--suite", "mine"}, {{"KBLASTER_TASKS", extra.path().string()}});
  EXPECT_EQ(env.exit_code, 0) << env.output;
  EXPECT_NE(env.output.find("952"), std::string::npos) << env.output;
  const auto missing = kblaster({"--tasks", (extra.path() / "nope").string(), "tasks", "list"});
  EXPECT_EQ(missing.exit_code, exit_code::input) << missing.output;
  EXPECT_NE(missing.output.find("not a folder"), std::string::npos) << missing.output;
}

TEST(cli_authoring, check_task_prints_the_compiler_output_and_exits_65) {
  temp_dir extra("kb-extra-broken");
  write_task(extra.path(), "953_broken", "953", "mine",
             "#pragma once\n#include <kblaster/device/core.cuh>\ntemplate <class A> struct kb_op "
             "{\n  static KB_HD A map(A x) { return x * undeclared_thing; }\n};\n");
  const auto r = kblaster({"--tasks", extra.path().string(), "check", "--task", "953"});
  EXPECT_EQ(r.exit_code, exit_code::input) << r.output;
  EXPECT_NE(r.output.find("undeclared_thing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does not compile"), std::string::npos) << r.output;
}

TEST(cli_authoring, check_task_runs_only_the_named_tasks) {
  temp_dir extra("kb-extra-good");
  write_task(extra.path(), "954_double", "954", "mine");
  const auto r = kblaster({"--tasks", extra.path().string(), "check", "--task", "954"});
  // Without a GPU the GPU stages are blocked (3); the CPU stages passed for the one task.
  EXPECT_TRUE(r.exit_code == exit_code::blocked || r.exit_code == exit_code::ok) << r.output;
  EXPECT_NE(r.output.find("1 task contracts valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("954"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("softmax"), std::string::npos) << r.output;
}

TEST(cli_authoring, every_command_answers_help_with_its_own_text) {
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"eval", "--help"}, "eval --task ID --candidate FILE"},
           {{"optimize", "-h"}, "optimize --task ID | --suite NAME"},
           {{"tasks", "import", "--help"}, "tasks import FILE.py"},
           {{"check", "--help"}, "check [--suite S] [--task ID]"},
           {{"help", "profile"}, "profile --task ID --candidate FILE"},
           {{"--root", root.string(), "strategies", "--help"}, "strategies list"}}) {
    const auto r = kblaster(args);
    EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << args.front() << ": " << r.output;
    EXPECT_EQ(r.output.find("store verify"), std::string::npos)
        << "the whole help for " << args.front();
  }
}

TEST(cli_authoring, option_values_are_checked_before_any_work) {
  temp_dir store("kb-budget-store");
  const auto r = kblaster(
      {"--store", store.path().string(), "optimize", "--task", "019", "--budget", "banana"});
  EXPECT_EQ(r.exit_code, exit_code::usage) << r.output;
  EXPECT_NE(r.output.find("banana"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("preflight"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(store.path() / "store.sqlite")) << "work started before the check";
  const auto gpu = kblaster({"optimize", "--task", "019", "--gpu-budget", "5x"});
  EXPECT_EQ(gpu.exit_code, exit_code::usage) << gpu.output;
}

// docs/task-format.md's walk-through, run as written (all but the GPU step) in a fresh folder.
TEST(walkthrough, runs_as_written) {
  const std::string doc = read_file(root / "docs" / "task-format.md");
  const auto begin = doc.find("<!-- walkthrough -->");
  const auto end = doc.find("<!-- /walkthrough -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string walk = doc.substr(begin, end - begin);
  std::vector<std::string> blocks;
  for (size_t at = walk.find("```sh\n"); at != std::string::npos; at = walk.find("```sh\n", at)) {
    const size_t start = at + 6;
    const size_t stop = walk.find("\n```", start);
    ASSERT_NE(stop, std::string::npos);
    blocks.push_back(walk.substr(start, stop - start + 1));
    at = stop + 4;
  }
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks.back().rfind("# on the GPU machine", 0), 0u) << blocks.back();
  blocks.pop_back();
  temp_dir tasks("kb-walkthrough");
  std::string script;
  for (const auto& b : blocks) {
    script += b;
  }
  process_spec spec;
  spec.argv = {"bash", "-euo", "pipefail", "-c", script};
  spec.cwd = root;
  const char* path = std::getenv("PATH");
  spec.env_overrides = {
      {"TASKS", tasks.path().string()},
      {"PATH", fs::path(KBLASTER_BINARY).parent_path().string() + ":" + (path ? path : "")}};
  spec.timeout = std::chrono::seconds(900);
  const auto r = run_process(spec);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("task 960 (mine): Softsign"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 task contracts valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rejects zeros"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("elementwise.vectorized"), std::string::npos) << r.output;
}

} // namespace
} // namespace kb::task
