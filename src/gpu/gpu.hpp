// The GPU-side processes of an evaluation. The judge (`kblaster worker`) is trusted: it never
// loads candidate code. It allocates every tensor in memory it can share, generates inputs, runs
// the task's oracle, poisons, compares, digests, times on its own stream and decides. One runner
// (`kblaster runner`) per candidate, sandboxed, loads that candidate's shared object and only
// launches it on request, on views of the judge's memory imported through file descriptors.
// docs/evaluation.md describes the protocol and docs/sandbox.md the runner's isolation.
#pragma once

#include "gpu/protocol.hpp"

#include <functional>

namespace kb::gpu {

// `kblaster worker`: reads one job per line from stdin, writes events to $KBLASTER_RESULT_FD.
int judge_main();

// The profiler's calls the runner makes when the judge asks for them (profile::worker_calls,
// which the CLI hands in: the profiler sits above gpu/). `prepare` enqueues the L2 flush on
// `stream` (a cudaStream_t), `launch` enqueues one call there and returns kb_launch's code;
// `counters`: CUPTI's counters around one more call.
using profile_calls_fn = std::function<protocol::profile_calls(const std::function<void()>& prepare,
                                                               const std::function<int()>& launch,
                                                               void* stream, bool counters)>;

// `kblaster runner`: serves the judge on the socket named by $KBLASTER_RUNNER_FD.
int runner_main(const profile_calls_fn& profile_calls);

} // namespace kb::gpu
