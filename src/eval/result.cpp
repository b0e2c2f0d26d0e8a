// An evaluation result's one JSON mapping: what a queue job carries back from the worker that ran
// it, on this host or another.
#include "eval/eval.hpp"

#include <stdexcept>

namespace kb::eval {

using nlohmann::json;

namespace {

json context_json(const run_context& c) {
  return {{"device", c.device ? json(*c.device) : json(nullptr)},
          {"toolkit", c.toolkit},
          {"arch", c.arch},
          {"isolation", c.isolation},
          {"isolation_detail", c.isolation_detail},
          {"shape", c.shape},
          {"ceilings", task::to_json(c.ceilings)}};
}

run_context context_from(const json& j) {
  run_context c;
  if (!j.at("device").is_null()) {
    c.device = j.at("device").get<protocol::device>();
  }
  c.toolkit = j.at("toolkit").get<std::string>();
  c.arch = j.at("arch").get<std::string>();
  c.isolation = j.at("isolation").get<std::string>();
  c.isolation_detail = j.at("isolation_detail").get<std::string>();
  c.shape = j.at("shape").get<std::string>();
  c.ceilings = task::ceilings_from_json(j.at("ceilings"));
  return c;
}

} // namespace

void to_json(json& j, const counters_run& c) {
  j = {{"source", "cupti"},
       {"verdict", to_string(c.outcome)},
       {"reason", c.reason},
       {"message", c.message},
       {"seconds", c.seconds},
       {"counters", c.values},
       {"event_median_s", c.event_median_s ? json(*c.event_median_s) : json(nullptr)}};
}

void from_json(const json& j, counters_run& c) {
  const std::string v = j.at("verdict").get<std::string>();
  const auto o = verdict_from_string(v);
  if (!o) {
    throw std::invalid_argument("unknown verdict '" + v + "'");
  }
  c.outcome = *o;
  c.reason = j.at("reason").get<std::string>();
  c.message = j.at("message").get<std::string>();
  c.seconds = j.at("seconds").get<double>();
  c.values = j.at("counters");
  c.event_median_s = j.at("event_median_s").is_null()
                         ? std::nullopt
                         : std::optional<double>(j.at("event_median_s").get<double>());
}

json to_json(const result& r) {
  json builds = json::object();
  for (const auto& [role, b] : r.builds) {
    builds[role] = b.to_json();
  }
  return {{"verdict", to_string(r.final)},
          {"reason", r.reason},
          {"message", r.message},
          {"gate", r.gate ? json(*r.gate) : json(nullptr)},
          {"worker_seconds", r.worker_seconds},
          {"context", context_json(r.context)},
          {"builds", builds},
          {"verification", r.verification},
          {"checker_selftest", r.checker_selftest ? json(*r.checker_selftest) : json(nullptr)},
          {"timing", r.timing},
          {"counters", r.counters ? json(*r.counters) : json(nullptr)},
          {"detail", r.detail},
          {"seconds", r.seconds}};
}

result result_from_json(const json& j) {
  result r;
  const std::string v = j.at("verdict").get<std::string>();
  const auto final = verdict_from_string(v);
  if (!final) {
    throw std::invalid_argument("unknown verdict '" + v + "'");
  }
  r.final = *final;
  r.reason = j.at("reason").get<std::string>();
  r.message = j.at("message").get<std::string>();
  r.detail = j.at("detail");
  r.seconds = j.at("seconds").get<double>();
  // Results queued before these fields travelled carry only the record.
  if (j.contains("gate") && !j.at("gate").is_null()) {
    r.gate = j.at("gate").get<gate_summary>();
  }
  if (j.contains("worker_seconds")) {
    r.worker_seconds = j.at("worker_seconds").get<double>();
  }
  if (j.contains("context")) {
    r.context = context_from(j.at("context"));
  }
  if (j.contains("builds")) {
    for (const auto& [role, b] : j.at("builds").items()) {
      r.builds.emplace(role, build::result::from_json(b));
    }
  }
  if (j.contains("verification")) {
    r.verification = j.at("verification").get<std::vector<protocol::library_result>>();
  }
  if (j.contains("checker_selftest") && !j.at("checker_selftest").is_null()) {
    r.checker_selftest = j.at("checker_selftest").get<protocol::selftest>();
  }
  if (j.contains("timing")) {
    r.timing = j.at("timing").get<std::vector<protocol::session_timing>>();
  }
  if (j.contains("counters") && !j.at("counters").is_null()) {
    r.counters = j.at("counters").get<counters_run>();
  }
  return r;
}

} // namespace kb::eval
