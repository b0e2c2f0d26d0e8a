// Lanes and memory: the buffers of one lane at a shape (a lane per library where the device holds
// them, so that no runner can reach another's buffers), the inputs generated or copied between
// lanes, the float64 oracle, digests, poison and comparisons, and the room checks that tell a
// device too small from a candidate's hoard.
#include "gpu/detail/worker.hpp"

namespace kb::gpu::detail {

auto worker::allocate(shape_buffers& b, const shape_desc& s, bool with_reference, size_t lane) -> void {
  b.shape = &s;
  for (const auto& t : s.inputs) {
    b.inputs.emplace_back(t.bytes(), m_host_reference);
  }
  for (const auto& t : s.outputs) {
    b.outputs.emplace_back(t.bytes(), m_host_reference);
    double* r = nullptr;
    if (with_reference) {
      const size_t bytes = std::max<size_t>(8, static_cast<size_t>(t.numel()) * 8);
      if (const cudaError_t e = cudaMalloc(&r, bytes); e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw out_of_device_memory(
            fmt::format("cannot allocate {} bytes for a float64 reference", bytes));
      } else {
        cuda_check(e, "reference buffer");
      }
      b.device_bytes += static_cast<int64_t>(bytes);
      judge_device_bytes() += static_cast<int64_t>(bytes);
    }
    b.refs.push_back(r);
    b.host_refs.emplace_back(m_host_reference ? static_cast<size_t>(t.numel()) : 0);
  }
  // Workspace: the largest any candidate asks for at this shape, allocated outside timing. Every
  // runner is asked first and the answers are read after, so that runners whose first query
  // builds a module (eager PyTorch imports it and runs it once) do it side by side.
  std::vector<kb_tensor> iv;
  std::vector<kb_tensor> ov;
  std::vector<candidate_lib*> asked;
  for (auto& lib : m_libs) {
    if (lib.rejected || !lib.has_workspace || lane_of(lib) != lane) {
      continue;
    }
    call_request q = request_for(lib, b);
    m_out.step("workspace", lib.role, s.name);
    if (!lib.runner->send(message::workspace, json(q))) {
      lib.rejected = runner_failure(lib, false, "kb_workspace_bytes");
      continue;
    }
    asked.push_back(&lib);
  }
  for (auto* asked_lib : asked) {
    auto& lib = *asked_lib;
    bool hung = false;
    const auto waited_from = clock_type::now();
    const std::optional<json> wr = lib.runner->reply(m_hang_ms, &hung);
    m_workspace_wait_s +=
        std::chrono::duration<double>(clock_type::now() - waited_from).count();
    if (!wr) {
      lib.rejected = runner_failure(lib, hung, "kb_workspace_bytes");
      continue;
    }
    const auto parsed = reply_as<workspace_reply>(*wr);
    if (!parsed) {
      lib.rejected = malformed_reply(lib, "kb_workspace_bytes");
      continue;
    }
    const workspace_reply& w = *parsed;
    const int rc = w.rc;
    const uint64_t bytes = w.bytes;
    if (rc != 0) {
      lib.rejected =
          rejection{"launch.refused",
                    fmt::format("kb_workspace_bytes returned {} at shape {}", rc, s.name)};
      continue;
    }
    size_t free_bytes = 0;
    size_t total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    if (bytes > free_bytes / 2) {
      lib.rejected = rejection{"workspace.too_large",
                               fmt::format("asks for {} bytes of workspace at shape {} ({} free)",
                                           bytes, s.name, free_bytes)};
      continue;
    }
    b.workspace_bytes = std::max(b.workspace_bytes, bytes);
  }
  if (b.workspace_bytes > 0) {
    b.workspace = guarded_buffer(b.workspace_bytes, false);
  }
  kb_args a = args_for(s, b.inputs, b.outputs, iv, ov, nullptr, 0);
  uint64_t oracle_bytes = 0;
  m_oracle_ws(&a, &oracle_bytes);
  if (oracle_bytes > 0) {
    cuda_check(cudaMalloc(&b.oracle_ws, oracle_bytes), "oracle workspace");
    b.device_bytes += static_cast<int64_t>(oracle_bytes);
    judge_device_bytes() += static_cast<int64_t>(oracle_bytes);
    m_oracle_ws_host.assign(oracle_bytes, 0);
  }
  m_oracle_ws_bytes = oracle_bytes;
}

auto worker::generate(shape_buffers& b, int dist_index, uint64_t seed) -> void {
  const auto& s = *b.shape;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const auto& t = s.inputs[i];
    const uint64_t ts = tensor_seed(seed, static_cast<int>(i));
    if (m_host_reference) {
      cpu_fill_random(b.inputs[i].host(), t.dtype, t.numel(), pick(t, dist_index), ts);
      cuda_check(
          cudaMemcpy(b.inputs[i].data(), b.inputs[i].host(), t.bytes(), cudaMemcpyHostToDevice),
          "upload");
    } else {
      gpu_fill_random(b.inputs[i].data(), t.dtype, t.numel(), pick(t, dist_index), ts, m_stream);
    }
  }
}

