// The CPU path: what runs without a GPU. The same oracle module, generator and checker as the
// worker, on host buffers at the check shapes.
#include "eval/eval.hpp"
#include "gpu/check_rule.hpp"
#include "gpu/device_ops.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include <dlfcn.h>

namespace kb::eval {

using nlohmann::json;

namespace {

using oracle_fn = int (*)(const kb_args*, int);
using oracle_workspace_fn = int (*)(const kb_args*, uint64_t*);

class oracle_module {
public:
  explicit oracle_module(const fs::path& path) {
    m_handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m_handle == nullptr) {
      fail("cannot load oracle module {}: {}", path.string(), dlerror());
    }
    m_run = reinterpret_cast<oracle_fn>(dlsym(m_handle, "kbt_oracle"));
    m_workspace = reinterpret_cast<oracle_workspace_fn>(dlsym(m_handle, "kbt_oracle_workspace"));
    if (m_run == nullptr || m_workspace == nullptr) {
      fail("oracle module {} lacks kbt_oracle/kbt_oracle_workspace", path.string());
    }
  }
  oracle_module(const oracle_module&) = delete;
  oracle_module& operator=(const oracle_module&) = delete;
  ~oracle_module() { dlclose(m_handle); }

  // Host inputs in their dtypes; outputs as float64.
  void run(const task::contract& c, const task::shape_case& s,
           std::vector<std::vector<unsigned char>>& inputs,
           std::vector<std::vector<double>>& outputs) const {
    const auto ins = task::concrete_inputs(c, s);
    const auto outs = task::concrete_outputs(c, s);
    std::vector<kb_tensor> iv;
    std::vector<kb_tensor> ov;
    for (size_t i = 0; i < ins.size(); ++i) {
      iv.push_back(gpu::contiguous_view(
          inputs[i].data(), static_cast<kb_dtype>(task::abi_dtype(ins[i].type)), ins[i].shape));
    }
    outputs.resize(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      outputs[i].assign(static_cast<size_t>(outs[i].numel()), 0.0);
      ov.push_back(gpu::contiguous_view(outputs[i].data(), KB_FLOAT64, outs[i].shape));
    }
    std::vector<double> scalars;
    for (const auto& p : c.params) {
      scalars.push_back(p.value);
    }
    kb_args a = gpu::make_args(iv, ov, scalars, nullptr, 0, nullptr);
    uint64_t ws = 0;
    m_workspace(&a, &ws);
    std::vector<unsigned char> workspace(ws);
    a.workspace = workspace.data();
    a.workspace_bytes = ws;
    if (const int rc = m_run(&a, 0); rc != 0) {
      fail("the CPU oracle of task {} refused shape {} (code {})", c.id, s.name, rc);
    }
  }

private:
  void* m_handle = nullptr;
  oracle_fn m_run = nullptr;
  oracle_workspace_fn m_workspace = nullptr;
};

std::vector<std::vector<unsigned char>> host_inputs(const task::contract& c,
                                                    const task::shape_case& s) {
  std::vector<std::vector<unsigned char>> out;
  for (const auto& t : task::concrete_inputs(c, s)) {
    out.emplace_back(std::max<size_t>(8, t.bytes()));
  }
  return out;
}

kb::distribution device_distribution(const task::distribution& d, const task::shape_case& s) {
  return {static_cast<int>(d.k), d.a,
          d.b_expr.empty() ? d.b : static_cast<double>(task::eval_expr(d.b_expr, s.dims))};
}

} // namespace

fs::path build_oracle(const fs::path& root, const task::contract& c, const fs::path& cache_dir) {
  build::compiler comp(build::detect_toolchain(), cache_dir);
  const auto r = comp.compile(build::oracle_request(root, c));
  if (!r.ok()) {
    fail_input("the oracle module of task {} does not compile ({}):\n{}", c.id, r.reason, r.log);
  }
  return r.binary;
}

std::vector<std::vector<double>> cpu_reference(const fs::path& module, const task::contract& c,
                                               const task::shape_case& s,
                                               const std::vector<std::vector<double>>& inputs) {
  const auto ins = task::concrete_inputs(c, s);
  if (inputs.size() != ins.size()) {
    fail("cpu_reference: task {} has {} inputs, {} given", c.id, ins.size(), inputs.size());
  }
  auto host = host_inputs(c, s);
  for (size_t i = 0; i < ins.size(); ++i) {
    if (static_cast<int64_t>(inputs[i].size()) != ins[i].numel()) {
      fail("cpu_reference: input {} of task {} needs {} values at shape {}, {} given", ins[i].name,
           c.id, ins[i].numel(), s.name, inputs[i].size());
    }
    for (size_t k = 0; k < inputs[i].size(); ++k) {
      write_from_double(host[i].data(), static_cast<kb_dtype>(task::abi_dtype(ins[i].type)),
                        static_cast<int64_t>(k), inputs[i][k]);
    }
  }
  std::vector<std::vector<double>> outputs;
  oracle_module(module).run(c, s, host, outputs);
  return outputs;
}

