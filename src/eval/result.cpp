// An evaluation result's one JSON mapping: the stored evaluation (the store's detail blob) and
// what a queue job carries back from the worker that ran it, on this host or another. Records of
// earlier schemas are read through one upgrade, step by step, to this one.
#include "eval/eval.hpp"
#include "eval/verification.hpp"

#include <stdexcept>

namespace kb::eval {

using nlohmann::json;

namespace {

template <class T> json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <class T> std::optional<T> optional_of(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) {
    return std::nullopt;
  }
  return j.at(key).get<T>();
}

json context_json(const run_context& c) {
  return {{"device", optional_json(c.device)},
          {"toolkit", c.toolkit},
          {"arch", c.arch},
          {"isolation", c.isolation},
          {"isolation_detail", c.isolation_detail},
          {"isolation_probe", c.isolation_probe},
          {"shape", c.shape},
          {"ceilings", task::to_json(c.ceilings)}};
}

run_context context_from(const json& j) {
  run_context c;
  c.device = optional_of<gpu::protocol::device>(j, "device");
  c.toolkit = j.at("toolkit").get<std::string>();
  c.arch = j.at("arch").get<std::string>();
  c.isolation = j.at("isolation").get<std::string>();
  c.isolation_detail = j.at("isolation_detail").get<std::string>();
  c.isolation_probe = j.at("isolation_probe").get<std::string>();
  c.shape = j.at("shape").get<std::string>();
  c.ceilings = task::ceilings_from_json(j.at("ceilings"));
  return c;
}

json task_json(const task_ref& t) {
  return {{"id", t.id}, {"suite", t.suite}, {"family", t.family}, {"digest", t.digest}};
}

task_ref task_from(const json& j) {
  return {j.at("id").get<std::string>(), j.at("suite").get<std::string>(),
          j.at("family").get<std::string>(), j.at("digest").get<std::string>()};
}

json source_json(const source_ref& s) {
  return {{"name", s.name}, {"origin", s.origin}, {"source_digest", s.source_digest}};
}

source_ref source_from(const json& j) {
  return {j.at("name").get<std::string>(), j.at("origin").get<std::string>(),
          j.at("source_digest").get<std::string>()};
}

verdict verdict_of(const json& j) {
  const std::string v = j.get<std::string>();
  const auto o = verdict_from_string(v);
  if (!o) {
    throw std::invalid_argument("unknown verdict '" + v + "'");
  }
  return *o;
}

// ---- The upgrade of earlier records ----
//
// Schema 1: the judge's whole document, as record() stored it before the result was typed:
//   {verdict, reason, message, seconds, statistics, builds, verification, checker_selftest,
//    profile, device, isolation{level, detail, probe}, toolchain{version, arch}, shape{name},
//    ceilings, floor_seconds, candidate, baseline, sanitize, ...the rest}.
// Schema 2: the queue's result mapping: {verdict, reason, message, seconds, detail: a schema-1
//   document} and, in all but the oldest, gate, worker_seconds, context, builds, verification,
//   checker_selftest, timing, counters.
// Schema 3 (result_schema_version): the facts above have their typed fields; `detail` keeps the
//   rest.

// An earlier record's object read over the defaults of today's mapping: fields it lacked (it was
// written before they travelled) take their default values.
json over_defaults(json defaults, const json& old) {
  if (old.is_object()) {
    defaults.update(old);
  }
  return defaults;
}

json schema_2_of_1(const json& document) {
  json up = json::object();
  for (const char* key : {"verdict", "reason", "message", "seconds"}) {
    if (document.contains(key)) {
      up[key] = document.at(key);
    }
  }
  up["detail"] = document;
  return up;
}

json schema_3_of_2(json up) {
  json d = up.value("detail", json::object());
  if (!d.is_object()) {
    d = json::object();
  }
  // A fact goes to its typed field when the record has none there yet; it leaves detail either way.
  const auto lift = [&](const char* field, const char* key, const auto& convert) {
    if (d.contains(key)) {
      if (!up.contains(field) || up.at(field).is_null() || up.at(field).empty()) {
        up[field] = convert(d.at(key));
      }
      d.erase(key);
    }
  };
  for (const char* key : {"verdict", "reason", "message", "seconds"}) {
    lift(key, key, [](const json& x) { return x; });
  }
  up.erase("schema");
  up.emplace("message", "");
  up.emplace("seconds", 0.0);
  up.emplace("worker_seconds", 0.0);
  lift("gate", "statistics", [](const json& x) { return over_defaults(json(gate_summary{}), x); });
  lift("builds", "builds", [](const json& x) {
    json builds = json::object();
    for (const auto& [role, b] : x.items()) {
      builds[role] = over_defaults(build::result{}.to_json(), b);
    }
    return builds;
  });
  lift("verification", "verification", [](const json& x) {
    // The protocol's mapping; records of earlier judges lack some of its fields (the runner's
    // output). A rejection's reason and message were always there, and an acceptance has none.
    json defaults = json(gpu::protocol::library_result{});
    defaults.erase("reason");
    defaults.erase("message");
    json out = json::array();
    for (const auto& l : x) {
      out.push_back(over_defaults(defaults, l));
    }
    return out;
  });
  lift("checker_selftest", "checker_selftest",
       [](const json& x) { return over_defaults(json(gpu::protocol::selftest{}), x); });
  lift("counters", "profile", [](const json& x) { return over_defaults(json(counters_run{}), x); });
  lift("timing", "timing", [](const json& x) { return x; });
  lift("task", "task", [](const json& x) { return over_defaults(task_json({}), x); });
  for (const char* side : {"candidate", "baseline"}) {
    lift(side, side, [](const json& x) { return over_defaults(source_json({}), x); });
  }
  lift("floor_s", "floor_seconds", [](const json& x) { return x; });
  lift("sanitize", "sanitize", [](const json& x) {
    json tools = json::object();
    for (const auto& [tool, t] : x.items()) {
      tools[tool] = over_defaults(json(sanitizer_run{}), t);
    }
    return tools;
  });
  // Where and how it ran: the context of schema 2, else the document's parts of it.
  json context = over_defaults(context_json({}), up.value("context", json::object()));
  if (d.contains("device") && context.at("device").is_null()) {
    context["device"] = over_defaults(json(gpu::protocol::device{}), d.at("device"));
  }
  const json toolchain = d.value("toolchain", json::object());
  const json isolation = d.value("isolation", json::object());
  const json shape = d.value("shape", json::object());
  const auto fill = [&](const char* field, const json& from, const char* key) {
    if (context.at(field) == "" && from.is_object() && from.contains(key) &&
        from.at(key).is_string()) {
      context[field] = from.at(key);
    }
  };
  fill("toolkit", toolchain, "version");
  fill("arch", toolchain, "arch");
  fill("isolation", isolation, "level");
  fill("isolation_detail", isolation, "detail");
  fill("isolation_probe", isolation, "probe");
  fill("shape", shape, "name");
  if (!up.contains("context") && d.contains("ceilings")) {
    context["ceilings"] = over_defaults(task::to_json(task::ceilings{}), d.at("ceilings"));
  }
  up["context"] = context;
  d.erase("device");
  d.erase("isolation");
  d.erase("ceilings");
  up["detail"] = d;
  up["schema"] = 3;
  return up;
}

// The record at this schema, whatever schema it was written in.
json upgraded(const json& record) {
  if (!record.is_object()) {
    throw std::invalid_argument("a stored result is a JSON object");
  }
  int schema = 0;
  if (record.contains("schema")) {
    schema = record.at("schema").get<int>();
  } else {
    schema = record.contains("detail") ? 2 : 1;
  }
  if (schema < 1 || schema > result_schema_version) {
    throw std::invalid_argument("a stored result of schema " + std::to_string(schema) +
                                " (this build reads 1 to " + std::to_string(result_schema_version) +
                                ")");
  }
  json up = record;
  if (schema == 1) {
    up = schema_2_of_1(up);
    schema = 2;
  }
  if (schema == 2) {
    up = schema_3_of_2(std::move(up));
  }
  return up;
}

} // namespace

