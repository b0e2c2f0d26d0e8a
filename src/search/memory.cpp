#include "search/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace kb::search {

using nlohmann::json;

double reward(const store::experience& e) {
  if (!e.correct || !e.measured_speedup || *e.measured_speedup <= 0) {
    return -1.0; // log2(0.5)
  }
  return std::log2(*e.measured_speedup);
}

std::vector<strategy_stats> summarize(const std::vector<store::experience>& experiences) {
  std::map<std::string, strategy_stats> by;
  for (const auto& e : experiences) {
    auto& s = by[e.strategy];
    s.strategy = e.strategy;
    s.attempts += 1;
    s.mean_reward += (reward(e) - s.mean_reward) / s.attempts;
    if (e.correct) {
      s.correct += 1;
      const double sp = e.measured_speedup.value_or(0);
      if (sp > 1) {
        s.successes += 1;
      }
      if (sp > s.best_speedup) {
        s.best_speedup = sp;
        s.best_params = e.params;
      }
    } else if (s.last_failure.empty()) {
      s.last_failure = e.failure_reason; // experiences arrive newest first
    }
  }
  std::vector<strategy_stats> out;
  for (auto& [k, v] : by) {
    out.push_back(std::move(v));
  }
  return out;
}

double ucb_score(const strategy_stats& s, int total_attempts, double exploration) {
  if (s.attempts == 0) {
    return std::numeric_limits<double>::infinity();
  }
  return s.mean_reward +
         exploration * std::sqrt(std::log(std::max(total_attempts, 1)) / s.attempts);
}

std::vector<store::experience> memory::visible(const task::contract& c,
                                               const std::string& gpu) const {
  auto all = m_store.find_experiences(task::to_string(c.fam), gpu);
  if (m_isolated_run) {
    std::erase_if(all, [&](const store::experience& e) {
      return e.run == m_isolated_run && e.task_id != c.id;
    });
  }
  return all;
}

std::vector<strategy_outcome> memory::rank(const task::contract& c, const std::string& gpu,
                                           const std::vector<const strategy*>& applicable,
                                           double exploration) const {
  const auto stats = summarize(visible(c, gpu));
  int total = 0;
  for (const auto& s : stats) {
    total += s.attempts;
  }
  std::vector<strategy_outcome> out;
  for (size_t i = 0; i < applicable.size(); ++i) {
    const strategy& st = *applicable[i];
    strategy_stats s;
    s.strategy = st.name;
    for (const auto& x : stats) {
      if (x.strategy == st.name) {
        s = x;
      }
    }
    strategy_outcome o;
    o.strategy = st.name;
    o.description = st.description;
    o.params = s.attempts > 0 ? s.best_params : st.defaults;
    o.attempts = s.attempts;
    o.successes = s.successes;
    o.best_speedup = s.best_speedup;
    o.mean_speedup = s.attempts > 0 ? std::exp2(s.mean_reward) : 0;
    o.last_failure = s.last_failure;
    // Untried strategies keep their library order among themselves.
    o.score = s.attempts == 0 ? 1e9 - static_cast<double>(i) : ucb_score(s, total, exploration);
    out.push_back(o);
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const strategy_outcome& a, const strategy_outcome& b) { return a.score > b.score; });
  return out;
}

std::string memory_key::to_string() const {
  return fmt::format("{} x {} x {}", task::to_string(fam), profile::to_string(state),
                     shape.to_string());
}

namespace {

// The shape distance of an experience from the task at `key`: -1 for the task itself, 100 for
// an experience without a shape class.
int key_distance(const store::experience& e, const std::string& task_id, const memory_key& key) {
  if (e.task_id == task_id) {
    return -1;
  }
  const json features = e.op_features.is_object() ? e.op_features : json::object();
  const auto cls = shape_class::parse(features.value("shape_class", std::string()));
  return cls ? distance(*cls, key.shape) : 100;
}

} // namespace

double key_weight(const store::experience& e, const std::string& task_id, const memory_key& key) {
  const auto st = profile::state_from_string(e.state_before);
  const double state_factor = st && *st == key.state ? 1.0 : 0.5;
  const int d = key_distance(e, task_id, key);
  return d < 0 ? state_factor : state_factor / (1.0 + d);
}

double strategy_outcome::move_score(const json& centre, const json& point) const {
  double sum = 0;
  if (!centre.is_object() || !point.is_object()) {
    return sum;
  }
  for (const auto& [axis, values] : value_scores) {
    if (!point.contains(axis) || !centre.contains(axis) || point.at(axis) == centre.at(axis)) {
      continue;
    }
    const auto score = [&](const json& v) {
      const auto it = values.find(v.dump());
      return it != values.end() ? it->second : 0.0;
    };
    sum += score(point.at(axis)) - score(centre.at(axis));
  }
  return sum;
}

