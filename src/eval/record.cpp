// Turning an evaluation into store rows: every attempt is recorded, failures included.
#include "eval/eval.hpp"

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

std::optional<double> number(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number()) {
    return j[key].get<double>();
  }
  return std::nullopt;
}

} // namespace

int64_t record(store::store& st, int64_t run, const task::contract& c,
               const candidate_input& candidate, const candidate_input& baseline, const result& r) {
  const json d = r.detail.is_object() ? r.detail : json::object();
  int64_t evaluation = 0;
  st.atomically([&] {
    const int64_t task_row = st.record_task(c);
    std::optional<int64_t> env;
    if (d.contains("device")) {
      const json& dev = d["device"];
      store::environment e;
      e.gpu_name = dev.value("name", "");
      e.gpu_uuid = dev.value("uuid", "");
      e.sm_count = dev.value("sm_count", 0);
      e.driver = dev.value("driver_version", "");
      e.cuda_runtime = std::to_string(dev.value("cuda_runtime", 0));
      e.nvcc_version = d.value("toolchain", json::object()).value("version", "");
      e.hostname = hostname();
      e.extra = dev;
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
    if (d.contains("builds") && d["builds"].contains("candidate")) {
      const json& b = d["builds"]["candidate"];
      store::build_record br;
      br.key.source_digest = cand_blob.digest;
      br.key.flags =
          fmt::format("{}", fmt::join(b.value("flags", std::vector<std::string>{}), " "));
      br.key.toolkit = d.value("toolchain", json::object()).value("version", "");
      br.key.arch = d.value("toolchain", json::object()).value("arch", "");
      br.outcome = b.value("status", "");
      br.reason = b.value("reason", "");
      br.seconds = b.value("seconds", 0.0);
      const fs::path binary = b.value("binary", "");
      if (!binary.empty() && fs::exists(binary)) {
        br.binary_digest = st.put_file(binary).digest;
      }
      br.log_digest = st.put(b.value("log_tail", "")).digest;
      build = st.record_build(br);
    }

    store::evaluation_record e;
    e.run = run;
    e.candidate = cand_id;
    e.baseline = base_id;
    e.environment = env;
    e.build = build;
    e.shape = d.value("shape", json::object()).value("name", "");
    e.verdict = store::verdict_from_string(to_string(r.final)).value_or(store::verdict::error);
    e.reason = r.reason;
    const json stats = d.value("statistics", json::object());
    e.candidate_median = number(stats, "median_candidate_s");
    e.baseline_median = number(stats, "median_baseline_s");
    e.speedup = number(stats, "speedup");
    if (stats.contains("speedup_ci")) {
      e.ci_low = stats["speedup_ci"][0].get<double>();
      e.ci_high = stats["speedup_ci"][1].get<double>();
    }
    // The gate's p (sessions and blocks respected), not the pooled Mann-Whitney p it keeps for
    // reference.
    e.p_value = number(stats, "p");
    if (!e.p_value) {
      e.p_value = number(stats, "mann_whitney_p");
    }
    e.floor_fraction = number(stats, "floor_fraction");
    e.samples = d.contains("timing") ? d["timing"] : json();
    json correctness = json::object();
    for (const auto& l : d.value("verification", json::array())) {
      correctness[l.value("role", "?")] = {{"accepted", l.value("accepted", false)},
                                           {"summary", l.value("summary", json::object())},
                                           {"reason", l.value("reason", "")}};
    }
    if (d.contains("checker_selftest")) {
      correctness["checker_selftest"] = d["checker_selftest"];
    }
    e.correctness = correctness;
    e.sandboxed = d.value("isolation", json::object()).value("level", "") == "sandboxed";
    json detail = d;
    detail.erase("timing"); // kept once, as the samples blob
    e.detail = detail;
    evaluation = st.record_evaluation(e);
  });
  return evaluation;
}

} // namespace kb::eval