void to_json(json& j, const sanitizer_run& s) {
  j = {{"exit_code", s.exit_code},
       {"errors", s.errors},
       {"summary", s.summary_errors ? json{{"errors", *s.summary_errors},
                                           {"warnings", s.summary_warnings.value_or(0)}}
                                    : json(nullptr)},
       {"failure", s.failure},
       {"log_tail", s.log_tail}};
}

void from_json(const json& j, sanitizer_run& s) {
  s.exit_code = j.at("exit_code").get<int>();
  s.errors = j.at("errors").get<bool>();
  if (const auto& summary = j.at("summary"); !summary.is_null()) {
    s.summary_errors = summary.at("errors").get<long>();
    s.summary_warnings = summary.at("warnings").get<long>();
  }
  s.failure = j.at("failure").get<std::string>();
  s.log_tail = j.at("log_tail").get<std::string>();
}

void to_json(json& j, const gate_summary& g) {
  j = {{"n_baseline", g.n_baseline},
       {"n_candidate", g.n_candidate},
       {"median_baseline_s", g.median_baseline_s},
       {"median_candidate_s", g.median_candidate_s},
       {"median_baseline_ci_s", {g.median_baseline_low_s, g.median_baseline_high_s}},
       {"median_candidate_ci_s", {g.median_candidate_low_s, g.median_candidate_high_s}},
       {"speedup", g.speedup},
       {"speedup_ci", {g.speedup_low, g.speedup_high}},
       {"p", optional_json(g.p)},
       {"floor_fraction", g.floor_fraction},
       {"ratio", g.ratio},
       {"ratio_ci", {g.ratio_low, g.ratio_high}},
       {"delta", g.delta},
       {"resolution_s", g.resolution_s},
       {"p_within", optional_json(g.p_within)},
       {"p_between", optional_json(g.p_between)},
       {"mann_whitney_p", optional_json(g.mann_whitney_p)}};
  json sessions = json::array();
  for (const auto& m : g.session_medians) {
    sessions.push_back({{"baseline", m.baseline_s}, {"candidate", m.candidate_s}});
  }
  j["session_medians"] = sessions;
  if (g.decided) {
    const auto& x = *g.decided;
    j.update({{"throttled_dropped", x.throttled_dropped},
              {"test",
               {{"name", "blocks_and_sessions"},
                {"sessions", x.sessions},
                {"blocks", x.blocks},
                {"rounds_per_block", x.rounds_per_block},
                {"mean_log_ratio", x.mean_log_ratio},
                {"p_within", x.p_within},
                {"p_between", optional_json(x.p_between)},
                {"p", x.p}}},
              {"verdict", x.verdict},
              {"reason", x.reason},
              {"baseline_floor_fraction", x.baseline_floor_fraction},
              {"physical_limit_s", x.physical_limit_s},
              {"faster_than_physical_limit", x.faster_than_physical_limit}});
  }
}

