#include "common/process.hpp"
#include "store_test_support.hpp"

#include <fstream>

namespace kb::store::testing {
namespace {

class store_cli_test : public store_test {
protected:
  process_result kblaster(std::vector<std::string> args) {
    args.insert(args.begin(), {KBLASTER_BINARY, "--store", store_dir().string()});
    return run_process({.argv = args, .timeout = std::chrono::seconds(60)});
  }
};

TEST_F(store_cli_test, runs_list_and_show_print_every_evaluation_with_verdict_and_reason) {
  recorded_run r;
  {
    store st(store_dir());
    r = record_sample_run(st);
    auto e = sample_evaluation(r, 1);
    e.verdict = verdict::rejected;
    e.reason = "verify.nan_output";
    e.samples = nullptr;
    e.speedup.reset();
    st.record_evaluation(e);
  }
  const auto list = kblaster({"runs", "list"});
  ASSERT_TRUE(list.ok()) << list.output;
  EXPECT_NE(list.output.find("optimize"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("finished"), std::string::npos) << list.output;

  const auto show = kblaster({"runs", "show", std::to_string(r.run)});
  ASSERT_TRUE(show.ok()) << show.output;
  EXPECT_NE(show.output.find("2 evaluation(s)"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("improved"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("timing.improved"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("rejected"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("verify.nan_output"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("1.500x"), std::string::npos) << show.output;

  const auto json = kblaster({"runs", "show", std::to_string(r.run), "--json"});
  ASSERT_TRUE(json.ok()) << json.output;
  const auto doc = nlohmann::json::parse(json.output);
  ASSERT_EQ(doc["evaluations"].size(), 2u);
  EXPECT_EQ(doc["evaluations"][1]["reason"], "verify.nan_output");

  EXPECT_EQ(kblaster({"runs", "show", "999"}).exit_code, 65);
}

TEST_F(store_cli_test, store_verify_fails_on_a_corrupt_blob_and_gc_keeps_referenced_ones) {
  recorded_run r;
  std::string unreferenced;
  {
    store st(store_dir());
    r = record_sample_run(st);
    unreferenced = st.put("scratch").digest;
  }
  const auto clean = kblaster({"store", "verify"});
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  const auto gc = kblaster({"store", "gc", "--grace", "0"});
  EXPECT_EQ(gc.exit_code, 0) << gc.output;
  EXPECT_NE(gc.output.find("removed 1 blob(s)"), std::string::npos) << gc.output;

  store st(store_dir());
  EXPECT_FALSE(st.exists(unreferenced));
  EXPECT_TRUE(st.exists(r.binary));
  fs::permissions(st.path_of(r.binary), fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(st.path_of(r.binary), std::ios::app) << "!";
  const auto corrupt = kblaster({"store", "verify"});
  EXPECT_EQ(corrupt.exit_code, 1) << corrupt.output;
  EXPECT_NE(corrupt.output.find("corrupt  " + r.binary), std::string::npos) << corrupt.output;

  fs::remove(st.path_of(r.log));
  const auto missing = kblaster({"store", "verify"});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("missing  " + r.log), std::string::npos) << missing.output;
}

TEST_F(store_cli_test, evidence_export_and_check_round_trip_and_catch_tampering) {
  recorded_run r;
  {
    store st(store_dir());
    r = record_sample_run(st);
  }
  const fs::path out = tmp() / "evidence";
  const auto exported =
      kblaster({"evidence", "export", std::to_string(r.run), "--out", out.string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto checked = run_process({.argv = {KBLASTER_BINARY, "evidence", "check", out.string()}});
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find(": ok"), std::string::npos) << checked.output;

  std::ofstream(out / "rows.json", std::ios::app) << " ";
  const auto tampered = run_process({.argv = {KBLASTER_BINARY, "evidence", "check", out.string()}});
  EXPECT_EQ(tampered.exit_code, 1) << tampered.output;
  EXPECT_NE(tampered.output.find("rows.json has changed"), std::string::npos) << tampered.output;

  EXPECT_EQ(
      kblaster({"evidence", "export", std::to_string(r.run), "--out", out.string()}).exit_code, 65);
}

TEST_F(store_cli_test, kblaster_home_places_the_store) {
  const auto result =
      run_process({.argv = {KBLASTER_BINARY, "runs", "list"},
                   .env_overrides = {{"KBLASTER_HOME", (tmp() / "home-store").string()}}});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(tmp() / "home-store" / "store.sqlite"));
}

} // namespace
} // namespace kb::store::testing
