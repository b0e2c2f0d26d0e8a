// CUPTI's range profiler (the CUDA 12.6+ API: cupti_range_profiler.h and cupti_profiler_host.h),
// around one call of the candidate inside the evaluation worker. One user range, replayed by the
// caller as many passes as the metrics need (the call is idempotent: inputs are read-only and
// every output is rewritten). libcupti is loaded at run time, so kblaster starts where it is
// missing; a missing library, a device without profiling support or a user without permission
// for counters is an answer with its reason, never an exception.
#include "profile/detail/cupti.hpp"
#include "profile/profile.hpp"

#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <dlfcn.h>

namespace kb::profile {

namespace detail {

bool is_permission_error(int cupti_result) {
  return cupti_result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
         cupti_result == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
}

std::string cupti_failure_reason(int cupti_result, std::string_view call, std::string_view text) {
  if (is_permission_error(cupti_result)) {
    return fmt::format(
        "ERR_NVGPUCTRPERM: this user may not read GPU performance counters ({} returned {}); see "
        "https://developer.nvidia.com/ERR_NVGPUCTRPERM",
        call, text);
  }
  return fmt::format("{} failed: {} (CUPTI result {})", call, text, cupti_result);
}

std::string default_unit(std::string_view metric) {
  const auto ends_with = [&](std::string_view s) {
    return metric.size() >= s.size() && metric.substr(metric.size() - s.size()) == s;
  };
  if (ends_with(".pct") || metric.find(".pct_of_peak") != std::string_view::npos ||
      ends_with("_pct")) {
    return "%";
  }
  if (metric.rfind("gpu__time_duration", 0) == 0) {
    return "nsecond";
  }
  if (metric.find("bytes") != std::string_view::npos && ends_with(".per_second")) {
    return "byte/second";
  }
  return "";
}

} // namespace detail

const std::vector<std::string>& cupti_metrics() {
  static const std::vector<std::string> metrics{
      "gpu__time_duration.sum",
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes.sum.per_second",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "l1tex__t_sector_hit_rate.pct",
      "lts__t_sector_hit_rate.pct",
      "sm__ctas_launched.sum",
  };
  return metrics;
}

nlohmann::json cupti_values::to_json() const {
  nlohmann::json v = nlohmann::json::object();
  for (const auto& [name, value] : values) {
    v[name] = {{"value", value.first}, {"unit", value.second}};
  }
  return {{"available", available},     {"reason", reason}, {"values", v},
          {"unsupported", unsupported}, {"passes", passes}, {"seconds", seconds}};
}

cupti_values cupti_values::from_json(const nlohmann::json& j) {
  cupti_values v;
  v.available = j.value("available", false);
  v.reason = j.value("reason", "");
  const auto values = j.value("values", nlohmann::json::object());
  for (const auto& [name, value] : values.items()) {
    v.values[name] = {value.at("value").get<double>(), value.value("unit", "")};
  }
  v.unsupported = j.value("unsupported", std::vector<std::string>{});
  v.passes = j.value("passes", 0);
  v.seconds = j.value("seconds", 0.0);
  return v;
}

namespace {

// The entry points used, resolved from libcupti at run time.
struct cupti_library {
  std::string path;
  std::string error; // why it could not be loaded
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiProfilerInitialize) initialize = nullptr;
  decltype(&cuptiProfilerDeInitialize) deinitialize = nullptr;
  decltype(&cuptiProfilerDeviceSupported) device_supported = nullptr;
  decltype(&cuptiDeviceGetChipName) chip_name = nullptr;
  decltype(&cuptiProfilerGetCounterAvailability) counter_availability = nullptr;
  decltype(&cuptiProfilerHostInitialize) host_initialize = nullptr;
  decltype(&cuptiProfilerHostDeinitialize) host_deinitialize = nullptr;
  decltype(&cuptiProfilerHostGetMetricProperties) metric_properties = nullptr;
  decltype(&cuptiProfilerHostConfigAddMetrics) add_metrics = nullptr;
  decltype(&cuptiProfilerHostGetConfigImageSize) config_image_size = nullptr;
  decltype(&cuptiProfilerHostGetConfigImage) config_image = nullptr;
  decltype(&cuptiProfilerHostGetNumOfPasses) pass_count = nullptr;
  decltype(&cuptiProfilerHostEvaluateToGpuValues) evaluate = nullptr;
  decltype(&cuptiRangeProfilerEnable) enable = nullptr;
  decltype(&cuptiRangeProfilerDisable) disable = nullptr;
  decltype(&cuptiRangeProfilerSetConfig) set_config = nullptr;
  decltype(&cuptiRangeProfilerStart) start = nullptr;
  decltype(&cuptiRangeProfilerStop) stop = nullptr;
  decltype(&cuptiRangeProfilerPushRange) push_range = nullptr;
  decltype(&cuptiRangeProfilerPopRange) pop_range = nullptr;
  decltype(&cuptiRangeProfilerDecodeData) decode = nullptr;
  decltype(&cuptiRangeProfilerGetCounterDataSize) counter_data_size = nullptr;
  decltype(&cuptiRangeProfilerCounterDataImageInitialize) counter_data_initialize = nullptr;
  decltype(&cuptiRangeProfilerGetCounterDataInfo) counter_data_info = nullptr;
  // The driver's current context (libcuda is loaded whenever the runtime works).
  using ctx_get_current_fn = CUresult (*)(CUcontext*);
  ctx_get_current_fn ctx_get_current = nullptr;