void from_json(const json& j, gate_summary& g) {
  g.n_baseline = j.at("n_baseline").get<int>();
  g.n_candidate = j.at("n_candidate").get<int>();
  g.median_baseline_s = j.at("median_baseline_s").get<double>();
  g.median_candidate_s = j.at("median_candidate_s").get<double>();
  g.median_baseline_low_s = j.at("median_baseline_ci_s").at(0).get<double>();
  g.median_baseline_high_s = j.at("median_baseline_ci_s").at(1).get<double>();
  g.median_candidate_low_s = j.at("median_candidate_ci_s").at(0).get<double>();
  g.median_candidate_high_s = j.at("median_candidate_ci_s").at(1).get<double>();
  g.speedup = j.at("speedup").get<double>();
  g.speedup_low = j.at("speedup_ci").at(0).get<double>();
  g.speedup_high = j.at("speedup_ci").at(1).get<double>();
  g.p = optional_of<double>(j, "p");
  g.floor_fraction = j.at("floor_fraction").get<double>();
  g.ratio = j.at("ratio").get<double>();
  g.ratio_low = j.at("ratio_ci").at(0).get<double>();
  g.ratio_high = j.at("ratio_ci").at(1).get<double>();
  g.delta = j.at("delta").get<double>();
  g.resolution_s = j.value("resolution_s", 0.0);
  g.p_within = optional_of<double>(j, "p_within");
  g.p_between = optional_of<double>(j, "p_between");
  g.mann_whitney_p = optional_of<double>(j, "mann_whitney_p");
  g.session_medians.clear();
  for (const auto& m : j.value("session_medians", json::array())) {
    g.session_medians.push_back({m.at("baseline").get<double>(), m.at("candidate").get<double>()});
  }
  g.decided.reset();
  if (j.contains("test")) {
    gate_summary::decision x;
    const auto& t = j.at("test");
    // Records of every schema have the test; some of the fields beside it came later.
    x.throttled_dropped = j.value("throttled_dropped", size_t{0});
    x.sessions = t.at("sessions").get<size_t>();
    x.blocks = t.at("blocks").get<size_t>();
    x.rounds_per_block = t.at("rounds_per_block").get<size_t>();
    x.mean_log_ratio = t.at("mean_log_ratio").get<double>();
    x.p_within = t.at("p_within").get<double>();
    x.p_between = optional_of<double>(t, "p_between");
    x.p = t.at("p").get<double>();
    x.verdict = j.value("verdict", std::string());
    x.reason = j.value("reason", std::string());
    x.baseline_floor_fraction = j.value("baseline_floor_fraction", 0.0);
    x.physical_limit_s = j.value("physical_limit_s", 0.0);
    x.faster_than_physical_limit = j.value("faster_than_physical_limit", false);
    g.decided = x;
  }
}