namespace {

// strategy_outcome::value_scores for one strategy from other tasks' attempts at it: each correct
// one's log2 speedup less its task's mean for the strategy (so that a task where everything is
// fast does not make its values look good), averaged per axis value with the key's weights.
std::map<std::string, std::map<std::string, double>>
value_scores_of(const std::vector<store::experience>& experiences, const std::string& strategy,
                const std::string& task_id, const memory_key& key) {
  // The strategy's correct attempts on other tasks (this task's own choose the centre).
  std::vector<const store::experience*> lessons;
  for (const auto& e : experiences) {
    if (e.strategy == strategy && e.correct && e.measured_speedup.value_or(0) > 0 &&
        e.params.is_object() && e.task_id != task_id) {
      lessons.push_back(&e);
    }
  }
  std::map<std::string, std::pair<double, int>> task_mean; // task -> (sum of log2, count)
  for (const auto* e : lessons) {
    auto& [sum, n] = task_mean[e->task_id];
    sum += std::log2(*e->measured_speedup);
    n += 1;
  }
  std::map<std::string, std::map<std::string, std::pair<double, double>>> acc; // weighted sums
  for (const auto* e : lessons) {
    const auto& [sum, n] = task_mean.at(e->task_id);
    const double relative = std::log2(*e->measured_speedup) - sum / n;
    const double w = key_weight(*e, task_id, key);
    for (const auto& [axis, value] : e->params.items()) {
      auto& [weighted, weights] = acc[axis][value.dump()];
      weighted += w * relative;
      weights += w;
    }
  }
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& [axis, values] : acc) {
    for (const auto& [value, sums] : values) {
      if (sums.second > 0) {
        const double mean = sums.first / sums.second;
        // A value every experience shares averages to 0 up to rounding: keep it 0, so that a
        // move along an axis nobody varied neither wins nor loses.
        out[axis][value] = std::fabs(mean) < 1e-9 ? 0.0 : mean;
      }
    }
  }
  return out;
}

} // namespace

std::vector<strategy_outcome> memory::rank(const task::contract& c, const std::string& gpu,
                                           const std::vector<const strategy*>& applicable,
                                           const memory_key& key,
                                           const rank_options& options) const {
  struct weighted {
    double weight = 0;
    double reward = 0; // weighted sum
    int attempts = 0;
    int successes = 0;
    int best_distance = 1000; // of the experience the best parameters come from
    double best_speedup = 0;
    json best_params;
    std::string best_task;
    std::string last_failure;
    double own_weight = 0;
  };
  std::map<std::string, weighted> by;
  double total = 0;
  const auto experiences = m_store.find_experiences(task::to_string(c.fam), gpu);
  for (const auto& e : experiences) {
    const double w = key_weight(e, c.id, key);
    auto& s = by[e.strategy];
    s.weight += w;
    s.reward += w * reward(e);
    s.attempts += 1;
    total += w;
    if (e.task_id == c.id) {
      s.own_weight += w;
    }
    if (e.correct) {
      const double sp = e.measured_speedup.value_or(0);
      s.successes += sp > 1 ? 1 : 0;
      // The best parameters of the nearest shape class where the strategy was correct and
      // faster than the baseline (this task first).
      const int d = key_distance(e, c.id, key);
      if (sp > 1 && (d < s.best_distance || (d == s.best_distance && sp > s.best_speedup))) {
        s.best_distance = d;
        s.best_speedup = sp;
        s.best_params = e.params;
        s.best_task = e.task_id;
      }
    } else if (s.last_failure.empty()) {
      s.last_failure = e.failure_reason;
    }
  }
  std::vector<strategy_outcome> out;
  for (size_t i = 0; i < applicable.size(); ++i) {
    const strategy& st = *applicable[i];
    const weighted s = by.count(st.name) != 0 ? by.at(st.name) : weighted{};
    strategy_outcome o;
    o.strategy = st.name;
    o.description = st.description;
    o.params = st.defaults;
    std::optional<double> margin; // another task's best over that task's default point
    if (!s.best_params.is_null()) {
      try {
        o.params = resolve_params(st, s.best_params);
        if (s.best_task != c.id) {
          const json defaults = resolve_params(st, st.defaults);
          for (const auto& e : experiences) {
            if (e.task_id == s.best_task && e.strategy == st.name && e.correct &&
                e.measured_speedup.value_or(0) > 0 && e.params == defaults) {
              margin = s.best_speedup / *e.measured_speedup;
              break;
            }
          }
          o.params_first = margin && *margin >= transfer_margin;
        }
      } catch (const std::exception&) {
        // Parameters of an older library: start from the defaults (o.params still holds them).
      }
    }
    o.value_scores = value_scores_of(experiences, st.name, c.id, key);
    o.attempts = s.attempts;
    o.successes = s.successes;
    o.best_speedup = s.best_speedup;
    o.mean_speedup = s.weight > 0 ? std::exp2(s.reward / s.weight) : 0;
    o.last_failure = s.last_failure;
    o.addresses_state = addresses(st, key.state);
    // Ties among untried strategies: those addressing the state first, then library order, or a
    // seeded order (a different seed explores in a different order).
    double tie = -static_cast<double>(i);
    if (options.seed != 0) {
      const auto h = std::hash<std::string>{}(st.name + "#" + std::to_string(options.seed));
      tie = static_cast<double>(h % 1000003) / 1000003.0;
    }
    if (s.weight <= 0) {
      o.score = 1e9 + (o.addresses_state ? 1e6 : 0) + tie;
    } else {
      o.score = s.reward / s.weight +
                options.exploration * std::sqrt(std::log(std::max(total, 1.0) + 1) / s.weight) +
                (o.addresses_state ? 0.05 : 0) + 1e-9 * tie;
    }
    o.evidence = {
        {"key", key.to_string()},
        {"weight", s.weight},
        {"weight_of_this_task", s.own_weight},
        {"weighted_mean_speedup", o.mean_speedup},
        {"params_from_task", s.best_task},
        {"params_shape_distance", s.best_params.is_null() ? json(nullptr) : json(s.best_distance)},
        {"params_margin_over_default", margin ? json(*margin) : json(nullptr)},
        {"params_first", o.params_first},
        {"addresses_state", o.addresses_state},
        {"score", o.score}};
    out.push_back(o);
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const strategy_outcome& a, const strategy_outcome& b) { return a.score > b.score; });
  return out;
}

