// Several processes on one store, and processes killed halfway: the store must lose nothing that
// was committed and keep nothing half-written. The children are this test binary, started again
// with KB_STORE_CHILD naming their part.
#include "common/error.hpp"
#include "common/process.hpp"
#include "store_test_support.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>

#include <unistd.h>

namespace kb::store::testing {
namespace {

constexpr const char* child_env = "KB_STORE_CHILD";
constexpr const char* result_fd_env = "KB_STORE_RESULT_FD";

void tell_parent(const std::string& line) {
  const int fd = std::atoi(std::getenv(result_fd_env));
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    _exit(3);
  }
}

void wait_for_go() {
  char c = 0;
  while (read(0, &c, 1) == 1 && c != '\n') {
  }
}

[[noreturn]] void sleep_until_killed() {
  while (true) {
    pause();
  }
}

// The rows one writer needs: the shared task and baseline, and its own candidate and run.
recorded_run writer_setup(store& st, const std::string& name) {
  recorded_run r;
  r.task = st.record_task(softmax_task());
  r.environment = st.record_environment(h200());
  r.baseline = st.record_candidate({r.task,
                                    st.put("// the shared baseline").digest,
                                    candidate_origin::baseline,
                                    "",
                                    {},
                                    std::nullopt});
  r.candidate = st.record_candidate({r.task,
                                     st.put("// candidate of " + name).digest,
                                     candidate_origin::proposer,
                                     "s-" + name,
                                     {},
                                     r.baseline});
  r.run = st.begin_run("eval", {{"writer", name}});
  return r;
}

int run_child(const std::string& mode) {
  const fs::path dir = std::getenv("KB_STORE_DIR");
  const std::string name =
      std::getenv("KB_STORE_NAME") != nullptr ? std::getenv("KB_STORE_NAME") : "child";
  if (mode == "writer") {
    const int count = std::atoi(std::getenv("KB_STORE_COUNT"));
    tell_parent("ready");
    wait_for_go();
    store st(dir); // both writers create and migrate the store at the same moment
    const auto r = writer_setup(st, name);
    for (int i = 0; i < count; ++i) {
      auto e = sample_evaluation(r, i);
      e.build.reset();
      e.detail["writer"] = name;
      st.record_evaluation(e);
      experience x;
      x.run = r.run;
      x.task_id = "023";
      x.family = "normalize";
      x.gpu = "NVIDIA H200";
      x.strategy = "s-" + name;
      x.measured_speedup = i;
      x.correct = true;
      st.record_experience(x);
    }
    st.finish_run(r.run, run_status::finished, "done", "");
    return 0;
  }
  store st(dir);
  const auto r = writer_setup(st, name);
  if (mode == "hang_in_transaction") {
    st.atomically([&] {
      const int64_t run = st.begin_run("optimize", {{"doomed", true}});
      auto e = sample_evaluation(r, 0);
      e.run = run;
      e.build.reset();
      for (int i = 0; i < 5; ++i) {
        e.detail["index"] = i;
        st.record_evaluation(e);
      }
      st.attach(run, "big", st.put(std::string(1 << 20, 'x')).digest);
      tell_parent("ready");
      sleep_until_killed();
    });
  }
  if (mode == "hang_running") {
    for (int i = 0; i < 3; ++i) {
      auto e = sample_evaluation(r, i);
      e.build.reset();
      st.record_evaluation(e);
    }
    tell_parent(std::to_string(r.run));
    sleep_until_killed();
  }
  if (mode == "churn") {
    std::mt19937 random(static_cast<unsigned>(getpid()));
    for (int i = 0;; ++i) {
      auto e = sample_evaluation(r, i);
      e.build.reset();
      // Blobs of varied size, so that kills land in file writes as well as in SQLite.
      e.detail["padding"] = std::string(random() % (256 << 10), 'p');
      st.record_evaluation(e);
      if (i == 0) {
        tell_parent("tick");
      }
    }
  }
  return 2;
}

// Started as a child, the binary plays its part and exits before the test runner starts.
const int child_exit = [] {
  if (const char* mode = std::getenv(child_env); mode != nullptr) {
    int code = 1;
    try {
      code = run_child(mode);
    } catch (const std::exception& e) {
      fmt::print(stderr, "child {}: {}\n", mode, e.what());
    }
    _exit(code);
  }
  return 0;
}();

class process_test : public store_test {
protected:
  std::unique_ptr<child_process> spawn(const std::string& mode, const std::string& name,
                                       std::map<std::string, std::string> env = {}) {
    process_spec spec;
    spec.argv = {self_executable().string()};
    env[child_env] = mode;
    env["KB_STORE_DIR"] = store_dir().string();
    env["KB_STORE_NAME"] = name;
    spec.env_overrides = env;
    return std::make_unique<child_process>(spec, tmp() / (name + ".log"), result_fd_env);
  }

  std::string expect_line(child_process& child, const std::string& name) {
    bool timed_out = false;
    auto line = child.read_line(std::chrono::seconds(60), &timed_out);
    EXPECT_TRUE(line) << name << (timed_out ? " timed out" : " exited") << ": " << log_of(name);
    return line.value_or("");
  }

