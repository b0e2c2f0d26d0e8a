// Turning an evaluation into store rows: every attempt is recorded, failures included.
#include "eval/eval.hpp"
#include "eval/verification.hpp"

#include "common/fs.hpp"
#include "common/sha256.hpp"

#include <fmt/format.h>

#include <unistd.h>

namespace kb::eval {

using nlohmann::json;

namespace {

store::candidate_origin origin_of(const std::string& s) {
  if (s == "candidate") {
    return store::candidate_origin::import;
  }
  return store::candidate_origin_from_string(s).value_or(store::candidate_origin::import);
}

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

} // namespace

int64_t record(store::store& st, int64_t run, const task::contract& c,
               const candidate_input& candidate, const candidate_input& baseline, const result& r) {
  int64_t evaluation = 0;
  st.atomically([&] {
    const int64_t task_row = st.record_task(c);
    std::optional<int64_t> env;
    if (r.context.device) {
      const auto& dev = *r.context.device;
      store::environment e;
      e.gpu_name = dev.name;
      e.gpu_uuid = dev.uuid;
      e.sm_count = dev.sm_count;
      e.driver = dev.driver_version;
      e.cuda_runtime = std::to_string(dev.cuda_runtime);
      e.nvcc_version = r.context.toolkit;
      e.hostname = hostname();
      e.extra = dev.record;
      env = st.record_environment(e);
    }
    const auto base_blob = st.put(baseline.source);
    const int64_t base_id =
        st.record_candidate({task_row, base_blob.digest, origin_of(baseline.origin),
                             baseline.strategy, baseline.params, std::nullopt});
    const auto cand_blob = st.put(candidate.source);
    const int64_t cand_id =
        st.record_candidate({task_row, cand_blob.digest, origin_of(candidate.origin),
                             candidate.strategy, candidate.params, std::nullopt});

    std::optional<int64_t> build;
    if (const auto b = r.builds.find("candidate"); b != r.builds.end()) {
      store::build_record br;
      br.key.source_digest = cand_blob.digest;
      br.key.flags = fmt::format("{}", fmt::join(b->second.flags, " "));
      br.key.toolkit = r.context.toolkit;
      br.key.arch = r.context.arch;
      br.outcome = build::to_string(b->second.status);
      br.reason = b->second.reason;
      br.seconds = b->second.seconds;
      if (!b->second.binary.empty() && fs::exists(b->second.binary)) {
        br.binary_digest = st.put_file(b->second.binary).digest;
      }
      br.log_digest = st.put(b->second.log).digest;
      build = st.record_build(br);
    }

    store::evaluation_record e;
    e.run = run;
    e.candidate = cand_id;
    e.baseline = base_id;
    e.environment = env;
    e.build = build;
    e.shape = r.context.shape;
    e.verdict = r.final;
    e.reason = r.reason;
    if (r.gate) {
      e.candidate_median = r.gate->median_candidate_s;
      e.baseline_median = r.gate->median_baseline_s;
      e.speedup = r.gate->speedup;
      e.ci_low = r.gate->speedup_low;
      e.ci_high = r.gate->speedup_high;
      // The gate's p (sessions and blocks respected), not the pooled Mann-Whitney p the record
      // keeps for reference.
      e.p_value = r.gate->p;
      e.floor_fraction = r.gate->floor_fraction;
    }
    e.samples = r.timing.empty() ? json() : json(r.timing);
    json correctness = json::object();
    for (const auto& l : r.verification) {
      const auto summary = summary_of(l);
      correctness[l.role] = {{"accepted", l.accepted},
                             {"summary", summary ? json(*summary) : json::object()},
                             {"reason", l.reason}};
    }
    if (r.checker_selftest) {
      correctness["checker_selftest"] = *r.checker_selftest;
    }
    e.correctness = correctness;
    e.sandboxed = r.context.isolation == "sandboxed";
    json stored = to_json(r);
    stored.erase("timing"); // kept once, as the samples blob
    e.detail = stored;
    evaluation = st.record_evaluation(e);
  });
  return evaluation;
}

} // namespace kb::eval
