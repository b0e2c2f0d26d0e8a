// The store's contract, run on both backends: SQLite (a folder) and PostgreSQL (a database on the
// server scripts/services.sh starts). Then the queue's guarantees with several processes sharing
// one PostgreSQL store: no job is taken twice, and a worker killed with SIGKILL loses no finished
// result while its job is taken again once its lease expires.
#include "eval/eval.hpp"
#include "service_support.hpp"
#include "store/detail/schema.hpp"

#include "../unit/store_test_support.hpp"

#include <set>
#include <thread>

#include <signal.h>
#include <sys/wait.h>

namespace kb::store::testing {
namespace {

using kb::testing::postgres_admin_url;
using kb::testing::scratch_database;
using namespace std::chrono_literals;

enum class kind { sqlite, postgres };

class backend_test : public ::testing::TestWithParam<kind> {
protected:
  void SetUp() override {
    m_folder = std::make_unique<temp_dir>("kb-conformance");
    if (GetParam() == kind::postgres) {
      const std::string admin = postgres_admin_url();
      if (admin.empty()) {
        GTEST_SKIP() << "KBLASTER_TEST_NO_POSTGRES=1: this machine has no PostgreSQL";
      }
      m_db = std::make_unique<kb::testing::scratch_database>(admin);
    }
  }
  open_options options() const {
    open_options o;
    if (m_db) {
      o.dir = m_db->url();
      o.files = m_folder->path() / "shared";
    } else {
      o.dir = m_folder->path() / "store";
    }
    return o;
  }
  store open() const { return store(options()); }

  std::unique_ptr<temp_dir> m_folder;
  std::unique_ptr<kb::testing::scratch_database> m_db;
};

TEST_P(backend_test, migrates_to_the_latest_schema_and_reopens) {
  {
    auto st = open();
    EXPECT_EQ(st.schema_version(), detail::latest_schema_version());
    EXPECT_EQ(st.shared(), GetParam() == kind::postgres);
    st.begin_run("eval", {{"n", 1}});
  }
  auto st = open();
  EXPECT_EQ(st.schema_version(), detail::latest_schema_version());
  EXPECT_EQ(st.list_runs(10).size(), 1u);
}

TEST_P(backend_test, records_read_back_as_written) {
  auto st = open();
  const auto r = record_sample_run(st, "a");
  // Recording the same task, environment and candidate again returns the same rows.
  EXPECT_EQ(st.record_task(softmax_task()), r.task);
  EXPECT_EQ(st.record_environment(h200()), r.environment);
  EXPECT_EQ(st.record_candidate(
                {r.task, r.baseline_source, candidate_origin::baseline, "", {}, std::nullopt}),
            r.baseline);
  const auto runs = st.list_runs(10);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, run_status::finished);
  EXPECT_EQ(runs[0].evaluations, 1);
  EXPECT_EQ(runs[0].args.at("salt"), "a");

  auto e2 = sample_evaluation(r, 1);
  e2.speedup = std::nullopt;
  e2.p_value = 0.1234567890123456789;
  e2.verdict = verdict::inconclusive;
  st.record_evaluation(e2);
  const auto rows = st.evaluations_of_run(r.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].task_id, "023");
  EXPECT_EQ(rows[0].strategy, "softmax.online");
  EXPECT_EQ(rows[0].record.verdict, verdict::improved);
  EXPECT_DOUBLE_EQ(*rows[0].record.speedup, 1.5);
  EXPECT_DOUBLE_EQ(*rows[0].record.candidate_median, 1.0e-3);
  EXPECT_FALSE(rows[1].record.speedup.has_value());
  EXPECT_EQ(*rows[1].record.p_value, 0.1234567890123456789); // bit-exact round trip
  EXPECT_TRUE(rows[1].record.sandboxed);
  EXPECT_EQ(nlohmann::json::parse(st.get(rows[1].detail_digest)).at("index"), 1);

  EXPECT_EQ(st.find_build({r.candidate_source, "-O3 -arch=sm_90a", "13.0", "sm_90a"}), r.binary);
  EXPECT_FALSE(st.find_build({r.candidate_source, "-O2", "13.0", "sm_90a"}).has_value());

  st.record_outcome({r.run, r.task, "no_improvement", "search.no_candidate", std::nullopt});
  const auto outcomes = st.outcomes_of_run(r.run);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].outcome, "no_improvement");

  const auto xs = st.find_experiences("normalize", "NVIDIA H200", "softmax.online");
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_DOUBLE_EQ(*xs[0].measured_speedup, 1.5);
  EXPECT_TRUE(xs[0].correct);
  EXPECT_TRUE(st.find_experiences("normalize", "NVIDIA H200", "other").empty());
  EXPECT_EQ(st.gpus(), std::vector<std::string>{"NVIDIA H200"});
  ASSERT_EQ(st.attachments(r.run).size(), 1u);
  EXPECT_THROW(st.attach(r.run, "ncu.csv", r.log), input_error);
}

