// The stored evaluation: eval::to_json(result) read back by eval::stored_result, and records of
// the earlier schemas read through its upgrade. The schema-1 records are the judge's own, written
// on the H200 before the result was typed: an `eval --json` document (evidence/h200/harness/
// eval-time/019_relu.json) and the detail blobs of an exported run (adversarial-evidence). The
// schema-2 record is the queue's mapping of that time, built from the same document as its
// to_json wrote it.
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "eval/verification.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kb::eval {
namespace {

using nlohmann::json;

const fs::path root = KBLASTER_SOURCE_DIR;

json schema_1_document() {
  return json::parse(read_file(root / "evidence/h200/harness/eval-time/019_relu.json"));
}

// What the queue carried before the stored result had a schema (eval::to_json of that time):
// the typed fields of then, beside the judge's whole document as `detail`.
json schema_2_of(const json& d) {
  json builds = d.at("builds");
  return {{"verdict", d.at("verdict")},
          {"reason", d.at("reason")},
          {"message", d.at("message")},
          {"gate", d.at("statistics")},
          {"worker_seconds", 3.25},
          {"context",
           {{"device", d.at("device")},
            {"toolkit", d.at("toolchain").at("version")},
            {"arch", d.at("toolchain").at("arch")},
            {"isolation", d.at("isolation").at("level")},
            {"isolation_detail", d.at("isolation").at("detail")},
            {"shape", d.at("shape").at("name")},
            {"ceilings", d.at("ceilings")}}},
          {"builds", builds},
          {"verification", d.at("verification")},
          {"checker_selftest", d.at("checker_selftest")},
          {"timing", d.at("timing")},
          {"counters", nullptr},
          {"detail", d},
          {"seconds", d.at("seconds")}};
}

// Every fact of a schema-1 document, read from its typed field.
void expect_the_documents_facts(const result& r, const json& d) {
  EXPECT_EQ(to_string(r.final), d.at("verdict"));
  EXPECT_EQ(r.reason, d.at("reason"));
  EXPECT_EQ(r.message, d.at("message"));
  EXPECT_DOUBLE_EQ(r.seconds, d.at("seconds").get<double>());
  // The gate's mapping writes back every field the statistics held.
  ASSERT_TRUE(r.gate);
  const json gate = *r.gate;
  for (const auto& [key, value] : d.at("statistics").items()) {
    EXPECT_EQ(gate.at(key), value) << key;
  }
  ASSERT_TRUE(r.gate->decided);
  EXPECT_EQ(r.gate->decided->verdict, d.at("statistics").at("verdict"));
  EXPECT_EQ(r.gate->decided->blocks, d.at("statistics").at("test").at("blocks").get<size_t>());
  ASSERT_TRUE(r.context.device);
  EXPECT_EQ(json(*r.context.device), d.at("device"));
  EXPECT_EQ(r.context.toolkit, d.at("toolchain").at("version"));
  EXPECT_EQ(r.context.arch, "sm_90a");
  EXPECT_EQ(r.context.isolation, "sandboxed");
  EXPECT_EQ(r.context.isolation_detail, d.at("isolation").at("detail"));
  EXPECT_EQ(r.context.isolation_probe, d.at("isolation").at("probe"));
  EXPECT_EQ(r.context.shape, d.at("shape").at("name"));
  EXPECT_EQ(task::to_json(r.context.ceilings), d.at("ceilings"));
  ASSERT_EQ(r.builds.size(), d.at("builds").size());
  for (const auto& [role, b] : r.builds) {
    EXPECT_EQ(b.to_json(), d.at("builds").at(role)) << role;
  }
  EXPECT_EQ(json(r.verification), d.at("verification"));
  ASSERT_TRUE(r.checker_selftest);
  EXPECT_EQ(json(*r.checker_selftest), d.at("checker_selftest"));
  EXPECT_EQ(r.task.id, "019");
  EXPECT_EQ(r.task.family, d.at("task").at("family"));
  EXPECT_EQ(r.candidate.source_digest, d.at("candidate").at("source_digest"));
  EXPECT_EQ(r.baseline.source_digest, d.at("baseline").at("source_digest"));
  EXPECT_DOUBLE_EQ(*r.floor_s, d.at("floor_seconds").get<double>());
  EXPECT_FALSE(r.sanitize);
  EXPECT_FALSE(r.counters);
  // The facts without a typed field stay in detail; those with one leave it.
  for (const char* kept : {"protocol", "sessions", "toolchain", "device_probe", "shape"}) {
    EXPECT_EQ(r.detail.at(kept), d.at(kept)) << kept;
  }
  for (const char* moved : {"verdict", "reason", "message", "seconds", "statistics", "builds",
                            "verification", "checker_selftest", "device", "isolation", "ceilings",
                            "floor_seconds", "candidate", "baseline", "task", "timing"}) {
    EXPECT_FALSE(r.detail.contains(moved)) << moved;
  }
}

TEST(stored_result, a_result_reads_back_as_it_was_written) {
  const json d = schema_1_document();
  const result r = stored_result(d);
  const json stored = to_json(r);
  EXPECT_EQ(stored.at("schema"), result_schema_version);
  const result back = stored_result(stored);
  EXPECT_EQ(to_json(back), stored);
  // With a sanitizer's word and counters, which this document lacks.
  result s = back;
  s.sanitize.emplace();
  s.sanitize->emplace("racecheck", sanitizer_run{86, true, 2, 1, "none", "RACECHECK SUMMARY"});
  s.sanitize->emplace("memcheck", sanitizer_run{0, false, std::nullopt, std::nullopt, "none", ""});
  s.counters = counters_run{verdict::same, "verify.passed", "", 1.5, {{"available", true}}, 2e-5};
  const result s_back = stored_result(json::parse(to_json(s).dump()));
  EXPECT_EQ(to_json(s_back), to_json(s));
  EXPECT_EQ(s_back.sanitize->at("racecheck").summary_warnings, 1);
  EXPECT_FALSE(s_back.sanitize->at("memcheck").summary_errors);
}

TEST(stored_result, a_schema_1_document_of_the_judge_reads_with_every_fact_typed) {
  const json d = schema_1_document();
  const result r = stored_result(d);
  expect_the_documents_facts(r, d);
  // The document's timing is the judge's sessions, typed.
  ASSERT_EQ(r.timing.size(), d.at("timing").size());
  EXPECT_EQ(r.timing[0].samples.at("candidate").size(),
            d.at("timing")[0].at("samples").at("candidate").size());
}

TEST(stored_result, a_schema_2_queue_result_reads_as_the_same_result) {
  const json d = schema_1_document();
  const result r = stored_result(schema_2_of(d));
  expect_the_documents_facts(r, d);
  EXPECT_DOUBLE_EQ(r.worker_seconds, 3.25);
  EXPECT_EQ(r.timing.size(), d.at("timing").size());
  // Its oldest form carried the document alone.
  const json oldest = {{"verdict", d.at("verdict")},
                       {"reason", d.at("reason")},
                       {"message", d.at("message")},
                       {"detail", d},
                       {"seconds", d.at("seconds")}};
  expect_the_documents_facts(stored_result(oldest), d);
}

TEST(stored_result, what_is_no_record_is_refused) {
  EXPECT_THROW(stored_result(json::array()), std::invalid_argument);
  json future = to_json(stored_result(schema_1_document()));
  future["schema"] = result_schema_version + 1;
  EXPECT_THROW(stored_result(future), std::invalid_argument);
  json bad = to_json(stored_result(schema_1_document()));
  bad["verdict"] = "great";
  EXPECT_THROW(stored_result(bad), std::invalid_argument);
  EXPECT_ANY_THROW(stored_result(json{{"reason", "no verdict"}}));
}

// The detail blobs of a run exported before the result was typed: each reads, and the evidence
// check re-derives every row's verdict and reason from them through the typed reader.
TEST(stored_result, the_evidence_of_an_earlier_schema_still_checks_out) {
  const fs::path dir = root / "evidence/h200/harness/adversarial-evidence";
  const json rows = json::parse(read_file(dir / "rows.json"));
  int sanitized = 0;
  for (const auto& row : rows.at("tables").at("evaluations")) {
    const std::string blob = read_file(dir / "blobs" / row.at("detail_digest").get<std::string>());
    const result r = stored_result(json::parse(blob));
    EXPECT_EQ(to_string(r.final), row.at("verdict")) << row.at("id");
    EXPECT_EQ(r.reason, row.at("reason")) << row.at("id");
    EXPECT_FALSE(r.builds.empty()) << row.at("id");
    if (r.sanitize) {
      ++sanitized;
      EXPECT_TRUE(r.sanitize->at("racecheck").errors);
    }
  }
  EXPECT_EQ(sanitized, 1);
  const auto report = store::check_evidence(dir, recorded_outcome_of);
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.problems);
}

