// Per-device ceilings: measured once per (device UUID, driver, toolkit) in a child process
// (`kblaster device-limits-probe`), stored, and turned into the roofline floors and physical
// limits every command uses. Without a calibration the conservative default applies, named as
// such.
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/process.hpp"
#include "eval/detail/limit_kernels.hpp"
#include "eval/eval.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kb::eval {

using nlohmann::json;

namespace {

std::string driver_key(const json& info) {
  return std::to_string(info.value("cuda_driver_api", 0));
}
std::string toolkit_key(const json& info) {
  return std::to_string(info.value("cuda_runtime", 0));
}

std::optional<double> positive(double v) {
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

std::optional<double> optional_from(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) {
    return std::nullopt;
  }
  return j[key].get<double>();
}

} // namespace

store::device_limits measure_device_limits() {
  const auto probe = probe_device();
  if (!probe.available) {
    fail("device limits: {}", probe.reason);
  }
  const auto r = detail::run_limit_kernels();
  store::device_limits out;
  out.gpu_uuid = probe.info.at("uuid");
  out.gpu_name = r.gpu_name;
  out.driver = driver_key(probe.info);
  out.toolkit = toolkit_key(probe.info);
  out.copy_bandwidth = r.copy_bandwidth;
  out.read_bandwidth = r.read_bandwidth;
  out.fp32_flops = r.fp32_flops;
  out.fp16_tensor_flops = positive(r.fp16_tensor_flops);
  out.bf16_tensor_flops = positive(r.bf16_tensor_flops);
  out.tf32_tensor_flops = positive(r.tf32_tensor_flops);
  json copies = json::array();
  for (const auto& [how, bw] : r.copy_methods) {
    copies.push_back({{"method", how}, {"bandwidth", bw}});
  }
  json reads = json::array();
  for (const auto& [how, bw] : r.read_methods) {
    reads.push_back({{"method", how}, {"bandwidth", bw}});
  }
  out.detail = {{"buffer_bytes", r.buffer_bytes},
                {"sm_count", r.sm_count},
                {"method_version", limits_method_version},
                {"copy_methods", copies},
                {"read_methods", reads},
                {"method", "best of repeated runs under CUDA events, each bandwidth the best of "
                           "several streaming kernels (copy_methods, read_methods); copy counts "
                           "bytes read and written; tensor cores through wmma (mma.sync) with "
                           "fp32 accumulate"}};
  return out;
}

json to_json(const store::device_limits& x) {
  return {{"gpu_uuid", x.gpu_uuid},
          {"gpu_name", x.gpu_name},
          {"driver", x.driver},
          {"toolkit", x.toolkit},
          {"copy_bandwidth", x.copy_bandwidth},
          {"read_bandwidth", x.read_bandwidth},
          {"fp32_flops", x.fp32_flops},
          {"fp16_tensor_flops", optional_json(x.fp16_tensor_flops)},
          {"bf16_tensor_flops", optional_json(x.bf16_tensor_flops)},
          {"tf32_tensor_flops", optional_json(x.tf32_tensor_flops)},
          {"created", x.created},
          {"detail", x.detail}};
}

store::device_limits device_limits_from_json(const json& j) {
  store::device_limits x;
  x.gpu_uuid = j.at("gpu_uuid");
  x.gpu_name = j.value("gpu_name", "");
  x.driver = j.at("driver");
  x.toolkit = j.at("toolkit");
  x.copy_bandwidth = j.at("copy_bandwidth");
  x.read_bandwidth = j.at("read_bandwidth");
  x.fp32_flops = j.at("fp32_flops");
  x.fp16_tensor_flops = optional_from(j, "fp16_tensor_flops");
  x.bf16_tensor_flops = optional_from(j, "bf16_tensor_flops");
  x.tf32_tensor_flops = optional_from(j, "tf32_tensor_flops");
  x.created = j.value("created", "");
  x.detail = j.value("detail", json::object());
  return x;
}

