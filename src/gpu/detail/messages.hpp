// The judge-runner protocol: one struct per message, with its one JSON mapping. The judge owns
// every buffer; the runner knows them only by id, maps what it is sent and launches on request.
// A checked call and a timed call are the same `call` message.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kb::gpu::detail {

enum class message : uint32_t {
  map = 1,       // judge -> runner: {map_request} + one descriptor (a cuMem POSIX handle)
  load = 2,      // judge -> runner: {load_request}          reply: {load_reply}
  workspace = 3, // judge -> runner: {call_request}          reply: {workspace_reply}
  call = 4,      // judge -> runner: {call_request}          reply: {call_reply}
  sync = 5,      // judge -> runner: {}                       reply: {sync_reply}
  profile = 6,   // judge -> runner: {call_request}          reply: the profiler's JSON
  exit = 7,      // judge -> runner: {}
  wake = 8,      // judge -> runner: {}                       reply: {wake_reply}
  reply = 100,
};

// The runner maps the buffer read-only when `read_only` (GO: only the judge writes it), and
// always reserves one granule of address space more than it maps, left unmapped, so that the
// first byte past the buffer's end (where the judge places each tensor's end) faults.
struct map_request {
  uint32_t id = 0;
  uint64_t bytes = 0; // [bytes] of the allocation (granularity-aligned)
  bool read_only = false;
  uint64_t granularity = 0; // [bytes] the allocation granularity: the unmapped gap after it
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(map_request, id, bytes, read_only, granularity)
};

// GO and DONE live in buffers of their own: GO mapped read-only in the runner (the judge's
// stream alone writes it), DONE read-write (the runner's stream writes it behind the graph).
// `exact`: under a sanitizer, every tensor gets an exact allocation of its own for the call; said
// here, not in the runner's environment, so that a sanitized run and a plain one look alike to
// the candidate's process.
struct load_request {
  std::string path;     // the candidate's shared object; empty: the built-in empty kernel
  uint32_t go_id = 0;   // the buffer holding GO (offset 0)
  uint32_t done_id = 0; // the buffer holding DONE (offset 0)
  bool exact = false;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(load_request, path, go_id, done_id, exact)
};

struct load_reply {
  bool ok = false;
  std::string reason; // load.dlopen_failed, load.missing_kb_launch, runner.cuda
  std::string message;
  std::string info; // kb_candidate_info(), at most 500 bytes
  bool has_workspace = false;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(load_reply, ok, reason, message, info, has_workspace)
};

// A tensor as the runner sees it: a place in one of the judge's buffers.
struct tensor_ref {
  uint32_t buffer = 0;
  uint64_t offset = 0; // [bytes]
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(tensor_ref, buffer, offset, dtype, shape)
};

struct call_request {
  uint32_t seq = 0; // the GO value this call waits for; DONE gets it when the launch completes
  std::vector<tensor_ref> inputs;
  std::vector<tensor_ref> outputs;
  std::vector<double> scalars;
  uint32_t workspace_buffer = 0; // 0: none
  uint64_t workspace_offset = 0;
  uint64_t workspace_bytes = 0;
  bool counters = false; // profile only
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(call_request, seq, inputs, outputs, scalars, workspace_buffer,
                                 workspace_offset, workspace_bytes, counters)
};

// The runner's own clock (not trusted: it only names a broken rule; the judge's clock decides).
struct call_reply {
  int rc = 0;                // kb_launch's return code
  std::string launch_error;  // cudaGetLastError() after the call, "" when none
  std::string capture_error; // kb_launch broke the stream capture (it synchronised): no DONE
  std::string sync_error;    // the CUDA error of the work outside the stream: no DONE
  int64_t host_ns = 0;       // [ns] inside kb_launch
  int64_t graph_ns = 0;      // [ns] after kb_launch: the capture updated into the last graph or
                             // instantiated anew
  bool instantiated = false; // the capture could not update the last graph (a new one was made)
  int64_t outside_ns = 0;    // [ns] after the graph was ready, until work outside the stream ended
  int64_t prepare_ns = 0;    // [ns] before kb_launch: the previous graph released, capture begun
  int64_t launch_ns = 0;     // [ns] after the work outside the stream: the graph queued behind GO
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(call_reply, rc, launch_error, capture_error, sync_error, host_ns,
                                 graph_ns, instantiated, outside_ns, prepare_ns, launch_ns)
};

struct workspace_reply {
  int rc = 0;
  uint64_t bytes = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(workspace_reply, rc, bytes)
};

// A runner's first frame, sent once its CUDA context and stream exist and before it reads the
// load request: whatever ends the runner before it (a tool in front of it, the sandbox, no
// device) happened before any candidate code was loaded, so it is the judge's failure.
struct ready_reply {
  bool ready = true;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(ready_reply, ready)
};

// The answer to `wake`: the runner is awake and reading its socket. The judge wakes a runner
// before each call it times, so that the call's round trip holds the call and not the
// scheduler's wake-up of a runner that slept while other runners' calls ran.
struct wake_reply {
  bool awake = true;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(wake_reply, awake)
};

struct sync_reply {
  std::string error; // "" or the CUDA error name after synchronising the device
  bool sticky = false;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(sync_reply, error, sticky)
};

} // namespace kb::gpu::detail
