// The runner: one sandboxed process per candidate. It loads the candidate's shared object,
// imports the judge's buffers it is sent, and launches the candidate when asked, on its own
// stream, gated by the judge's GO value and followed by its DONE value. It decides nothing:
// whatever it replies is checked by the judge, and what it prints goes to a file only the judge
// reads back as bytes.
#include "gpu/detail/channel.hpp"
#include "gpu/detail/kernels.hpp"
#include "gpu/detail/messages.hpp"
#include "gpu/device_ops.hpp"
#include "gpu/gpu.hpp"

#include "gpu/detail/driver.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

namespace kb::gpu {

namespace {

using nlohmann::json;
using namespace detail;

using launch_fn = int (*)(const kb_args*);
using workspace_fn = int (*)(const kb_args*, uint64_t*);
using info_fn = const char* (*)();

[[noreturn]] void die(const std::string& why) {
  fmt::print(stderr, "kblaster runner: {}\n", why);
  std::_Exit(3);
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    KB_CU(cuGetErrorName)(r, &name);
    die(fmt::format("{}: {}", what, name != nullptr ? name : "?"));
  }
}

struct runner {
  int sock = -1;
  profile_calls_fn profile_calls; // the profiler's calls (runner_main's argument)
  cudaStream_t stream = nullptr;
  cudaGraphExec_t graph = nullptr; // the last call's kb_launch, captured
  std::map<uint32_t, CUdeviceptr> mapped;
  launch_fn launch = nullptr;
  workspace_fn workspace = nullptr;
  bool empty = false;
  CUdeviceptr go = 0;   // read-only here: only the judge's stream writes it
  CUdeviceptr done = 0; // written by this runner's stream behind each call's graph
  std::vector<double> scalars;
  std::vector<kb_tensor> ins;
  std::vector<kb_tensor> outs;
  // Under a sanitizer: every tensor gets an exact allocation of its own for the call (copied in
  // before, copied back after), so that one element past the end is outside any allocation.
  bool exact = false;
  struct exact_copy {
    void* shared;
    void* own;
    size_t bytes;
  };
  std::vector<exact_copy> copies;