bool measured_by_current_method(const store::device_limits& limits) {
  return limits.detail.is_object() &&
         limits.detail.value("method_version", 1) >= limits_method_version;
}

task::ceilings ceilings_from(const std::optional<store::device_limits>& limits) {
  if (!limits) {
    return task::ceilings::conservative_default();
  }
  const auto& x = *limits;
  task::ceilings c;
  c.measured = true;
  c.bandwidth = x.copy_bandwidth;
  c.peak_bandwidth = limit_headroom_bandwidth * std::max(x.read_bandwidth, x.copy_bandwidth);
  c.fp32_flops = x.fp32_flops;
  c.peak_fp32_flops = limit_headroom_fp32 * x.fp32_flops;
  double tensor = 0;
  for (const auto& r : {x.fp16_tensor_flops, x.bf16_tensor_flops, x.tf32_tensor_flops}) {
    tensor = std::max(tensor, r.value_or(0.0));
  }
  c.tensor_flops = tensor;
  c.peak_tensor_flops = limit_headroom_tensor * tensor;
  c.source = fmt::format(
      "measured on {} {} (driver {}, toolkit {}, {}): copy {:.2f} TB/s, read {:.2f} TB/s, fp32 "
      "{:.1f} TFLOP/s, tensor cores {:.0f} TFLOP/s",
      x.gpu_name, x.gpu_uuid, x.driver, x.toolkit, x.created.empty() ? "now" : x.created,
      x.copy_bandwidth / 1e12, x.read_bandwidth / 1e12, x.fp32_flops / 1e12, tensor / 1e12);
  return c;
}

std::optional<store::device_limits> run_limits_probe(std::string* error) {
  temp_dir dir("kblaster-limits");
  const fs::path out = dir.path() / "limits.json";
  process_spec spec;
  spec.argv = {worker_executable().string(), "device-limits-probe", "--out", out.string()};
  spec.timeout = std::chrono::minutes(5);
  const auto r = run_process(spec);
  if (!r.ok() || !fs::exists(out)) {
    *error = fmt::format("the device measurement failed ({}): {}", r.describe(),
                         r.output.substr(r.output.size() > 2000 ? r.output.size() - 2000 : 0));
    return std::nullopt;
  }
  try {
    return device_limits_from_json(json::parse(read_file(out)));
  } catch (const std::exception& e) {
    *error = fmt::format("the device measurement wrote no readable result: {}", e.what());
    return std::nullopt;
  }
}

ceilings_resolution resolve_ceilings(store::store& st, const device_probe& device,
                                     bool measure_when_missing, const progress_fn& progress) {
  ceilings_resolution r;
  if (!device.available) {
    r.note = "no device: " + r.ceilings.source;
    return r;
  }
  const std::string uuid = device.info.value("uuid", "");
  const std::string driver = driver_key(device.info);
  const std::string toolkit = toolkit_key(device.info);
  r.limits = st.find_device_limits(uuid, driver, toolkit);
  // A measurement by an older method (one copy kernel, below what streaming kernels reach) is
  // taken again.
  if (r.limits && !measured_by_current_method(*r.limits)) {
    r.limits.reset();
  }
  if (!r.limits && measure_when_missing) {
    if (progress) {
      progress(fmt::format("calibrate: measuring the limits of {} (once per device, driver and "
                           "toolkit)",
                           uuid));
    }
    std::string error;
    if (auto measured = run_limits_probe(&error)) {
      st.record_device_limits(*measured);
      r.limits = st.find_device_limits(uuid, driver, toolkit);
      r.measured_now = true;
    } else {
      r.note = error;
    }
  }
  r.ceilings = ceilings_from(r.limits);
  if (r.note.empty()) {
    r.note = r.ceilings.source;
  } else {
    r.note += "; using the " + r.ceilings.source;
  }
  return r;
}

} // namespace kb::eval
