// The parts of a stored evaluation that the judge's runner records as it checks: each library's
// checks and their summary (gpu::protocol::library_result's record) and the checker's self-test
// counts (gpu::protocol::selftest's record), typed. Their one mapping is the stored result's, in
// src/eval/result.cpp.
#pragma once

#include "gpu/protocol.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kb::eval {

// A library's verification as the judge's runner recorded it (gpu::protocol::library_result's
// record): each check with its errors per output, and the worst metrics over the checks. Records
// of earlier judges lack some fields: those read as the defaults here (a metric as unknown).
struct output_errors {
  std::string output;
  std::optional<double> max_abs_err;
  std::optional<double> max_rel_err;
  std::optional<double> p99_abs_err;
  std::optional<double> rel_l2;
  std::optional<uint64_t> violations; // elements outside the tolerance
  std::optional<uint64_t> nonfinite;
  std::optional<uint64_t> unwritten;
};
struct verification_check {
  std::string shape;
  std::string distribution;
  std::optional<uint64_t> seed;
  bool passed = false;
  bool inputs_unchanged = true; // checks recorded before the judge compared the inputs
  std::string reason;           // a failed check's, where the record names one
  std::vector<output_errors> outputs;
};
// The worst of each metric over a library's checks, and how many checks there were.
struct verification_summary {
  int checks = 0;
  double max_abs_err = 0;
  double max_rel_err = 0;
  double p99_abs_err = 0;
  double rel_l2 = 0;
  double max_excess = 0;
};
void to_json(nlohmann::json& j, const output_errors& o);
void from_json(const nlohmann::json& j, output_errors& o);
void to_json(nlohmann::json& j, const verification_check& c);
void from_json(const nlohmann::json& j, verification_check& c);
void to_json(nlohmann::json& j, const verification_summary& s);
void from_json(const nlohmann::json& j, verification_summary& s);
// The checks of one library's verification, in the order the judge ran them.
std::vector<verification_check> checks_of(const gpu::protocol::library_result& l);
// Its summary; nullopt when the record has none (no check ran).
std::optional<verification_summary> summary_of(const gpu::protocol::library_result& l);

// The checker's self-test in figures (gpu::protocol::selftest's record): at how many shapes each
// trivial output was rejected, of how many shapes and checks. Earlier records lack the counts
// of shapes: 0.
struct selftest_tally {
  int zeros_rejected_by = 0;
  int copy_of_input_rejected_by = 0;
  int constant_rejected_by = 0;
  int shapes = 0;
  int checks = 0;
};
selftest_tally tally_of(const gpu::protocol::selftest& s);

} // namespace kb::eval