// Each library's checks, its summary and the checker's self-test read through their typed
// mapping: the schema-1 document's as the judge wrote them on the H200, and a record of an
// earlier judge that lacks the fields added since (inputs_unchanged, a check's reason, the
// summary's max_excess, the self-test's counts of shapes and checks).
TEST(stored_result, verification_and_selftest_read_typed_from_a_schema_1_document) {
  const json d = schema_1_document();
  const result r = stored_result(d);
  ASSERT_FALSE(r.verification.empty());
  const auto& l = r.verification[0];
  const json& recorded = d.at("verification")[0];
  const auto checks = checks_of(l);
  ASSERT_EQ(checks.size(), recorded.at("checks").size());
  const json& first = recorded.at("checks")[0];
  EXPECT_EQ(checks[0].shape, first.at("shape"));
  EXPECT_EQ(checks[0].distribution, first.at("distribution"));
  ASSERT_TRUE(checks[0].seed);
  EXPECT_EQ(*checks[0].seed, first.at("seed").get<uint64_t>());
  EXPECT_EQ(checks[0].passed, first.at("passed").get<bool>());
  EXPECT_TRUE(checks[0].inputs_unchanged);
  EXPECT_EQ(checks[0].reason, "");
  ASSERT_EQ(checks[0].outputs.size(), first.at("outputs").size());
  const json& out = first.at("outputs")[0];
  EXPECT_EQ(checks[0].outputs[0].output, out.at("output"));
  EXPECT_EQ(*checks[0].outputs[0].p99_abs_err, out.at("p99_abs_err").get<double>());
  EXPECT_EQ(*checks[0].outputs[0].violations, out.at("violations").get<uint64_t>());
  const auto summary = summary_of(l);
  ASSERT_TRUE(summary);
  EXPECT_EQ(json(*summary), recorded.at("summary"));
  ASSERT_TRUE(r.checker_selftest);
  const auto tally = tally_of(*r.checker_selftest);
  EXPECT_EQ(tally.zeros_rejected_by, d.at("checker_selftest").at("zeros_rejected_by"));
  EXPECT_EQ(tally.copy_of_input_rejected_by,
            d.at("checker_selftest").at("copy_of_input_rejected_by"));
  EXPECT_EQ(tally.constant_rejected_by, d.at("checker_selftest").at("constant_rejected_by"));
  EXPECT_EQ(tally.checks, d.at("checker_selftest").at("checks"));
  EXPECT_EQ(tally.shapes, 0); // this judge did not count them yet
}