  bool loaded() const { return error.empty(); }
};

std::vector<std::string> library_candidates() {
  if (const char* env = std::getenv("KBLASTER_CUPTI"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> paths{"libcupti.so.13"};
  const std::filesystem::path toolkit = std::filesystem::path(KBLASTER_CUDA_INCLUDE).parent_path();
  paths.push_back((toolkit / "lib64" / "libcupti.so.13").string());
  paths.push_back("/usr/local/cuda/lib64/libcupti.so.13");
  paths.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  return paths;
}

template <class F> bool resolve(void* handle, const char* symbol, F& out, std::string& error) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  if (out == nullptr && error.empty()) {
    error = fmt::format("{} lacks {}", "libcupti", symbol);
  }
  return out != nullptr;
}

cupti_library load_library(const std::vector<std::string>& paths) {
  cupti_library lib;
  void* handle = nullptr;
  std::string tried;
  for (const auto& path : paths) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      lib.path = path;
      break;
    }
    const char* e = dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", e != nullptr ? e : path);
  }
  if (handle == nullptr) {
    lib.error = "libcupti.so.13 not found: " + tried;
    return lib;
  }
  std::string& e = lib.error;
  resolve(handle, "cuptiGetResultString", lib.result_string, e);
  resolve(handle, "cuptiProfilerInitialize", lib.initialize, e);
  resolve(handle, "cuptiProfilerDeInitialize", lib.deinitialize, e);
  resolve(handle, "cuptiProfilerDeviceSupported", lib.device_supported, e);
  resolve(handle, "cuptiDeviceGetChipName", lib.chip_name, e);
  resolve(handle, "cuptiProfilerGetCounterAvailability", lib.counter_availability, e);
  resolve(handle, "cuptiProfilerHostInitialize", lib.host_initialize, e);
  resolve(handle, "cuptiProfilerHostDeinitialize", lib.host_deinitialize, e);
  resolve(handle, "cuptiProfilerHostGetMetricProperties", lib.metric_properties, e);
  resolve(handle, "cuptiProfilerHostConfigAddMetrics", lib.add_metrics, e);
  resolve(handle, "cuptiProfilerHostGetConfigImageSize", lib.config_image_size, e);
  resolve(handle, "cuptiProfilerHostGetConfigImage", lib.config_image, e);
  resolve(handle, "cuptiProfilerHostGetNumOfPasses", lib.pass_count, e);
  resolve(handle, "cuptiProfilerHostEvaluateToGpuValues", lib.evaluate, e);
  resolve(handle, "cuptiRangeProfilerEnable", lib.enable, e);
  resolve(handle, "cuptiRangeProfilerDisable", lib.disable, e);
  resolve(handle, "cuptiRangeProfilerSetConfig", lib.set_config, e);
  resolve(handle, "cuptiRangeProfilerStart", lib.start, e);
  resolve(handle, "cuptiRangeProfilerStop", lib.stop, e);
  resolve(handle, "cuptiRangeProfilerPushRange", lib.push_range, e);
  resolve(handle, "cuptiRangeProfilerPopRange", lib.pop_range, e);
  resolve(handle, "cuptiRangeProfilerDecodeData", lib.decode, e);
  resolve(handle, "cuptiRangeProfilerGetCounterDataSize", lib.counter_data_size, e);
  resolve(handle, "cuptiRangeProfilerCounterDataImageInitialize", lib.counter_data_initialize, e);
  resolve(handle, "cuptiRangeProfilerGetCounterDataInfo", lib.counter_data_info, e);
  if (!e.empty()) {
    e = fmt::format("{} ({})", e, lib.path);
  }
  return lib;
}

