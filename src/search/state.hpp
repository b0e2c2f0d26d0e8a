// The search's view of a task at its current best: a typed bottleneck state (the profiler's
// classifier, fed with counters when the evaluation carried them, else with the analytic roofline
// and the measured time: source "analytic"), the task's shape class (what memory transfers
// between tasks along). Which states a strategy addresses is in strategies.hpp.
#pragma once

#include "common/names.hpp"
#include "eval/eval.hpp"
#include "profile/profile.hpp"
#include "search/proposer.hpp"
#include "search/strategies.hpp"
#include "task/task.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kb::search {

// Where a bottleneck state came from. Stored, so names round-trip through strings.
enum class state_source { analytic, ncu, cupti };
inline constexpr auto state_source_names =
    name_table<state_source>({{state_source::analytic, "analytic"},
                              {state_source::ncu, "ncu"},
                              {state_source::cupti, "cupti"}});
static_assert(state_source_names.well_formed());
std::string to_string(state_source s);
std::optional<state_source> state_source_from_string(const std::string& s);

struct bottleneck {
  profile::state state = profile::state::unknown;
  state_source source = state_source::analytic;
  nlohmann::json numbers = nlohmann::json::object(); // the classifier's figures
  std::string sentence;                              // one line for people and prompts
  nlohmann::json to_json() const;
};

// The state of a candidate that ran in `seconds` [s] at shape `s`. When the evaluation result
// carries counters that could be read (eval::result::counters), the classifier runs on them;
// otherwise on the analytic roofline (the task's minimum bytes and FLOP) and the time: source
// analytic.
bottleneck assess(const task::contract& c, const task::shape_case& s, double seconds,
                  const eval::result* evaluation = nullptr);

// Whether an evaluation carries CUPTI counters that could be read (eval::profile_mode), and if
// not, why, in a few words.
bool has_counters(const eval::result& r);
std::string counters_note(const eval::result& r);

// A coarse class of shapes and dtypes inside a family: memory's unit of transfer. Buckets are
// rounded log2 of the features that decide which kernel shape wins (elementwise: elements;
// normalize, reduce, loss: row length, rows, and whether rows are contiguous; matmul: m, n, k).
struct shape_class {
  task::family fam = task::family::elementwise;
  std::string dtype;  // storage type
  std::string layout; // "flat", "rows" (contiguous rows), "strided" (inner > 1), "gemm"
  std::vector<int> log2_buckets;
  std::string to_string() const; // "normalize/float32/rows/x12.r14"
  static std::optional<shape_class> parse(const std::string& text);
};
shape_class classify_shape(const shape_features& f);
// How far two classes are apart: the sum of bucket differences, plus 4 for another dtype; 100
// for another family or layout (transfer across those is weak but not nothing: within one
// family, a strategy that works tends to work).
int distance(const shape_class& a, const shape_class& b);

// Why a proposal was chosen, for the run's JSON: the state that led to it, the strategy's rank and
// score and what memory retrieved for it (weights, key, where its starting parameters came from).
nlohmann::json choice_record(const bottleneck& state, const proposal_context& context,
                             const proposal& chosen);

} // namespace kb::search
