// The modules of src/ depend on each other one way: the graph of `#include "module/..."` lines
// between folders has no cycle, and the library's modules never include the CLI. A module's
// detail/ folder is its own: no other module (and no header of include/) includes from it (what
// another module needs belongs in the owner's public header). stats/ (the gate's statistics)
// needs nothing but common/; gpu/ (the judge and the runner) sits below eval/, which drives it.
// scripts/include-graph.py draws the graph (docs/include-graph.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

using graph = std::map<std::string, std::set<std::string>>;

graph module_includes(const fs::path& src) {
  graph g;
  const std::regex include(R"re(^\s*#\s*include\s+"([a-z_]+)/)re");
  for (const auto& dir : fs::directory_iterator(src)) {
    if (!dir.is_directory()) {
      continue;
    }
    const std::string module = dir.path().filename().string();
    g[module];
    for (const auto& f : fs::recursive_directory_iterator(dir.path())) {
      if (!f.is_regular_file()) {
        continue;
      }
      std::ifstream in(f.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line)) {
        if (std::regex_search(line, m, include) && m[1] != module &&
            fs::is_directory(src / m[1].str())) {
          g[module].insert(m[1]);
        }
      }
    }
  }
  return g;
}

// The path of another module's detail/ header that `line`, in a file of `module`, includes
// (quoted or in angle brackets).
std::optional<std::string> foreign_detail(const std::string& module, const std::string& line) {
  static const std::regex include(
      R"re(^\s*#\s*include\s+["<](([a-z_]+)/([^">]*/)?detail/[^">]*)[">])re");
  std::smatch m;
  if (std::regex_search(line, m, include) && m[2] != module) {
    return m[1].str();
  }
  return std::nullopt;
}

// Every include of another module's detail/ under `root` (src/ or include/, whose folders are
// the modules), as "file -> header".
std::vector<std::string> foreign_detail_includes(const fs::path& root) {
  std::vector<std::string> found;
  for (const auto& dir : fs::directory_iterator(root)) {
    if (!dir.is_directory()) {
      continue;
    }
    const std::string module = dir.path().filename().string();
    for (const auto& f : fs::recursive_directory_iterator(dir.path())) {
      if (!f.is_regular_file()) {
        continue;
      }
      std::ifstream in(f.path());
      std::string line;
      while (std::getline(in, line)) {
        if (auto header = foreign_detail(module, line)) {
          found.push_back(fs::relative(f.path(), root).generic_string() + " -> " + *header);
        }
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// A cycle through the graph as "a -> b -> a", or "" when there is none.
std::string find_cycle(const graph& g) {
  std::map<std::string, int> state; // 0 new, 1 on the path, 2 done
  std::vector<std::string> path;
  std::string found;
  std::function<bool(const std::string&)> visit = [&](const std::string& n) {
    state[n] = 1;
    path.push_back(n);
    for (const auto& next : g.at(n)) {
      if (state[next] == 1) {
        for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) {
          found += *it + " -> ";
        }
        found += next;
        return true;
      }
      if (state[next] == 0 && g.count(next) != 0 && visit(next)) {
        return true;
      }
    }
    path.pop_back();
    state[n] = 2;
    return false;
  };
  for (const auto& [n, _] : g) {
    if (state[n] == 0 && visit(n)) {
      return found;
    }
  }
  return "";
}

// A path of includes from `from` to `to` as "a -> b -> c", or "" when `to` is out of reach.
std::string find_path(const graph& g, const std::string& from, const std::string& to) {
  std::map<std::string, std::string> came_from{{from, ""}};
  std::vector<std::string> frontier{from};
  while (!frontier.empty()) {
    std::vector<std::string> next;
    for (const auto& n : frontier) {
      if (n == to) {
        std::string path = n;
        for (std::string at = came_from.at(n); !at.empty(); at = came_from.at(at)) {
          path = at + " -> " + path;
        }
        return path;
      }
      if (g.count(n) == 0) {
        continue;
      }
      for (const auto& m : g.at(n)) {
        if (came_from.emplace(m, n).second) {
          next.push_back(m);
        }
      }
    }
    frontier = std::move(next);
  }
  return "";
}

TEST(Architecture, TheCycleFinderSeesACycle) {
  const graph acyclic{{"a", {"b"}}, {"b", {"c"}}, {"c", {}}};
  EXPECT_EQ(find_cycle(acyclic), "");
  const graph cyclic{{"a", {"b"}}, {"b", {"c"}}, {"c", {"a"}}};
  EXPECT_EQ(find_cycle(cyclic), "a -> b -> c -> a");
}

TEST(Architecture, ModulesIncludeEachOtherOneWay) {
  const auto g = module_includes(fs::path(KBLASTER_SOURCE_DIR) / "src");
  ASSERT_GE(g.size(), 10u);
  EXPECT_EQ(find_cycle(g), "") << "an include cycle between modules";
  for (const auto& [module, deps] : g) {
    if (module != "cli") {
      EXPECT_EQ(deps.count("cli"), 0u) << module << " includes the CLI";
    }
  }
}

TEST(Architecture, ThePathFinderSeesAReach) {
  const graph g{{"a", {"b"}}, {"b", {"c"}}, {"c", {}}, {"d", {"a"}}};
  EXPECT_EQ(find_path(g, "a", "c"), "a -> b -> c");
  EXPECT_EQ(find_path(g, "d", "c"), "d -> a -> b -> c");
  EXPECT_EQ(find_path(g, "c", "a"), "");
  EXPECT_EQ(find_path(g, "b", "d"), "");
}

TEST(Architecture, TheGpuSideSitsBelowEvaluation) {
  // gpu/ holds the judge, the runner, their protocol, the harness's device ops and the check
  // rule; eval/ starts the judge and reads its result. Nothing gpu/ includes, directly or through
  // another module, reaches eval/.
  const auto g = module_includes(fs::path(KBLASTER_SOURCE_DIR) / "src");
  ASSERT_EQ(g.count("gpu"), 1u);
  ASSERT_EQ(g.count("eval"), 1u);
  EXPECT_EQ(find_path(g, "gpu", "eval"), "") << "gpu/ reaches eval/";
  EXPECT_EQ(g.at("eval").count("gpu"), 1u) << "eval/ speaks the judge's protocol (gpu/)";
}

TEST(Architecture, StatisticsAreARoomOfTheirOwn) {
  // stats/ holds pure functions of samples: it sits below eval/ and gpu/ and needs only common/.
  const auto g = module_includes(fs::path(KBLASTER_SOURCE_DIR) / "src");
  ASSERT_EQ(g.count("stats"), 1u);
  for (const auto& dep : g.at("stats")) {
    EXPECT_EQ(dep, "common") << "stats/ includes " << dep;
  }
  EXPECT_EQ(g.at("eval").count("stats"), 1u) << "eval/ decides with stats/";
  EXPECT_EQ(g.at("common").count("stats"), 0u);
}

TEST(Architecture, TheDetailRuleSeesAReach) {
  EXPECT_EQ(foreign_detail("cli", R"(#include "eval/detail/seed.hpp")"), "eval/detail/seed.hpp");
  EXPECT_EQ(foreign_detail("gpu", R"(  # include "eval/x/detail/y.hpp")"), "eval/x/detail/y.hpp");
  EXPECT_EQ(foreign_detail("eval", R"(#include "eval/detail/seed.hpp")"), std::nullopt);
  EXPECT_EQ(foreign_detail("cli", R"(#include "eval/eval.hpp")"), std::nullopt);
  EXPECT_EQ(foreign_detail("cli", R"(#include "eval/details.hpp")"), std::nullopt);
  EXPECT_EQ(foreign_detail("cli", R"(// #include "eval/detail/seed.hpp")"), std::nullopt);
  EXPECT_EQ(foreign_detail("cli", R"(#include <eval/detail/seed.hpp>)"), "eval/detail/seed.hpp");
  EXPECT_EQ(foreign_detail("kblaster", R"(#include "kblaster/device/detail/x.cuh")"), std::nullopt);
}

TEST(Architecture, NoModuleIncludesAnotherModulesDetail) {
  // The sources of the modules and the device headers; a module's tests may include its own
  // detail/ (tests/ is not checked).
  for (const auto* root : {"src", "include"}) {
    std::string listed;
    for (const auto& reach : foreign_detail_includes(fs::path(KBLASTER_SOURCE_DIR) / root)) {
      listed += "\n  " + std::string(root) + "/" + reach;
    }
    EXPECT_TRUE(listed.empty()) << "includes of another module's detail/:" << listed;
  }
}

// The op graph and its lowering (src/graph) sit between the task and PyTorch modules below and
// the search above: the search sees lowered contracts, never graphs.
TEST(Architecture, TheGraphSitsBetweenTasksAndTheSearch) {
  const auto g = module_includes(fs::path(KBLASTER_SOURCE_DIR) / "src");
  ASSERT_EQ(g.count("graph"), 1u);
  for (const auto& dep : g.at("graph")) {
    EXPECT_TRUE(dep == "common" || dep == "task" || dep == "pytorch")
        << "graph includes " << dep;
  }
  for (const auto* below : {"common", "task", "pytorch", "build", "eval", "search", "store"}) {
    if (g.count(below) != 0) {
      EXPECT_EQ(g.at(below).count("graph"), 0u) << below << " includes graph";
    }
  }
}

// ---- The stored evaluation has one reader ----
// eval::to_json(result) is the stored evaluation and eval::stored_result its one reader, with the
// mappings of its parts, in src/eval/result.cpp: everywhere else an evaluation's facts are read
// from the typed result, never by key. The keys below are the record's (of every schema); a read
// of one by key elsewhere (`.value("verdict", ...)`, `.at("gate")`, `["detail"]` not assigned
// to) is either a read of the record or of another document that uses the same name.

const std::vector<std::string> record_keys = {
    // The record's fields (eval::to_json(result)) and those of schema 1.
    "verdict", "gate", "statistics", "verification", "checker_selftest", "worker_seconds",
    "floor_s", "floor_seconds", "sanitize", "detail", "counters", "timing", "builds", "context",
    "schema",
    // Of its parts: the gate, a library's checks and summary, the checker's self-test.
    "speedup", "speedup_ci", "session_medians", "median_candidate_s", "median_baseline_s", "checks",
    "summary", "inputs_unchanged", "max_abs_err", "zeros_rejected_by"};

// The record's keys that `line` reads by key.
std::set<std::string> record_keys_read(const std::string& line) {
  static const std::regex comment(R"(^\s*//)");
  if (std::regex_search(line, comment)) {
    return {};
  }
  static const auto reads = [] {
    std::vector<std::pair<std::string, std::regex>> r;
    for (const auto& key : record_keys) {
      r.emplace_back(key,
                     std::regex(R"(\.(value|at|contains|find|count)\(\s*")" + key + R"("|\[")" +
                                key + R"("\](?!\s*=[^=])(?!\.push_back|\.emplace))"));
    }
    return r;
  }();
  std::set<std::string> found;
  if (line.find('"') == std::string::npos) {
    return found;
  }
  for (const auto& [key, read] : reads) {
    if (line.find('"' + key + '"') != std::string::npos && std::regex_search(line, read)) {
      found.insert(key);
    }
  }
  return found;
}

// Every by-key read of a record key under src/ outside src/eval/result.cpp, as "file: key".
std::set<std::string> record_reads(const fs::path& src) {
  std::set<std::string> found;
  for (const auto& f : fs::recursive_directory_iterator(src)) {
    const std::string ext = f.path().extension().string();
    if (!f.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".cu")) {
      continue;
    }
    const std::string rel = fs::relative(f.path(), src).generic_string();
    if (rel == "eval/result.cpp") {
      continue;
    }
    std::ifstream in(f.path());
    std::string line;
    while (std::getline(in, line)) {
      for (const auto& key : record_keys_read(line)) {
        found.insert(rel + ": " + key);
      }
    }
  }
  return found;
}

TEST(Architecture, TheRecordReadRuleSeesARead) {
  using keys = std::set<std::string>;
  EXPECT_EQ(record_keys_read(R"(  const auto v = j.value("verdict", std::string());)"),
            keys{"verdict"});
  EXPECT_EQ(record_keys_read(R"(x.at("gate").at("speedup"))"), (keys{"gate", "speedup"}));
  EXPECT_EQ(record_keys_read(R"(if (d.contains("detail") && d["detail"].is_object()))"),
            keys{"detail"});
  EXPECT_EQ(record_keys_read(R"(for (const auto& c : l.record["checks"]) {)"), keys{"checks"});
  EXPECT_EQ(record_keys_read(R"(  out["verdict"] = to_string(r.final);)"), keys{});
  EXPECT_EQ(record_keys_read(R"(  report["checks"].push_back(c);)"), keys{});
  EXPECT_EQ(record_keys_read(R"(  if (t["verdict"] == "same") {)"), keys{"verdict"});
  EXPECT_EQ(record_keys_read(R"(  // j.value("verdict", ""))"), keys{});
  EXPECT_EQ(record_keys_read(R"(  {"verdict", to_string(r.final)},)"), keys{});
  EXPECT_EQ(record_keys_read(R"(  j.value("verdicts", 0))"), keys{});
}

TEST(Architecture, NoEvaluationRecordIsReadByKeyOutsideItsMapping) {
  // Documents other than the stored evaluation that name a field as the record does; each says
  // which document it is.
  const std::set<std::string> other_documents = {
      // bench.json's rows (the bench report, read back by rescore and the dashboard's bench page);
      // their statistics go through the gate's one mapping, eval::gate_of.
      "cli/bench_commands.cpp: floor_s",
      "cli/bench_commands.cpp: statistics",
      "cli/bench_commands.cpp: verdict",
      "serve/dashboard.cpp: speedup",
      "serve/dashboard.cpp: statistics",
      "serve/dashboard.cpp: verdict",
      // The A/A calibration's document (eval::calibrate), pooled from files of other machines.
      "cli/calibrate_commands.cpp: verdict",
      "eval/calibrate.cpp: verdict",
      // The CPU check's report of a task (eval::check_task_without_gpu).
      "cli/check_commands.cpp: checker_selftest",
      "cli/check_commands.cpp: checks",
      "cli/check_commands.cpp: zeros_rejected_by",
      // The command's arguments as the run's record keeps them.
      "cli/optimize_commands.cpp: counters",
      // The device's measured limits.
      "eval/device_limits.cpp: detail",
      // The preflight's report (a preflight run's attachment), read back in its one mapping to
      // be reused by a later optimize (--reuse-preflight).
      "cli/preflight.cpp: checks",
      "cli/preflight.cpp: detail",
      // The judge protocol's messages, in their one mapping.
      "gpu/protocol.cpp: checker_selftest",
      "gpu/protocol.cpp: counters",
      "gpu/protocol.cpp: timing",
      // The runner folding its checks into the summary it sends.
      "gpu/detail/worker.hpp: checks",
      // An op graph's issues.
      "graph/graph.cpp: detail",
      // A queued job's options (the executor's request mapping).
      "search/executor.cpp: sanitize",
      "search/executor.cpp: timing",
      // The search's outcome table and its checkpoints.
      "search/experiment.cpp: speedup",
      "search/experiment.cpp: verdict",
      "search/optimize.cpp: speedup",
      // The evidence export's evaluation rows (the store's columns); their detail blob is read by
      // eval::recorded_outcome_of.
      "store/evidence.cpp: speedup",
      "store/evidence.cpp: verdict",
  };
  const auto reads = record_reads(fs::path(KBLASTER_SOURCE_DIR) / "src");
  ASSERT_FALSE(reads.empty()) << "the rule sees no read at all";
  for (const auto& read : reads) {
    EXPECT_EQ(other_documents.count(read), 1u)
        << read << ": an evaluation's facts are read from eval::stored_result's typed result";
  }
  for (const auto& listed : other_documents) {
    EXPECT_EQ(reads.count(listed), 1u) << listed << ": no longer read; take it off the list";
  }
}

} // namespace
