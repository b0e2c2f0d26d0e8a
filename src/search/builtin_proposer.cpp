#include "search/builtin_proposer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace kb::search {

using nlohmann::json;

std::vector<json> builtin_proposer::point_order(const strategy& st, const json& best) {
  std::vector<json> out{resolve_params(st, best)};
  for (const auto& axis : st.space) {
    const auto& values = axis.values;
    const auto at = std::find(values.begin(), values.end(), out.front().at(axis.name));
    const auto index = at == values.end() ? 0 : static_cast<size_t>(at - values.begin());
    for (const int step : {+1, -1, +2, -2}) {
      const auto k = static_cast<long>(index) + step;
      if (k >= 0 && k < static_cast<long>(values.size())) {
        json p = out.front();
        p[axis.name] = values[static_cast<size_t>(k)];
        out.push_back(p);
      }
    }
  }
  for (const auto& corner : corner_points(st)) {
    out.push_back(resolve_params(st, corner));
  }
  return out;
}

proposal_result builtin_proposer::propose(const proposal_context& ctx) {
  const task::contract& c = *ctx.task;
  for (const auto& ranked : ctx.retrieved) {
    const strategy& st = find_strategy(ranked.strategy);
    // The centre: the best point of this strategy on this task so far, else memory's for the
    // nearest shape class (ranked.params) when it beat that task's default by
    // memory::transfer_margin (ranked.params_first), else the default.
    const bool transferred = ranked.params.is_object() && !ranked.params.empty();
    json best = transferred && ranked.params_first ? ranked.params : st.defaults;
    double best_speedup = 0;
    for (const auto& e : m_memory.attempts(c, ctx.gpu, st.name)) {
      if (e.correct && e.measured_speedup.value_or(0) > best_speedup) {
        best_speedup = *e.measured_speedup;
        best = e.params;
      }
    }
    // Around the centre first. A point carried over from another task that beat that task's
    // default by less than the margin is often best on its own task only: on the H200's outcome
    // table 019's best elementwise point (4% over its default) and 023's best split_row point
    // (7%) cost 026 and 040 one or two evaluations that their defaults did not, and 088's
    // (block 128, 1% over its default) took 901's search away from its own best. Such a point
    // is not the centre: the default is, and its neighbours go in the order of what their moves
    // gained on other tasks (below), which weighs every attempt there rather than one best point.
    // Then around memory's point and the default, so a local optimum does not end the strategy
    // early.
    std::vector<json> order;
    for (const json& centre : {best, ranked.params, st.defaults}) {
      if (!centre.is_object() || centre.empty()) {
        continue;
      }
      auto around = point_order(st, centre);
      if (m_seed != 0 && around.size() > 2) {
        std::mt19937_64 rng(m_seed ^ std::hash<std::string>{}(c.id + "|" + st.name));
        std::shuffle(around.begin() + 1, around.end(), rng);
      }
      // Neighbours first whose move from the centre gained most where the strategy ran on other
      // tasks (memory's value_scores, nearer shape classes weighing more); ties keep the order
      // above, so without such experiences the order is unchanged.
      if (!ranked.value_scores.empty() && around.size() > 2) {
        const json from = around.front();
        std::stable_sort(around.begin() + 1, around.end(), [&](const json& a, const json& b) {
          return ranked.move_score(from, a) > ranked.move_score(from, b);
        });
      }
      order.insert(order.end(), around.begin(), around.end());
    }
    for (const auto& point : order) {
      const std::string key = c.id + "|" + st.name + "|" + point.dump();
      if (m_issued.count(key) != 0 || m_memory.tried(c, ctx.gpu, st.name, point) ||
          (m_admissible && !m_admissible(c, st.name, point))) {
        continue;
      }
      m_issued.insert(key);
      proposal p;
      p.strategy = st.name;
      p.params = point;
      p.source = generate(c, st, point);
      p.origin = "builtin";
      p.predicted_speedup = ranked.attempts > 0 ? std::max(ranked.mean_speedup, 1.0) : 1.2;
      p.hypothesis = fmt::format(
          "{} {} (memory: {} attempts on {} tasks of this family, best {:.2f}x)", st.rationale,
          point.dump(), ranked.attempts, task::to_string(c.fam), ranked.best_speedup);
      p.trace = {{"rank", &ranked - ctx.retrieved.data()},
                 {"score", ranked.score},
                 {"started_from", best},
                 {"evidence", ranked.evidence}};
      return {p, false, "", ""};
    }
  }
  return {std::nullopt, true, "builtin.exhausted",
          "every applicable strategy and parameter point has been tried on this task"};
}

proposal_result builtin_proposer::repair(const proposal_context& ctx, const proposal&,
                                         const std::string&) {
  return propose(ctx);
}

} // namespace kb::search
