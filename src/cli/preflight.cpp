#include "cli/preflight.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"
#include "profile/profile.hpp"
#include "task/task.hpp"

#include <fmt/format.h>

#include <chrono>

namespace kb::cli {

using nlohmann::json;

json preflight_report::to_json() const {
  json checks_json = json::array();
  for (const auto& c : checks) {
    checks_json.push_back({{"name", c.name},
                           {"status", c.status},
                           {"detail", c.detail},
                           {"hard", c.hard},
                           {"seconds", c.seconds},
                           {"data", c.data}});
  }
  return {{"mode", mode}, {"reason", reason}, {"checks", checks_json}};
}

namespace {

using clock_type = std::chrono::steady_clock;

preflight_report report_from_json(const json& j) {
  preflight_report r;
  r.mode = j.value("mode", r.mode);
  r.reason = j.value("reason", std::string());
  for (const auto& c : j.value("checks", json::array())) {
    r.checks.push_back({c.value("name", std::string()), c.value("status", std::string()),
                        c.value("detail", std::string()), c.value("hard", true),
                        c.value("seconds", 0.0), c.value("data", json::object())});
  }
  return r;
}

// The checks a reused preflight stands for.
bool reused_check(const std::string& name) {
  return name == "compiler" || name == "sandbox" || name == "timing" || name == "counters";
}

} // namespace

std::optional<reusable_preflight>
find_reusable_preflight(const store::store& st, const std::string& device_uuid,
                        const preflight_options& opt, std::chrono::system_clock::time_point now) {
  if (opt.reuse_within.count() <= 0 || device_uuid.empty()) {
    return std::nullopt;
  }
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  for (const auto& r : st.list_runs(200)) {
    if (r.kind != "preflight" || r.status != store::run_status::finished ||
        (r.outcome != "full-diagnostics" && r.outcome != "events-only") ||
        r.args.value("no_sandbox", false) != opt.no_sandbox) {
      continue;
    }
    const auto finished = store::utc_seconds(r.finished);
    if (!finished || now_s < *finished ||
        now_s - *finished > static_cast<double>(opt.reuse_within.count())) {
      continue;
    }
    for (const auto& [name, digest] : st.attachments(r.id)) {
      if (name != "preflight") {
        continue;
      }
      auto report = report_from_json(json::parse(st.get(digest), nullptr, false));
      int ok = 0;
      bool same_device = false;
      for (const auto& c : report.checks) {
        same_device = same_device ||
                      (c.name == "device" && c.data.value("uuid", std::string()) == device_uuid);
        ok += reused_check(c.name) && c.name != "counters" && c.status == "ok" ? 1 : 0;
      }
      if (same_device && ok == 3) {
        return reusable_preflight{r.id, now_s - *finished, std::move(report)};
      }
    }
  }
  return std::nullopt;
}

preflight_report preflight(store::store& st, const preflight_options& opt,
                           const std::function<void(const preflight_check&)>& on_check) {
  preflight_report report;
  const auto add = [&](preflight_check c, clock_type::time_point started) {
    c.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    if (on_check) {
      on_check(c);
    }
    report.checks.push_back(std::move(c));
    return report.checks.back().status != "failed" || !report.checks.back().hard;
  };
  const auto record = [&] {
    const int64_t run =
        st.begin_run("preflight", {{"no_sandbox", opt.no_sandbox}, {"llm", opt.llm.has_value()}});
    const auto blob = st.put(report.to_json().dump(2));
    st.attach(run, "preflight", blob.digest);
    st.finish_run(run, store::run_status::finished, report.mode, report.reason);
  };
  const auto stop = [&](const std::string& why) {
    report.mode = "unavailable";
    report.reason = why;
    record();
    return report;
  };
  // 7. The LLM provider, when one is configured; then the report is recorded (mode and reason
  // set by the checks before).
  const auto check_llm_and_record = [&] {
    const auto t7 = clock_type::now();
    if (opt.llm) {
      llm::client client(*opt.llm);
      const auto p = llm::preflight(client);
      preflight_check c{"llm", p.ok() ? "ok" : "failed", p.message, true};
      c.data = {{"status", llm::to_string(p.code)}, {"http_status", p.http_status}};
      if (!add(c, t7)) {
        return stop("llm: " + p.message);
      }
    } else {
      add({"llm", "skipped", "no LLM proposer configured", false}, t7);
    }
    record();
    return report;
  };

  // 1. The store takes writes and reads them back.
  auto t = clock_type::now();
  {
    preflight_check c{"store", "ok", "", true};
    try {
      const std::string probe =
          fmt::format("preflight {}", std::chrono::system_clock::now().time_since_epoch().count());
      const auto blob = st.put(probe);
      if (st.get(blob.digest) != probe) {
        throw error("a blob read back differs from what was written");
      }
      c.detail = fmt::format("{} (schema {})", st.dir().string(), st.schema_version());
    } catch (const std::exception& e) {
      c.status = "failed";
      c.detail = e.what();
    }
    if (!add(c, t)) {
      return stop("store: " + report.checks.back().detail);
    }
  }

  // 2. A CUDA device.
  t = clock_type::now();
  const auto dev = eval::probe_device();
  {
    preflight_check c{"device", dev.available ? "ok" : "failed", "", true};
    c.data = dev.info;
    c.detail =
        dev.available
            ? fmt::format("{} ({}, {} SMs, {:.0f} GB, driver API {}, runtime {})",
                          dev.info.value("name", ""), dev.info.value("arch", ""),
                          dev.info.value("sm_count", 0), dev.info.value("memory_bytes", 0.0) / 1e9,
                          dev.info.value("cuda_driver_api", 0), dev.info.value("cuda_runtime", 0))
            : dev.reason;
    if (!add(c, t)) {
      return stop("device: " + dev.reason);
    }
  }
  // 3-6 as a usable preflight on this device found them a short while ago (--reuse-preflight).
  if (const auto prev = find_reusable_preflight(st, dev.info.value("uuid", std::string()), opt,
                                                std::chrono::system_clock::now())) {
    for (auto c : prev->report.checks) {
      if (reused_check(c.name)) {
        c.detail += fmt::format(" (preflight run {}, {:.0f} s ago)", prev->run, prev->age_s);
        c.seconds = 0;
        if (on_check) {
          on_check(c);
        }
        report.checks.push_back(std::move(c));
      }
    }
    report.mode = prev->report.mode;
    report.reason = prev->report.reason;
    return check_llm_and_record();
  }

  // 3-5. nvcc targets the device, the sandbox runs a candidate, events time it: one short A/A
  // evaluation of a task's baseline answers all three. It runs at the official shape (a ReLU of
  // a few milliseconds): at a check shape the kernel takes about a microsecond, below what the
  // timing scheme resolves, and the A/A medians of two runners differed by up to 4.5x there.
  t = clock_type::now();
  const auto c019 = task::find_task(opt.root, "019");
  eval::options eo;
  eo.cache_dir = opt.cache_dir;
  eo.no_sandbox = opt.no_sandbox;
  eo.shape = c019.official().name;
  eo.seeds = 1;
  eo.sessions = 1;
  eo.timing.max_wall = 1.0;
  const eval::candidate_input base{read_file(c019.baseline), "baseline.cu", "baseline"};
  eval::candidate_input copy = base;
  copy.origin = "import"; // compiled like an untrusted candidate: in the sandbox
  auto r = eval::evaluate(opt.root, c019, copy, base, eo, {});
  // The A/A is a health check, and its judge is the candidates': a timing rule that rests on a
  // share of calls (the ABI rules, the fresh-call minimum) can reject an honest kernel once on a
  // busy host. One rejection by a timing rule is taken again before the run is blocked; the
  // detail names the first.
  std::string first_timing_rejection;
  if (r.final == eval::verdict::rejected && r.reason.rfind("timing.", 0) == 0) {
    first_timing_rejection = r.reason + ": " + r.message;
    r = eval::evaluate(opt.root, c019, copy, base, eo, {});
  }
  {
    const auto b = r.builds.find("candidate");
    const bool built = b != r.builds.end() && b->second.ok();
    preflight_check c{"compiler", built ? "ok" : "failed", "", true};
    c.detail =
        fmt::format("nvcc {} for {}: {}", r.context.toolkit.empty() ? "?" : r.context.toolkit,
                    r.context.arch.empty() ? "?" : r.context.arch,
                    b == r.builds.end() ? r.message : build::to_string(b->second.status));
    if (!add(c, t)) {
      return stop("compiler: " + c.detail);
    }
  }
  {
    const std::string& level = r.context.isolation;
    const bool sandbox_ok = level == "sandboxed" || (opt.no_sandbox && level == "unprotected");
    const bool ran = !r.verification.empty();
    preflight_check c{"sandbox", sandbox_ok && ran ? "ok" : "failed", "", true};
    c.detail =
        fmt::format("{} ({}); {}", level.empty() ? "?" : level, r.context.isolation_detail,
                    ran ? "a candidate compiled and ran inside it" : r.reason + ": " + r.message);
    c.data = {{"level", level}, {"detail", r.context.isolation_detail}};
    if (!add(c, t)) {
      return stop("sandbox: " + c.detail);
    }
  }
  {
    // The timing path works when the A/A's two medians agree within 20% (or within the scheme's
    // resolution). Whether the gate calls an A/A "same" is its false-positive rate, which
    // `kblaster calibrate` measures; one A/A in twenty may differ, and must not block a run.
    const double a = r.gate ? r.gate->median_baseline_s : 0.0;
    const double b = r.gate ? r.gate->median_candidate_s : 0.0;
    const bool timed = r.final == eval::verdict::same || r.final == eval::verdict::inconclusive ||
                       r.final == eval::verdict::improved || r.final == eval::verdict::regressed;
    const bool sane = a > 0 && b > 0 && timed &&
                      std::abs(a - b) <= std::max(0.2 * std::max(a, b), eo.resolution_s);
    preflight_check c{"timing", sane ? "ok" : "failed", "", true};
    c.detail =
        sane ? fmt::format("A/A medians {:.2f} us and {:.2f} us ({})", a * 1e6, b * 1e6, r.message)
             : r.reason + ": " + r.message;
    if (!first_timing_rejection.empty()) {
      c.detail += fmt::format(" (taken again after: {})", first_timing_rejection);
    }
    c.data = r.gate ? json(*r.gate) : json(nullptr);
    if (!add(c, t)) {
      return stop("timing: " + c.detail);
    }
  }

  // 6. Profiler counters; without them the search still runs on events and the roofline.
  t = clock_type::now();
  const auto access = profile::probe_access(profile::counter_source::ncu);
  {
    preflight_check c{"counters", access.available ? "ok" : "degraded",
                      access.available ? access.tool : access.reason, false};
    c.data = access.to_json();
    add(c, t);
  }

  report.mode = access.available ? "full-diagnostics" : "events-only";
  report.reason = access.available ? "" : "profiler counters unavailable: " + access.reason;
  return check_llm_and_record();
}

} // namespace kb::cli