std::optional<gate_summary> gate_of(const json& statistics) {
  if (!statistics.is_object() || statistics.empty()) {
    return std::nullopt;
  }
  return over_defaults(json(gate_summary{}), statistics).get<gate_summary>();
}

void to_json(json& j, const counters_run& c) {
  j = {{"source", "cupti"},
       {"verdict", to_string(c.outcome)},
       {"reason", c.reason},
       {"message", c.message},
       {"seconds", c.seconds},
       {"counters", c.values},
       {"event_median_s", optional_json(c.event_median_s)}};
}

void from_json(const json& j, counters_run& c) {
  c.outcome = verdict_of(j.at("verdict"));
  c.reason = j.at("reason").get<std::string>();
  c.message = j.at("message").get<std::string>();
  c.seconds = j.at("seconds").get<double>();
  c.values = j.at("counters");
  c.event_median_s = optional_of<double>(j, "event_median_s");
}

void to_json(json& j, const output_errors& o) {
  j = {{"output", o.output},
       {"max_abs_err", optional_json(o.max_abs_err)},
       {"max_rel_err", optional_json(o.max_rel_err)},
       {"p99_abs_err", optional_json(o.p99_abs_err)},
       {"rel_l2", optional_json(o.rel_l2)},
       {"violations", optional_json(o.violations)},
       {"nonfinite", optional_json(o.nonfinite)},
       {"unwritten", optional_json(o.unwritten)}};
}

void from_json(const json& j, output_errors& o) {
  o.output = j.at("output").get<std::string>();
  o.max_abs_err = optional_of<double>(j, "max_abs_err");
  o.max_rel_err = optional_of<double>(j, "max_rel_err");
  o.p99_abs_err = optional_of<double>(j, "p99_abs_err");
  o.rel_l2 = optional_of<double>(j, "rel_l2");
  o.violations = optional_of<uint64_t>(j, "violations");
  o.nonfinite = optional_of<uint64_t>(j, "nonfinite");
  o.unwritten = optional_of<uint64_t>(j, "unwritten");
}

void to_json(json& j, const verification_check& c) {
  j = {{"shape", c.shape},
       {"distribution", c.distribution},
       {"seed", optional_json(c.seed)},
       {"passed", c.passed},
       {"inputs_unchanged", c.inputs_unchanged},
       {"reason", c.reason},
       {"outputs", c.outputs}};
}

void from_json(const json& j, verification_check& c) {
  c.shape = j.at("shape").get<std::string>();
  c.distribution = j.at("distribution").get<std::string>();
  c.seed = optional_of<uint64_t>(j, "seed");
  c.passed = j.at("passed").get<bool>();
  c.inputs_unchanged = j.at("inputs_unchanged").get<bool>();
  c.reason = j.at("reason").get<std::string>();
  c.outputs.clear();
  for (const auto& o : j.at("outputs")) {
    // The runner's record of an output carries more (count, scale, worst index) than is read.
    c.outputs.push_back(over_defaults(json(output_errors{}), o).get<output_errors>());
  }
}

void to_json(json& j, const verification_summary& s) {
  j = {{"checks", s.checks},           {"max_abs_err", s.max_abs_err},
       {"max_rel_err", s.max_rel_err}, {"p99_abs_err", s.p99_abs_err},
       {"rel_l2", s.rel_l2},           {"max_excess", s.max_excess}};
}

void from_json(const json& j, verification_summary& s) {
  s.checks = j.at("checks").get<int>();
  s.max_abs_err = j.at("max_abs_err").get<double>();
  s.max_rel_err = j.at("max_rel_err").get<double>();
  s.p99_abs_err = j.at("p99_abs_err").get<double>();
  s.rel_l2 = j.at("rel_l2").get<double>();
  s.max_excess = j.at("max_excess").get<double>();
}

std::vector<verification_check> checks_of(const gpu::protocol::library_result& l) {
  std::vector<verification_check> out;
  const json& r = l.record;
  if (!r.is_object() || !r.contains("checks") || !r.at("checks").is_array()) {
    return out;
  }
  for (const auto& c : r.at("checks")) {
    out.push_back(over_defaults(json(verification_check{}), c).get<verification_check>());
  }
  return out;
}