auto worker::copy_inputs(shape_buffers& to, const shape_buffers& from, int dist_index, uint64_t seed) -> void {
  if (m_host_reference) {
    generate(to, dist_index, seed);
    return;
  }
  const auto& s = *to.shape;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    cuda_check(cudaMemcpyAsync(to.inputs[i].data(), from.inputs[i].data(), s.inputs[i].bytes(),
                               cudaMemcpyDeviceToDevice, m_stream),
               "inputs");
  }
}

auto worker::compute_reference_into(shape_buffers& in, shape_buffers& b) -> void {
  const auto& s = *b.shape;
  std::vector<kb_tensor> iv;
  std::vector<kb_tensor> ov;
  if (m_host_reference) {
    std::vector<guarded_buffer> none;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      iv.push_back(view(s.inputs[i], in.inputs[i].host()));
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      tensor_desc t = s.outputs[i];
      t.dtype = KB_FLOAT64;
      ov.push_back(view(t, b.host_refs[i].data()));
    }
    const kb_args a =
        make_args(iv, ov, m_scalars, m_oracle_ws_host.data(), m_oracle_ws_bytes, nullptr);
    if (m_oracle(&a, 0) != 0) {
      fail("the CPU oracle refused shape {}", s.name);
    }
    return;
  }
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    iv.push_back(view(s.inputs[i], in.inputs[i].data()));
  }
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    tensor_desc t = s.outputs[i];
    t.dtype = KB_FLOAT64;
    ov.push_back(view(t, b.refs[i]));
  }
  const kb_args a = make_args(iv, ov, m_scalars, b.oracle_ws, m_oracle_ws_bytes, m_stream);
  const int rc = m_oracle(&a, 1);
  if (rc == oracle_out_of_memory) {
    (void)cudaGetLastError();
    throw out_of_device_memory(
        fmt::format("the float64 oracle ran out of device memory at shape {}", s.name));
  }
  if (rc != 0) {
    fail("the GPU oracle refused shape {} (code {})", s.name, rc);
  }
  cuda_check(cudaStreamSynchronize(m_stream), "oracle");
}

auto worker::digest(guarded_buffer& buf, size_t bytes) -> uint64_t {
  if (m_host_reference) {
    cuda_check(cudaMemcpy(buf.host(), buf.data(), bytes, cudaMemcpyDeviceToHost), "download");
    return cpu_digest(buf.host(), bytes);
  }
  return gpu_digest(buf.data(), bytes, m_stream);
}

auto worker::poison(guarded_buffer& buf, const tensor_desc& t) -> void {
  if (m_host_reference) {
    cpu_fill_poison(buf.host(), t.dtype, t.numel(), m_poison);
    cuda_check(cudaMemcpy(buf.data(), buf.host(), t.bytes(), cudaMemcpyHostToDevice), "poison");
  } else {
    gpu_fill_poison(buf.data(), t.dtype, t.numel(), m_poison, m_stream);
  }
}

auto worker::compare(shape_buffers& b, size_t out, const tolerance_spec& tol) -> error_metrics {
  const auto& t = b.shape->outputs[out];
  if (m_host_reference) {
    cuda_check(cudaMemcpy(b.outputs[out].host(), b.outputs[out].data(), t.bytes(),
                          cudaMemcpyDeviceToHost),
               "download");
    return cpu_compare(b.outputs[out].host(), t.dtype, b.host_ref(out), t.numel(), tol, m_poison);
  }
  return gpu_compare(b.outputs[out].data(), t.dtype, b.ref(out), t.numel(), tol, m_poison,
                     m_stream);
}

