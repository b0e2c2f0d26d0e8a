// The built-in proposer: no network. It walks the strategies memory ranks highest for the task's
// family and, within a strategy, searches its parameter space locally around the best point found
// so far on this task (the default first, then one step along each axis, then the corners),
// never proposing an attempt memory already holds for the task.
#pragma once

#include "search/memory.hpp"
#include "search/proposer.hpp"

#include <set>
#include <string>

namespace kb::search {

class builtin_proposer : public proposer {
public:
  explicit builtin_proposer(const memory& mem) : m_memory(mem) {}
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
  std::set<std::string> m_issued; // task|strategy|params proposed by this object
};

} // namespace kb::search
