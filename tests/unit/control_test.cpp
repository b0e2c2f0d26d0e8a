// The control plane an operator leaves running: which tool, judge and device produced a result
// (kept with it, and part of every queue key), failed queue jobs retried on a later enqueue up to
// a cap, what `queue probe` says it did, and what a new user meets first (`--version`, a
// candidate that does not compile).
#include "common/fs.hpp"
#include "common/process.hpp"
#include "common/error.hpp"
#include "eval/eval.hpp"
#include "llm/llm.hpp"
#include "search/executor.hpp"
#include "search/proposer.hpp"
#include "store_test_support.hpp"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <csignal>
#include <thread>

namespace kb::store::testing {
namespace {

using namespace std::chrono_literals;

process_result kblaster(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), KBLASTER_BINARY);
  process_spec p;
  p.argv = args;
  p.timeout = std::chrono::seconds(300);
  p.env_overrides = std::move(env);
  return run_process(p);
}

class control_test : public store_test {};

TEST_F(control_test, the_queue_key_holds_the_devices_the_job_may_run_on) {
  task::contract c;
  c.id = "019";
  c.digest = "contract-1";
  search::eval_request r;
  r.project_root = "/project";
  r.task_file = "/project/tasks/core10/019/task.toml";
  r.candidate = {"__global__ void k() {}", "cand.cu", "proposer", "tile", {}};
  r.baseline = {"// baseline", "baseline.cu", "baseline"};
  const auto a = search::job_key_of(c, r, "gpus:GPU-a");
  EXPECT_EQ(search::job_key_of(c, r, "gpus:GPU-a").protocol, a.protocol);
  EXPECT_NE(search::job_key_of(c, r, "gpus:GPU-b").protocol, a.protocol);
  EXPECT_NE(search::job_key_of(c, r, "slurm:gpu::gpu:1").protocol, a.protocol);
  EXPECT_NE(search::job_key_of(c, r).protocol, a.protocol);
}

TEST_F(control_test, a_failed_job_is_retried_on_a_later_enqueue_up_to_a_cap_with_its_reason_kept) {
  store st(store_dir());
  const job_key key{"023", std::string(64, 'f'), "p"};
  const auto first = st.submit(key, {{"n", 1}}, std::nullopt, 1, 2);
  EXPECT_EQ(first.outcome, enqueue_outcome::created);
  ASSERT_TRUE(st.claim("w1", 60s));
  st.release(first.id, "w1", "worker.error", true); // the only attempt: failed
  EXPECT_EQ(st.find_job(first.id)->state, job_state::failed);
  // Two more enqueues each give it another attempt; the reason of its failure stays meanwhile.
  for (int round = 0; round < 2; ++round) {
    const auto again = st.submit(key, {{"n", 1}}, std::nullopt, 1, 2);
    EXPECT_EQ(again.id, first.id);
    EXPECT_EQ(again.outcome, enqueue_outcome::retried) << round;
    const std::string last = round == 0 ? "worker.error" : "worker.error0";
    EXPECT_EQ(again.reason, last);
    const auto j = st.find_job(first.id);
    EXPECT_EQ(j->state, job_state::queued);
    EXPECT_EQ(j->reason, last);
    const auto taken = st.claim("w2", 60s);
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->attempts, round + 2);
    st.release(first.id, "w2", fmt::format("worker.error{}", round), true);
    EXPECT_EQ(st.find_job(first.id)->state, job_state::failed);
  }
  // The cap: three attempts in all.
  const auto spent = st.submit(key, {{"n", 1}}, std::nullopt, 1, 2);
  EXPECT_EQ(spent.outcome, enqueue_outcome::failed);
  EXPECT_EQ(spent.reason, "worker.error1");
  EXPECT_EQ(st.find_job(first.id)->state, job_state::failed);
  EXPECT_FALSE(st.claim("w3", 60s));
  // A job that finished is reused, not run again.
  const auto done = st.submit({"023", std::string(64, 'd'), "p"}, {}, std::nullopt);
  ASSERT_TRUE(st.claim("w4", 60s));
  EXPECT_TRUE(st.complete(done.id, "w4", {{"verdict", "same"}}));
  EXPECT_EQ(st.submit({"023", std::string(64, 'd'), "p"}, {}).outcome, enqueue_outcome::done);
}

