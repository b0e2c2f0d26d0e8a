#include "search/state.hpp"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

namespace kb::search {

using nlohmann::json;

std::string to_string(state_source v) {
  return std::string(state_source_names.name(v));
}

std::optional<state_source> state_source_from_string(const std::string& s) {
  return state_source_names.parse(s);
}

json bottleneck::to_json() const {
  return {{"state", profile::to_string(state)},
          {"source", to_string(source)},
          {"numbers", numbers},
          {"sentence", sentence}};
}

namespace {

// The CUPTI values an evaluation carries that can be classified, or why there are none.
struct counters_reading {
  std::optional<profile::cupti_values> values;
  std::string why_not;
};

counters_reading read_counters(const eval::result& r) {
  if (!r.counters) {
    return {std::nullopt, "the evaluation did not collect them"};
  }
  const auto& run = *r.counters;
  if (run.outcome != eval::verdict::same) {
    return {std::nullopt, fmt::format("the counters' run ended {} ({})",
                                      eval::to_string(run.outcome), run.reason)};
  }
  auto v = run.values.is_object() ? profile::cupti_values::from_json(run.values)
                                  : profile::cupti_values{};
  if (v.available && !v.values.empty()) {
    return {std::move(v), ""};
  }
  return {std::nullopt, "CUPTI: " + (v.reason.empty() ? std::string("no values") : v.reason)};
}

} // namespace

bottleneck assess(const task::contract& c, const task::shape_case& s, double seconds,
                  const eval::result* evaluation) {
  bottleneck b;
  profile::observation o;
  o.events_only_reason = "analytic: the evaluation carried no counters";
  if (evaluation != nullptr) {
    // CUPTI's counters collected with the evaluation (eval::profile_mode), classified here.
    const auto reading = read_counters(*evaluation);
    if (reading.values) {
      o.measured = profile::counters_from_cupti(*reading.values);
    } else {
      o.events_only_reason = "analytic: " + reading.why_not;
    }
    o.ceilings = evaluation->context.ceilings;
  }
  if (seconds > 0) {
    o.seconds = seconds;
  }
  o.bytes = task::roofline_bytes(c, s);
  o.flops = task::roofline_flops(c, s);
  const auto a = profile::classify(o);
  b.state = a.result;
  b.source = o.measured ? state_source::cupti : state_source::analytic;
  b.numbers = a.numbers;
  b.numbers["rule"] = a.rule;
  if (!o.measured) {
    b.numbers["why_analytic"] = o.events_only_reason;
  }
  b.sentence = a.sentence;
  return b;
}

bool has_counters(const eval::result& r) {
  return read_counters(r).values.has_value();
}

std::string counters_note(const eval::result& r) {
  const auto reading = read_counters(r);
  return reading.values ? fmt::format("CUPTI: {} metrics in {} passes",
                                      reading.values->values.size(), reading.values->passes)
                        : reading.why_not;
}

namespace {

int log2_bucket(int64_t v) {
  return v > 0 ? static_cast<int>(std::lround(std::log2(static_cast<double>(v)))) : 0;
}

} // namespace

std::string shape_class::to_string() const {
  std::string buckets;
  for (const int b : log2_buckets) {
    if (!buckets.empty()) {
      buckets += '.';
    }
    buckets += std::to_string(b);
  }
  return fmt::format("{}/{}/{}/{}", task::to_string(fam), dtype, layout, buckets);
}

std::optional<shape_class> shape_class::parse(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, '/');) {
    parts.push_back(p);
  }
  if (parts.size() != 4) {
    return std::nullopt;
  }
  const auto fam = task::family_from_string(parts[0]);
  if (!fam) {
    return std::nullopt;
  }
  shape_class k;
  k.fam = *fam;
  k.dtype = parts[1];
  k.layout = parts[2];
  std::stringstream buckets(parts[3]);
  for (std::string b; std::getline(buckets, b, '.');) {
    try {
      k.log2_buckets.push_back(std::stoi(b));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return k;
}

shape_class classify_shape(const shape_features& f) {
  shape_class k;
  k.fam = f.fam;
  k.dtype = task::to_string(f.storage);
  switch (f.fam) {
  case task::family::elementwise:
    k.layout = "flat";
    k.log2_buckets = {log2_bucket(f.elements)};
    break;
  case task::family::normalize:
  case task::family::reduce:
  case task::family::loss:
    if (f.channel_rows) { // a batch norm: the channels, and the values of each
      k.layout = "channels";
      k.log2_buckets = {log2_bucket(f.extent), log2_bucket(f.outer * f.inner)};
      break;
    }
    k.layout = f.inner > 1 ? "strided" : "rows";
    k.log2_buckets = {log2_bucket(f.extent), log2_bucket(f.rows())};
    break;
  case task::family::scan:
  case task::family::argreduce:
    k.layout = f.inner > 1 ? "strided" : "rows";
    k.log2_buckets = {log2_bucket(f.extent), log2_bucket(f.rows())};
    break;
  case task::family::pool:
    k.layout = fmt::format("pool{}d{}", f.pool_rank, f.overlapping ? "-overlap" : "");
    k.log2_buckets = {log2_bucket(f.extent), log2_bucket(f.outer), log2_bucket(f.window)};
    break;
  case task::family::matmul:
    // A batch of products counts as one with the batch's rows (the work a tile grid covers);
    // diag(a) @ B is a row scaling, bound by memory like nothing else in the family.
    k.layout = f.diag ? "diag" : "gemm";
    k.log2_buckets = {log2_bucket(f.m * f.batch), log2_bucket(f.n), log2_bucket(f.k)};
    break;
  case task::family::conv:
    k.layout = f.transposed ? "conv_transposed" : "conv";
    k.log2_buckets = {log2_bucket(f.m), log2_bucket(f.n), log2_bucket(f.k),
                      log2_bucket(f.groups)};
    break;
  }
  return k;
}

int distance(const shape_class& a, const shape_class& b) {
  if (a.fam != b.fam || a.layout != b.layout || a.log2_buckets.size() != b.log2_buckets.size()) {
    return 100;
  }
  int d = a.dtype == b.dtype ? 0 : 4;
  for (size_t i = 0; i < a.log2_buckets.size(); ++i) {
    d += std::abs(a.log2_buckets[i] - b.log2_buckets[i]);
  }
  return d;
}

json choice_record(const bottleneck& state, const proposal_context& context,
                   const proposal& chosen) {
  json why{{"state", state.to_json()}};
  for (size_t i = 0; i < context.retrieved.size(); ++i) {
    const auto& r = context.retrieved[i];
    if (r.strategy == chosen.strategy) {
      why["rank"] = i;
      why["of"] = context.retrieved.size();
      why["score"] = r.score;
      why["addresses_state"] = r.addresses_state;
      why["retrieved"] = {{"attempts", r.attempts},
                          {"successes", r.successes},
                          {"best_speedup", r.best_speedup},
                          {"mean_speedup", r.mean_speedup},
                          {"params", r.params},
                          {"evidence", r.evidence}};
    }
  }
  if (chosen.trace.is_object() && chosen.trace.contains("started_from")) {
    why["started_from"] = chosen.trace["started_from"];
  }
  return why;
}

} // namespace kb::search
