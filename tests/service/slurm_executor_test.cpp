// Evaluation jobs through a real Slurm (scripts/services.sh starts slurmctld and slurmd on this
// machine, with munge): the executor submits sbatch jobs running `kblaster queue work --job ID`,
// follows them and resubmits what the cluster lost. This machine has no GPU, so a job runs the CPU
// path: it compiles the oracle and the candidates, runs the CPU oracle and the checker's
// self-test, and reports the GPU stages blocked. The Slurm settings can come from the config
// file's [slurm] table: a job submitted with them lands in the partition the file names.
#include "common/fs.hpp"
#include "common/process.hpp"
#include "search/executor.hpp"
#include "task/task.hpp"

#include <chrono>
#include <gtest/gtest.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

namespace kb::search {
namespace {

using namespace std::chrono_literals;

const fs::path source_root = KBLASTER_SOURCE_DIR;

bool slurm_ready() {
  const char* up = std::getenv("KBLASTER_TEST_SLURM");
  if (up != nullptr && std::string(up) == "1") {
    return true;
  }
  const char* absent = std::getenv("KBLASTER_TEST_NO_SLURM");
  if (absent == nullptr || std::string(absent) != "1") {
    ADD_FAILURE() << "KBLASTER_TEST_SLURM is not 1: start Slurm (scripts/services.sh start) and "
                     "source its services.env, or set KBLASTER_TEST_NO_SLURM=1 on a machine "
                     "without it";
  }
  return false;
}

// `cleanup`: runs also once a stop was asked for (else a child started then is killed at once).
std::string run_text(const std::vector<std::string>& argv, bool cleanup = false) {
  process_spec p;
  p.argv = argv;
  p.timeout = 60s;
  p.cleanup = cleanup;
  return run_process(p).output;
}

class slurm_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (!slurm_ready()) {
      GTEST_SKIP() << "KBLASTER_TEST_NO_SLURM=1: this machine has no Slurm";
    }
    m_dir = std::make_unique<temp_dir>("kb-slurm");
    m_logs = m_dir->path() / "logs";
  }

  std::unique_ptr<executor> make(int max_jobs = 4) {
    slurm_options s;
    s.gres = ""; // this cluster has no GPUs
    s.max_jobs = max_jobs;
    return make(s);
  }

  std::unique_ptr<executor> make(slurm_options s, queue_options q = {}) {
    q.store.dir = m_dir->path() / "store";
    q.poll = 300ms;
    s.log_dir = m_logs;
    return make_queue_executor(source_root, q,
                               make_slurm_workers(KBLASTER_BINARY, q.store.dir.string(), s));
  }

  // The Slurm job ids of the jobs this test submitted, from their output files.
  std::vector<std::string> job_ids() const {
    std::vector<std::string> ids;
    if (fs::exists(m_logs)) {
      for (const auto& e : fs::directory_iterator(m_logs)) {
        const auto name = e.path().filename().string(); // slurm-<id>.out
        if (name.starts_with("slurm-") && name.ends_with(".out")) {
          ids.push_back(name.substr(6, name.size() - 10));
        }
      }
    }
    return ids;
  }

  static eval::options cpu_options() {
    eval::options o;
    o.cache_dir = KBLASTER_TEST_CACHE;
    o.no_sandbox = true; // the verdict must come from the missing GPU, not the sandbox probe
    o.seeds = 1;
    o.sessions = 1;
    return o;
  }

  // The Slurm jobs this test submitted, by their output files.
  int submitted() const {
    int n = 0;
    if (fs::exists(m_logs)) {
      for (const auto& e : fs::directory_iterator(m_logs)) {
        n += e.path().filename().string().starts_with("slurm-") ? 1 : 0;
      }
    }
    return n;
  }

  std::unique_ptr<temp_dir> m_dir;
  fs::path m_logs;
};

void expect_cpu_path(const eval::result& r) {
  EXPECT_EQ(r.final, eval::verdict::blocked) << r.reason << ": " << r.message;
  EXPECT_EQ(r.reason, "blocked.no_cuda_device");
  ASSERT_EQ(r.builds.count("oracle"), 1u);
  EXPECT_EQ(r.builds.at("oracle").status, build::outcome::ok) << r.builds.at("oracle").log;
  ASSERT_TRUE(r.detail.contains("cpu_check")) << r.detail.dump().substr(0, 400);
  EXPECT_TRUE(r.detail["cpu_check"].value("ok", false)) << r.detail["cpu_check"].dump();
  EXPECT_TRUE(r.detail["cpu_check"].contains("checker_selftest"));
}

TEST_F(slurm_test, an_evaluation_runs_as_a_slurm_job_and_reports_the_gpu_stages_blocked) {
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  auto exec = make();
  const auto r = exec->evaluate(c, base, base, cpu_options());
  expect_cpu_path(r);
  EXPECT_EQ(submitted(), 1);
  // The same evaluation again is the same job: its result is reused, nothing is submitted.
  const auto again = exec->evaluate(c, base, base, cpu_options());
  EXPECT_EQ(again.reason, r.reason);
  EXPECT_EQ(again.detail.dump(), r.detail.dump());
  EXPECT_EQ(submitted(), 1);
}