TEST_F(control_test, queue_probe_says_what_it_enqueued_and_what_was_there_already) {
  const std::string where = store_dir().string();
  const auto first = kblaster({"--store", where, "queue", "probe", "--count", "3", "--tag", "t"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("3 enqueued, 0 already waiting"), std::string::npos)
      << first.output;
  const auto second = kblaster({"--store", where, "queue", "probe", "--count", "3", "--tag", "t"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("0 enqueued, 3 already waiting"), std::string::npos)
      << second.output;
}

TEST_F(control_test, version_prints_the_version_the_judge_protocol_and_the_commit) {
  const auto r = kblaster({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("kblaster {}", KBLASTER_VERSION)), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("judge protocol {}", eval::judge_protocol_version)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("commit "), std::string::npos) << r.output;
}

// A candidate that does not compile: nvcc's error is on the terminal, and the record says which
// tool and judge protocol produced it.
TEST_F(control_test, a_candidate_that_does_not_compile_shows_the_compilers_error) {
  const fs::path cand = tmp() / "broken.cu";
  write_file_atomic(cand, "int f() { return undeclared_name_kb45; }\n");
  const fs::path json = tmp() / "out.json";
  const auto r = kblaster({"--root", source_root.string(), "--store", store_dir().string(),
                           "eval", "--task", "019", "--candidate", cand.string(), "--json",
                           json.string()},
                          {{"KBLASTER_CACHE", KBLASTER_TEST_CACHE}});
  EXPECT_NE(r.output.find("undeclared_name_kb45"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(json)) << r.output;
  const auto detail = eval::stored_result(nlohmann::json::parse(read_file(json))).detail;
  ASSERT_TRUE(detail.contains("provenance")) << detail.dump(1);
  EXPECT_EQ(detail["provenance"]["kblaster"], KBLASTER_VERSION);
  EXPECT_EQ(detail["provenance"]["judge_protocol"], eval::judge_protocol_version);
  EXPECT_TRUE(detail["provenance"].contains("device_uuid"));
}

// ---- No credential in a command line, a job script or a message ----

TEST_F(control_test, a_store_urls_passwords_are_in_no_message) {
  const auto r = kblaster(
      {"--store", "postgresql://kbuser:pw_in_url_45@127.0.0.1:1/db?sslmode=disable&password=pw_in_query_45",
       "runs", "list"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("pw_in_url_45"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("pw_in_query_45"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("***"), std::string::npos) << r.output;
}

TEST_F(control_test, a_gpu_worker_gets_the_store_in_its_environment_and_no_other_secret) {
  const fs::path seen = tmp() / "seen";
  const fs::path fake = tmp() / "fake-kblaster";
  // Writes its arguments and its environment, then ends.
  write_file_atomic(fake,
                    fmt::format(R"(#!/bin/sh
printf '%s\n' "$@" > {0}.argv
env > {0}.env
)",
                                seen.string()),
                    0700);
  const std::string url = "postgresql://kbuser:pw_worker_45@db.example/kb";
  ::setenv("KB_TEST_API_KEY_45", "sk-not-for-workers", 1);
  auto workers = search::make_gpu_workers(fake, url, {"GPU-test-45"}, tmp() / "logs");
  store st(store_dir());
  workers->tend(st, {1});
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!fs::exists(seen.string() + ".env") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(200ms);
  workers->shutdown();
  ::unsetenv("KB_TEST_API_KEY_45");
  const std::string argv = read_file(seen.string() + ".argv");
  const std::string env = read_file(seen.string() + ".env");
  EXPECT_EQ(argv.find("pw_worker_45"), std::string::npos) << argv;
  EXPECT_NE(argv.find("work"), std::string::npos) << argv;
  EXPECT_NE(env.find("KBLASTER_STORE=" + url), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=GPU-test-45"), std::string::npos) << env;
  EXPECT_EQ(env.find("KB_TEST_API_KEY_45"), std::string::npos) << env;
}

TEST_F(control_test, a_store_location_file_must_be_private) {
  const fs::path file = tmp() / "location";
  write_file_atomic(file, store_dir().string() + "\n", 0644);
  const auto open = [&] {
    return kblaster({"runs", "list"}, {{"KBLASTER_STORE_FILE", file.string()},
                                      {"KBLASTER_STORE", ""},
                                      {"KBLASTER_HOME", (tmp() / "home").string()}});
  };
  const auto loose = open();
  EXPECT_NE(loose.exit_code, 0) << loose.output;
  EXPECT_NE(loose.output.find("chmod 600"), std::string::npos) << loose.output;
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  const auto tight = open();
  EXPECT_EQ(tight.exit_code, 0) << tight.output;
  EXPECT_TRUE(fs::exists(store_dir())) << tight.output;
}

// ---- Deadlines, backoff, logs that append ----

class idle_workers final : public search::worker_provider {
public:
  std::string name() const override { return "idle"; }
  int slots() const override { return 1; }
  void tend(kb::store::store&, const std::vector<int64_t>&) override {}
  void shutdown() override {}
};

TEST_F(control_test, a_job_no_worker_takes_ends_at_its_deadline) {
  search::queue_options q;
  q.store.dir = store_dir();
  q.poll = 50ms;
  q.job_deadline = 1s;
  auto exec =
      search::make_queue_executor(source_root, q, std::make_unique<idle_workers>());
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  const auto started = std::chrono::steady_clock::now();
  const auto r = exec->evaluate(c, base, base, {});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  EXPECT_EQ(r.final, eval::verdict::error);
  EXPECT_EQ(r.reason, "queue.deadline");
  store st(store_dir());
  const auto j = st.find_job(1);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, job_state::failed);
  EXPECT_EQ(j->reason, "queue.deadline");
}

// The search's budget ends a wait that the queue's own deadline (hours) would not: a job no
// worker took is withdrawn, and a later enqueue of it (a resumed run) gives it another try.
TEST_F(control_test, a_queued_evaluation_waits_no_longer_than_the_searchs_budget) {
  search::queue_options q;
  q.store.dir = store_dir();
  q.poll = 50ms;
  auto exec = search::make_queue_executor(source_root, q, std::make_unique<idle_workers>());
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  const auto started = std::chrono::steady_clock::now();
  eval::result r;
  {
    const search::wait_limit budget(started + 1s);
    r = exec->evaluate(c, base, base, {});
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  EXPECT_EQ(r.final, eval::verdict::error);
  EXPECT_EQ(r.reason, "budget.exhausted") << r.message;
  store st(store_dir());
  const auto j = st.find_job(1);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, job_state::failed);
  EXPECT_EQ(j->reason, "budget.exhausted");
  EXPECT_EQ(st.submit(j->key, j->payload).outcome,
            enqueue_outcome::retried);
}

TEST_F(control_test, a_gpu_worker_that_cannot_start_is_restarted_with_backoff_into_one_log) {
  const fs::path fake = tmp() / "fails-at-once";
  write_file_atomic(fake, "#!/bin/sh\necho started\nexit 1\n", 0700);
  auto workers = search::make_gpu_workers(fake, store_dir().string(), {"GPU-x"}, tmp() / "logs");
  store st(store_dir());
  const auto until = std::chrono::steady_clock::now() + 2500ms;
  int tends = 0;
  while (std::chrono::steady_clock::now() < until) {
    workers->tend(st, {1});
    ++tends;
    std::this_thread::sleep_for(25ms);
  }
  workers->shutdown();
  const std::string log = read_file(tmp() / "logs" / "worker-gpu0.log");
  size_t starts = 0;
  for (size_t at = log.find("started"); at != std::string::npos; at = log.find("started", at + 1)) {
    ++starts;
  }
  // 0.2 s, 0.4 s, 0.8 s, 1.6 s apart: a handful of starts in 2.5 s, not one per tend.
  EXPECT_GE(starts, 2u) << log; // every start is in the log: it appends
  EXPECT_LE(starts, 6u) << tends << " tends";
}

TEST_F(control_test, a_worker_stopped_by_sigterm_gives_its_job_back_and_ends) {
  {
    store st(store_dir());
    st.enqueue({"probe", "long", "probe"}, {{"probe_seconds", 60.0}});
  }
  process_spec spec;
  spec.argv = {KBLASTER_BINARY, "--store", store_dir().string(), "queue", "work", "--max-jobs",
               "1", "--name", "w-stop"};
  child_process worker(spec, tmp() / "worker.log", "KBLASTER_UNUSED_FD");
  // Once it holds the job, SIGTERM.
  const auto until = std::chrono::steady_clock::now() + 20s;
  bool held = false;
  while (!held && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    store st(store_dir());
    held = st.find_job(1)->state == job_state::running;
  }
  ASSERT_TRUE(held) << read_file(tmp() / "worker.log");
  const auto sent = std::chrono::steady_clock::now();
  ::kill(worker.pid(), SIGTERM);
  const auto r = worker.wait(15s);
  EXPECT_FALSE(r.timed_out) << read_file(tmp() / "worker.log");
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 10s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << read_file(tmp() / "worker.log");
  store st(store_dir());
  const auto j = st.find_job(1);
  EXPECT_EQ(j->state, job_state::queued) << j->reason;
  EXPECT_EQ(j->reason, "worker.interrupted");
}

// The processes whose command line holds `token`, other than this one.
std::vector<pid_t> processes_naming(const std::string& token) {
  std::vector<pid_t> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])) ||
        std::stoi(name) == ::getpid()) {
      continue;
    }
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(token) != std::string::npos) {
      found.push_back(std::stoi(name));
    }
  }
  return found;
}