std::optional<verification_summary> summary_of(const gpu::protocol::library_result& l) {
  const json& r = l.record;
  if (!r.is_object() || !r.contains("summary") || !r.at("summary").is_object() ||
      r.at("summary").empty()) {
    return std::nullopt;
  }
  return over_defaults(json(verification_summary{}), r.at("summary")).get<verification_summary>();
}

selftest_tally tally_of(const gpu::protocol::selftest& s) {
  const json defaults = {{"zeros_rejected_by", 0},
                         {"copy_of_input_rejected_by", 0},
                         {"constant_rejected_by", 0},
                         {"shapes", 0},
                         {"checks", 0}};
  const json j = over_defaults(defaults, s.record);
  return {j.at("zeros_rejected_by").get<int>(), j.at("copy_of_input_rejected_by").get<int>(),
          j.at("constant_rejected_by").get<int>(), j.at("shapes").get<int>(),
          j.at("checks").get<int>()};
}

json to_json(const result& r) {
  json builds = json::object();
  for (const auto& [role, b] : r.builds) {
    builds[role] = b.to_json();
  }
  return {{"schema", result_schema_version},
          {"verdict", to_string(r.final)},
          {"reason", r.reason},
          {"message", r.message},
          {"gate", optional_json(r.gate)},
          {"worker_seconds", r.worker_seconds},
          {"context", context_json(r.context)},
          {"builds", builds},
          {"verification", r.verification},
          {"checker_selftest", optional_json(r.checker_selftest)},
          {"timing", r.timing},
          {"counters", optional_json(r.counters)},
          {"task", task_json(r.task)},
          {"candidate", source_json(r.candidate)},
          {"baseline", source_json(r.baseline)},
          {"floor_s", optional_json(r.floor_s)},
          {"sanitize", optional_json(r.sanitize)},
          {"detail", r.detail},
          {"seconds", r.seconds}};
}

result stored_result(const json& record) {
  const json j = upgraded(record);
  result r;
  r.final = verdict_of(j.at("verdict"));
  r.reason = j.at("reason").get<std::string>();
  r.message = j.at("message").get<std::string>();
  r.seconds = j.at("seconds").get<double>();
  r.worker_seconds = j.at("worker_seconds").get<double>();
  r.gate = optional_of<gate_summary>(j, "gate");
  r.context = context_from(j.at("context"));
  const json builds = j.value("builds", json::object());
  for (const auto& [role, b] : builds.items()) {
    r.builds.emplace(role, build::result::from_json(b));
  }
  r.verification =
      j.value("verification", json::array()).get<std::vector<gpu::protocol::library_result>>();
  r.checker_selftest = optional_of<gpu::protocol::selftest>(j, "checker_selftest");
  // The stored evaluation keeps its timing once, as the samples blob.
  r.timing = j.value("timing", json::array()).get<std::vector<gpu::protocol::session_timing>>();
  r.counters = optional_of<counters_run>(j, "counters");
  if (j.contains("task")) {
    r.task = task_from(j.at("task"));
  }
  if (j.contains("candidate")) {
    r.candidate = source_from(j.at("candidate"));
  }
  if (j.contains("baseline")) {
    r.baseline = source_from(j.at("baseline"));
  }
  r.floor_s = optional_of<double>(j, "floor_s");
  r.sanitize = optional_of<std::map<std::string, sanitizer_run>>(j, "sanitize");
  r.detail = j.at("detail");
  return r;
}

std::optional<result> stored_result(const store::store& st, const store::evaluation_row& row,
                                    bool with_samples) {
  if (row.detail_digest.empty() || !st.exists(row.detail_digest)) {
    return std::nullopt;
  }
  result r;
  try {
    r = stored_result(json::parse(st.get(row.detail_digest)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (with_samples && !row.samples_digest.empty() && st.exists(row.samples_digest)) {
    try {
      r.timing =
          json::parse(st.get(row.samples_digest)).get<std::vector<gpu::protocol::session_timing>>();
    } catch (const std::exception&) {
      r.timing.clear(); // samples of another form: the record stands without them
    }
  }
  return r;
}

store::recorded_outcome recorded_outcome_of(const std::string& detail_blob) {
  const result r = stored_result(json::parse(detail_blob));
  store::recorded_outcome o;
  o.verdict = to_string(r.final);
  o.reason = r.reason;
  if (r.gate) {
    o.speedup = r.gate->speedup;
    o.baseline_median = r.gate->median_baseline_s;
    o.candidate_median = r.gate->median_candidate_s;
  }
  return o;
}

} // namespace kb::eval