TEST_F(slurm_test, a_job_cancelled_mid_run_is_submitted_again_and_finishes) {
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  // The job's setup lines hold the first job until it is cancelled (it leaves a marker, so the
  // job submitted again goes straight on): the cancel lands while the job runs, however fast the
  // evaluation itself would be.
  const auto marker = m_dir->path() / "first-job-running";
  slurm_options s;
  s.gres = "";
  s.setup =
      "if [ ! -e '" + marker.string() + "' ]; then touch '" + marker.string() + "'; sleep 600; fi";
  auto exec = make(s);
  auto pending =
      std::async(std::launch::async, [&] { return exec->evaluate(c, base, base, cpu_options()); });
  // Wait for the Slurm job to run, then cancel it as an administrator (or a preemption) would.
  for (int i = 0; i < 600 && !fs::exists(marker); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(fs::exists(marker)) << "the job never ran";
  const auto ids = job_ids();
  ASSERT_EQ(ids.size(), 1u);
  const std::string id = ids[0];
  EXPECT_EQ(run_text({"squeue", "-h", "-j", id, "-o", "%T"}).substr(0, 7), "RUNNING");
  run_text({"scancel", id});
  ASSERT_EQ(pending.wait_for(600s), std::future_status::ready);
  const auto r = pending.get();
  expect_cpu_path(r);
  EXPECT_EQ(submitted(), 2) << "the cancelled job was not submitted again (once)";
  const auto state = run_text({"squeue", "-h", "-t", "all", "-j", id, "-o", "%T"});
  EXPECT_NE(state.find("CANCELLED"), std::string::npos) << state;
}

TEST_F(slurm_test, a_job_whose_setup_fails_is_retried_and_then_fails_with_the_clusters_reason) {
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  slurm_options s;
  s.gres = "";
  s.resubmits = 1;
  s.setup = "echo preparing; false";
  auto exec = make(s);
  const auto r = exec->evaluate(c, base, base, cpu_options());
  EXPECT_EQ(r.final, eval::verdict::error) << r.reason << ": " << r.message;
  EXPECT_TRUE(r.reason.starts_with("cluster.")) << r.reason << ": " << r.message;
  EXPECT_GE(submitted(), 2) << "a failed job is submitted again while attempts remain";
  // The worker never started: the job's output holds the setup's line and nothing of kblaster.
  for (const auto& id : job_ids()) {
    const auto out = read_file(m_logs / ("slurm-" + id + ".out"));
    EXPECT_NE(out.find("preparing"), std::string::npos) << out;
    EXPECT_EQ(out.find("queue job"), std::string::npos) << out;
  }
}

// No credential reaches the cluster: the job's script and command line hold no store location
// (a URL may hold a password), which travels in a file only the user reads, and the job gets the
// worker's environment, not the submitter's (an API key stays on the login node).
TEST_F(slurm_test, a_job_carries_no_store_location_in_its_script_and_not_the_submitters_secrets) {
  ::setenv("KB_TEST_API_KEY_45", "sk-stays-on-the-login-node", 1);
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  slurm_options s;
  s.gres = "";
  const auto env_file = m_dir->path() / "job-env.txt";
  s.setup = "env > '" + env_file.string() + "'";
  auto exec = make(s);
  const auto r = exec->evaluate(c, base, base, cpu_options());
  ::unsetenv("KB_TEST_API_KEY_45");
  expect_cpu_path(r);
  const auto ids = job_ids();
  ASSERT_EQ(ids.size(), 1u);
  const std::string script = run_text({"scontrol", "write", "batch_script", ids[0], "-"});
  EXPECT_NE(script.find("queue work"), std::string::npos) << script;
  const std::string store_location = (m_dir->path() / "store").string();
  EXPECT_EQ(script.find(store_location), std::string::npos) << script;
  const std::string env = read_file(env_file);
  EXPECT_EQ(env.find("KB_TEST_API_KEY_45"), std::string::npos) << env;
  EXPECT_NE(env.find("KBLASTER_STORE_FILE="), std::string::npos) << env;
  const auto location = m_logs / "store-location";
  EXPECT_EQ(read_file(location), store_location + "\n");
  EXPECT_EQ(fs::status(location).permissions() & (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);
}

TEST_F(slurm_test, a_job_gets_the_partition_time_and_sbatch_options_of_the_config_file) {
  // scripts/services.sh makes a second partition, not the default: a job reaches it only when
  // asked. The file names it, a time limit and an extra option; the command line's layer says
  // this cluster has no GPUs, over the file's gres.
  const auto partitions = run_text({"sinfo", "-h", "-o", "%P"});
  ASSERT_NE(partitions.find("second"), std::string::npos)
      << "no partition `second` (restart the services with scripts/services.sh start): "
      << partitions;
  const auto nonce = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  const auto config = m_dir->path() / "config.toml";
  write_file_atomic(config, "[slurm]\npartition = \"second\"\ntime = \"7:00\"\ngres = "
                            "\"gpu:1\"\nsbatch_args = [\"--comment=kblaster-config-" +
                                nonce + "\"]\n");
  slurm_options s;
  apply(slurm_settings_from_toml(config), s);
  slurm_settings command_line;
  command_line.gres = "";
  apply(command_line, s);
  ASSERT_EQ(s.partition, "second");
  ASSERT_EQ(s.gres, "");

  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  auto exec = make(s);
  const auto r = exec->evaluate(c, base, base, cpu_options());
  expect_cpu_path(r);
  const auto ids = job_ids();
  ASSERT_EQ(ids.size(), 1u);
  // The job record, as Slurm keeps it (squeue remembers finished jobs for MinJobAge). The
  // worker's result can reach the store while Slurm still says COMPLETING: wait for the end.
  std::string record;
  for (int i = 0; i < 100; ++i) {
    const auto out = run_text({"squeue", "-h", "-t", "all", "-j", ids[0], "-o", "%P|%l|%k|%T"});
    record = out.substr(0, out.find('\n'));
    if (!record.ends_with("COMPLETING")) {
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(record, "second|7:00|kblaster-config-" + nonce + "|COMPLETED") << record;
}

// A job sbatch refuses (a partition the cluster does not have) is tried again a few times,
// further apart each time, and then fails with reason cluster.submit_failed and sbatch's message
// on the coordinator's terminal; the evaluation does not wait the queue's hours for it.
TEST_F(slurm_test, a_job_sbatch_refuses_is_tried_a_few_times_further_apart_and_then_fails) {
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  slurm_options s;
  s.gres = "";
  s.partition = "kb_no_such_partition";
  std::mutex lines_lock;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> lines;
  queue_options q;
  q.job_deadline = 180s; // a bound for the test itself: the refusals must end the wait sooner
  q.say = [&](const std::string& line) {
    std::lock_guard lock(lines_lock);
    lines.emplace_back(std::chrono::steady_clock::now(), line);
  };
  auto exec = make(s, q);
  const auto started = std::chrono::steady_clock::now();
  const auto r = exec->evaluate(c, base, base, cpu_options());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 120s);
  EXPECT_EQ(r.final, eval::verdict::error) << r.reason << ": " << r.message;
  EXPECT_EQ(r.reason, "cluster.submit_failed") << r.message;
  std::lock_guard lock(lines_lock);
  std::vector<std::chrono::steady_clock::time_point> tries;
  for (const auto& [at, line] : lines) {
    if (line.find("sbatch for queue job") != std::string::npos) {
      tries.push_back(at);
      EXPECT_NE(line.find("partition"), std::string::npos) << "sbatch's message: " << line;
    }
  }
  ASSERT_EQ(tries.size(), 5u) << "one line per refusal";
  EXPECT_NE(lines.back().second.find("cluster.submit_failed"), std::string::npos)
      << lines.back().second;
  // 1 s, 2 s, 4 s, 8 s apart (the poll adds a little): not once per poll.
  EXPECT_GE(tries.back() - tries.front(), 14s);
  EXPECT_EQ(submitted(), 0);
}

// A coordinator stopped by SIGINT or SIGTERM leaves nothing running on the cluster: the waiting
// evaluation ends (run.interrupted, its job stays in the queue for --resume) and the executor
// cancels the Slurm job it submitted. (The stop is asked for as the signal handler does; the test
// is last in this file, as the stop holds for the rest of the process.)
TEST_F(slurm_test, a_stopped_coordinator_cancels_the_jobs_it_submitted) {
  const auto c = task::find_task(source_root, "019");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  const auto marker = m_dir->path() / "job-running";
  slurm_options s;
  s.gres = "";
  s.setup = "touch '" + marker.string() + "'; sleep 600";
  auto exec = make(s);
  auto pending =
      std::async(std::launch::async, [&] { return exec->evaluate(c, base, base, cpu_options()); });
  for (int i = 0; i < 600 && !fs::exists(marker); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(fs::exists(marker)) << "the job never ran";
  const auto ids = job_ids();
  ASSERT_EQ(ids.size(), 1u);
  request_stop(SIGTERM);
  ASSERT_EQ(pending.wait_for(30s), std::future_status::ready);
  const auto r = pending.get();
  EXPECT_EQ(r.final, eval::verdict::error);
  EXPECT_EQ(r.reason, "run.interrupted") << r.message;
  exec.reset(); // the coordinator's executor ends as the stopped command does
  std::string state;
  for (int i = 0; i < 100; ++i) {
    state = run_text({"squeue", "-h", "-t", "all", "-j", ids[0], "-o", "%T"}, true);
    if (state.find("CANCELLED") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_NE(state.find("CANCELLED"), std::string::npos) << state;
  EXPECT_EQ(submitted(), 1) << "nothing is submitted once stopped";
}

} // namespace
} // namespace kb::search