// SIGTERM to a kblaster compiling a candidate: it ends, and so does the compiler it started (in
// its own process group), instead of being left to run on.
TEST_F(control_test, a_stopped_kblaster_leaves_no_compiler_running) {
  const fs::path started = tmp() / "nvcc-started";
  const fs::path nvcc = tmp() / "kb45-hanging-nvcc";
  write_file_atomic(nvcc,
                    fmt::format(R"(#!/bin/sh
case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0;; esac
touch {}
sleep 300 &
wait
)",
                                started.string()),
                    0755);
  const auto c = task::find_task(source_root, "019");
  process_spec spec;
  spec.argv = {KBLASTER_BINARY, "--root", source_root.string(), "--store", store_dir().string(),
               "eval", "--task", "019", "--candidate", c.baseline.string(), "--no-sandbox"};
  spec.env_overrides = {{"KBLASTER_NVCC", nvcc.string()},
                        {"KBLASTER_CACHE", (tmp() / "cache").string()}};
  child_process kb(spec, tmp() / "kblaster.log", "KBLASTER_UNUSED_FD");
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(started) && kb.running() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(fs::exists(started)) << read_file(tmp() / "kblaster.log");
  ASSERT_FALSE(processes_naming(nvcc.string()).empty());
  ::kill(kb.pid(), SIGTERM);
  const auto r = kb.wait(15s);
  EXPECT_FALSE(r.timed_out) << read_file(tmp() / "kblaster.log");
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << read_file(tmp() / "kblaster.log");
  std::vector<pid_t> left;
  for (int i = 0; i < 50; ++i) {
    left = processes_naming(nvcc.string());
    if (left.empty()) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " compiler processes left running";
  for (const pid_t pid : left) {
    ::kill(pid, SIGKILL);
  }
}