TEST_P(backend_test, a_failed_transaction_leaves_nothing) {
  auto st = open();
  EXPECT_THROW(st.atomically([&] {
    st.begin_run("eval", {});
    throw error("stop");
  }),
               error);
  EXPECT_TRUE(st.list_runs(10).empty());
  st.atomically([&] {
    st.begin_run("eval", {});
    st.atomically([&] { st.begin_run("bench", {}); }); // nested: a savepoint
  });
  EXPECT_EQ(st.list_runs(10).size(), 2u);
}

TEST_P(backend_test, verify_gc_and_evidence_work) {
  auto st = open();
  const auto r = record_sample_run(st, "v");
  const auto loose = st.put("nobody references this").digest;
  auto report = st.verify();
  EXPECT_TRUE(report.ok()) << (report.database.empty() ? "" : report.database[0]);
  EXPECT_GE(report.blobs_checked, 7);
  const auto gc = st.gc(0s);
  EXPECT_EQ(gc.removed_blobs, 1);
  EXPECT_FALSE(st.exists(loose));
  EXPECT_TRUE(st.exists(r.binary));
  const fs::path out = m_folder->path() / "evidence";
  const auto exported = st.export_evidence(r.run, out, eval::recorded_outcome_of);
  EXPECT_TRUE(exported.ok());
  EXPECT_TRUE(check_evidence(out, eval::recorded_outcome_of).ok());
  const auto rows = nlohmann::json::parse(read_file(out / "rows.json"));
  EXPECT_EQ(rows.at("tables").at("evaluations").size(), 1u);
  EXPECT_TRUE(rows.at("tables").at("evaluations")[0].at("speedup").is_number_float());
  EXPECT_TRUE(rows.at("tables").at("evaluations")[0].at("run").is_number_integer());
}

TEST_P(backend_test, one_job_per_task_candidate_and_protocol) {
  auto st = open();
  const job_key key{"023", std::string(64, 'a'), "protocol-1"};
  const int64_t id = st.enqueue(key, {{"what", "first"}});
  EXPECT_EQ(st.enqueue(key, {{"what", "second"}}), id);
  EXPECT_NE(st.enqueue({"023", std::string(64, 'a'), "protocol-2"}, {}), id);
  EXPECT_EQ(st.find_job(key)->payload.at("what"), "first");
  EXPECT_THROW(st.enqueue({"", "x", "y"}, {}), input_error);
  const auto counts = st.count_jobs();
  EXPECT_EQ(counts.queued, 2);
}

TEST_P(backend_test, jobs_are_taken_once_and_finished_once) {
  auto st = open();
  const int64_t a = st.enqueue({"t", "a", "p"}, {{"n", 1}});
  const int64_t b = st.enqueue({"t", "b", "p"}, {{"n", 2}});
  const auto first = st.claim("w1", 60s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, a);
  EXPECT_EQ(first->state, job_state::running);
  EXPECT_EQ(first->attempts, 1);
  const auto second = st.claim("w2", 60s);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->id, b);
  EXPECT_FALSE(st.claim("w3", 60s).has_value());
  EXPECT_TRUE(st.complete(a, "w1", {{"verdict", "same"}}));
  EXPECT_FALSE(st.complete(a, "w9", {{"verdict", "other"}})); // the first result stays
  EXPECT_EQ(st.find_job(a)->result.at("verdict"), "same");
  EXPECT_EQ(st.find_job(a)->state, job_state::done);
  EXPECT_TRUE(st.renew(b, "w2", 60s));
  EXPECT_FALSE(st.renew(b, "w1", 60s));
  st.release(b, "w2", "worker.stopping", true);
  EXPECT_EQ(st.find_job(b)->state, job_state::queued);
  EXPECT_EQ(st.claim("w4", 60s)->id, b);
}

TEST_P(backend_test, an_expired_lease_gives_the_job_to_another_worker_until_attempts_run_out) {
  auto st = open();
  const int64_t id = st.enqueue({"t", "c", "p"}, {}, std::nullopt, 2);
  ASSERT_EQ(st.claim("w1", 1ms)->id, id);
  std::this_thread::sleep_for(20ms);
  const auto again = st.claim("w2", 1ms);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, id);
  EXPECT_EQ(again->attempts, 2);
  EXPECT_EQ(again->worker, "w2");
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(st.claim("w3", 60s).has_value());
  const auto failed = st.find_job(id);
  EXPECT_EQ(failed->state, job_state::failed);
  EXPECT_EQ(failed->reason, "queue.attempts_exhausted");
  st.requeue(id, "executor.resubmitted");
  EXPECT_EQ(st.claim("w4", 60s)->attempts, 1);
}

