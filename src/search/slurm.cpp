// The Slurm worker provider: sbatch per queue job, squeue/sacct to follow, requeue what was lost.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "search/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <sstream>

namespace kb::search {

cluster_fate slurm_fate(const std::string& state_text) {
  // "CANCELLED by 0" -> CANCELLED; "COMPLETED+" -> COMPLETED
  std::string state = state_text.substr(0, state_text.find_first_of(" +"));
  static const std::map<std::string, cluster_fate> fates = {
      {"PENDING", cluster_fate::waiting},     {"CONFIGURING", cluster_fate::waiting},
      {"REQUEUED", cluster_fate::waiting},    {"REQUEUE_HOLD", cluster_fate::waiting},
      {"REQUEUE_FED", cluster_fate::waiting}, {"SUSPENDED", cluster_fate::waiting},
      {"RESIZING", cluster_fate::waiting},    {"RESV_DEL_HOLD", cluster_fate::waiting},
      {"RUNNING", cluster_fate::running},     {"COMPLETING", cluster_fate::running},
      {"STAGE_OUT", cluster_fate::running},   {"SIGNALING", cluster_fate::running},
      {"COMPLETED", cluster_fate::finished},  {"PREEMPTED", cluster_fate::lost},
      {"NODE_FAIL", cluster_fate::lost},      {"BOOT_FAIL", cluster_fate::lost},
      {"CANCELLED", cluster_fate::lost},      {"DEADLINE", cluster_fate::lost},
      {"OUT_OF_MEMORY", cluster_fate::lost},  {"REVOKED", cluster_fate::lost},
      {"SPECIAL_EXIT", cluster_fate::failed}, {"TIMEOUT", cluster_fate::timeout},
      {"FAILED", cluster_fate::failed},
  };
  const auto it = fates.find(state);
  return it != fates.end() ? it->second : cluster_fate::failed;
}

std::string to_string(cluster_fate v) {
  return std::string(cluster_fate_names.name(v));
}

namespace {

process_result run(const std::vector<std::string>& argv, bool cleanup = false) {
  process_spec p;
  p.argv = argv;
  p.timeout = std::chrono::seconds(60);
  p.cleanup = cleanup;
  return run_process(p);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

class slurm_workers final : public worker_provider {
public:
  slurm_workers(fs::path kblaster, std::string store, slurm_options opt)
      : m_kblaster(std::move(kblaster)), m_store(std::move(store)), m_opt(std::move(opt)) {
    if (run({"sbatch", "--version"}).spawn_failed) {
      fail_input("--executor slurm: sbatch is not on PATH (is this a Slurm login node?)");
    }
  }
  ~slurm_workers() override { shutdown(); }
  std::string name() const override { return "slurm"; }
  int slots() const override { return m_opt.max_jobs; }

  void tend(store::store& st, const std::vector<int64_t>& pending) override {
    if (stop_requested() != 0) {
      return; // stopping: nothing more is submitted
    }
    follow(st);
    for (const int64_t job : pending) {
      if (m_by_job.contains(job) || static_cast<int>(m_by_job.size()) >= m_opt.max_jobs) {
        continue;
      }
      const auto j = st.find_job(job);
      if (!j || j->state == store::job_state::done || j->state == store::job_state::failed) {
        continue;
      }
      if (j->state == store::job_state::running && j->lease_expires > now_ms()) {
        continue; // another run's worker holds it
      }
      if (const auto r = m_refused.find(job);
          r != m_refused.end() && std::chrono::steady_clock::now() < r->second.next_try) {
        continue; // sbatch refused it lately: not before its next try
      }
      submit(st, job);
    }
  }

  void shutdown() override {
    // Also on SIGINT/SIGTERM (the executor shuts its workers down): nothing submitted is left
    // running on the cluster.
    for (const auto& [job, id] : m_by_job) {
      run({"scancel", id}, true);
    }
    m_by_job.clear();
  }

private:
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // The file holding the store's location (mode 0600), written once beside the jobs' logs.
  fs::path store_location_file() {
    const fs::path file = m_opt.log_dir / "store-location";
    if (!m_location_written) {
      if (file.string().find(',') != std::string::npos) {
        fail_input("the Slurm log folder {} holds a comma, which sbatch --export cannot carry",
                   m_opt.log_dir.string());
      }
      write_file_atomic(file, m_store + "\n", 0600);
      m_location_written = true;
    }
    return file;
  }

  // sbatch refusing a job: tried again 1 s, 2 s, 4 s, ... later (at most a minute apart), and
  // after `max_refusals` refusals in a row the queue job fails (cluster.submit_failed).
  static constexpr int max_refusals = 5;
  struct refusal {
    int count = 0;
    std::chrono::steady_clock::time_point next_try;
  };

  void submit(store::store& st, int64_t job) {
    fs::create_directories(m_opt.log_dir);
    std::vector<std::string> argv = {
        "sbatch",   "--parsable", "--job-name", fmt::format("kblaster-job-{}", job),
        "--ntasks", "1",          "--output",   (m_opt.log_dir / "slurm-%j.out").string()};
    if (!m_opt.gres.empty()) {
      argv.push_back("--gres=" + m_opt.gres);
    }
    if (!m_opt.partition.empty()) {
      argv.push_back("--partition=" + m_opt.partition);
    }
    if (!m_opt.account.empty()) {
      argv.push_back("--account=" + m_opt.account);
    }
    if (!m_opt.time_limit.empty()) {
      argv.push_back("--time=" + m_opt.time_limit);
    }
    argv.insert(argv.end(), m_opt.extra.begin(), m_opt.extra.end());
    // The job's environment is explicit: the names worker_environment() allows (their values as
    // they are here), and where the store is, as a file only this user reads, so the store's URL
    // (which may hold a password) is in no command line and no job script, and the model's API
    // key stays on this host.
    std::string exported = "--export=";
    for (const auto& [name, value] : worker_environment()) {
      exported += name + ",";
    }
    exported += "KBLASTER_STORE_FILE=" + store_location_file().string();
    argv.push_back(exported);
    std::string command;
    if (!m_opt.setup.empty()) {
      // The cluster's own preparation first; a line that fails ends the job before the worker.
      command += "set -e\n" + m_opt.setup + "\nset +e\n";
    }
    if (!m_opt.store_files.empty()) {
      command += "KBLASTER_STORE_FILES=" + shell_quote(m_opt.store_files) + " ";
    }
    command += fmt::format("exec {} queue work --job {}", shell_quote(m_kblaster), job);
    argv.push_back("--wrap=" + command);
    const auto r = run(argv);
    if (!r.ok()) {
      const std::string why = fmt::format("sbatch for queue job {} failed ({}): {}", job,
                                          r.describe(), trimmed(r.output));
      auto& refused = m_refused[job];
      if (++refused.count >= max_refusals) {
        m_refused.erase(job);
        st.abandon(job, "cluster.submit_failed");
        fail("{}; refused {} times, the job fails (cluster.submit_failed)", why, max_refusals);
      }
      const auto wait = std::min(std::chrono::seconds(60),
                                 std::chrono::seconds(int64_t{1} << (refused.count - 1)));
      refused.next_try = std::chrono::steady_clock::now() + wait;
      fail("{}; trying again in {} s", why, wait.count());
    }
    m_refused.erase(job);
    // --parsable: "jobid" or "jobid;cluster"
    const std::string id = trimmed(r.output).substr(0, trimmed(r.output).find(';'));
    m_by_job[job] = id;
  }

  // The state of each submitted job: squeue while Slurm remembers it, else sacct.
  std::map<std::string, std::string> states() {
    std::map<std::string, std::string> out;
    if (m_by_job.empty()) {
      return out;
    }
    std::string ids;
    for (const auto& [job, id] : m_by_job) {
      ids += (ids.empty() ? "" : ",") + id;
    }
    const auto q = run({"squeue", "-h", "-t", "all", "-j", ids, "-o", "%i %T"});
    std::istringstream lines(q.output);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string id, state;
      if (words >> id >> state) {
        out[id] = state;
      }
    }
    for (const auto& [job, id] : m_by_job) {
      if (out.contains(id)) {
        continue;
      }
      const auto a = run({"sacct", "-n", "-P", "-X", "-j", id, "-o", "State"});
      const std::string state = trimmed(a.output.substr(0, a.output.find('\n')));
      if (a.ok() && !state.empty()) {
        out[id] = state;
      }
    }
    return out;
  }

  void follow(store::store& st) {
    const auto known = states();
    std::vector<int64_t> settled;
    for (const auto& [job, id] : m_by_job) {
      const auto it = known.find(id);
      if (it == known.end()) {
        continue; // not visible yet
      }
      const auto fate = slurm_fate(it->second);
      if (fate == cluster_fate::waiting || fate == cluster_fate::running) {
        continue;
      }
      settled.push_back(job);
      const auto j = st.find_job(job);
      if (!j || j->state == store::job_state::done) {
        continue;
      }
      const std::string state = it->second.substr(0, it->second.find(' '));
      if (fate == cluster_fate::timeout) {
        st.abandon(job, "cluster.timeout");
        continue;
      }
      // Lost by the cluster, or a worker that ended without finishing: back in the queue, and
      // submitted again at the next look.
      if (auto& n = m_resubmits[job]; n < m_opt.resubmits) {
        ++n;
        st.requeue(job, "cluster." + to_string(fate) + "." + state);
      } else {
        st.abandon(job, "cluster." + to_string(fate));
      }
    }
    for (const int64_t job : settled) {
      m_by_job.erase(job);
    }
  }

  fs::path m_kblaster;
  std::string m_store;
  slurm_options m_opt;
  std::map<int64_t, std::string> m_by_job; // queue job -> Slurm job id
  std::map<int64_t, int> m_resubmits;
  std::map<int64_t, refusal> m_refused; // queue job -> sbatch's refusals of it in a row
  bool m_location_written = false;
};

} // namespace

std::unique_ptr<worker_provider> make_slurm_workers(fs::path kblaster, std::string store_location,
                                                    slurm_options opt) {
  return std::make_unique<slurm_workers>(std::move(kblaster), std::move(store_location),
                                         std::move(opt));
}

} // namespace kb::search