// ---- The parser and the store's edge cases ----

TEST_F(control_test, one_unreadable_json_row_does_not_break_the_listing) {
  {
    store st(store_dir());
    record_sample_run(st, "a");
    record_sample_run(st, "b");
  }
  {
    detail::connection db(store_dir() / "store.sqlite", 1000);
    db.exec("UPDATE runs SET args_json = '{not json' WHERE id = 1");
  }
  const auto r = kblaster({"--store", store_dir().string(), "runs", "list"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  store st(store_dir());
  const auto runs = st.list_runs(10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs.back().args.contains("unreadable_json")) << runs.back().args.dump();
}

TEST_F(control_test, the_database_is_private_to_its_owner) {
  store st(store_dir());
  record_sample_run(st);
  for (const char* name : {"store.sqlite", "store.sqlite-wal"}) {
    const auto p = fs::status(store_dir() / name).permissions();
    EXPECT_EQ(p & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << name;
  }
}

TEST_F(control_test, a_writer_waits_past_the_busy_timeout_and_keeps_its_record) {
  { store st(store_dir()); }
  detail::connection holder(store_dir() / "store.sqlite", 1000);
  holder.exec("BEGIN IMMEDIATE");
  std::thread release([&] {
    std::this_thread::sleep_for(1500ms);
    holder.exec("COMMIT");
  });
  open_options o;
  o.dir = store_dir();
  o.busy_timeout_ms = 200; // each try; the writer tries again
  int64_t run = 0;
  EXPECT_NO_THROW({
    store st(o);
    run = st.begin_run("eval", {{"waited", true}});
  });
  release.join();
  store st(store_dir());
  EXPECT_TRUE(st.find_run(run).has_value());
}

TEST_F(control_test, a_budget_of_nothing_or_of_twenty_digits_is_refused) {
  for (const char* budget : {"0", "0s", "99999999999999999999", "99999999999999999999h", "31d",
                             "800h"}) {
    const auto r = kblaster({"--store", store_dir().string(), "optimize", "--task", "019",
                             "--budget", budget});
    EXPECT_EQ(r.exit_code, exit_code::usage) << budget << ": " << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

TEST_F(control_test, plain_http_to_another_machine_is_refused_for_the_llm) {
  llm::client_config c;
  c.model = "m";
  c.base_url = "http://api.example.com/v1";
  EXPECT_THROW(llm::validate(c), input_error);
  c.base_url = "http://10.0.0.5:8000/v1";
  EXPECT_THROW(llm::validate(c), input_error);
  for (const char* ok : {"http://localhost:8000/v1", "http://127.0.0.1:9/v1", "http://[::1]:8/v1",
                         "https://api.example.com/v1"}) {
    c.base_url = ok;
    EXPECT_NO_THROW(llm::validate(c)) << ok;
  }
}

TEST_F(control_test, an_export_that_meets_a_corrupt_blob_leaves_nothing) {
  recorded_run r;
  {
    store st(store_dir());
    r = record_sample_run(st);
    const fs::path blob = st.path_of(r.log);
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(blob, std::ios::trunc) << "rotted";
  }
  store st(store_dir());
  const fs::path out = tmp() / "evidence";
  EXPECT_ANY_THROW(st.export_evidence(r.run, out, eval::recorded_outcome_of));
  EXPECT_TRUE(!fs::exists(out) || fs::is_empty(out));
}

// ---- Trust by provenance ----

// A --baseline that is not the task's own compiles in the sandbox: a file outside it stays out of
// reach (outside, the #include would put the file's text into the verdict's message).
TEST_F(control_test, only_the_tasks_own_baseline_compiles_outside_the_sandbox) {
  const fs::path secret = tmp() / "secret.h";
  write_file_atomic(secret, "#error KB45_SECRET_TEXT\n");
  const fs::path evil = tmp() / "evil.cu";
  write_file_atomic(evil, fmt::format("#include \"{}\"\n", secret.string()));
  const auto c = task::find_task(source_root, "019");
  const fs::path json = tmp() / "out.json";
  const auto r = kblaster({"--root", source_root.string(), "--store", store_dir().string(),
                           "eval", "--task", "019", "--candidate", c.baseline.string(),
                           "--baseline", evil.string(), "--json", json.string()},
                          {{"KBLASTER_CACHE", KBLASTER_TEST_CACHE}});
  EXPECT_EQ(r.output.find("KB45_SECRET_TEXT"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(json)) << r.output;
  const auto stored = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(stored.dump().find("KB45_SECRET_TEXT"), std::string::npos);
  const auto detail = eval::stored_result(stored).detail;
  EXPECT_EQ(detail["trusted_builds"]["baseline"], false) << detail.dump(1).substr(0, 2000);
  EXPECT_EQ(detail["trusted_builds"]["candidate"], true);
}

TEST_F(control_test, names_that_tell_a_candidates_origin_are_reserved) {
  for (const char* name : {"baseline", "Baseline", " baseline ", "portfolio", "oracle",
                           "baseline.tuned"}) {
    EXPECT_TRUE(search::is_reserved_strategy_name(name)) << name;
  }
  for (const char* name : {"normalize.one_pass", "baseline_like", "llm.unnamed", "tile"}) {
    EXPECT_FALSE(search::is_reserved_strategy_name(name)) << name;
  }
}

} // namespace
} // namespace kb::store::testing
