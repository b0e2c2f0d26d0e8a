// Verification: the matrix of shapes, distributions and seeds against the float64 oracle, the
// determinism runs, the checker's self-test on trivial outputs, later sessions' re-check of
// the verified digests, and the profiler's calls.
#include "gpu/detail/worker.hpp"

namespace kb::gpu::detail {

auto worker::verify_all() -> json {
  const bool selftest_on = m_job.checker_selftest;
  // The self-test tries each trivial output at every check of a shape until the checker rejects
  // it there once: the point is that the checker can tell it from a right answer at each shape,
  // and at the official shape (gigabytes per output) one rejection costs what nine would.
  std::map<std::string, int> trivial_rejections{
      {"zeros", 0}, {"copy_of_input", 0}, {"constant", 0}};
  std::map<std::string, int> trivial_tries{{"zeros", 0}, {"copy_of_input", 0}, {"constant", 0}};
  int shapes_checked = 0;
  std::optional<double> constant;
  int total_checks = 0;
  for (const auto& s : m_shapes) {
    int dists = 1;
    for (const auto& t : s.inputs) {
      dists = std::max(dists, static_cast<int>(t.dists.size()));
    }
    if (m_job.single_check) {
      dists = 1; // the official distribution only
    }
    total_checks += dists * static_cast<int>(m_seeds.size());
  }
  int done = 0;
  // Where verification's time goes, for the record.
  struct {
    double allocate_s = 0, reference_s = 0, call_s = 0, compare_s = 0, digest_s = 0,
           determinism_s = 0, selftest_s = 0;
  } vp;
  const auto seconds_since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  for (const auto& s : m_shapes) {
    if (!any_alive() || m_context_lost ||
        !check_room(lane_bytes(s, 1), "verification at shape " + s.name)) {
      break;
    }
    const auto ta = clock_type::now();
    m_separate_lanes = m_separate_lanes && lanes_fit(s, 1);
    shape_buffers b;
    allocate(b, s, /*with_reference=*/true, 0);
    const auto extra = extra_lanes(b, s);
    const auto lane = [&](const candidate_lib& lib) -> shape_buffers& {
      const size_t l = lane_of(lib);
      return l == 0 || extra.empty() ? b : *extra[l - 1];
    };
    vp.allocate_s += seconds_since(ta);
    ++shapes_checked;
    std::set<std::string> untested_here{"zeros", "copy_of_input", "constant"};
    const bool timing_shape = s.name == m_timing_shape;
    int dists = 1;
    for (const auto& t : s.inputs) {
      dists = std::max(dists, static_cast<int>(t.dists.size()));
    }
    if (m_job.single_check) {
      dists = 1; // the official distribution only
    }
    for (int d = 0; d < dists && any_alive() && !m_context_lost; ++d) {
      for (size_t si = 0; si < m_seeds.size() && any_alive() && !m_context_lost; ++si) {
        const uint64_t seed = m_seeds[si];
        std::string dist_label;
        for (const auto& t : s.inputs) {
          dist_label += (dist_label.empty() ? "" : "/") +
                        t.dist_labels[static_cast<size_t>(d) % t.dist_labels.size()];
        }
        const std::string what = fmt::format("{} {} seed {}", s.name, dist_label, si);
        proto::progress pr;
        pr.stage = "verify";
        pr.done = done;
        pr.total = total_checks;
        pr.what = what;
        m_out.send(pr);
        auto t0 = clock_type::now();
        generate(b, d, seed);
        for (const auto& e : extra) {
          copy_inputs(*e, b, d, seed);
        }
        compute_reference(b);
        vp.reference_s += seconds_since(t0);
        t0 = clock_type::now();
        std::vector<uint64_t> input_digests;
        for (size_t i = 0; i < s.inputs.size(); ++i) {
          input_digests.push_back(digest(b.inputs[i], s.inputs[i].bytes()));
        }
        std::vector<double> scales;
        for (size_t o = 0; o < s.outputs.size(); ++o) {
          const auto mo = reference_moments(b, o);
          scales.push_back(std::sqrt(mo.sum_sq / std::max<int64_t>(1, s.outputs[o].numel())));
          if (!constant) {
            constant = mo.sum / std::max<int64_t>(1, s.outputs[o].numel());
          }
        }
        vp.digest_s += seconds_since(t0);
        std::vector<tolerance_spec> tols;
        for (double sc : scales) {
          tols.push_back({m_atol, m_rtol, sc});
        }
        for (auto& lib : m_libs) {
          if (lib.rejected) {
            continue;
          }
          auto& lb = lane(lib);
          t0 = clock_type::now();
          for (size_t o = 0; o < s.outputs.size(); ++o) {
            poison(lb.outputs[o], s.outputs[o]);
          }
          if (auto r = call(lib, lb, "verify", what)) {
            reject(lib, *r);
            continue;
          }
          vp.call_s += seconds_since(t0);
          t0 = clock_type::now();
          std::vector<error_metrics> ms;
          for (size_t o = 0; o < s.outputs.size(); ++o) {
            ms.push_back(compare(lb, o, tols[o]));
          }
          vp.compare_s += seconds_since(t0);
          auto outcome = judge(ms, scales, s);
          t0 = clock_type::now();
          bool inputs_ok = true;
          for (size_t i = 0; i < s.inputs.size(); ++i) {
            inputs_ok =
                inputs_ok && digest(lb.inputs[i], s.inputs[i].bytes()) == input_digests[i];
          }
          vp.digest_s += seconds_since(t0);
          if (outcome.passed && !inputs_ok) {
            outcome.passed = false;
            outcome.reason = "verify.inputs_modified";
            outcome.message = fmt::format("inputs changed by the call ({})", what);
          }
          lib.checks.push_back({{"shape", s.name},
                                {"distribution", dist_label},
                                {"seed", seed},
                                {"passed", outcome.passed},
                                {"inputs_unchanged", inputs_ok},
                                {"outputs", outcome.outputs}});
          fold_summary(lib.summary, outcome.outputs);
          if (!outcome.passed) {
            reject(lib, {outcome.reason, fmt::format("{}: {}", what, outcome.message)});
            continue;
          }
          if (timing_shape) {
            t0 = clock_type::now();
            uint64_t h = 0;
            for (size_t o = 0; o < s.outputs.size(); ++o) {
              h = h * 31 + digest(lb.outputs[o], s.outputs[o].bytes());
            }
            const int key = d * static_cast<int>(m_seeds.size()) + static_cast<int>(si);
            lib.set_digests[key] = h;
            lib.set_keyed[key] = output_check(lb).digest;
            vp.digest_s += seconds_since(t0);
            if (si == 0 && d == 0) {
              t0 = clock_type::now();
              check_determinism(lib, lb, h, what);
              vp.determinism_s += seconds_since(t0);
            }
          }
        }
        if (selftest_on && !untested_here.empty()) {
          t0 = clock_type::now();
          selftest_trivial(b, scales, tols, *constant, untested_here, trivial_tries,
                           trivial_rejections);
          vp.selftest_s += seconds_since(t0);
        }
        ++done;
      }
    }
  }
  m_verify_phases = {{"allocate_s", vp.allocate_s}, {"reference_s", vp.reference_s},
                     {"call_s", vp.call_s},         {"compare_s", vp.compare_s},
                     {"digest_s", vp.digest_s},     {"determinism_s", vp.determinism_s},
                     {"selftest_s", vp.selftest_s}, {"workspace_wait_s", m_workspace_wait_s}};
  // *_rejected_by counts the shapes where the kind was rejected (once each), *_tried the
  // checks it was tried at.
  json st{{"zeros_rejected_by", trivial_rejections["zeros"]},
          {"copy_of_input_rejected_by", trivial_rejections["copy_of_input"]},
          {"constant_rejected_by", trivial_rejections["constant"]},
          {"zeros_tried", trivial_tries["zeros"]},
          {"copy_of_input_tried", trivial_tries["copy_of_input"]},
          {"constant_tried", trivial_tries["constant"]},
          {"constant", constant.value_or(0.0)},
          {"shapes", shapes_checked},
          {"checks", done}};
  st["sound"] = !selftest_on ||
                (trivial_rejections["zeros"] > 0 && trivial_rejections["copy_of_input"] > 0 &&
                 trivial_rejections["constant"] > 0);
  return st;
}

auto worker::check_determinism(candidate_lib& lib, shape_buffers& b, uint64_t first,
                         const std::string& what) -> void {
  const int runs = m_job.determinism_runs;
  const auto& s = *b.shape;
  for (int r = 1; r < runs && !lib.rejected; ++r) {
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      poison(b.outputs[o], s.outputs[o]);
    }
    if (auto rj = call(lib, b, "determinism", fmt::format("{} run {}", what, r + 1))) {
      reject(lib, *rj);
      return;
    }
    uint64_t h = 0;
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      h = h * 31 + digest(b.outputs[o], s.outputs[o].bytes());
    }
    if (h != first && m_deterministic) {
      reject(lib, {"verify.nondeterministic",
                   fmt::format("run {} of {} gave different bits than run 1 ({})", r + 1, runs,
                               what)});
    }
  }
}