std::vector<store::experience> memory::attempts(const task::contract& c, const std::string& gpu,
                                                const std::string& strategy) const {
  std::vector<store::experience> out;
  for (auto& e : m_store.find_experiences(task::to_string(c.fam), gpu, strategy)) {
    if (e.task_id == c.id) {
      out.push_back(std::move(e));
    }
  }
  return out;
}

bool memory::tried(const task::contract& c, const std::string& gpu, const std::string& strategy,
                   const json& params) const {
  for (const auto& e : attempts(c, gpu, strategy)) {
    if (e.params == params) {
      return true;
    }
  }
  return false;
}

json memory::export_all(const std::vector<std::string>& families) const {
  json out = json::array();
  for (const auto& fam : families) {
    // Every GPU: the query takes one; the store's environments name them.
    for (const auto& gpu : m_store.gpus()) {
      for (const auto& e : m_store.find_experiences(fam, gpu)) {
        out.push_back(
            {{"task_id", e.task_id},
             {"family", e.family},
             {"op_features", e.op_features},
             {"shape", e.shape},
             {"dtype", e.dtype},
             {"gpu", e.gpu},
             {"state_before", e.state_before},
             {"strategy", e.strategy},
             {"params", e.params},
             {"predicted_speedup",
              e.predicted_speedup ? json(*e.predicted_speedup) : json(nullptr)},
             {"measured_speedup", e.measured_speedup ? json(*e.measured_speedup) : json(nullptr)},
             {"correct", e.correct},
             {"failure_reason", e.failure_reason},
             {"created", e.created}});
      }
    }
  }
  return out;
}

int memory::import_all(const json& experiences) {
  int n = 0;
  m_store.atomically([&] {
    for (const auto& j : experiences) {
      store::experience e;
      e.task_id = j.at("task_id");
      e.family = j.at("family");
      e.op_features = j.value("op_features", json::object());
      e.shape = j.value("shape", "");
      e.dtype = j.value("dtype", "");
      e.gpu = j.at("gpu");
      e.state_before = j.value("state_before", "");
      e.strategy = j.at("strategy");
      e.params = j.value("params", json::object());
      if (j.contains("predicted_speedup") && j["predicted_speedup"].is_number()) {
        e.predicted_speedup = j["predicted_speedup"].get<double>();
      }
      if (j.contains("measured_speedup") && j["measured_speedup"].is_number()) {
        e.measured_speedup = j["measured_speedup"].get<double>();
      }
      e.correct = j.value("correct", false);
      e.failure_reason = j.value("failure_reason", "");
      m_store.record_experience(e);
      ++n;
    }
  });
  return n;
}

} // namespace kb::search
