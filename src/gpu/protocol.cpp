// The judge protocol's one JSON mapping (the wire format of src/gpu/protocol.hpp).
#include "gpu/protocol.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace kb::gpu::protocol {

using nlohmann::json;

namespace {

template <class T> void put_optional(json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? json(*v) : json(nullptr);
}

template <class T> void get_optional(const json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j.at(key).is_null()) {
    v = j.at(key).get<T>();
  } else {
    v.reset();
  }
}

// Set digests travel as {"<set>": "<16 hex digits>"}: JSON numbers cannot hold 64 bits exactly
// everywhere, and the hex is what a person compares.
json digests_json(const set_digests& d) {
  json j = json::object();
  for (const auto& [set, h] : d) {
    j[std::to_string(set)] = fmt::format("{:016x}", h);
  }
  return j;
}

set_digests digests_from(const json& j) {
  set_digests d;
  for (const auto& [key, value] : j.items()) {
    d[std::stoi(key)] = std::stoull(value.get<std::string>(), nullptr, 16);
  }
  return d;
}

// A typed view over a record: the record's keys, with the typed fields written over them.
json with_record(const json& record, json typed) {
  json j = record.is_object() ? record : json::object();
  for (auto& [k, v] : typed.items()) {
    j[k] = std::move(v);
  }
  return j;
}

} // namespace

// ---- job ----

void to_json(json& j, const distribution& x) {
  j = {{"kind", x.kind}, {"a", x.a}, {"b", x.b}, {"label", x.label}};
}
void from_json(const json& j, distribution& x) {
  x.kind = j.at("kind").get<int>();
  x.a = j.at("a").get<double>();
  x.b = j.at("b").get<double>();
  x.label = j.at("label").get<std::string>();
}

void to_json(json& j, const tensor& x) {
  j = {{"name", x.name}, {"dtype", x.dtype}, {"shape", x.shape}, {"dists", x.dists}};
}
void from_json(const json& j, tensor& x) {
  x.name = j.at("name").get<std::string>();
  x.dtype = j.at("dtype").get<int>();
  x.shape = j.at("shape").get<std::vector<int64_t>>();
  x.dists = j.at("dists").get<std::vector<distribution>>();
}

void to_json(json& j, const shape& x) {
  j = {{"name", x.name}, {"role", x.role}, {"inputs", x.inputs}, {"outputs", x.outputs}};
}
void from_json(const json& j, shape& x) {
  x.name = j.at("name").get<std::string>();
  x.role = j.at("role").get<std::string>();
  x.inputs = j.at("inputs").get<std::vector<tensor>>();
  x.outputs = j.at("outputs").get<std::vector<tensor>>();
}

void to_json(json& j, const tolerance& x) {
  j = {
      {"atol", x.atol}, {"rtol", x.rtol}, {"rel_l2", x.rel_l2}, {"deterministic", x.deterministic}};
}
void from_json(const json& j, tolerance& x) {
  x.atol = j.at("atol").get<double>();
  x.rtol = j.at("rtol").get<double>();
  x.rel_l2 = j.at("rel_l2").get<double>();
  x.deterministic = j.at("deterministic").get<bool>();
}

std::string to_string(placement p) {
  switch (p) {
  case placement::fixed:
    return "fixed";
  case placement::drawn:
    return "drawn";
  }
  return "?";
}

std::optional<placement> placement_from_string(const std::string& s) {
  for (const placement p : {placement::fixed, placement::drawn}) {
    if (to_string(p) == s) {
      return p;
    }
  }
  return std::nullopt;
}

