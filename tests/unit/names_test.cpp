// The stable names of stored and printed enums (src/common/names.hpp): every table names each
// value once, each module's to_string writes the table's name and its from_string reads it back
// as the same value, and text that is not a name (another case, a neighbour's name, nothing) is
// rejected rather than read as some value.
#include "build/build.hpp"
#include "common/error.hpp"
#include "common/names.hpp"
#include "eval/eval.hpp"
#include "llm/llm.hpp"
#include "profile/profile.hpp"
#include "pytorch/pytorch.hpp"
#include "report/report.hpp"
#include "sandbox/sandbox.hpp"
#include "search/executor.hpp"
#include "search/optimize.hpp"
#include "search/screen.hpp"
#include "search/state.hpp"
#include "stats/stats.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

namespace kb {
namespace {

enum class colour { red, green, blue };
constexpr auto colour_names = name_table<colour>({{colour::red, "red"}, {colour::green, "green"}});

TEST(names, a_table_names_its_values_and_reads_only_its_names) {
  static_assert(colour_names.size() == 2);
  static_assert(colour_names.name(colour::green) == "green");
  static_assert(colour_names.parse("red") == colour::red);
  EXPECT_EQ(colour_names.name(colour::blue), "?"); // a value the table does not hold
  EXPECT_FALSE(colour_names.parse("blue"));
  EXPECT_FALSE(colour_names.parse("Red"));
  EXPECT_FALSE(colour_names.parse("red "));
  EXPECT_FALSE(colour_names.parse(""));
  EXPECT_FALSE(colour_names.parse("?"));
}

TEST(names, a_table_that_names_twice_is_not_well_formed) {
  static_assert(colour_names.well_formed());
  static_assert(!name_table<colour>({{colour::red, "red"}, {colour::green, "red"}}).well_formed());
  static_assert(!name_table<colour>({{colour::red, "red"}, {colour::red, "rouge"}}).well_formed());
  static_assert(!name_table<colour>({{colour::red, ""}}).well_formed());
  static_assert(!name_table<colour>({{colour::red, "?"}}).well_formed());
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// Every value of the table: to_string gives its name, from_string reads the name back as the
// value; names are distinct; text that is no name (upper case, a suffix, empty) reads as nothing.
template <class E, size_t N, class To, class From>
void round_trips(const names_of<E, N>& table, To to, From from) {
  ASSERT_TRUE(table.well_formed());
  std::set<std::string> seen;
  for (const auto& [value, name] : table) {
    SCOPED_TRACE(std::string(name));
    EXPECT_EQ(std::string(to(value)), name);
    const auto back = from(std::string(name));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, value);
    EXPECT_TRUE(seen.insert(std::string(name)).second);
    if (upper(std::string(name)) != name) {
      EXPECT_FALSE(from(upper(std::string(name))).has_value());
    }
    EXPECT_FALSE(from(std::string(name) + "_").has_value());
  }
  EXPECT_FALSE(from(std::string()).has_value());
  EXPECT_FALSE(from(std::string("no_such_name")).has_value());
  EXPECT_FALSE(from(std::string("?")).has_value());
}

// For enums printed but not read back: names distinct, to_string writes the table's name.
template <class E, size_t N, class To> void names_each(const names_of<E, N>& table, To to) {
  round_trips(table, to, [&](const std::string& s) { return table.parse(s); });
}

#define KB_ROUND_TRIPS(ns, table, from)                                                            \
  round_trips(                                                                                     \
      ns::table, [](auto v) { return ns::to_string(v); },                                          \
      [](const std::string& s) { return ns::from(s); })

TEST(names, every_stored_enum_round_trips_through_its_name) {
  KB_ROUND_TRIPS(store, run_status_names, run_status_from_string);
  KB_ROUND_TRIPS(store, verdict_names, verdict_from_string);
  KB_ROUND_TRIPS(store, candidate_origin_names, candidate_origin_from_string);
  KB_ROUND_TRIPS(store, job_state_names, job_state_from_string);
  KB_ROUND_TRIPS(build, outcome_names, outcome_from_string);
  KB_ROUND_TRIPS(eval, profile_mode_names, profile_mode_from_string);
  KB_ROUND_TRIPS(stats, verdict_names, verdict_from_string);
  KB_ROUND_TRIPS(stats, stop_reason_names, stop_reason_from_string);
  KB_ROUND_TRIPS(profile, plan_names, plan_from_string);
  KB_ROUND_TRIPS(profile, state_names, state_from_string);
  KB_ROUND_TRIPS(profile, counter_source_names, counter_source_from_string);
  KB_ROUND_TRIPS(profile, status_names, status_from_string);
  KB_ROUND_TRIPS(llm, status_names, status_from_string);
  KB_ROUND_TRIPS(llm, token_limit_param_names, token_limit_param_from_string);
  KB_ROUND_TRIPS(search, outcome_names, outcome_from_string);
  KB_ROUND_TRIPS(search, state_source_names, state_source_from_string);
}

TEST(names, every_printed_enum_writes_its_tables_name) {
  names_each(search::stage_names, [](auto v) { return search::to_string(v); });
  names_each(search::search_stop_names, [](auto v) { return search::to_string(v); });
  names_each(search::cluster_fate_names, [](auto v) { return search::to_string(v); });
  names_each(pytorch::import_status_names, [](auto v) { return pytorch::to_string(v); });
  names_each(report::compile_status_names, [](auto v) { return report::to_string(v); });
}

// The sandbox's names are read from options and records; text that is no name is an input error.
template <class E, size_t N, class To, class From>
void round_trips_or_throws(const names_of<E, N>& table, To to, From from) {
  round_trips(table, to, [&](const std::string& s) -> std::optional<E> {
    try {
      return from(s);
    } catch (const input_error&) {
      return std::nullopt;
    }
  });
}

TEST(names, sandbox_names_round_trip_and_unknown_names_are_input_errors) {
  round_trips_or_throws(
      sandbox::identity_names, [](auto v) { return sandbox::to_string(v); },
      [](const std::string& s) { return sandbox::identity_from_string(s); });
  round_trips_or_throws(
      sandbox::isolation_names, [](auto v) { return sandbox::to_string(v); },
      [](const std::string& s) { return sandbox::isolation_from_string(s); });
  EXPECT_EQ(sandbox::to_string(sandbox::identity::root_mapped), "root-mapped");
  EXPECT_THROW(sandbox::identity_from_string("root_mapped"), input_error);
}

} // namespace
} // namespace kb