TEST(stored_result, an_earlier_judges_verification_reads_over_the_defaults) {
  json d = schema_1_document();
  json& lib = d.at("verification")[0];
  json& check = lib.at("checks")[0];
  check.erase("inputs_unchanged");
  check.erase("seed");
  check.at("outputs")[0].erase("p99_abs_err");
  check.at("outputs")[0].erase("unwritten");
  lib.at("summary").erase("max_excess");
  d.at("checker_selftest") = {{"sound", true}, {"zeros_rejected_by", 3}};
  const result r = stored_result(d);
  const auto checks = checks_of(r.verification[0]);
  ASSERT_FALSE(checks.empty());
  EXPECT_TRUE(checks[0].inputs_unchanged);
  EXPECT_FALSE(checks[0].seed);
  EXPECT_FALSE(checks[0].outputs[0].p99_abs_err);
  EXPECT_FALSE(checks[0].outputs[0].unwritten);
  EXPECT_TRUE(checks[0].outputs[0].max_abs_err);
  const auto summary = summary_of(r.verification[0]);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->max_excess, 0.0);
  EXPECT_EQ(summary->checks, lib.at("summary").at("checks"));
  const auto tally = tally_of(*r.checker_selftest);
  EXPECT_EQ(tally.zeros_rejected_by, 3);
  EXPECT_EQ(tally.constant_rejected_by, 0);
  // A library that never reached a check has neither checks nor a summary.
  gpu::protocol::library_result none;
  EXPECT_TRUE(checks_of(none).empty());
  EXPECT_FALSE(summary_of(none));
}

} // namespace
} // namespace kb::eval
