// The GPU-side processes of an evaluation. The judge (`kblaster worker`) is trusted: it never
// loads candidate code. It allocates every tensor in memory it can share, generates inputs, runs
// the task's oracle, poisons, compares, digests, times on its own stream and decides. One runner
// (`kblaster runner`) per candidate, sandboxed, loads that candidate's shared object and only
// launches it on request, on views of the judge's memory imported through file descriptors.
// docs/evaluation.md describes the protocol and docs/sandbox.md the runner's isolation.
#pragma once

namespace kb::gpu {

// `kblaster worker`: reads one job per line from stdin, writes events to $KBLASTER_RESULT_FD.
int judge_main();

// `kblaster runner`: serves the judge on the socket named by $KBLASTER_RUNNER_FD.
int runner_main();

} // namespace kb::gpu
