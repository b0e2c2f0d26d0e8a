// A/A calibration: a task's baseline against itself, in independent sessions. The spread of
// those comparisons is the smallest difference this machine can resolve; it sets the gate's delta.
#include "eval/eval.hpp"
#include "eval/stats.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"

#include <fmt/format.h>

namespace kb::eval {

using nlohmann::json;

json calibrate(const fs::path& root, const task::contract& c, int repeats, const options& opt,
               const progress_fn& progress) {
  const candidate_input base{read_file(c.baseline), c.baseline.filename().string(), "baseline"};
  std::vector<stats::aa_run> runs;
  json evaluations = json::array();
  for (int r = 0; r < repeats; ++r) {
    options o = opt;
    o.seed_base = opt.seed_base + static_cast<uint64_t>(r);
    if (progress) {
      progress(fmt::format("calibrate: task {} repeat {}/{}", c.id, r + 1, repeats));
    }
    const result res = evaluate(root, c, base, base, o, progress);
    if (!res.detail.contains("timing")) {
      fail("calibration of task {} failed: {} ({})", c.id, res.message, res.reason);
    }
    for (const auto& session : res.detail["timing"]) {
      stats::aa_run run;
      for (const auto& s : session["samples"]["baseline"]) {
        run.first.push_back(s["t"]);
      }
      for (const auto& s : session["samples"]["candidate"]) {
        run.second.push_back(s["t"]);
      }
      runs.push_back(std::move(run));
    }
    evaluations.push_back({{"verdict", to_string(res.final)},
                           {"statistics", res.detail.value("statistics", json::object())}});
  }
  const auto spread = stats::aa_spread_from_runs(runs);
  return {{"task", c.id},
          {"shape", opt.shape},
          {"sessions", runs.size()},
          {"ratio_p95", spread.ratio_p95},
          {"half_width_median", spread.half_width_median},
          {"spread", spread.spread},
          {"evaluations", evaluations}};
}

} // namespace kb::eval