auto worker::selftest_trivial(shape_buffers& b, const std::vector<double>& scales,
                        const std::vector<tolerance_spec>& tols, double constant,
                        std::set<std::string>& untested, std::map<std::string, int>& tries,
                        std::map<std::string, int>& rejections) -> void {
  const auto& s = *b.shape;
  for (const char* kind : {"zeros", "copy_of_input", "constant"}) {
    if (untested.count(kind) == 0) {
      continue;
    }
    tries[kind] += 1;
    std::vector<error_metrics> ms;
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      const auto& t = s.outputs[o];
      const std::string k = kind;
      if (m_host_reference) {
        void* h = b.outputs[o].host();
        if (k == "zeros") {
          cpu_fill_value(h, t.dtype, t.numel(), 0.0);
        } else if (k == "constant") {
          cpu_fill_value(h, t.dtype, t.numel(), constant);
        } else {
          cpu_copy_cyclic(b.inputs[0].host(), s.inputs[0].dtype, s.inputs[0].numel(), h, t.dtype,
                          t.numel());
        }
        ms.push_back(
            cpu_compare(h, t.dtype, b.host_refs[o].data(), t.numel(), tols[o], m_poison));
      } else {
        void* dptr = b.outputs[o].data();
        if (k == "zeros") {
          gpu_fill_value(dptr, t.dtype, t.numel(), 0.0, m_stream);
        } else if (k == "constant") {
          gpu_fill_value(dptr, t.dtype, t.numel(), constant, m_stream);
        } else {
          gpu_copy_cyclic(b.inputs[0].data(), s.inputs[0].dtype, s.inputs[0].numel(), dptr,
                          t.dtype, t.numel(), m_stream);
        }
        ms.push_back(
            gpu_compare(dptr, t.dtype, b.refs[o], t.numel(), tols[o], m_poison, m_stream));
      }
    }
    if (!judge(ms, scales, s).passed) {
      rejections[kind] += 1;
      untested.erase(kind);
    }
  }
}