TEST_P(backend_test, a_failed_job_is_retried_by_a_later_enqueue_until_its_cap) {
  auto st = open();
  const job_key key{"t", "retry", "p"};
  const auto first = st.submit(key, {}, std::nullopt, 1, 1);
  ASSERT_EQ(st.claim("w1", 60s)->id, first.id);
  st.release(first.id, "w1", "worker.error", true);
  const auto again = st.submit(key, {}, std::nullopt, 1, 1);
  EXPECT_EQ(again.outcome, enqueue_outcome::retried);
  EXPECT_EQ(again.reason, "worker.error");
  EXPECT_EQ(st.claim("w2", 60s)->attempts, 2);
  st.release(first.id, "w2", "worker.error", true);
  EXPECT_EQ(st.submit(key, {}, std::nullopt, 1, 1).outcome, enqueue_outcome::failed);
  EXPECT_FALSE(st.claim("w3", 60s).has_value());
}

INSTANTIATE_TEST_SUITE_P(store, backend_test, ::testing::Values(kind::sqlite, kind::postgres),
                         [](const auto& info) {
                           return info.param == kind::sqlite ? "sqlite" : "postgres";
                         });

// ---- Several processes sharing one PostgreSQL store ----

class shared_queue_test : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string admin = postgres_admin_url();
    if (admin.empty()) {
      GTEST_SKIP() << "KBLASTER_TEST_NO_POSTGRES=1: this machine has no PostgreSQL";
    }
    m_db = std::make_unique<kb::testing::scratch_database>(admin);
    m_folder = std::make_unique<temp_dir>("kb-queue");
  }
  open_options options() const {
    open_options o;
    o.dir = m_db->url();
    o.files = m_folder->path() / "shared";
    return o;
  }
  std::unique_ptr<kb::testing::scratch_database> m_db;
  std::unique_ptr<temp_dir> m_folder;
};

TEST_F(shared_queue_test, processes_taking_jobs_at_once_never_take_the_same_one) {
  constexpr int jobs = 120;
  constexpr int workers = 4;
  {
    store st(options());
    for (int i = 0; i < jobs; ++i) {
      st.enqueue({"t", "cand-" + std::to_string(i), "p"}, {{"i", i}});
    }
  }
  std::vector<pid_t> children;
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        store st(options()); // a connection of its own after fork()
        const std::string name = "worker-" + std::to_string(w);
        while (auto j = st.claim(name, 60s)) {
          st.complete(j->id, name, {{"by", name}, {"attempts", j->attempts}});
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "worker %d: %s\n", w, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  store st(options());
  const auto counts = st.count_jobs();
  EXPECT_EQ(counts.done, jobs);
  EXPECT_EQ(counts.queued + counts.running + counts.failed, 0);
  std::set<std::string> by;
  for (int i = 1; i <= jobs; ++i) {
    const auto j = st.find_job(i);
    ASSERT_TRUE(j);
    EXPECT_EQ(j->attempts, 1) << "job " << i << " was taken more than once";
    EXPECT_EQ(j->result.at("attempts"), 1);
    by.insert(j->result.at("by").get<std::string>());
  }
  EXPECT_GE(by.size(), 2u) << "the workers did not share the work";
}

TEST_F(shared_queue_test, a_worker_killed_mid_job_loses_no_finished_result_and_its_job_is_retried) {
  {
    store st(options());
    st.enqueue({"t", "first", "p"}, {{"i", 1}});
    st.enqueue({"t", "second", "p"}, {{"i", 2}});
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    store st(options());
    auto j = st.claim("doomed", 1500ms);
    st.complete(j->id, "doomed", {{"value", 42}});
    j = st.claim("doomed", 1500ms); // taken, never finished
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  store st(options());
  const auto first = st.find_job(1);
  EXPECT_EQ(first->state, job_state::done);
  EXPECT_EQ(first->result.at("value"), 42);
  EXPECT_EQ(st.find_job(2)->state, job_state::running);
  EXPECT_FALSE(st.claim("rescuer", 60s).has_value()) << "taken before the lease expired";
  std::this_thread::sleep_for(1600ms);
  const auto retried = st.claim("rescuer", 60s);
  ASSERT_TRUE(retried);
  EXPECT_EQ(retried->id, 2);
  EXPECT_EQ(retried->attempts, 2);
  EXPECT_TRUE(st.complete(2, "rescuer", {{"value", 7}}));
  EXPECT_EQ(st.count_jobs().done, 2);
}

} // namespace
} // namespace kb::store::testing