const cupti_library& library() {
  static const cupti_library lib = [] {
    cupti_library l = load_library(library_candidates());
    if (l.loaded()) {
      void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (driver == nullptr) {
        l.error = "libcuda.so.1 not found";
      } else {
        resolve(driver, "cuCtxGetCurrent", l.ctx_get_current, l.error);
      }
    }
    return l;
  }();
  return lib;
}

// A failed step: its reason ends the collection.
struct failure {
  std::string reason;
};

class session {
public:
  explicit session(const cupti_library& lib) : m_lib(lib) {}
  ~session() {
    if (m_range != nullptr) {
      CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
      p.pRangeProfilerObject = m_range;
      m_lib.disable(&p);
    }
    if (m_host != nullptr) {
      CUpti_Profiler_Host_Deinitialize_Params p{
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
      p.pHostObject = m_host;
      m_lib.host_deinitialize(&p);
    }
    if (m_initialized) {
      CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
      m_lib.deinitialize(&p);
    }
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  void check(CUptiResult r, const char* call) const {
    if (r == CUPTI_SUCCESS) {
      return;
    }
    const char* text = nullptr;
    m_lib.result_string(r, &text);
    throw failure{detail::cupti_failure_reason(static_cast<int>(r), call,
                                               text != nullptr ? text : "unknown error")};
  }

  // Initialises the profiler and its host object on the current device's primary context,
  // which it returns; a device that cannot be range-profiled is a failure saying why.
  CUcontext open_profiler() {
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
      throw failure{fmt::format("no CUDA device: {}", cudaGetErrorName(e))};
    }
    cudaFree(nullptr); // makes the primary context current
    CUcontext ctx = nullptr;
    if (m_lib.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
      throw failure{"no current CUDA context"};
    }
    CUpti_Profiler_DeviceSupported_Params supported{
        CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    supported.cuDevice = device;
    supported.api = CUPTI_PROFILER_RANGE_PROFILING;
    check(m_lib.device_supported(&supported), "cuptiProfilerDeviceSupported");
    if (supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      std::string why;
      for (const auto& [flag, name] : {std::pair{supported.architecture, "architecture"},
                                       {supported.sli, "SLI"},
                                       {supported.vGpu, "vGPU"},
                                       {supported.confidentialCompute, "confidential computing"},
                                       {supported.cmp, "CMP"},
                                       {supported.wsl, "WSL"}}) {
        if (flag == CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED ||
            flag == CUPTI_PROFILER_CONFIGURATION_DISABLED) {
          why += fmt::format("{}{} {}", why.empty() ? "" : ", ", name,
                             flag == CUPTI_PROFILER_CONFIGURATION_DISABLED ? "disabled"
                                                                           : "unsupported");
        }
      }
      throw failure{"the device does not support CUPTI range profiling" +
                    (why.empty() ? std::string() : ": " + why)};
    }
    CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    check(m_lib.initialize(&init), "cuptiProfilerInitialize");
    m_initialized = true;

    CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<size_t>(device);
    check(m_lib.chip_name(&chip), "cuptiDeviceGetChipName");
    CUpti_Profiler_GetCounterAvailability_Params avail{
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = ctx;
    check(m_lib.counter_availability(&avail), "cuptiProfilerGetCounterAvailability");
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    check(m_lib.counter_availability(&avail), "cuptiProfilerGetCounterAvailability");

    CUpti_Profiler_Host_Initialize_Params host{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip.pChipName;
    host.pCounterAvailabilityImage = availability.data();
    check(m_lib.host_initialize(&host), "cuptiProfilerHostInitialize");
    m_host = host.pHostObject;
    return ctx;
  }

  // Adds the metrics to the configuration one at a time; those refused are listed in
  // `out.unsupported`. `names` and `units` are the accepted metrics, in order.
  void add_metrics(std::vector<const char*>& names, std::vector<std::string>& units,
                   cupti_values& out) {
    // A metric this chip or range mode does not know would fail the whole configuration, so
    // metrics are added one at a time and those refused are dropped.
    for (const auto& m : cupti_metrics()) {
      std::string unit;
      for (const std::string& query : {m, m.substr(0, m.find('.'))}) {
        CUpti_Profiler_Host_GetMetricProperties_Params props{
            CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
        props.pHostObject = m_host;
        props.pMetricName = query.c_str();
        if (m_lib.metric_properties(&props) == CUPTI_SUCCESS) {
          // The base metric's unit is not its rollup's (a percentage of a throughput, a rate of
          // a count): only the full name's unit is taken as it is.
          unit = query == m && props.pDimUnit != nullptr && *props.pDimUnit != '\0'
                     ? props.pDimUnit
                     : detail::default_unit(m);
          break;
        }
      }
      // A unit the SI table does not read as the metric's kind (time, bytes per second, percent)
      // would scale the value wrongly: the name's own unit is safer.
      const std::string expected = detail::default_unit(m);
      if (!expected.empty() && si_scale(unit).second != si_scale(expected).second) {
        unit = expected;
      }
      const char* name = m.c_str();
      CUpti_Profiler_Host_ConfigAddMetrics_Params add{
          CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
      add.pHostObject = m_host;
      add.ppMetricNames = &name;
      add.numMetrics = 1;
      if (m_lib.add_metrics(&add) != CUPTI_SUCCESS) {
        out.unsupported.push_back(m);
        continue;
      }
      names.push_back(name);
      units.push_back(unit);
    }
    if (names.empty()) {
      throw failure{"CUPTI accepted none of the metrics on this device"};
    }
  }

  // Builds the configuration image of the metrics, enables range profiling on `ctx` and
  // sets it up for one user range replayed by the caller; returns the passes the scheduler
  // asks for. `config` and `counter_data` must outlive the profiling.
  size_t configure(CUcontext ctx, std::vector<const char*>& names, std::vector<uint8_t>& config,
                   std::vector<uint8_t>& counter_data) {
    CUpti_Profiler_Host_GetConfigImageSize_Params size{
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = m_host;
    check(m_lib.config_image_size(&size), "cuptiProfilerHostGetConfigImageSize");
    config.resize(size.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params image{
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    image.pHostObject = m_host;
    image.configImageSize = config.size();
    image.pConfigImage = config.data();
    check(m_lib.config_image(&image), "cuptiProfilerHostGetConfigImage");
    CUpti_Profiler_Host_GetNumOfPasses_Params passes{
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = config.size();
    passes.pConfigImage = config.data();
    check(m_lib.pass_count(&passes), "cuptiProfilerHostGetNumOfPasses");

    CUpti_RangeProfiler_Enable_Params enable{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = ctx;
    check(m_lib.enable(&enable), "cuptiRangeProfilerEnable");
    m_range = enable.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params data_size{
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pRangeProfilerObject = m_range;
    data_size.pMetricNames = names.data();
    data_size.numMetrics = names.size();
    data_size.maxNumOfRanges = 1;
    data_size.maxNumRangeTreeNodes = 1;
    check(m_lib.counter_data_size(&data_size), "cuptiRangeProfilerGetCounterDataSize");
    counter_data.resize(data_size.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params data_init{
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    data_init.pRangeProfilerObject = m_range;
    data_init.counterDataSize = counter_data.size();
    data_init.pCounterData = counter_data.data();
    check(m_lib.counter_data_initialize(&data_init),
          "cuptiRangeProfilerCounterDataImageInitialize");

    CUpti_RangeProfiler_SetConfig_Params set{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set.pRangeProfilerObject = m_range;
    set.configSize = config.size();
    set.pConfig = config.data();
    set.counterDataImageSize = counter_data.size();
    set.pCounterDataImage = counter_data.data();
    set.range = CUPTI_UserRange;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = 1;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    check(m_lib.set_config(&set), "cuptiRangeProfilerSetConfig");
    return passes.numOfPasses;
  }

  // Replays the call under the range until the profiler has every pass it asked for (at most
  // `pass_limit`), counting them in `out.passes`.
  void run_passes(const std::function<void()>& prepare, const std::function<std::string()>& call,
                  int pass_limit, cupti_values& out) {
    bool all_submitted = false;
    while (!all_submitted) {
      if (out.passes >= pass_limit) {
        throw failure{fmt::format("CUPTI asked for more than {} passes", pass_limit)};
      }
      prepare();
      CUpti_RangeProfiler_Start_Params start{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
      start.pRangeProfilerObject = m_range;
      check(m_lib.start(&start), "cuptiRangeProfilerStart");
      CUpti_RangeProfiler_PushRange_Params push{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
      push.pRangeProfilerObject = m_range;
      push.pRangeName = nvtx_range;
      check(m_lib.push_range(&push), "cuptiRangeProfilerPushRange");
      const std::string failed = call();
      CUpti_RangeProfiler_PopRange_Params pop{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
      pop.pRangeProfilerObject = m_range;
      m_lib.pop_range(&pop);
      CUpti_RangeProfiler_Stop_Params stop{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
      stop.pRangeProfilerObject = m_range;
      const CUptiResult stopped = m_lib.stop(&stop);
      if (!failed.empty()) {
        throw failure{"the candidate failed under CUPTI: " + failed};
      }
      check(stopped, "cuptiRangeProfilerStop");
      all_submitted = stop.isAllPassSubmitted != 0;
      ++out.passes;
    }
  }

  // Decodes the range's counters and evaluates the metrics into `out.values`.
  void read_values(std::vector<const char*>& names, const std::vector<std::string>& units,
                   std::vector<uint8_t>& counter_data, cupti_values& out) {
    CUpti_RangeProfiler_DecodeData_Params decode{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = m_range;
    check(m_lib.decode(&decode), "cuptiRangeProfilerDecodeData");
    CUpti_RangeProfiler_GetCounterDataInfo_Params info{
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    check(m_lib.counter_data_info(&info), "cuptiRangeProfilerGetCounterDataInfo");
    if (info.numTotalRanges < 1) {
      throw failure{"CUPTI recorded no range"};
    }
    std::vector<double> values(names.size());
    CUpti_Profiler_Host_EvaluateToGpuValues_Params eval{
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    eval.pHostObject = m_host;
    eval.pCounterDataImage = counter_data.data();
    eval.counterDataImageSize = counter_data.size();
    eval.rangeIndex = 0;
    eval.ppMetricNames = names.data();
    eval.numMetrics = names.size();
    eval.pMetricValues = values.data();
    check(m_lib.evaluate(&eval), "cuptiProfilerHostEvaluateToGpuValues");
    for (size_t i = 0; i < names.size(); ++i) {
      out.values[names[i]] = {values[i], units[i]};
    }
  }

  cupti_values collect(const std::function<void()>& prepare,
                       const std::function<std::string()>& call) {
    cupti_values out;
    const CUcontext ctx = open_profiler();
    std::vector<const char*> names;
    std::vector<std::string> units;
    add_metrics(names, units, out);
    std::vector<uint8_t> config;
    std::vector<uint8_t> counter_data;
    const size_t passes = configure(ctx, names, config, counter_data);
    // The scheduler asked for `passes`; the profiler says when it has them all.
    run_passes(prepare, call, static_cast<int>(passes) + 8, out);
    read_values(names, units, counter_data, out);
    out.available = true;
    return out;
  }

private:
  const cupti_library& m_lib;
  bool m_initialized = false;
  CUpti_Profiler_Host_Object* m_host = nullptr;
  CUpti_RangeProfiler_Object* m_range = nullptr;
};

} // namespace

std::string detail::cupti_load_error(const std::vector<std::string>& paths) {
  return load_library(paths).error;
}

cupti_values collect_cupti(const std::function<void()>& prepare,
                           const std::function<std::string()>& call) {
  // One profiler per process at a time.
  static std::mutex busy;
  const std::lock_guard<std::mutex> lock(busy);
  const auto started = std::chrono::steady_clock::now();
  cupti_values out;
  const auto& lib = library();
  if (!lib.loaded()) {
    out.reason = lib.error;
  } else {
    try {
      session s(lib);
      out = s.collect(prepare, call);
    } catch (const failure& f) {
      out.available = false;
      out.values.clear();
      out.reason = f.reason;
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

} // namespace kb::profile
