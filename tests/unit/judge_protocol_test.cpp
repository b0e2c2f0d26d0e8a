// The judge-runner protocol's parts that need no GPU: message framing with descriptors, the
// bounded byte capture of a runner's output, the host-work rule and the sanitizer summaries.
#include "eval/detail/sanitizer.hpp"
#include "eval/eval.hpp"
#include "gpu/detail/capture.hpp"
#include "gpu/detail/channel.hpp"
#include "gpu/detail/messages.hpp"
#include "gpu/detail/rules.hpp"

#include "common/text.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kb::gpu::detail {
namespace {

struct socket_pair {
  int a = -1;
  int b = -1;
  socket_pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    a = sv[0];
    b = sv[1];
  }
  ~socket_pair() {
    ::close(a);
    ::close(b);
  }
};

TEST(JudgeChannel, FramesCarryTypedMessagesAndDescriptors) {
  socket_pair s;
  call_request c;
  c.seq = 7;
  c.inputs.push_back({3, 65536, 0, {4, 5}});
  c.scalars = {0.5};
  ASSERT_TRUE(send_frame(s.a, static_cast<uint32_t>(message::call), nlohmann::json(c).dump()));
  frame f;
  ASSERT_EQ(receive_frame(s.b, f, 1000), recv_status::ok);
  EXPECT_EQ(f.type, static_cast<uint32_t>(message::call));
  const auto back = nlohmann::json::parse(f.payload).get<call_request>();
  EXPECT_EQ(back.seq, 7u);
  ASSERT_EQ(back.inputs.size(), 1u);
  EXPECT_EQ(back.inputs[0].offset, 65536u);
  EXPECT_EQ(back.inputs[0].shape, (std::vector<int64_t>{4, 5}));

  // A descriptor crosses: what is written through the received one is read through the pipe.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_TRUE(send_frame(s.a, static_cast<uint32_t>(message::map),
                         nlohmann::json(map_request{9, 2u << 20}).dump(), {p[1]}));
  ASSERT_EQ(receive_frame(s.b, f, 1000), recv_status::ok);
  ASSERT_EQ(f.fds.size(), 1u);
  EXPECT_NE(f.fds[0], p[1]);
  ASSERT_EQ(::write(f.fds[0], "x", 1), 1);
  char ch = 0;
  ASSERT_EQ(::read(p[0], &ch, 1), 1);
  EXPECT_EQ(ch, 'x');
  ::close(f.fds[0]);
  ::close(p[0]);
  ::close(p[1]);
}