auto worker::compare_with(guarded_buffer& y, const tensor_desc& t, const shape_buffers& refs,
                             size_t out, const tolerance_spec& tol) -> error_metrics {
  if (m_host_reference) {
    cuda_check(cudaMemcpy(y.host(), y.data(), t.bytes(), cudaMemcpyDeviceToHost), "download");
    return cpu_compare(y.host(), t.dtype, refs.host_ref(out), t.numel(), tol, m_poison);
  }
  return gpu_compare(y.data(), t.dtype, refs.ref(out), t.numel(), tol, m_poison, m_stream);
}

auto worker::reference_moments(shape_buffers& b, size_t out) -> moments {
  const auto& t = b.shape->outputs[out];
  return m_host_reference ? cpu_moments(b.host_ref(out), t.numel())
                          : gpu_moments(b.ref(out), t.numel(), m_stream);
}

auto worker::runners_hold_room_for(uint64_t need) -> bool {
  if (std::any_of(m_libs.begin(), m_libs.end(),
                  [](const candidate_lib& lib) { return lib.host_dispatch; })) {
    return false;
  }
  size_t free_now = 0;
  m_runner_excess = runner_excess(&free_now);
  return m_runner_excess > 0 && fits_in_free(need, free_now + m_runner_excess);
}

auto worker::check_room(uint64_t need, const std::string& what) -> bool {
  if (m_hoard) {
    return false;
  }
  if (fits_on_device(need) || !runners_hold_room_for(need)) {
    return true;
  }
  m_hoard = true;
  for (auto& lib : m_libs) {
    if (!lib.rejected && lib.role != "baseline") {
      reject(lib, {"abi.allocation",
                   fmt::format("the runners hold {} bytes of device memory beyond their "
                               "allowance ({} bytes each), so that the {} bytes the judge needs "
                               "for {} do not fit: a candidate allocates device memory of its "
                               "own (the ABI gives it a workspace instead)",
                               m_runner_excess, runner_memory_allowance, need, what)});
    }
  }
  return false;
}

auto worker::hoard_took(const std::string& what) -> bool {
  if (std::any_of(m_libs.begin(), m_libs.end(),
                  [](const candidate_lib& lib) { return lib.host_dispatch; })) {
    return false;
  }
  size_t free_now = 0;
  m_runner_excess = runner_excess(&free_now);
  if (m_runner_excess == 0) {
    return false;
  }
  m_hoard = true;
  for (auto& lib : m_libs) {
    if (!lib.rejected && lib.role != "baseline") {
      reject(lib, {"abi.allocation",
                   fmt::format("the judge ran out of device memory ({}) while the runners held "
                               "{} bytes beyond their allowance ({} bytes each): a candidate "
                               "allocates device memory of its own (the ABI gives it a workspace "
                               "instead)",
                               what, m_runner_excess, runner_memory_allowance)});
    }
  }
  return true;
}

auto worker::runner_excess(size_t* free_now) const -> uint64_t {
  size_t total = 0;
  *free_now = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemGetInfo(free_now, &total) != cudaSuccess) {
    return 0;
  }
  const int64_t judge = judge_device_bytes().load() - m_judge_bytes_at_start;
  const int runners = static_cast<int>(m_libs.size()) + (m_empty.runner ? 1 : 0);
  return runner_memory_excess(m_free_at_start, *free_now,
                              judge > 0 ? static_cast<uint64_t>(judge) : 0, runners,
                              runner_memory_allowance);
}

auto worker::extra_lanes(const shape_buffers& base,
                                                          const shape_desc& s) -> std::vector<std::unique_ptr<shape_buffers>> {
  std::vector<std::unique_ptr<shape_buffers>> lanes;
  if (!m_separate_lanes) {
    return lanes;
  }
  for (size_t l = 1; l < m_libs.size(); ++l) {
    auto e = std::make_unique<shape_buffers>();
    allocate(*e, s, /*with_reference=*/false, l);
    e->ref_source = &base;
    lanes.push_back(std::move(e));
  }
  return lanes;
}