auto worker::check_expected_digests() -> void {
  const auto& expected = m_job.expected_digests;
  const shape_desc& s = timing_shape();
  m_separate_lanes = m_separate_lanes && lanes_fit(s, 1);
  shape_buffers b;
  allocate(b, s, /*with_reference=*/false, 0);
  const auto extra = extra_lanes(b, s);
  // Set by set: generated once into lane 0 and copied into the other lanes; where the lanes are
  // shared, generated again before each library's call after the first (a call may have
  // changed them, and the next library must not pay for it).
  const int n_seeds = static_cast<int>(m_seeds.size());
  for (int k = 0; k < dist_count(s) * n_seeds; ++k) {
    const auto si = static_cast<size_t>(k % n_seeds);
    const int d = k / n_seeds;
    bool generated = false;
    bool lane0_called = false;
    for (auto& lib : m_libs) {
      const auto want = expected.find(lib.role);
      if (lib.rejected || want == expected.end()) {
        continue;
      }
      const auto digest_was = want->second.find(k);
      if (digest_was == want->second.end()) {
        continue;
      }
      const size_t l = lane_of(lib);
      const bool on_lane0 = l == 0 || extra.empty();
      auto& lb = on_lane0 ? b : *extra[l - 1];
      if (!generated) {
        generate(b, d, m_seeds[si]);
        for (const auto& e : extra) {
          copy_inputs(*e, b, d, m_seeds[si]);
        }
        generated = true;
      } else if (on_lane0 && lane0_called) {
        generate(b, d, m_seeds[si]);
      }
      lane0_called = lane0_called || on_lane0;
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        poison(lb.outputs[o], s.outputs[o]);
      }
      if (auto r = call(lib, lb, "recheck", fmt::format("set {}", si))) {
        reject(lib, *r);
        continue;
      }
      uint64_t h = 0;
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        h = h * 31 + digest(lb.outputs[o], s.outputs[o].bytes());
      }
      lib.set_digests[k] = h;
      lib.set_keyed[k] = output_check(lb).digest;
      if (h != digest_was->second && m_deterministic) {
        reject(lib, {"verify.nondeterministic",
                     fmt::format("output bits on input set {} differ from the verifying session",
                                 si)});
      }
    }
  }
}

auto worker::profile_calls() -> proto::profile_calls {
  auto& lib = *std::find_if(m_libs.begin(), m_libs.end(),
                            [](const candidate_lib& l) { return !l.rejected; });
  const shape_desc& s = timing_shape();
  shape_buffers b;
  allocate(b, s, /*with_reference=*/false, lane_of(lib));
  generate(b, 0, m_seeds.at(0));
  cuda_check(cudaStreamSynchronize(m_stream), "inputs");
  call_request c = request_for(lib, b);
  c.counters = m_job.counters;
  m_out.step("profile", lib.role, s.name);
  // The profiler's calls run in the runner (Nsight Compute and CUPTI see that process); what
  // it reports is measurement, never part of a verdict.
  bool hung = false;
  std::optional<json> r;
  if (lib.runner->send(message::profile, json(c))) {
    r = lib.runner->reply(m_hang_ms * 4, &hung);
  }
  if (!r) {
    reject(lib, runner_failure(lib, hung, "profile"));
    return {};
  }
  const auto out = reply_as<proto::profile_calls>(*r);
  if (!out) {
    reject(lib, malformed_reply(lib, "profile"));
    return {};
  }
  if (out->failed) {
    reject(lib, {"launch.cuda_error", *out->failed, out->context_lost});
  }
  return *out;
}

} // namespace kb::gpu::detail