json check_task_without_gpu(const fs::path& root, const task::contract& c, const options& opt) {
  json report{{"task", c.id}};
  build::compiler comp(build::detect_toolchain(opt.arch), opt.cache_dir);
  const auto oracle = comp.compile(build::oracle_request(root, c));
  report["oracle_build"] = oracle.to_json();
  const auto baseline =
      comp.compile(build::candidate_request(root, c, read_file(c.baseline), "baseline.cu"));
  report["baseline_build"] = baseline.to_json();
  if (!oracle.ok() || !baseline.ok()) {
    report["ok"] = false;
    report["message"] =
        !oracle.ok() ? "oracle module does not compile" : "baseline does not compile";
    return report;
  }
  const oracle_module module(oracle.binary);
  std::map<std::string, int> rejected{{"zeros", 0}, {"copy_of_input", 0}, {"constant", 0}};
  std::optional<double> constant;
  int checks = 0;
  // The trivial outputs below are written in full, so any poison pattern serves their compare.
  std::mt19937_64 poison_rng(opt.seed_base);
  const poison_pattern poison = gpu::draw_poison(poison_rng);
  std::vector<uint64_t> seeds;
  for (int i = 0; i < opt.seeds; ++i) {
    seeds.push_back(opt.seed_base * 1000003ull + static_cast<uint64_t>(i));
  }
  for (const auto* s : c.shapes_with_role("check")) {
    const auto ins = task::concrete_inputs(c, *s);
    const auto outs = task::concrete_outputs(c, *s);
    size_t dists = 1;
    for (const auto& t : c.inputs) {
      dists = std::max(dists, t.distributions.size());
    }
    for (size_t d = 0; d < dists; ++d) {
      for (const uint64_t seed : seeds) {
        auto host = host_inputs(c, *s);
        for (size_t i = 0; i < ins.size(); ++i) {
          const auto& dist = c.inputs[i].distributions[d % c.inputs[i].distributions.size()];
          gpu::cpu_fill_random(host[i].data(), static_cast<kb_dtype>(task::abi_dtype(ins[i].type)),
                               ins[i].numel(), device_distribution(dist, *s),
                               tensor_seed(seed, static_cast<int>(i)));
        }
        std::vector<std::vector<double>> refs;
        module.run(c, *s, host, refs);
        std::vector<double> scales;
        std::vector<std::string> names;
        for (size_t o = 0; o < outs.size(); ++o) {
          const auto m = gpu::cpu_moments(refs[o].data(), outs[o].numel());
          scales.push_back(std::sqrt(m.sum_sq / std::max<int64_t>(1, outs[o].numel())));
          names.push_back(outs[o].name);
          if (!constant) {
            constant = m.sum / std::max<int64_t>(1, outs[o].numel());
          }
          for (double v : refs[o]) {
            if (!std::isfinite(v)) {
              fail("task {}: the oracle produced a non-finite value at shape {} (seed {})", c.id,
                   s->name, seed);
            }
          }
        }
        for (const std::string kind : {"zeros", "copy_of_input", "constant"}) {
          std::vector<error_metrics> ms;
          for (size_t o = 0; o < outs.size(); ++o) {
            const auto dt = static_cast<kb_dtype>(task::abi_dtype(outs[o].type));
            std::vector<unsigned char> y(std::max<size_t>(8, outs[o].bytes()));
            if (kind == "zeros") {
              gpu::cpu_fill_value(y.data(), dt, outs[o].numel(), 0.0);
            } else if (kind == "constant") {
              gpu::cpu_fill_value(y.data(), dt, outs[o].numel(), *constant);
            } else {
              gpu::cpu_copy_cyclic(host[0].data(),
                                   static_cast<kb_dtype>(task::abi_dtype(ins[0].type)),
                                   ins[0].numel(), y.data(), dt, outs[o].numel());
            }
            ms.push_back(gpu::cpu_compare(y.data(), dt, refs[o].data(), outs[o].numel(),
                                          {c.tol.atol, c.tol.rtol, scales[o]}, poison));
          }
          if (!gpu::judge(ms, scales, names, c.tol.rel_l2).passed) {
            rejected[kind] += 1;
          }
        }
        ++checks;
      }
    }
  }
  report["checks"] = checks;
  report["checker_selftest"] = {{"zeros_rejected_by", rejected["zeros"]},
                                {"copy_of_input_rejected_by", rejected["copy_of_input"]},
                                {"constant_rejected_by", rejected["constant"]}};
  const bool sound =
      rejected["zeros"] > 0 && rejected["copy_of_input"] > 0 && rejected["constant"] > 0;
  report["ok"] = sound;
  report["message"] =
      sound
          ? "oracle runs on the CPU; the checker rejects zeros, a copy of the input and a constant"
          : "the checker accepts a trivial output at every check shape";
  return report;
}

} // namespace kb::eval
