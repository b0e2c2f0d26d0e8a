// Shared by the store tests: a fresh store in a temporary folder, and a run with the rows a
// real evaluation would write.
#pragma once

#include "common/fs.hpp"
#include "store/detail/database.hpp"
#include "store/store.hpp"
#include "task/task.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kb::store::testing {

inline const fs::path source_root = KBLASTER_SOURCE_DIR;

inline const task::contract& softmax_task() {
  static const task::contract c = task::find_task(source_root, "023");
  return c;
}

struct recorded_run {
  int64_t task = 0;
  int64_t run = 0;
  int64_t environment = 0;
  int64_t baseline = 0;
  int64_t candidate = 0;
  int64_t build = 0;
  int64_t evaluation = 0;
  std::string baseline_source;
  std::string candidate_source;
  std::string binary;
  std::string log;
  std::string artifact;
};

inline environment h200() {
  environment env;
  env.gpu_name = "NVIDIA H200";
  env.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000001";
  env.sm_count = 132;
  env.sm_clock_mhz = 1980;
  env.memory_clock_mhz = 3201;
  env.driver = "580.65.06";
  env.cuda_runtime = "13.0";
  env.nvcc_version = "13.0.88";
  env.hostname = "gpu-node";
  return env;
}

inline evaluation_record sample_evaluation(const recorded_run& r, int index) {
  evaluation_record e;
  e.run = r.run;
  e.candidate = r.candidate;
  e.baseline = r.baseline;
  e.environment = r.environment;
  e.build = r.build;
  e.shape = "official";
  e.verdict = verdict::improved;
  e.reason = "timing.improved";
  e.candidate_median = 1.0e-3;
  e.baseline_median = 1.5e-3;
  e.speedup = 1.5;
  e.ci_low = 1.45;
  e.ci_high = 1.55;
  e.p_value = 1e-6;
  e.floor_fraction = 0.8;
  e.samples = {
      {"candidate", {1.0e-3, 1.01e-3, 0.99e-3}}, {"baseline", {1.5e-3, 1.49e-3}}, {"index", index}};
  e.correctness = {{"max_abs", 1e-7}, {"rel_l2", 2e-8}};
  e.sandboxed = true;
  e.detail = {{"index", index},
              {"note", "full result document"},
              {"verdict", "improved"},
              {"reason", "timing.improved"},
              {"statistics",
               {{"speedup", 1.5}, {"median_baseline_s", 1.5e-3}, {"median_candidate_s", 1.0e-3}}}};
  return e;
}

// A task, an environment, a run with a baseline and a candidate (built, evaluated once), an
// outcome, an experience and an artifact: every table and every blob column gets a row.
inline recorded_run record_sample_run(store& st, const std::string& salt = "") {
  recorded_run r;
  r.task = st.record_task(softmax_task());
  r.environment = st.record_environment(h200());
  r.run = st.begin_run("optimize", {{"task", "023"}, {"salt", salt}});
  r.baseline_source = st.put("// baseline source " + salt).digest;
  r.candidate_source = st.put("// candidate source " + salt).digest;
  r.baseline = st.record_candidate(
      {r.task, r.baseline_source, candidate_origin::baseline, "", {}, std::nullopt});
  r.candidate = st.record_candidate({r.task,
                                     r.candidate_source,
                                     candidate_origin::proposer,
                                     "softmax.online",
                                     {{"block", 256}},
                                     r.baseline});
  r.binary = st.put("\x7f"
                    "ELF binary " +
                    salt)
                 .digest;
  r.log = st.put("nvcc log " + salt).digest;
  r.build = st.record_build(
      {{r.candidate_source, "-O3 -arch=sm_90a", "13.0", "sm_90a"}, "ok", "", r.binary, r.log, 2.5});
  r.evaluation = st.record_evaluation(sample_evaluation(r, 0));
  st.record_outcome({r.run, r.task, "improved", "timing.improved", r.candidate});
  experience x;
  x.run = r.run;
  x.task_id = "023";
  x.family = "normalize";
  x.gpu = "NVIDIA H200";
  x.strategy = "softmax.online";
  x.params = {{"block", 256}};
  x.predicted_speedup = 1.3;
  x.measured_speedup = 1.5;
  x.correct = true;
  st.record_experience(x);
  r.artifact = st.put("profiler report " + salt).digest;
  st.attach(r.run, "ncu.csv", r.artifact);
  st.finish_run(r.run, run_status::finished, "improved", "");
  return r;
}

// The first column of the first row of a query, as text, on a connection of its own.
inline std::string query_text(const fs::path& store_dir, const std::string& sql) {
  detail::connection db(store_dir / "store.sqlite", 10000);
  detail::statement s(db, sql);
  return s.step() && !s.is_null(0) ? s.column_text(0) : std::string();
}

inline int64_t query_count(const fs::path& store_dir, const std::string& sql) {
  return std::stoll(query_text(store_dir, sql));
}

class store_test : public ::testing::Test {
protected:
  void SetUp() override { m_tmp = std::make_unique<temp_dir>("kb-store-test"); }
  fs::path tmp() const { return m_tmp->path(); }
  fs::path store_dir() const { return m_tmp->path() / "store"; }

private:
  std::unique_ptr<temp_dir> m_tmp;
};

} // namespace kb::store::testing