void to_json(json& j, const timing& x) {
  j = {{"min_samples", x.min_samples},
       {"max_samples", x.max_samples},
       {"min_time", x.min_time},
       {"target_rsd", x.target_rsd},
       {"max_wall", x.max_wall},
       {"input_sets", x.input_sets},
       {"check_every", x.check_every},
       {"cold_l2", x.cold_l2},
       {"block_launches", x.block_launches},
       {"order_seed", x.order_seed},
       {"throttle_fraction", x.throttle_fraction},
       {"placement", to_string(x.where)}};
}
void from_json(const json& j, timing& x) {
  x.min_samples = j.at("min_samples").get<int>();
  x.max_samples = j.at("max_samples").get<int>();
  x.min_time = j.at("min_time").get<double>();
  x.target_rsd = j.at("target_rsd").get<double>();
  x.max_wall = j.at("max_wall").get<double>();
  x.input_sets = j.at("input_sets").get<int>();
  x.check_every = j.at("check_every").get<int>();
  x.cold_l2 = j.at("cold_l2").get<bool>();
  x.block_launches = j.at("block_launches").get<bool>();
  x.order_seed = j.at("order_seed").get<uint64_t>();
  x.throttle_fraction = j.at("throttle_fraction").get<double>();
  const auto where = placement_from_string(j.at("placement").get<std::string>());
  if (!where) {
    throw std::invalid_argument("timing.placement: " + j.at("placement").dump() +
                                " is not fixed or drawn");
  }
  x.where = *where;
}

void to_json(json& j, const library& x) {
  j = {{"role", x.role}, {"path", x.path}, {"host_dispatch", x.host_dispatch}};
}
void from_json(const json& j, library& x) {
  x.role = j.at("role").get<std::string>();
  x.path = j.at("path").get<std::string>();
  x.host_dispatch = j.at("host_dispatch").get<bool>();
}

void to_json(json& j, const runner_command& x) {
  j = {{"argv", x.argv}, {"env_overrides", x.env_overrides}};
  put_optional(j, "env", x.env);
  put_optional(j, "cwd", x.cwd);
  json limits = json::object();
  put_optional(limits, "cpu_time", x.cpu_time);
  put_optional(limits, "file_size", x.file_size);
  put_optional(limits, "processes", x.processes);
  put_optional(limits, "open_files", x.open_files);
  put_optional(limits, "core_size", x.core_size);
  j["rlimits"] = limits;
  j["run_as"] = x.uid && x.gid ? json{{"uid", *x.uid}, {"gid", *x.gid}} : json(nullptr);
  j["exact"] = x.exact;
}
void from_json(const json& j, runner_command& x) {
  x.argv = j.at("argv").get<std::vector<std::string>>();
  x.env_overrides = j.at("env_overrides").get<std::map<std::string, std::string>>();
  get_optional(j, "env", x.env);
  get_optional(j, "cwd", x.cwd);
  const json& limits = j.at("rlimits");
  get_optional(limits, "cpu_time", x.cpu_time);
  get_optional(limits, "file_size", x.file_size);
  get_optional(limits, "processes", x.processes);
  get_optional(limits, "open_files", x.open_files);
  get_optional(limits, "core_size", x.core_size);
  x.exact = j.at("exact").get<bool>();
  const json& as = j.at("run_as");
  if (as.is_null()) {
    x.uid.reset();
    x.gid.reset();
  } else {
    x.uid = as.at("uid").get<uint32_t>();
    x.gid = as.at("gid").get<uint32_t>();
  }
}

std::string to_string(op o) {
  return o == op::exit ? "exit" : "evaluate";
}

void to_json(json& j, const job& x) {
  j = {{"op", to_string(x.what)}};
  if (x.what == op::exit) {
    return;
  }
  j["task"] = x.task;
  j["oracle"] = x.oracle;
  j["timing_shape"] = x.timing_shape;
  j["shapes"] = x.shapes;
  j["scalars"] = x.scalars;
  j["tolerance"] = x.tol;
  j["seeds"] = x.seeds;
  j["determinism_runs"] = x.determinism_runs;
  j["candidates"] = x.candidates;
  j["verify"] = x.verify;
  json expected = json::object();
  for (const auto& [role, d] : x.expected_digests) {
    expected[role] = digests_json(d);
  }
  j["expected_digests"] = expected;
  j["checker_selftest"] = x.checker_selftest;
  j["host_reference"] = x.host_reference;
  j["single_check"] = x.single_check;
  j["profile"] = x.profile;
  j["counters"] = x.counters;
  put_optional(j, "timing", x.time);
  j["fresh_seed"] = x.fresh_seed;
  j["runner"] = x.runner;
  j["runner_log_dir"] = x.runner_log_dir;
  j["hang_timeout_ms"] = x.hang_timeout_ms;
  j["judge_seed"] = x.judge_seed;
}

