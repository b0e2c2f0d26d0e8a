// The built-in proposer: no network. It walks the strategies memory ranks highest for the task's
// key (family x state x shape class) and, within a strategy, searches its parameter space locally
// around the best point found so far on this task, or, before any, around the best point memory
// holds for the nearest shape class (else the default): that point first, then one step along
// each axis, then the corners, never proposing an attempt memory already holds for the task. A
// non-zero seed shuffles the neighbours (the first point stays first).
#pragma once

#include "search/memory.hpp"
#include "search/proposer.hpp"

#include <functional>
#include <set>
#include <string>

namespace kb::search {

class builtin_proposer : public proposer {
public:
  // `admissible` (when set) limits proposals to points it accepts (a replayed table's points).
  using admissible_fn = std::function<bool(const task::contract&, const std::string& strategy,
                                           const nlohmann::json&)>;
  explicit builtin_proposer(const memory& mem, uint64_t seed = 0, admissible_fn admissible = {})
      : m_memory(mem), m_seed(seed), m_admissible(std::move(admissible)) {}
  std::string name() const override { return "builtin"; }
  proposal_result propose(const proposal_context& context) override;
  // The built-in strategies compile and verify for every shape by construction; a failure is
  // recorded and another point is proposed instead of a repair.
  proposal_result repair(const proposal_context& context, const proposal& failed,
                         const std::string& error) override;

  // The points of `st` in the order they are tried, around `best`.
  static std::vector<nlohmann::json> point_order(const strategy& st, const nlohmann::json& best);

private:
  const memory& m_memory;
  uint64_t m_seed = 0;
  admissible_fn m_admissible;
  std::set<std::string> m_issued; // task|strategy|params proposed by this object
};

} // namespace kb::search