auto worker::lanes_fit(const shape_desc& s, int sets) const -> bool {
  if (m_libs.size() < 2) {
    return true;
  }
  // A lane per library: as one lane with that many times the sets, the references once.
  return fits_on_device(lane_bytes(s, sets * static_cast<int>(m_libs.size())));
}

auto worker::fits_on_device(uint64_t bytes) -> bool {
  size_t free_bytes = 0;
  size_t total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    return false;
  }
  return fits_in_free(bytes, free_bytes);
}

auto worker::timing_sets(const shape_desc& s) const -> int {
  const int sets = std::max(1, m_job.time->input_sets);
  const int n_dists = dist_count(s);
  const int n_seeds = static_cast<int>(m_seeds.size());
  const int wanted = std::min(std::max(sets, n_dists), n_dists * n_seeds);
  return sets_that_fit(wanted, static_cast<int>(m_libs.size()), m_separate_lanes,
                       [&](int total) { return fits_on_device(lane_bytes(s, total)); })
      .sets;
}

auto worker::device_info() -> json {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "device");
  cudaDeviceProp p{};
  cuda_check(cudaGetDeviceProperties(&p, dev), "properties");
  char bus[64] = {0};
  cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
  m_nvml = std::make_unique<nvml>(bus);
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
  int mem_clock_khz = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  m_default_clock_mhz = clock_khz / 1000.0;
  m_l2_bytes = static_cast<size_t>(p.l2CacheSize);
  std::string uuid = "GPU";
  for (int i = 0; i < 16; ++i) {
    uuid += fmt::format("{}{:02x}", (i == 0 || i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "",
                        static_cast<unsigned char>(p.uuid.bytes[i]));
  }
  json j{{"name", p.name},
         {"uuid", uuid},
         {"pci_bus_id", bus},
         {"compute_capability", fmt::format("{}.{}", p.major, p.minor)},
         {"sm_count", p.multiProcessorCount},
         {"l2_bytes", p.l2CacheSize},
         {"memory_bytes", p.totalGlobalMem},
         {"max_sm_clock_mhz", m_default_clock_mhz},
         {"memory_clock_mhz", mem_clock_khz / 1000.0},
         {"cuda_driver_api", driver},
         {"cuda_runtime", runtime},
         {"driver_version", m_nvml->driver_version()},
         {"nvml", m_nvml->available() ? "ok" : m_nvml->error()}};
  return j;
}

auto worker::load_oracle() -> void {
  const std::string& path = m_job.oracle;
  m_out.step("load", "oracle", path);
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    fail("cannot load the oracle module {}: {}", path, dlerror());
  }
  m_oracle = reinterpret_cast<oracle_fn>(dlsym(h, "kbt_oracle"));
  m_oracle_ws = reinterpret_cast<oracle_workspace_fn>(dlsym(h, "kbt_oracle_workspace"));
  if (m_oracle == nullptr || m_oracle_ws == nullptr) {
    fail("oracle module {} lacks kbt_oracle/kbt_oracle_workspace", path);
  }
  m_oracle_transient =
      reinterpret_cast<oracle_workspace_fn>(dlsym(h, "kbt_oracle_transient_bytes"));
}

auto worker::oracle_transient_bytes(const shape_desc& s) const -> uint64_t {
  if (m_oracle_transient == nullptr) {
    return 0;
  }
  // Shapes only: the module is asked before the lane's buffers exist.
  std::vector<kb_tensor> ins;
  std::vector<kb_tensor> outs;
  for (const auto& t : s.inputs) {
    ins.push_back(view(t, nullptr));
  }
  for (const auto& t : s.outputs) {
    outs.push_back(view(t, nullptr));
  }
  const kb_args a = make_args(ins, outs, m_scalars, nullptr, 0, nullptr);
  uint64_t bytes = 0;
  return m_oracle_transient(&a, &bytes) == 0 ? bytes : 0;
}

auto worker::lane_bytes(const shape_desc& s, int sets) const -> uint64_t {
  uint64_t need = oracle_transient_bytes(s);
  for (const auto& t : s.inputs) {
    need += t.bytes() * static_cast<uint64_t>(sets);
  }
  for (const auto& t : s.outputs) {
    need += t.bytes() * static_cast<uint64_t>(sets) + static_cast<uint64_t>(t.numel()) * 8;
  }
  return need;
}

} // namespace kb::gpu::detail