void from_json(const json& j, job& x) {
  const std::string what = j.at("op").get<std::string>();
  if (what == "exit") {
    x = job{};
    x.what = op::exit;
    return;
  }
  if (what != "evaluate") {
    throw std::invalid_argument("a job with op \"" + what + "\"");
  }
  x.what = op::evaluate;
  x.task = j.at("task").get<std::string>();
  x.oracle = j.at("oracle").get<std::string>();
  x.timing_shape = j.at("timing_shape").get<std::string>();
  x.shapes = j.at("shapes").get<std::vector<shape>>();
  x.scalars = j.at("scalars").get<std::vector<double>>();
  x.tol = j.at("tolerance").get<tolerance>();
  x.seeds = j.at("seeds").get<std::vector<uint64_t>>();
  x.determinism_runs = j.at("determinism_runs").get<int>();
  x.candidates = j.at("candidates").get<std::vector<library>>();
  x.verify = j.at("verify").get<bool>();
  x.expected_digests.clear();
  for (const auto& [role, d] : j.at("expected_digests").items()) {
    x.expected_digests[role] = digests_from(d);
  }
  x.checker_selftest = j.at("checker_selftest").get<bool>();
  x.host_reference = j.at("host_reference").get<bool>();
  x.single_check = j.at("single_check").get<bool>();
  x.profile = j.at("profile").get<bool>();
  x.counters = j.at("counters").get<bool>();
  get_optional(j, "timing", x.time);
  x.fresh_seed = j.at("fresh_seed").get<uint64_t>();
  x.runner = j.at("runner").get<runner_command>();
  x.runner_log_dir = j.at("runner_log_dir").get<std::string>();
  x.hang_timeout_ms = j.at("hang_timeout_ms").get<int64_t>();
  x.judge_seed = j.at("judge_seed").get<uint64_t>();
}

// ---- result ----

void to_json(json& j, const device& x) {
  j = with_record(x.record, {{"name", x.name},
                             {"uuid", x.uuid},
                             {"sm_count", x.sm_count},
                             {"driver_version", x.driver_version},
                             {"cuda_runtime", x.cuda_runtime},
                             {"max_sm_clock_mhz", x.max_sm_clock_mhz}});
}
void from_json(const json& j, device& x) {
  x.name = j.at("name").get<std::string>();
  x.uuid = j.at("uuid").get<std::string>();
  x.sm_count = j.at("sm_count").get<int>();
  x.driver_version = j.at("driver_version").get<std::string>();
  x.cuda_runtime = j.at("cuda_runtime").get<int>();
  x.max_sm_clock_mhz = j.at("max_sm_clock_mhz").get<double>();
  x.record = j;
}

void to_json(json& j, const runner_end& x) {
  j = {{"status", x.status}, {"exit_code", x.exit_code}, {"signal", x.signal}};
}
void from_json(const json& j, runner_end& x) {
  x.status = j.at("status").get<std::string>();
  x.exit_code = j.at("exit_code").get<int>();
  x.signal = j.at("signal").get<std::string>();
}

void to_json(json& j, const runner_output& x) {
  j = {{"bytes", x.bytes}, {"tail_base64", x.tail_base64}, {"tail_text", x.tail_text}};
}
void from_json(const json& j, runner_output& x) {
  x.bytes = j.at("bytes").get<uint64_t>();
  x.tail_base64 = j.at("tail_base64").get<std::string>();
  x.tail_text = j.at("tail_text").get<std::string>();
}

void to_json(json& j, const library_result& x) {
  json typed{{"role", x.role},
             {"accepted", x.accepted},
             {"set_digests", digests_json(x.digests)},
             {"runner_exit", x.runner_exit ? json(*x.runner_exit) : json(nullptr)},
             {"runner_output", x.output}};
  if (!x.accepted) {
    typed["reason"] = x.reason;
    typed["message"] = x.message;
  }
  j = with_record(x.record, std::move(typed));
}
void from_json(const json& j, library_result& x) {
  x.role = j.at("role").get<std::string>();
  x.accepted = j.at("accepted").get<bool>();
  x.reason = x.accepted ? "" : j.at("reason").get<std::string>();
  x.message = x.accepted ? "" : j.at("message").get<std::string>();
  x.digests = digests_from(j.at("set_digests"));
  get_optional(j, "runner_exit", x.runner_exit);
  x.output = j.at("runner_output").get<runner_output>();
  x.record = j;
}

