// compute-sanitizer's verdict read from its own summary line, not from its exit code alone:
// memcheck, initcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
// "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)". The last summary line of the
// log is the tool's (it prints it after the program ends).
#pragma once

#include <optional>
#include <string_view>

namespace kb::eval::detail {

struct sanitizer_summary {
  long errors = 0;
  long warnings = 0; // racecheck only
};

// The counts of the last summary line in `log`, or nullopt when there is none.
std::optional<sanitizer_summary> parse_sanitizer_summary(std::string_view log);

// Whether a tool's run found errors: its error exit code, or a summary with errors, or no
// summary at all (the tool did not finish).
bool sanitizer_found_errors(std::string_view log, int exit_code, int error_exit_code);

} // namespace kb::eval::detail
