// Fills a store for the dashboard's browser tests without a GPU: the real optimization loop with
// the built-in proposer, memory and store, evaluating through a scripted GPU that answers with
// result documents shaped like the real ones (builds, verification per check, timing samples per
// session, statistics); an eval run of a candidate whose source, strategy, log and message carry
// HTML and script; a bench run with PyTorch timings. Every record goes through eval::record and
// the store's API, as `kblaster optimize`, `eval` and `bench` record them.
//
//   fill_store STORE ROOT            the runs above; prints their ids as JSON
//   fill_store STORE ROOT --add RUN  one more evaluation of task 023 in RUN (a search going on)
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "eval/eval.hpp"
#include "search/builtin_proposer.hpp"
#include "search/memory.hpp"
#include "search/optimize.hpp"
#include "store/store.hpp"
#include "task/task.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>

namespace {

using namespace kb;
using nlohmann::json;

const char* const gpu_name = "scripted test GPU";
// What a successful build leaves (the store keeps a successful build's binary).
fs::path scripted_binary;

// A deterministic stream of numbers (the timing samples' spread).
struct lcg {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

json verification(int checks, bool fail_one) {
  json list = json::array();
  for (int i = 0; i < checks; ++i) {
    const bool bad = fail_one && i == checks - 1;
    list.push_back({{"shape", i % 2 ? "official" : "odd"},
                    {"distribution", i % 3 == 0 ? "normal" : "uniform01"},
                    {"seed", 20251130 + i},
                    {"passed", !bad},
                    {"inputs_unchanged", true},
                    {"reason", bad ? "verify.mismatch" : ""},
                    {"outputs",
                     {{{"output", "y"},
                       {"count", 4096},
                       {"max_abs_err", bad ? 0.5 : 1e-7 * (i + 1)},
                       {"max_rel_err", bad ? 1.0 : 2e-7 * (i + 1)},
                       {"p99_abs_err", bad ? 0.25 : 8e-8},
                       {"rel_l2", bad ? 0.3 : 4e-8},
                       {"violations", bad ? 517 : 0},
                       {"nonfinite", 0},
                       {"unwritten", 0}}}}});
  }
  gpu::protocol::library_result l;
  l.role = "candidate";
  l.accepted = !fail_one;
  if (fail_one) {
    l.reason = "verify.mismatch";
    l.message = "output y differs from the float64 oracle";
  }
  l.runner_exit = gpu::protocol::runner_end{"exit 0", 0, ""};
  l.record = {{"checks", list}};
  return json::array({l});
}

// A result document as eval::evaluate writes it, for a candidate `speed` times as fast as the
// baseline's time `base_s` (with `reject`: a wrong answer; `build_error`: a compile error).
eval::result scripted(const task::contract& c, const eval::candidate_input& cand,
                      const eval::candidate_input& base, double t_base, double t_cand,
                      const std::string& failure) {
  eval::result r;
  json d;
  r.task = {c.id, c.suite, task::to_string(c.fam), ""};
  gpu::protocol::device dev;
  dev.name = gpu_name;
  dev.uuid = "GPU-scripted";
  dev.sm_count = 132;
  dev.driver_version = "580.159.04";
  dev.cuda_runtime = 13000;
  dev.max_sm_clock_mhz = 1980;
  r.context.device = dev;
  r.context.toolkit = "13.0.88";
  r.context.arch = "sm_90a";
  r.context.isolation = "sandboxed";
  r.context.shape = "official";
  d["shape"] = {{"name", "official"}};
  r.candidate = {cand.name, cand.origin, sha256_hex(cand.source)};
  r.baseline = {base.name, base.origin, sha256_hex(base.source)};
  d["toolchain"] = {{"arch", "sm_90a"}, {"version", "13.0.88"}};
  r.context.ceilings.bandwidth = 4.3e12;
  r.context.ceilings.fp32_flops = 67e12;
  r.context.ceilings.source = "default";
  r.seconds = 3.5;
  const bool build_error = failure == "build.compile_error";
  build::result b;
  b.status = build_error ? build::outcome::compile_error : build::outcome::ok;
  b.reason = build_error ? failure : "build.ok";
  b.seconds = 1.25;
  b.binary = build_error ? fs::path() : scripted_binary;
  b.flags = {"-O3", "-std=c++17", "-arch=sm_90a"};
  b.log = build_error ? "candidate.cu(12): error: identifier \"blockDimx\" is undefined\n"
                        "1 error detected in the compilation of \"candidate.cu\"."
                      : "ptxas info    : Used 32 registers, 0 bytes smem\n";
  r.builds["candidate"] = b;
  if (build_error) {
    r.final = eval::verdict::rejected;
    r.reason = failure;
    r.message = "the candidate does not compile";
    r.detail = d;
    return r;
  }
  const bool reject = !failure.empty();
  r.verification = verification(6, reject).get<std::vector<gpu::protocol::library_result>>();
  if (reject) {
    r.final = eval::verdict::rejected;
    r.reason = failure;
    r.message = "output y differs from the float64 oracle on check 6: 517 elements beyond the "
                "tolerance (max abs err 0.5)";
    r.detail = d;
    return r;
  }
  lcg g{static_cast<uint64_t>(std::llround(t_cand * 1e12))};
  std::vector<eval::gate_summary::session_median> medians;
  for (int session = 0; session < 2; ++session) {
    json samples = {{"candidate", json::array()}, {"baseline", json::array()}};
    for (int i = 0; i < 200; ++i) {
      samples["candidate"].push_back({{"t", t_cand * (1 + 0.02 * g.next())}, {"round", i}});
      samples["baseline"].push_back({{"t", t_base * (1 + 0.02 * g.next())}, {"round", i}});
    }
    gpu::protocol::session_timing t;
    t.record = {{"samples", samples}};
    for (const auto& role : {"candidate", "baseline"}) {
      for (const auto& x : samples[role]) {
        t.samples[role].push_back({x.at("t").get<double>(), 0, x.at("round").get<int>(), {}});
      }
    }
    r.timing.push_back(t);
    medians.push_back({t_base * 1.01, t_cand * 1.01});
  }
  d["sessions"] = json::array({{{"seconds", 0.5}}, {{"seconds", 0.5}}});
  const double ratio = t_base / t_cand;
  const auto v = ratio > 1.02 ? eval::verdict::improved
                              : (ratio < 0.98 ? eval::verdict::regressed : eval::verdict::same);
  const double floor = task::floor_seconds(c, c.official(), task::ceilings{});
  r.floor_s = floor;
  eval::gate_summary gate;
  gate.n_baseline = 400;
  gate.n_candidate = 400;
  gate.median_baseline_s = t_base;
  gate.median_candidate_s = t_cand;
  gate.speedup = ratio;
  gate.speedup_low = ratio * 0.995;
  gate.speedup_high = ratio * 1.005;
  gate.p = v == eval::verdict::same ? 0.4 : 1e-30;
  gate.floor_fraction = floor / t_cand;
  gate.mann_whitney_p = gate.p;
  gate.session_medians = medians;
  r.gate = gate;
  r.worker_seconds = 1.0;
  r.final = v;
  r.reason = "timing." + eval::to_string(v);
  r.message = fmt::format("speedup {:.3f}x over the compared kernel", ratio);
  r.detail = d;
  return r;
}

// The scripted GPU: the baseline takes `base_s`; the n-th proposed candidate is rejected, fails to
// compile, or runs at a speed that depends on its strategy and parameters.
struct scripted_gpu {
  double base_s = 1e-3;
  int calls = 0;
  std::map<std::string, double> speed_of_source; // sha256 -> speed over the baseline
  eval::result operator()(const task::contract& c, const eval::candidate_input& cand,
                          const eval::candidate_input& base, const eval::options&) {
    auto speed = [&](const eval::candidate_input& in) {
      if (in.origin == "baseline") {
        return 1.0;
      }
      const auto key = sha256_hex(in.source);
      if (auto it = speed_of_source.find(key); it != speed_of_source.end()) {
        return it->second;
      }
      const double s = 0.9 + 0.1 * static_cast<double>(calls % 5) +
                       0.05 * static_cast<double>(in.strategy.size() % 4);
      speed_of_source[key] = s;
      return s;
    };
    std::string failure;
    if (cand.origin != "baseline" && base.origin != "baseline") {
      ++calls;
      if (calls == 2) {
        failure = "verify.mismatch";
      } else if (calls == 4) {
        failure = "build.compile_error";
      }
    }
    return scripted(c, cand, base, base_s / speed(base), base_s / speed(cand), failure);
  }
};

int64_t optimize_run(store::store& st, const fs::path& root, const std::vector<std::string>& ids) {
  const int64_t run = st.begin_run("optimize", {{"tasks", ids}, {"proposer", "builtin"}});
  search::memory mem(st);
  search::builtin_proposer prop(mem);
  search::optimize_options o;
  o.rollouts = 2;
  o.steps = 4;
  o.target_floor_fraction = 1e9;
  std::string outcome = "no_improvement";
  for (const auto& id : ids) {
    const auto c = task::find_task(root, id);
    scripted_gpu gpu;
    gpu.base_s = 1e-3 * (1 + static_cast<double>(id.back() - '0'));
    search::optimizer opt(st, run, mem, prop, o, gpu_name, std::ref(gpu), {}, {});
    const auto r = opt.optimize(c);
    if (r.final == search::outcome::improved) {
      outcome = "improved";
    }
  }
  st.finish_run(run, store::run_status::finished, outcome, "");
  return run;
}

int64_t injection_run(store::store& st, const fs::path& root) {
  const auto c = task::find_task(root, "019");
  const int64_t run = st.begin_run("eval", {{"task", c.id}});
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  eval::candidate_input cand{"// </code></pre><script>window.__pwned = 1;</script>\n"
                             "// <img src=x onerror=\"window.__pwned = 2\">\n"
                             "__global__ void relu(const float* x, float* y, int n) {\n"
                             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "  if (i < n) y[i] = x[i] > 0 ? x[i] : 0; // <b>not bold</b>\n"
                             "}\n",
                             "evil.cu", "proposer", "<script>window.__pwned = 3;</script>"};
  auto r = scripted(c, cand, base, 1e-3, 1e-3, "verify.mismatch");
  r.message = "<img src=x onerror=\"window.__pwned = 4\"> answer of the model";
  r.builds["candidate"].log = "<script>window.__pwned = 5;</script> warning";
  eval::record(st, run, c, cand, base, r);
  st.finish_run(run, store::run_status::finished, "rejected", "verify.mismatch");
  return run;
}

int64_t bench_run(store::store& st, const fs::path& root, const fs::path& pytorch) {
  json tasks = json::object();
  const std::vector<std::pair<std::string, double>> speeds = {{"019", 1.2}, {"023", 1.6}};
  for (const auto& [id, s] : speeds) {
    tasks[id]["official"] = {{"eager", {{"correct", true}, {"median_s", 1.1e-3}}},
                             {"compile_max_autotune", {{"correct", true}, {"median_s", 0.9e-3}}}};
  }
  write_file_atomic(pytorch, json{{"device", gpu_name}, {"tasks", tasks}}.dump(2));
  const int64_t run = st.begin_run("bench", {{"suite", "core10"}, {"pytorch", pytorch.string()}});
  for (const auto& [id, s] : speeds) {
    const auto c = task::find_task(root, id);
    const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
    const eval::candidate_input cand{"// portfolio kernel of task " + id + "\n", id + ".cu",
                                     "portfolio"};
    eval::record(st, run, c, cand, base, scripted(c, cand, base, 1e-3, 1e-3 / s, ""));
  }
  st.finish_run(run, store::run_status::finished, "improved", "");
  return run;
}

int64_t add_evaluation(store::store& st, const fs::path& root, int64_t run) {
  const auto c = task::find_task(root, "023");
  const eval::candidate_input base{read_file(c.baseline), "baseline.cu", "baseline"};
  const eval::candidate_input cand{"// live candidate\n__global__ void k() {}\n", "live.cu",
                                   "proposer", "row.live_update"};
  return eval::record(st, run, c, cand, base, scripted(c, cand, base, 4e-3, 3.5e-3, ""));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--add")) {
    std::cerr << "usage: fill_store STORE ROOT [--add RUN]\n";
    return 64;
  }
  try {
    const fs::path dir = argv[1];
    const fs::path root = argv[2];
    store::store st(dir);
    scripted_binary = dir / "scripted-binary.so";
    if (!fs::exists(scripted_binary)) {
      write_file_atomic(scripted_binary, "scripted build output\n");
    }
    if (argc == 5) {
      std::cout << json{{"evaluation", add_evaluation(st, root, std::stoll(argv[4]))}}.dump()
                << "\n";
      return 0;
    }
    json ids;
    ids["optimize"] = optimize_run(st, root, {"023", "019"});
    ids["injection"] = injection_run(st, root);
    ids["bench"] = bench_run(st, root, dir / "pytorch.json");
    std::cout << ids.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fill_store: " << e.what() << "\n";
    return 70;
  }
}