void to_json(json& j, const timing_sample& x) {
  j = {{"t", x.t}, {"set", x.set}, {"round", x.round}, {"fresh", x.fresh}};
  put_optional(j, "clock_mhz", x.clock_mhz);
}
void from_json(const json& j, timing_sample& x) {
  x.t = j.at("t").get<double>();
  x.set = j.at("set").get<int>();
  x.round = j.at("round").get<int>();
  x.fresh = j.value("fresh", false); // records written before fresh rounds have none
  get_optional(j, "clock_mhz", x.clock_mhz);
}

void to_json(json& j, const session_timing& x) {
  // The record's samples carry more per window (round trip, host time, tail); the typed ones are
  // what the gate reads, written over them only where the record has none.
  json typed{{"default_sm_clock_mhz", x.default_sm_clock_mhz}, {"overhead_s", x.overhead_s}};
  if (!x.record.is_object() || !x.record.contains("samples")) {
    typed["samples"] = x.samples;
  }
  j = with_record(x.record, std::move(typed));
}
void from_json(const json& j, session_timing& x) {
  x.samples.clear();
  for (const auto& [role, list] : j.at("samples").items()) {
    x.samples[role] = list.get<std::vector<timing_sample>>();
  }
  x.default_sm_clock_mhz = j.at("default_sm_clock_mhz").get<double>();
  x.overhead_s = j.at("overhead_s").get<double>();
  x.record = j;
}

void to_json(json& j, const profile_calls& x) {
  j = json::object();
  if (x.failed) {
    j["failed"] = *x.failed;
    j["context_lost"] = x.context_lost;
  }
  if (!x.event_times_s.empty()) {
    j["event_times_s"] = x.event_times_s;
  }
  if (x.event_median_s) {
    j["event_median_s"] = *x.event_median_s;
  }
  if (!x.nvtx_range.empty()) {
    j["nvtx_range"] = x.nvtx_range;
  }
  if (x.counters) {
    j["counters"] = *x.counters;
  }
}
void from_json(const json& j, profile_calls& x) {
  x = profile_calls{};
  if (j.contains("failed")) {
    x.failed = j.at("failed").get<std::string>();
    x.context_lost = j.value("context_lost", false);
  }
  if (j.contains("event_times_s")) {
    x.event_times_s = j.at("event_times_s").get<std::vector<double>>();
  }
  if (j.contains("event_median_s")) {
    x.event_median_s = j.at("event_median_s").get<double>();
  }
  x.nvtx_range = j.value("nvtx_range", std::string());
  if (j.contains("counters")) {
    x.counters = json(j.at("counters").get<json::object_t>()); // an object, or a type error
  }
}

void to_json(json& j, const selftest& x) {
  j = with_record(x.record, {{"sound", x.sound}});
}
void from_json(const json& j, selftest& x) {
  x.sound = j.at("sound").get<bool>();
  x.record = j;
}

const library_result* result::library(const std::string& role) const {
  for (const auto& l : candidates) {
    if (l.role == role) {
      return &l;
    }
  }
  return nullptr;
}

void to_json(json& j, const result& x) {
  j = {{"event", "result"},
       {"device", x.dev},
       {"candidates", x.candidates},
       {"stage_seconds", x.stage_seconds},
       {"context_lost", x.context_lost},
       {"lanes", x.lanes},
       {"poison", x.poison}};
  if (x.time) {
    j["timing"] = *x.time;
  }
  if (x.checker_selftest) {
    j["checker_selftest"] = *x.checker_selftest;
  }
  if (x.profile) {
    j["profile"] = *x.profile;
  }
}
void from_json(const json& j, result& x) {
  x.dev = j.at("device").get<device>();
  x.candidates = j.at("candidates").get<std::vector<library_result>>();
  x.time.reset();
  if (j.contains("timing")) {
    x.time = j.at("timing").get<session_timing>();
  }
  x.checker_selftest.reset();
  if (j.contains("checker_selftest")) {
    x.checker_selftest = j.at("checker_selftest").get<selftest>();
  }
  x.profile.reset();
  if (j.contains("profile")) {
    x.profile = j.at("profile").get<profile_calls>();
  }
  x.stage_seconds = j.at("stage_seconds");
  x.context_lost = j.at("context_lost").get<bool>();
  x.lanes = j.at("lanes").get<std::string>();
  x.poison = j.at("poison");
}