  std::string log_of(const std::string& name) const {
    std::error_code ec;
    return fs::exists(tmp() / (name + ".log"), ec) ? read_file(tmp() / (name + ".log")) : "";
  }

  // What must hold after any crash: the database is sound and every row's blobs are intact.
  void expect_consistent() {
    EXPECT_EQ(query_text(store_dir(), "PRAGMA integrity_check"), "ok");
    store st(store_dir());
    const auto report = st.verify();
    EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.corrupt)
                             << ::testing::PrintToString(report.missing)
                             << ::testing::PrintToString(report.database);
    for (const auto& run : st.list_runs(1000)) {
      for (const auto& row : st.evaluations_of_run(run.id)) {
        EXPECT_NO_THROW(nlohmann::json::parse(st.get(row.detail_digest)));
      }
    }
  }
};

TEST_F(process_test, two_writers_at_once_lose_nothing) {
  constexpr int count = 60;
  auto a = spawn("writer", "a", {{"KB_STORE_COUNT", std::to_string(count)}});
  auto b = spawn("writer", "b", {{"KB_STORE_COUNT", std::to_string(count)}});
  EXPECT_EQ(expect_line(*a, "a"), "ready");
  EXPECT_EQ(expect_line(*b, "b"), "ready");
  a->write_line("go");
  b->write_line("go");
  const auto ra = a->wait(std::chrono::minutes(5));
  const auto rb = b->wait(std::chrono::minutes(5));
  ASSERT_TRUE(ra.ok()) << ra.describe() << log_of("a");
  ASSERT_TRUE(rb.ok()) << rb.describe() << log_of("b");

  store st(store_dir());
  const auto runs = st.list_runs(10);
  ASSERT_EQ(runs.size(), 2u);
  std::set<std::string> writers;
  for (const auto& run : runs) {
    EXPECT_EQ(run.status, run_status::finished);
    writers.insert(run.args["writer"]);
    const auto rows = st.evaluations_of_run(run.id);
    ASSERT_EQ(rows.size(), static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      const auto detail = nlohmann::json::parse(st.get(rows[static_cast<size_t>(i)].detail_digest));
      EXPECT_EQ(detail["index"], i);
      EXPECT_EQ(detail["writer"], run.args["writer"]);
    }
  }
  EXPECT_EQ(writers, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM tasks"), 1);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM candidates"), 3); // one shared baseline
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM experiences"), 2 * count);
  EXPECT_EQ(st.find_experiences("normalize", "NVIDIA H200", "s-a").size(),
            static_cast<size_t>(count));
  expect_consistent();
}

TEST_F(process_test, a_writer_killed_inside_a_transaction_leaves_no_trace_of_it) {
  auto child = spawn("hang_in_transaction", "doomed");
  ASSERT_EQ(expect_line(*child, "doomed"), "ready");
  // While it holds the write lock, a reader still sees the committed store.
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM runs WHERE kind = 'optimize'"), 0);
  child->kill();

  expect_consistent();
  store st(store_dir());
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM runs WHERE kind = 'optimize'"), 0);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM evaluations"), 0);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM artifacts"), 0);
  // The run committed before the transaction was left running by a dead process.
  const auto runs = st.list_runs(10);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, run_status::interrupted);
  EXPECT_EQ(runs[0].reason, "run.process_gone");
  // The blob files the transaction wrote are strays; gc removes them and the store still verifies.
  EXPECT_FALSE(st.verify().stray.empty());
  EXPECT_GT(st.gc(std::chrono::seconds(0)).removed_stray, 0);
  EXPECT_TRUE(st.verify().ok());
  // The write lock died with the process.
  st.begin_run("eval", {});
}

TEST_F(process_test, a_run_whose_process_was_killed_is_kept_and_marked_interrupted) {
  auto child = spawn("hang_running", "victim");
  const std::string line = expect_line(*child, "victim");
  ASSERT_FALSE(line.empty());
  const int64_t run = std::stoll(line);
  {
    store st(store_dir()); // the owner lives: the run stays running
    EXPECT_EQ(st.find_run(run)->status, run_status::running);
  }
  child->kill();
  store st(store_dir());
  const auto info = st.find_run(run);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, run_status::interrupted);
  EXPECT_FALSE(info->finished.empty());
  EXPECT_EQ(st.evaluations_of_run(run).size(), 3u);
  expect_consistent();
}

TEST_F(process_test, kills_at_random_moments_never_break_the_store) {
  std::mt19937 random(12345);
  int64_t committed = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string name = "churn" + std::to_string(round);
    auto child = spawn("churn", name);
    ASSERT_EQ(expect_line(*child, name), "tick");
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 150));
    child->kill();
    expect_consistent();
    const int64_t now = query_count(store_dir(), "SELECT count(*) FROM evaluations");
    EXPECT_GT(
        now, committed); // each round committed at least its first evaluation, and nothing was lost
    committed = now;
  }
  store st(store_dir());
  for (const auto& run : st.list_runs(100)) {
    EXPECT_EQ(run.status, run_status::interrupted);
  }
}

} // namespace
} // namespace kb::store::testing