TEST(JudgeChannel, TimeoutClosedAndMalformed) {
  frame f;
  {
    socket_pair s;
    EXPECT_EQ(receive_frame(s.b, f, 20), recv_status::timeout);
    // Bytes that are not a frame (a candidate writing to the socket) are refused.
    const std::string junk = "{\"event\":\"result\",\"forged\":true}\n";
    ASSERT_EQ(::write(s.a, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    EXPECT_EQ(receive_frame(s.b, f, 1000), recv_status::malformed);
  }
  socket_pair s;
  ::shutdown(s.a, SHUT_WR);
  EXPECT_EQ(receive_frame(s.b, f, 1000), recv_status::closed);
}

// The spinning wait: a frame sent while it spins, one sent after it went to sleep, and a timeout
// shorter than the spin that still holds.
TEST(JudgeChannel, SpinningWaitSeesFramesAndKeepsItsTimeout) {
  using clock_type = std::chrono::steady_clock;
  frame f;
  socket_pair s;
  const auto t0 = clock_type::now();
  EXPECT_EQ(receive_frame(s.b, f, 30, 200'000), recv_status::timeout);
  const auto waited = clock_type::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(29));
  EXPECT_LT(waited, std::chrono::milliseconds(150)) << "the timeout bounds the spin";
  for (const int delay_ms : {2, 60}) { // inside a 20 ms spin, and after it
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      send_frame(s.a, static_cast<uint32_t>(message::reply), "{}");
    });
    EXPECT_EQ(receive_frame(s.b, f, -1, 20'000), recv_status::ok) << delay_ms;
    EXPECT_EQ(f.payload, "{}");
    sender.join();
  }
  ::shutdown(s.a, SHUT_WR);
  EXPECT_EQ(receive_frame(s.b, f, -1, 20'000), recv_status::closed);
}

TEST(JudgeChannel, WakeUpIsATypedExchangeOfItsOwn) {
  // The judge wakes a runner before each call it times; the answer is a message of its own, so
  // a frame forged on the socket (a reply of another kind, or an empty object) is not taken for
  // it.
  for (const message m : {message::map, message::load, message::workspace, message::call,
                          message::sync, message::profile, message::exit}) {
    EXPECT_NE(static_cast<uint32_t>(m), static_cast<uint32_t>(message::wake));
  }
  socket_pair s;
  ASSERT_TRUE(send_frame(s.a, static_cast<uint32_t>(message::wake), "{}"));
  frame f;
  ASSERT_EQ(receive_frame(s.b, f, 1000), recv_status::ok);
  EXPECT_EQ(f.type, static_cast<uint32_t>(message::wake));
  ASSERT_TRUE(
      send_frame(s.b, static_cast<uint32_t>(message::reply), nlohmann::json(wake_reply{}).dump()));
  ASSERT_EQ(receive_frame(s.a, f, 1000), recv_status::ok);
  EXPECT_TRUE(nlohmann::json::parse(f.payload).get<wake_reply>().awake);
  EXPECT_THROW((void)nlohmann::json::object().get<wake_reply>(), nlohmann::json::exception);
  EXPECT_THROW((void)nlohmann::json(call_reply{}).get<wake_reply>(), nlohmann::json::exception);
}

TEST(JudgeChannel, TheRunnersFirstWordIsAReadyOfItsOwn) {
  // The runner says it is ready before it reads the load request, so that a runner ended before
  // it (no candidate code loaded yet) is told apart from one the candidate's code ended; no other
  // reply passes for it, and it passes for no other.
  socket_pair s;
  ASSERT_TRUE(
      send_frame(s.b, static_cast<uint32_t>(message::reply), nlohmann::json(ready_reply{}).dump()));
  frame f;
  ASSERT_EQ(receive_frame(s.a, f, 1000), recv_status::ok);
  EXPECT_EQ(f.type, static_cast<uint32_t>(message::reply));
  EXPECT_TRUE(nlohmann::json::parse(f.payload).get<ready_reply>().ready);
  EXPECT_THROW((void)nlohmann::json(load_reply{}).get<ready_reply>(), nlohmann::json::exception);
  EXPECT_THROW((void)nlohmann::json(wake_reply{}).get<ready_reply>(), nlohmann::json::exception);
  EXPECT_THROW((void)nlohmann::json(ready_reply{}).get<load_reply>(), nlohmann::json::exception);
  EXPECT_EQ(last_line("kblaster runner: no CUDA device\n\n  \n"),
            "kblaster runner: no CUDA device");
  EXPECT_EQ(last_line("one\ntwo"), "two");
  EXPECT_EQ(last_line(" \n\t\n"), "");
  EXPECT_EQ(last_line(""), "");
}

TEST(JudgeCapture, InvalidUtf8BecomesReplacementAndJsonDumps) {
  const std::string bytes = std::string("ok \xFF\xFE end \xC3\xA9 \xE2\x82", 17) + '\0' + "z";
  const std::string text = printable_text(bytes);
  EXPECT_NE(text.find("ok "), std::string::npos);
  EXPECT_NE(text.find("\xC3\xA9"), std::string::npos); // valid sequences are kept
  EXPECT_NE(text.find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_EQ(text.find('\xFF'), std::string::npos);
  // Would throw json type_error.316 on the raw bytes.
  EXPECT_THROW((void)nlohmann::json(bytes).dump(), nlohmann::json::type_error);
  EXPECT_NO_THROW((void)nlohmann::json(text).dump());
  EXPECT_EQ(base64(std::string_view("\xFF\x00\x01", 3)), "/wAB");
  EXPECT_EQ(base64("ab"), "YWI=");
  EXPECT_EQ(base64("a"), "YQ==");
  EXPECT_EQ(printable_text("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // surrogate
}

TEST(JudgeCapture, HugeOutputKeepsOnlyTheTail) {
  const auto path = std::filesystem::temp_directory_path() / "kblaster-capture-test.log";
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1 << 20, '\xFF');
    for (int i = 0; i < 8; ++i) {
      out << block;
    }
    out << "LAST LINE";
  }
  const auto c = capture_tail(path);
  EXPECT_EQ(c.total, (8u << 20) + 9);
  EXPECT_EQ(c.tail.size(), capture_bytes);
  EXPECT_EQ(c.tail.substr(c.tail.size() - 9), "LAST LINE");
  EXPECT_NO_THROW((void)nlohmann::json(printable_text(c.tail)).dump());
  std::filesystem::remove(path);
  EXPECT_EQ(capture_tail(path).total, 0u); // a missing file is empty, not an error
}

TEST(JudgeRules, HostWork) {
  // The calibration's empty round trip is the allowance, never below 50 us.
  EXPECT_EQ(host_work_rule::calibrated(80'000).allowance_ns, 80'000);
  EXPECT_EQ(host_work_rule::calibrated(20'000).allowance_ns, host_work_rule::min_allowance_ns);
  const auto rule = host_work_rule::calibrated(60'000);
  // An honest call: enqueue only, a few tens of microseconds over the reference.
  EXPECT_FALSE(rule.violated(90'000, 40'000));
  // A 5 ms computation done synchronously inside kb_launch.
  EXPECT_TRUE(rule.violated(5'100'000, 40'000));
  // The allowance does not grow with the window: 70% of a 1 ms call's work done before GO
  // (a softmax computing its row statistics early) breaks the rule, whatever the window.
  EXPECT_TRUE(rule.violated(740'000, 40'000));
  EXPECT_TRUE(rule.violated(2'000'000, 40'000));
  EXPECT_FALSE(rule.violated(100'000, 40'000)); // exactly the allowance: not beyond it
  EXPECT_TRUE(rule.violated(100'001, 40'000));
  EXPECT_DOUBLE_EQ(net_sample(300e-6, 280e-6), 20e-6);
  EXPECT_DOUBLE_EQ(net_sample(279e-6, 280e-6), 1e-7);
}

// A round trip beyond the reference and the allowance is charged to the call's sample; only a
// gross excess rejects. The honest tensor-core matmul of L1_001 on the H100 had round trips of
// 99-147 us against a reference of 48-55 us: rejected `timing.host_work` when any excess over
// the allowance broke the rule, charged at most 45 us on a 2.55 ms window now.
TEST(JudgeRules, HostWorkBeyondTheAllowanceIsChargedAndGrossWorkRejected) {
  const auto rule = host_work_rule::calibrated(33'000); // allowance: 50 us
  EXPECT_EQ(rule.charge_ns(100'000, 50'000), 0);
  EXPECT_EQ(rule.charge_ns(147'000, 52'000), 45'000);
  EXPECT_FALSE(rule.rejected(147'000, 52'000));
  // Work hidden before GO gains at most the allowance, whatever its size and whatever the
  // honest call's own excess, and past four allowances it is rejected by name.
  const int64_t reference = 50'000;
  for (int64_t honest = 0; honest <= rule.allowance_ns; honest += 10'000) {
    for (int64_t hidden = 0; hidden <= 2'000'000; hidden += 7'000) {
      const int64_t trip = reference + honest + hidden;
      EXPECT_LE(hidden - rule.charge_ns(trip, reference), rule.allowance_ns);
      EXPECT_EQ(rule.rejected(trip, reference), honest + hidden > 4 * rule.allowance_ns);
    }
  }
  // 70% of a 1 ms softmax's work before GO, and a 5 ms synchronous computation: rejected.
  EXPECT_TRUE(rule.rejected(740'000, 40'000));
  EXPECT_TRUE(rule.rejected(5'100'000, 40'000));
  EXPECT_FALSE(rule.rejected(240'000, 40'000)); // exactly four allowances: charged 150 us
  EXPECT_EQ(rule.charge_ns(240'000, 40'000), 150'000);
  EXPECT_TRUE(rule.rejected(240'001, 40'000));
}

TEST(JudgeRules, EveryTimedCallIsCheckedWhole) {
  const std::optional<uint64_t> verified = 0xABCDu;
  // An honest call: complete behind STOP, nothing read again.
  EXPECT_TRUE(complete_at_stop({0xABCD, 0}, verified));
  // A nondeterministic task (no verified digest): only poison counts.
  EXPECT_TRUE(complete_at_stop({0x1234, 0}, std::nullopt));
  EXPECT_FALSE(complete_at_stop({0x1234, 1}, std::nullopt));
  // A digest forged to match, with poison left: the poison decides.
  EXPECT_FALSE(complete_at_stop({0xABCD, 56}, verified));
  EXPECT_EQ(whole_call_finding({0xABCD, 56}, {0xABCD, 56}, verified, false),
            whole_finding::unwritten);
  // Work after DONE: incomplete at STOP, complete once the runner is idle.
  EXPECT_EQ(whole_call_finding({0x1111, 300}, {0xABCD, 0}, verified, false),
            whole_finding::written_late);
  // The same for a library the judge dispatches from the host: judged on the second read only.
  EXPECT_EQ(whole_call_finding({0x1111, 300}, {0xABCD, 0}, verified, true),
            whole_finding::complete);
  // A stale or wrong answer, unchanged between the two reads.
  EXPECT_EQ(whole_call_finding({0x2222, 0}, {0x2222, 0}, verified, false), whole_finding::stale);
  EXPECT_EQ(whole_call_finding({0x2222, 0}, {0x2222, 0}, std::nullopt, false),
            whole_finding::complete);
}

TEST(JudgeRules, ReferenceTripIsTheBaselinesUnderTheSameConditions) {
  reference_trip r(55'000);
  // Too few baseline calls yet: the empty call's.
  for (int i = 0; i < 4; ++i) {
    r.add_baseline(135'000);
    EXPECT_EQ(r.for_candidate(), 55'000);
  }
  r.add_baseline(140'000);
  EXPECT_EQ(r.for_candidate(), 135'000); // median of 135, 135, 135, 135, 140 us
  EXPECT_EQ(r.for_baseline(), 135'000);  // the baseline too: its calls are just as slow
  // A candidate of 18 kernels per call at 180 us (its graph updated, not instantiated): held
  // against the baseline's 135 us it is within the 55 us allowance, against the empty call's it
  // would not be; 300 us is beyond it either way, and so is a 5 ms synchronous computation.
  const auto rule = host_work_rule::calibrated(55'000);
  EXPECT_TRUE(rule.violated(300'000, 55'000));
  EXPECT_FALSE(rule.violated(180'000, r.for_candidate()));
  EXPECT_TRUE(rule.violated(300'000, r.for_candidate()));
  EXPECT_TRUE(rule.violated(5'100'000, r.for_candidate()));
  // Never below the empty call's: baseline calls faster than it do not lower the reference.
  reference_trip fast(80'000);
  for (int i = 0; i < 9; ++i) {
    fast.add_baseline(60'000);
  }
  EXPECT_EQ(fast.for_candidate(), 80'000);
}

// A baseline that dispatches on the host (eager PyTorch) is never the reference: the control, the
// empty kernel called among the others' calls, is. At a KernelBench shape (ReLU on 4096 x 393216,
// 7.7 ms windows) honest one-kernel candidates held to the back-to-back empty call's 33 us were
// rejected (`timing.work_outside_stream`: 19 of 30 round trips beyond the 50 us allowance); a
// runner woken after other runners' long windows answers slower (the baseline's one-kernel calls
// at 135 us against the empty call's 55 us, above). Held to the control's calls, made under those
// conditions, the honest call passes and a call that does its work before GO still does not.
TEST(JudgeRules, WithoutABaselineThatEnqueuesTheControlIsTheReference) {
  reference_trip r(33'000);
  const auto rule = host_work_rule::calibrated(33'000); // allowance: 50 us at least
  for (int i = 0; i < 4; ++i) {
    r.add_control(120'000);
  }
  EXPECT_EQ(r.calls(), 4u);
  EXPECT_EQ(r.for_candidate(), 33'000); // too few control calls yet
  EXPECT_TRUE(rule.violated(130'000, r.for_candidate()));
  r.add_control(125'000);
  EXPECT_EQ(r.for_candidate(), 120'000);
  EXPECT_FALSE(rule.violated(130'000, r.for_candidate()));  // the honest candidate
  EXPECT_TRUE(rule.violated(1'000'000, r.for_candidate())); // 1 ms of work before GO
  // Never below the empty call's either.
  reference_trip fast(80'000);
  for (int i = 0; i < 9; ++i) {
    fast.add_control(40'000);
  }
  EXPECT_EQ(fast.for_candidate(), 80'000);
}

TEST(JudgeRules, AbiTallyWaitsOutARunnersSlowStart) {
  // A runner's first calls are slow: a dozen slow round trips at the start reject nothing, early
  // or at the end.
  abi_tally t;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(t.add(true, false, false), abi_finding::none);
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(t.add(false, false, false), abi_finding::none);
  }
  // A scattered slow call now and then never adds up to most calls.
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(t.add(i % 5 == 0, false, i % 7 == 0), abi_finding::none) << i;
  }
  EXPECT_EQ(t.finish(), abi_finding::none);
  // Half the calls is not most of them.
  abi_tally half;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(half.add(i % 2 == 0, false, false), abi_finding::none);
  }
  EXPECT_EQ(half.finish(), abi_finding::none);
  // A stretch of slow wake-ups: 60% of the first 40 calls slow, then the runner settles. Early,
  // 60% is not enough; at the end the slow calls are a minority of all.
  abi_tally stretch;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(stretch.add(i % 5 < 3, true, false), abi_finding::none) << i;
  }
  for (int i = 0; i < 60; ++i) {
    EXPECT_EQ(stretch.add(i % 10 == 0, true, false), abi_finding::none) << i;
  }
  EXPECT_EQ(stretch.finish(), abi_finding::none);
}

TEST(JudgeRules, AbiTallyNamesWhereTheWorkWent) {
  abi_tally host;
  abi_tally outside;
  abi_tally tail;
  abi_finding h = abi_finding::none;
  abi_finding o = abi_finding::none;
  abi_finding a = abi_finding::none;
  int calls = 0;
  while (h == abi_finding::none && calls < 100) {
    h = host.add(true, false, false);
    o = outside.add(true, true, false);
    a = tail.add(false, false, true);
    ++calls;
  }
  EXPECT_EQ(calls, 40); // the early word comes at 40 calls when (nearly) all were slow
  EXPECT_EQ(h, abi_finding::host_work);
  EXPECT_EQ(o, abi_finding::work_outside_stream);
  EXPECT_EQ(a, abi_finding::work_after_window);
  // A slow round trip is counted once: its tail does not count as work after the window.
  abi_tally both;
  for (int i = 0; i < 39; ++i) {
    EXPECT_EQ(both.add(true, false, true), abi_finding::none);
  }
  EXPECT_EQ(both.add(true, false, true), abi_finding::host_work);
  // Work hidden in four of five calls is found early, once more than three quarters are slow.
  abi_tally most;
  abi_finding m = abi_finding::none;
  int n = 0;
  while (m == abi_finding::none && n < 100) {
    m = most.add(n % 5 != 4, false, false);
    ++n;
  }
  EXPECT_EQ(m, abi_finding::host_work);
  EXPECT_EQ(n, 40);
}

TEST(JudgeRules, AbiTallyDecidesAtTheEndOverFewerCalls) {
  // A slow kernel gets few calls: at the end of timing most of at least 10 decide.
  abi_tally slow;
  for (int i = 0; i < 14; ++i) {
    EXPECT_EQ(slow.add(i != 3, true, false), abi_finding::none);
  }
  EXPECT_EQ(slow.finish(), abi_finding::work_outside_stream);
  abi_tally few;
  for (int i = 0; i < 9; ++i) {
    few.add(true, false, false);
  }
  EXPECT_EQ(few.finish(), abi_finding::none); // fewer than 10 calls decide nothing
  abi_tally tails;
  for (int i = 0; i < 12; ++i) {
    tails.add(false, false, i < 7);
  }
  EXPECT_EQ(tails.finish(), abi_finding::work_after_window);
}

// Samples around `median` [s] with a relative spread of `spread`, deterministic.
std::vector<double> around(double median, double spread, int n, uint64_t seed) {
  std::vector<double> x;
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0; // [0, 1)
    x.push_back(median * (1 + spread * (2 * u - 1)));
  }
  return x;
}

TEST(JudgeRules, TheBaselineAloneShowsWhetherACandidateSlowedIt) {
  // An honest candidate: the baseline takes as long beside it as alone.
  const auto honest = compare_alone(around(3e-3, 0.01, 200, 1), around(3e-3, 0.01, 60, 2));
  EXPECT_FALSE(honest.slowed) << honest.to_json().dump();
  EXPECT_NEAR(honest.ratio, 1.0, 0.01);
  // A candidate whose thread keeps the device busy between its calls: the baseline took 25%
  // longer beside it.
  const auto slowed = compare_alone(around(3.75e-3, 0.05, 200, 3), around(3e-3, 0.01, 60, 4));
  EXPECT_TRUE(slowed.slowed) << slowed.to_json().dump();
  EXPECT_NEAR(slowed.ratio, 1.25, 0.02);
  // Under the effect a gate could take for a speedup, or within the noise: not a finding.
  EXPECT_FALSE(compare_alone(around(3.06e-3, 0.005, 200, 5), around(3e-3, 0.005, 60, 6)).slowed);
  EXPECT_FALSE(compare_alone(around(3.3e-3, 0.4, 200, 7), around(3e-3, 0.4, 12, 8)).slowed);
  // A tiny kernel: 20% (26 us) is a finding, 9 us is not (a process more or less on the device
  // shifts such a window by microseconds).
  EXPECT_TRUE(compare_alone(around(1.56e-4, 0.01, 400, 9), around(1.3e-4, 0.01, 60, 10)).slowed);
  EXPECT_FALSE(
      compare_alone(around(1.39e-4, 0.002, 400, 12), around(1.3e-4, 0.002, 60, 13)).slowed);
  EXPECT_FALSE(compare_alone({}, around(1e-3, 0.01, 20, 11)).slowed);
  const std::vector<double> five{5, 1, 4, 2, 3};
  const auto b = stats::median_with_interval(five);
  EXPECT_EQ(b.median, 3);
  EXPECT_LE(b.low, b.median);
  EXPECT_GE(b.high, b.median);
  const std::vector<double> four{1, 2, 3, 4};
  EXPECT_EQ(stats::median_with_interval(four).median, 2.5);
  // The gate's throttle rule, which the comparison shares: below the fraction of the default
  // clock, and never for a clock or default that is unknown.
  EXPECT_TRUE(stats::throttled(1400.0, 1980, 0.75));
  EXPECT_FALSE(stats::throttled(1500.0, 1980, 0.75));
  EXPECT_FALSE(stats::throttled(std::nullopt, 1980, 0.75));
  EXPECT_FALSE(stats::throttled(100.0, 0, 0.75));
}

TEST(JudgeRules, FreshContentsShowAResultCache) {
  // An honest kernel takes as long on contents drawn anew as on the sets it has seen.
  EXPECT_FALSE(compare_fresh(around(3e-3, 0.01, 20, 21), around(3e-3, 0.01, 60, 22)).c.slowed);
  // A cache keyed by the contents computes on fresh contents (2.6 ms) and replays the seen ones
  // (a copy, 2.0 ms).
  const auto cache = compare_fresh(around(2.6e-3, 0.01, 12, 23), around(2.0e-3, 0.01, 60, 24));
  EXPECT_TRUE(cache.c.slowed) << cache.to_json().dump();
  EXPECT_TRUE(cache.to_json().at("reused").get<bool>());
  EXPECT_NEAR(cache.to_json().at("ratio").get<double>(), 1.3, 0.02);
  // Faster on fresh contents is no sign of reuse, and a few percent is within what the gate's
  // delta absorbs.
  EXPECT_FALSE(compare_fresh(around(2.0e-3, 0.01, 20, 25), around(2.6e-3, 0.01, 60, 26)).c.slowed);
  EXPECT_FALSE(compare_fresh(around(3.05e-3, 0.002, 20, 27), around(3e-3, 0.002, 60, 28)).c.slowed);
  static_assert(fresh_round_every >= 2 && fresh_min_calls >= 10 && seen_min_calls >= 10 &&
                fresh_max_rounds >= fresh_min_calls);
}

TEST(JudgeRules, RoundsArePlannedSoThatASlowKernelGetsItsMinimumOfEachKind) {
  const int minimum = fresh_min_calls + seen_min_calls;
  // A fast kernel (a 100 us round in a 6 s session): one fresh round in four up to the most a
  // session has, the stopping rule going on after them.
  const auto fast = plan_rounds(100e-6, 6.0);
  EXPECT_EQ(fast.rounds, fresh_max_rounds * fresh_round_every);
  EXPECT_EQ(fast.fresh, fresh_max_rounds);
  EXPECT_FALSE(fast.past_budget);
  EXPECT_TRUE(fast.within_cap);
  // A round of no measurable time plans the same (no division by zero).
  EXPECT_EQ(plan_rounds(0, 6.0).rounds, fast.rounds);
  // The preflight's A/A (a 1 s session) of a ReLU over 6.4 GB tensors: 18 rounds fit the limit,
  // but the plan takes the minimum of each kind, past the limit.
  const auto preflight = plan_rounds(0.055, 1.0);
  EXPECT_EQ(preflight.rounds, minimum);
  EXPECT_EQ(preflight.fresh, fresh_min_calls);
  EXPECT_EQ(preflight.rounds - preflight.fresh, seen_min_calls);
  EXPECT_TRUE(preflight.past_budget);
  EXPECT_TRUE(preflight.within_cap);
  EXPECT_NEAR(preflight.expected_s, 20 * 0.055, 1e-12);
  // A kernel whose rounds the limit holds 30 of: all of them, the minimum fresh among them.
  const auto medium = plan_rounds(0.2, 6.0);
  EXPECT_EQ(medium.rounds, 30);
  EXPECT_EQ(medium.fresh, fresh_min_calls);
  EXPECT_FALSE(medium.past_budget);
  // 48 rounds: one in four fresh.
  const auto longer = plan_rounds(0.125, 6.0);
  EXPECT_EQ(longer.rounds, 48);
  EXPECT_EQ(longer.fresh, 12);
  // A 2 s call beside a 1 s one: 20 rounds of 3 s, 60 s, past the limit and within the cap.
  const auto slow = plan_rounds(3.0, 6.0);
  EXPECT_EQ(slow.rounds, minimum);
  EXPECT_TRUE(slow.past_budget);
  EXPECT_TRUE(slow.within_cap);
  // Rounds of 7 s: the minimum would take 140 s, past the cap; the check cannot run.
  const auto too_slow = plan_rounds(7.0, 6.0);
  EXPECT_FALSE(too_slow.within_cap);
  EXPECT_FALSE(plan_rounds(0.5, 6.0, /*cap_s=*/5.0).within_cap);
  EXPECT_TRUE(plan_rounds(0.25, 6.0, /*cap_s=*/5.0).within_cap);
  // Every plan, whatever the round's time, holds the minimum of each kind and no more fresh
  // rounds than a session has.
  for (double r = 1e-6; r < 200; r *= 1.7) {
    for (const double budget : {0.5, 1.0, 6.0, 30.0}) {
      const auto p = plan_rounds(r, budget);
      EXPECT_GE(p.fresh, fresh_min_calls) << r << " " << budget;
      EXPECT_GE(p.rounds - p.fresh, seen_min_calls) << r << " " << budget;
      // The fresh calls are compared with as many redrawn ones, at least the minimum of seen
      // calls, within the plan.
      EXPECT_EQ(p.redrawn, p.fresh) << r << " " << budget;
      EXPECT_GE(p.redrawn, seen_min_calls) << r << " " << budget;
      EXPECT_LE(p.fresh + p.redrawn, p.rounds) << r << " " << budget;
      EXPECT_LE(p.fresh, fresh_max_rounds) << r << " " << budget;
      EXPECT_EQ(p.within_cap, minimum * r <= round_plan_cap_s) << r;
      EXPECT_EQ(p.to_json().at("rounds").get<int>(), p.rounds);
    }
  }
}

TEST(JudgeRules, TheDeckPlacesThePlannedFreshAndRedrawnRoundsAtDrawnPositions) {
  const auto plan = plan_rounds(0.2, 6.0); // 30 rounds, 10 fresh, 10 redrawn
  ASSERT_EQ(plan.redrawn, 10);
  std::mt19937_64 rng(7);
  const auto count = [](const std::vector<round_kind>& d, round_kind k) {
    return std::count(d.begin(), d.end(), k);
  };
  const auto deck = round_deck(plan, rng);
  ASSERT_EQ(deck.size(), 30u);
  EXPECT_EQ(count(deck, round_kind::fresh), 10);
  EXPECT_EQ(count(deck, round_kind::redrawn), 10);
  EXPECT_EQ(count(deck, round_kind::seen), 10);
  // The positions are drawn: other draws place them elsewhere, and over many draws every
  // position is fresh sometimes, redrawn sometimes and seen sometimes.
  std::vector<int> fresh_at(deck.size(), 0);
  std::vector<int> redrawn_at(deck.size(), 0);
  bool moved = false;
  for (int i = 0; i < 400; ++i) {
    const auto d = round_deck(plan, rng);
    EXPECT_EQ(count(d, round_kind::fresh), 10);
    EXPECT_EQ(count(d, round_kind::redrawn), 10);
    moved = moved || d != deck;
    for (size_t k = 0; k < d.size(); ++k) {
      fresh_at[k] += d[k] == round_kind::fresh ? 1 : 0;
      redrawn_at[k] += d[k] == round_kind::redrawn ? 1 : 0;
    }
  }
  EXPECT_TRUE(moved);
  for (size_t k = 0; k < deck.size(); ++k) {
    EXPECT_GT(fresh_at[k], 0);
    EXPECT_GT(redrawn_at[k], 0);
    EXPECT_LT(fresh_at[k] + redrawn_at[k], 400);
  }
  // A plan of no rounds (the check cannot run) has an empty deck.
  round_plan none;
  EXPECT_TRUE(round_deck(none, rng).empty());
}

// The interference check holds the baseline alone against its calls of seen rounds that follow a
// seen round: the rounds of the L1_004 A/A on the H100 where its calls ran 2.80 ms, as alone;
// every call of a prepared round, and some right after one, ran 3.05-3.40 ms.
TEST(JudgeRules, InterferenceComparesTheRoundsTimedLikeTheCallsAlone) {
  using k = round_kind;
  const std::vector<round_kind> deck{k::seen, k::redrawn, k::seen,  k::seen,
                                     k::fresh, k::fresh,  k::seen, k::seen};
  std::vector<int> like;
  for (int round = 0; round < 10; ++round) { // rounds past the deck are seen rounds
    if (timed_like_alone(deck, round)) {
      like.push_back(round);
    }
  }
  EXPECT_EQ(like, (std::vector<int>{0, 3, 7, 8, 9}));
  EXPECT_TRUE(timed_like_alone({}, 0));
  EXPECT_FALSE(timed_like_alone({k::fresh}, 1)); // the round after the deck's last, prepared
}

TEST(JudgeRules, MemoryARunnerHoldsBeyondItsAllowanceIsTheExcess) {
  constexpr uint64_t gib = uint64_t{1} << 30;
  // 100 GiB free before three runners started; the judge has since allocated 40 GiB.
  // Honest runners: 1.5 GiB of contexts and buffers in all, within 3 x 2 GiB.
  EXPECT_EQ(
      runner_memory_excess(100 * gib, 100 * gib - 40 * gib - 3 * gib / 2, 40 * gib, 3, 2 * gib),
      0u);
  // One of them holds 50 GiB of its own: the excess is what is beyond the 6 GiB allowed.
  EXPECT_EQ(runner_memory_excess(100 * gib, 100 * gib - 40 * gib - 51 * gib, 40 * gib, 3, 2 * gib),
            45 * gib);
  // The judge's own allocations are never the runners': freeing them leaves nothing to blame.
  EXPECT_EQ(runner_memory_excess(100 * gib, 100 * gib + gib, 0, 3, 2 * gib), 0u);
  // The judge's rule for its own buffers: 80% of what is free.
  EXPECT_TRUE(fits_in_free(8 * gib, 10 * gib));
  EXPECT_FALSE(fits_in_free(8 * gib + 1, 10 * gib));
}

TEST(JudgeRules, TimingSetsShrinkToWhatTheDeviceHoldsKeepingSeparateLanesFirst) {
  // A set of KernelBench's Swish (4096 x 393216 fp32 in and out): 12.9 GB a lane, with 60 GB
  // the judge may use.
  const double set_gb = 12.9;
  const auto fits = [&](int total_sets) { return total_sets * set_gb <= 60.0; };
  // Four sets wanted, two candidates: 8 lane-sets do not fit, 4 (two sets, separate) do.
  auto c = sets_that_fit(4, 2, true, fits);
  EXPECT_EQ(c.sets, 2);
  EXPECT_TRUE(c.separate_lanes);
  // Small shapes keep every set wanted.
  c = sets_that_fit(4, 2, true, [](int) { return true; });
  EXPECT_EQ(c.sets, 4);
  EXPECT_TRUE(c.separate_lanes);
  // Lanes already shared: sets counted once.
  c = sets_that_fit(4, 2, false, fits);
  EXPECT_EQ(c.sets, 4);
  EXPECT_FALSE(c.separate_lanes);
  // Not even one set per lane: one shared lane with as many sets as fit, at least one.
  const auto tight = [](int total_sets) { return total_sets <= 1; };
  c = sets_that_fit(4, 3, true, tight);
  EXPECT_EQ(c.sets, 1);
  EXPECT_FALSE(c.separate_lanes);
  c = sets_that_fit(4, 2, true, [](int) { return false; });
  EXPECT_EQ(c.sets, 1);
  EXPECT_FALSE(c.separate_lanes);
}

TEST(JudgeRules, APositionWrittenAfterStopIsLateAndAPoisonLikeValueIsNot) {
  // Three picks: a 4-byte float, a 1-byte bool and a 2-byte half, laid end to end.
  const std::vector<size_t> sizes{4, 1, 2};
  const std::vector<unsigned char> poison{0xA1, 0xB2, 0xC3, 0x7F, 0x01, 0x11, 0x7E};
  // An honest call: every position written before STOP, and the bool's true value equals the
  // poison byte (1 in 256 for a random byte): it held it at STOP and holds it after.
  const std::vector<unsigned char> honest{0x00, 0x00, 0x80, 0x3F, 0x01, 0x00, 0x3C};
  auto r = positions_written_late(honest.data(), honest.data(), poison.data(), sizes);
  EXPECT_EQ(r.poison_at_stop, 1);
  EXPECT_EQ(r.written_late, 0);
  // A call whose work went on after DONE: the float and the half still poison at STOP, written
  // by the time the runner replied.
  std::vector<unsigned char> at_stop = honest;
  std::copy(poison.begin(), poison.begin() + 4, at_stop.begin());
  std::copy(poison.begin() + 5, poison.end(), at_stop.begin() + 5);
  r = positions_written_late(at_stop.data(), honest.data(), poison.data(), sizes);
  EXPECT_EQ(r.poison_at_stop, 3);
  EXPECT_EQ(r.written_late, 2);
  // A position never written (poison at STOP and after) is the output digest's to find, not late.
  r = positions_written_late(at_stop.data(), at_stop.data(), poison.data(), sizes);
  EXPECT_EQ(r.poison_at_stop, 3);
  EXPECT_EQ(r.written_late, 0);
  // One byte of the float written at STOP, the rest after: not poison at STOP, so not late.
  std::vector<unsigned char> partly = at_stop;
  partly[0] = 0x00;
  r = positions_written_late(partly.data(), honest.data(), poison.data(), sizes);
  EXPECT_EQ(r.written_late, 1);
}

} // namespace
} // namespace kb::gpu::detail

namespace kb::eval::detail {
namespace {

TEST(SanitizerSummary, ParsesEachToolsOwnLine) {
  const std::string race =
      "========= COMPUTE-SANITIZER\n"
      "candidate prints ERROR SUMMARY: 3 errors early\n"
      "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n";
  auto s = parse_sanitizer_summary(race);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->errors, 0);
  EXPECT_FALSE(sanitizer_found_errors(race, 0, 86));
  const std::string hazards =
      "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n";
  s = parse_sanitizer_summary(hazards);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->errors, 1);
  EXPECT_EQ(s->warnings, 1);
  EXPECT_TRUE(sanitizer_found_errors(hazards, 0, 86));
  const std::string memcheck = "========= Invalid __global__ read of size 4 bytes\n"
                               "========= ERROR SUMMARY: 1 error\n";
  EXPECT_TRUE(sanitizer_found_errors(memcheck, 86, 86));
  EXPECT_TRUE(sanitizer_found_errors("========= ERROR SUMMARY: 0 errors\n", 86, 86));
  EXPECT_FALSE(sanitizer_found_errors("========= ERROR SUMMARY: 0 errors\n", 0, 86));
  EXPECT_TRUE(sanitizer_found_errors("the tool never finished", 0, 86));
}

TEST(EvaluationSeed, GivenIsReplayedElseDrawnFresh) {
  EXPECT_EQ(evaluation_seed(12345), 12345u);
  const uint64_t a = evaluation_seed(0);
  const uint64_t b = evaluation_seed(0);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_LT(a, uint64_t{1} << 53);
  EXPECT_LT(b, uint64_t{1} << 53);
}

} // namespace
} // namespace kb::eval::detail