// ---- events ----

std::string to_string(event_kind k) {
  switch (k) {
  case event_kind::step:
    return "step";
  case event_kind::progress:
    return "progress";
  case event_kind::rejected:
    return "rejected";
  case event_kind::result:
    return "result";
  case event_kind::error:
    return "error";
  }
  return "?";
}

std::optional<event_kind> event_kind_from_string(const std::string& s) {
  for (auto k : {event_kind::step, event_kind::progress, event_kind::rejected, event_kind::result,
                 event_kind::error}) {
    if (to_string(k) == s) {
      return k;
    }
  }
  return std::nullopt;
}

std::optional<event_kind> kind_of(const json& event) {
  if (!event.is_object() || !event.contains("event") || !event.at("event").is_string()) {
    return std::nullopt;
  }
  return event_kind_from_string(event.at("event").get<std::string>());
}

void to_json(json& j, const step& x) {
  j = {{"event", "step"}, {"stage", x.stage}, {"who", x.who}, {"what", x.what}};
}
void from_json(const json& j, step& x) {
  x.stage = j.at("stage").get<std::string>();
  x.who = j.at("who").get<std::string>();
  x.what = j.at("what").get<std::string>();
}

void to_json(json& j, const progress& x) {
  j = {{"event", "progress"}, {"stage", x.stage}};
  if (x.stage == "time") {
    j["round"] = x.round;
    j["samples"] = x.samples;
  } else {
    j["done"] = x.done;
    j["total"] = x.total;
    j["what"] = x.what;
  }
}
void from_json(const json& j, progress& x) {
  x.stage = j.at("stage").get<std::string>();
  if (x.stage == "time") {
    x.round = j.at("round").get<int>();
    x.samples = j.at("samples").get<std::map<std::string, int>>();
  } else {
    x.done = j.at("done").get<int>();
    x.total = j.at("total").get<int>();
    x.what = j.at("what").get<std::string>();
  }
}

void to_json(json& j, const rejected& x) {
  j = {{"event", "rejected"}, {"who", x.who}, {"reason", x.reason}, {"message", x.message}};
}
void from_json(const json& j, rejected& x) {
  x.who = j.at("who").get<std::string>();
  x.reason = j.at("reason").get<std::string>();
  x.message = j.at("message").get<std::string>();
}

std::string to_string(blocked_by b) {
  switch (b) {
  case blocked_by::none:
    return "none";
  case blocked_by::device_busy:
    return "blocked.device_busy";
  case blocked_by::device_memory:
    return "blocked.device_memory";
  }
  return "?";
}

std::optional<blocked_by> blocked_by_from_string(const std::string& s) {
  for (const blocked_by b :
       {blocked_by::none, blocked_by::device_busy, blocked_by::device_memory}) {
    if (to_string(b) == s) {
      return b;
    }
  }
  return std::nullopt;
}

void to_json(json& j, const error& x) {
  j = {{"event", "error"}, {"message", x.message}, {"sticky", x.sticky}};
  if (x.blocked != blocked_by::none) {
    j["blocked"] = to_string(x.blocked);
  }
}
void from_json(const json& j, error& x) {
  x.message = j.at("message").get<std::string>();
  x.sticky = j.value("sticky", false);
  x.blocked = blocked_by::none;
  if (j.contains("blocked")) {
    const auto b = blocked_by_from_string(j.at("blocked").get<std::string>());
    if (!b) {
      throw std::invalid_argument("error.blocked: " + j.at("blocked").dump() +
                                  " is not a reason the judge is blocked by");
    }
    x.blocked = *b;
  }
}

} // namespace kb::gpu::protocol
