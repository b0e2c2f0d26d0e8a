// The calls the evaluation worker makes for the profiler, after the candidate passed its check.
#include "profile/profile.hpp"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace kb::profile {

using nlohmann::json;

gpu::protocol::profile_calls worker_calls(const std::function<void()>& prepare,
                                          const std::function<int()>& launch, void* stream_handle,
                                          bool counters, int samples) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  gpu::protocol::profile_calls out;
  // A failed call ends the profile; whether the context survived decides what the worker can
  // still do.
  // A failed synchronisation leaves the context unusable (sticky errors); a launch error does not.
  const auto failed = [&](const std::string& what, int rc, cudaError_t e, bool sync_failed) {
    out.failed = e != cudaSuccess
                     ? fmt::format("{}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e))
                     : fmt::format("{}: kb_launch returned {}", what, rc);
    out.context_lost = sync_failed;
    return out;
  };

  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    return failed("creating CUDA events", 0, cudaGetLastError(), false);
  }
  // `prepare` only enqueues the flush: whatever waits for it here says so.
  const auto prepared = [&] {
    prepare();
    cudaStreamSynchronize(stream);
  };
  // One call behind its flush, between the two events when `timed`; false when it failed (`out`
  // then says how).
  const auto call = [&](bool timed, const std::string& what) {
    prepare();
    if (timed) {
      cudaEventRecord(start, stream);
    }
    const int rc = launch();
    if (timed) {
      cudaEventRecord(stop, stream);
    }
    const cudaError_t synced = cudaStreamSynchronize(stream);
    const cudaError_t e = synced != cudaSuccess ? synced : cudaGetLastError();
    if (rc != 0 || e != cudaSuccess) {
      failed(what, rc, e, synced != cudaSuccess);
      return false;
    }
    return true;
  };
  const auto give_up = [&] {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return out;
  };
  // Untimed calls first, for at least `warmup_seconds` and `min_warmup_calls`: the module's lazy
  // loading, the first launch's set-up and the clocks' climb out of idle (on the H200 a kernel's
  // events settled only after some 20 ms of calls) belong to no call. Each timed call is then
  // enqueued behind its own flush while the GPU still runs it, so the events hold the call and
  // not the host's launch latency.
  const auto warmup_start = std::chrono::steady_clock::now();
  for (int i = 0; i < max_warmup_calls; ++i) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_start).count();
    if (i >= min_warmup_calls && elapsed >= warmup_seconds) {
      break;
    }
    if (!call(false, fmt::format("warm-up call {}", i + 1))) {
      return give_up();
    }
  }
  std::vector<double> times; // [s]
  for (int i = 0; i < samples; ++i) {
    if (!call(true, fmt::format("event-timed call {}", i + 1))) {
      return give_up();
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!times.empty()) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    out.event_times_s = times;
    out.event_median_s = sorted[sorted.size() / 2];
  }

  // The call Nsight Compute profiles, when it is attached: every kernel it launches and only
  // those are inside the range.
  prepared();
  nvtxRangePushA(nvtx_range);
  const int rc = launch();
  const cudaError_t synced = cudaStreamSynchronize(stream);
  const cudaError_t e = synced != cudaSuccess ? synced : cudaGetLastError();
  nvtxRangePop();
  if (rc != 0 || e != cudaSuccess) {
    return failed("the call in the NVTX range", rc, e, synced != cudaSuccess);
  }
  out.nvtx_range = nvtx_range;

  if (counters) {
    const auto v = collect_cupti(prepared, [&]() -> std::string {
      const int code = launch();
      cudaError_t err = cudaStreamSynchronize(stream);
      if (err == cudaSuccess) {
        err = cudaGetLastError();
      }
      if (err != cudaSuccess) {
        return fmt::format("{} ({})", cudaGetErrorName(err), cudaGetErrorString(err));
      }
      return code != 0 ? fmt::format("kb_launch returned {}", code) : "";
    });
    out.counters = v.to_json();
  }
  return out;
}

} // namespace kb::profile