  void* exact_alloc(void* shared, size_t bytes) {
    void* own = nullptr;
    if (cudaMalloc(&own, bytes) != cudaSuccess ||
        cudaMemcpyAsync(own, shared, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) {
      die("cannot make an exact copy of a tensor");
    }
    copies.push_back({shared, own, bytes});
    return own;
  }
  void exact_release() {
    for (const auto& c : copies) {
      cudaFree(c.own);
    }
    copies.clear();
  }

  void reply(const json& j) const {
    if (!send_frame(sock, static_cast<uint32_t>(message::reply), j.dump())) {
      std::_Exit(0); // the judge is gone
    }
  }

  void map(const map_request& m, int fd) {
    CUmemGenericAllocationHandle h{};
    check(KB_CU(cuMemImportFromShareableHandle)(&h,
                                                reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
    ::close(fd);
    // One granule more address space than the mapping, left unmapped: the judge places each
    // tensor's end at the end of its allocation, so a read one byte past it faults here, in
    // plain runs as under a sanitizer.
    CUdeviceptr p = 0;
    check(KB_CU(cuMemAddressReserve)(&p, m.bytes + m.granularity, 0, 0, 0), "cuMemAddressReserve");
    check(KB_CU(cuMemMap)(p, m.bytes, 0, h, 0), "cuMemMap");
    CUdevice dev = 0;
    // cuCtxGetDevice is looked up by version, and its CUDA 13 entry point takes a context too:
    // the runtime's current device ordinal names the same device.
    int ordinal = 0;
    if (cudaGetDevice(&ordinal) != cudaSuccess) {
      fail("the runner has no current CUDA device");
    }
    check(KB_CU(cuDeviceGet)(&dev, ordinal), "cuDeviceGet");
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags =
        m.read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(KB_CU(cuMemSetAccess)(p, m.bytes, &access, 1), "cuMemSetAccess");
    KB_CU(cuMemRelease)(h); // the mapping keeps the memory
    mapped[m.id] = p;
  }

  void* address(uint32_t buffer, uint64_t offset) const {
    const auto it = mapped.find(buffer);
    if (it == mapped.end()) {
      die(fmt::format("buffer {} was never mapped", buffer));
    }
    return reinterpret_cast<void*>(it->second + offset);
  }

  kb_args args(const call_request& c) {
    ins.clear();
    outs.clear();
    for (const auto& t : c.inputs) {
      ins.push_back(
          contiguous_view(address(t.buffer, t.offset), static_cast<kb_dtype>(t.dtype), t.shape));
    }
    for (const auto& t : c.outputs) {
      outs.push_back(
          contiguous_view(address(t.buffer, t.offset), static_cast<kb_dtype>(t.dtype), t.shape));
    }
    scalars = c.scalars;
    void* ws = c.workspace_buffer != 0 ? address(c.workspace_buffer, c.workspace_offset) : nullptr;
    if (exact) {
      for (auto* list : {&ins, &outs}) {
        for (auto& t : *list) {
          int64_t n = 1;
          for (int i = 0; i < t.ndim; ++i) {
            n *= t.shape[i];
          }
          t.data = exact_alloc(t.data, static_cast<size_t>(n) * dtype_bytes(t.dtype));
        }
      }
      if (ws != nullptr) {
        ws = exact_alloc(ws, c.workspace_bytes);
      }
    }
    return make_args(ins, outs, scalars, ws, c.workspace_bytes, stream);
  }

  load_reply load(const load_request& l) {
    load_reply r;
    go = reinterpret_cast<CUdeviceptr>(address(l.go_id, 0));
    done = reinterpret_cast<CUdeviceptr>(address(l.done_id, 0));
    exact = l.exact;
    if (l.path.empty()) {
      empty = true;
      r.ok = true;
      r.info = "empty kernel (calibration)";
      return r;
    }
    void* handle = dlopen(l.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      r.reason = "load.dlopen_failed";
      r.message = err != nullptr ? err : "dlopen failed";
      return r;
    }
    launch = reinterpret_cast<launch_fn>(dlsym(handle, "kb_launch"));
    if (launch == nullptr) {
      r.reason = "load.missing_kb_launch";
      r.message = "the shared object exports no kb_launch";
      return r;
    }
    workspace = reinterpret_cast<workspace_fn>(dlsym(handle, "kb_workspace_bytes"));
    r.has_workspace = workspace != nullptr;
    if (auto info = reinterpret_cast<info_fn>(dlsym(handle, "kb_candidate_info"));
        info != nullptr) {
      const char* s = info();
      r.info = s != nullptr ? std::string(s).substr(0, 500) : "";
    }
    r.ok = true;
    return r;
  }

  int invoke(const kb_args& a) { return empty ? launch_empty(stream) : launch(&a); }

  // One call. kb_launch runs under stream capture of the given stream (relaxed mode: calls that
  // are not stream work, such as cudaMemcpyToSymbol, still work), so what it queues there, and on
  // any stream it forks from it and joins back, becomes a graph. Work it does elsewhere runs at
  // once and is waited for here, before the reply: it falls on the judge's round-trip clock, not
  // in the window. Then the graph is queued behind GO, with DONE after it, and only the judge's
  // GO starts it: the window holds exactly the call's stream work. A call that synchronises on
  // its stream breaks the capture and is refused. The host times in the reply are the runner's
  // own clock (not trusted: they name a rule; the judge's clock decides).
  call_reply call(const call_request& c) {
    const kb_args a = args(c);
    call_reply r;
    using clock = std::chrono::steady_clock;
    const auto ns = [](clock::time_point a0, clock::time_point a1) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(a1 - a0).count();
    };
    const auto tp = clock::now();
    if (const cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
        e != cudaSuccess) {
      r.sync_error = cudaGetErrorName(e);
      return r;
    }
    const auto t0 = clock::now();
    r.prepare_ns = ns(tp, t0);
    r.rc = invoke(a);
    const auto t1 = clock::now();
    cudaGraph_t g = nullptr;
    const cudaError_t ce = cudaStreamEndCapture(stream, &g);
    const cudaError_t le = cudaGetLastError();
    r.launch_error = le == cudaSuccess ? "" : cudaGetErrorName(le);
    if (ce != cudaSuccess || g == nullptr) {
      r.capture_error = cudaGetErrorName(ce);
      if (g != nullptr) {
        cudaGraphDestroy(g);
      }
      cudaDeviceSynchronize();
      cudaGetLastError();
      return r;
    }
    // The previous call's executable graph takes this call's parameters when the two captures
    // have the same shape (every honest call after the first): an update costs a fraction of an
    // instantiation, which grows with the graph's nodes and falls on the round trip. Any other
    // capture is instantiated anew. Either way the launch runs exactly this call's capture.
    // Under a sanitizer every capture is instantiated anew: nothing is timed there, and a
    // refused update (the check shapes' graphs differ) is an API error that memcheck counts.
    bool updated = false;
    if (graph != nullptr && !exact) {
      cudaGraphExecUpdateResultInfo info{};
      updated = cudaGraphExecUpdate(graph, g, &info) == cudaSuccess &&
                info.result == cudaGraphExecUpdateSuccess;
      if (!updated) {
        cudaGetLastError();
      }
    }
    if (!updated) {
      release_graph();
    }
    const cudaError_t ie = updated ? cudaSuccess : cudaGraphInstantiate(&graph, g, 0);
    cudaGraphDestroy(g);
    const auto tg = clock::now();
    r.graph_ns = ns(t1, tg);
    r.instantiated = !updated;
    if (ie != cudaSuccess) {
      graph = nullptr;
      r.capture_error = cudaGetErrorName(ie);
      return r;
    }
    // Work outside the captured stream, done now (before the window).
    const cudaError_t de = cudaDeviceSynchronize();
    const auto t2 = clock::now();
    r.host_ns = ns(t0, t1);
    r.outside_ns = ns(tg, t2);
    if (de != cudaSuccess) {
      r.sync_error = cudaGetErrorName(de);
      return r;
    }
    // Under a sanitizer (exact allocations) nothing is timed, and initcheck waits for a graph's
    // stream before it launches it: there the graph runs at once, without the wait for GO.
    if (!exact) {
      check(KB_CU(cuStreamWaitValue32)(reinterpret_cast<CUstream>(stream), go, c.seq,
                                       CU_STREAM_WAIT_VALUE_GEQ),
            "cuStreamWaitValue32");
    }
    if (const cudaError_t e = cudaGraphLaunch(graph, stream); e != cudaSuccess) {
      r.sync_error = cudaGetErrorName(e);
      return r;
    }
    for (const auto& x : copies) {
      cudaMemcpyAsync(x.shared, x.own, x.bytes, cudaMemcpyDeviceToDevice, stream);
    }
    // DONE follows the graph on the stream; on a failed stream it never comes, and the judge's
    // hang limit ends the call.
    KB_CU(cuStreamWriteValue32)(reinterpret_cast<CUstream>(stream), done, c.seq, 0);
    r.launch_ns = ns(t2, clock::now());
    return r;
  }

  // The last executable graph, when the next capture cannot update it.
  void release_graph() {
    if (graph != nullptr) {
      cudaGraphExecDestroy(graph);
      graph = nullptr;
    }
  }

  int serve() {
    while (true) {
      frame f;
      const auto st = receive_frame(sock, f, -1, message_spin_us);
      if (st != recv_status::ok) {
        return 0;
      }
      const auto type = static_cast<message>(f.type);
      const json body = f.payload.empty() ? json::object() : json::parse(f.payload);
      switch (type) {
      case message::map:
        if (f.fds.size() != 1) {
          die("a map message without its descriptor");
        }
        map(body.get<map_request>(), f.fds[0]);
        break;
      case message::load:
        reply(load(body.get<load_request>()));
        break;
      case message::workspace: {
        workspace_reply r;
        if (workspace != nullptr) {
          const kb_args a = args(body.get<call_request>());
          r.rc = workspace(&a, &r.bytes);
        }
        reply(r);
        break;
      }
      case message::call:
        reply(call(body.get<call_request>()));
        break;
      case message::sync: {
        // The executable graph stays (idle now) for the next call to update; under a sanitizer
        // it goes with the exact allocations it was captured on.
        const cudaError_t e = cudaDeviceSynchronize();
        if (exact) {
          release_graph();
        }
        exact_release();
        sync_reply r;
        if (e != cudaSuccess) {
          r.error = cudaGetErrorName(e);
          r.sticky = cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess;
        }
        reply(r);
        break;
      }
      case message::profile: {
        const auto c = body.get<call_request>();
        const kb_args a = args(c);
        int dev = 0;
        cudaGetDevice(&dev);
        int l2 = 0;
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
        const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), size_t(128) << 20);
        void* flush = nullptr;
        if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {
          die("cannot allocate the L2 flush buffer");
        }
        const auto out = profile_calls([&] { cudaMemsetAsync(flush, 0, flush_bytes, stream); },
                                       [&] { return invoke(a); }, stream, c.counters);
        cudaFree(flush);
        reply(json(out));
        break;
      }
      case message::wake:
        reply(wake_reply{});
        break;
      case message::exit:
        return 0;
      default:
        die(fmt::format("unknown message {}", f.type));
      }
      for (int fd : f.fds) {
        if (type != message::map) {
          ::close(fd);
        }
      }
    }
  }
};

} // namespace

int runner_main(const profile_calls_fn& profile_calls) {
  const char* fd_env = std::getenv("KBLASTER_RUNNER_FD");
  if (fd_env == nullptr) {
    fmt::print(stderr, "kblaster runner: KBLASTER_RUNNER_FD is not set (the runner is started by "
                       "kblaster's judge)\n");
    return 2;
  }
  runner r;
  r.sock = std::atoi(fd_env);
  r.profile_calls = profile_calls;
  // Spin while waiting for the device: the window's host steps (GO seen, device idle) cost
  // microseconds, not a scheduler's wake-up.
  cudaSetDeviceFlags(cudaDeviceScheduleSpin);
  if (cudaFree(nullptr) != cudaSuccess) {
    die("no CUDA device");
  }
  if (cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking) != cudaSuccess) {
    die("cannot create a stream");
  }
  r.reply(ready_reply{});
  try {
    return r.serve();
  } catch (const std::exception& e) {
    die(e.what());
  }
}

} // namespace kb::gpu
