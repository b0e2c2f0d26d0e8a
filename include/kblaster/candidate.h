/* KernelBlaster candidate ABI, version 1.
 *
 * A candidate is one CUDA source file that defines `kb_launch` (and optionally
 * `kb_workspace_bytes` and `kb_candidate_info`). The harness compiles it into a shared
 * object for the device's architecture and calls it from a worker process.
 *
 * Rules a candidate must follow (the harness checks each of them):
 *  - Shapes, strides and dtypes arrive at run time; nothing about them may be compiled in.
 *  - All device work is enqueued on `args->stream`; nothing else, no other stream, no
 *    synchronisation of the device. kb_launch runs under stream capture of `args->stream`:
 *    work forked to another stream through events must be joined back to it, and a call that
 *    synchronises with or queries the stream is refused. Work done anywhere else runs before
 *    the timed window and is rejected.
 *  - Inputs are read-only. Every element of every output is written on every call.
 *  - Scratch memory comes only from `args->workspace` (sized by `kb_workspace_bytes`).
 *  - Return 0 on success; any other value means "this candidate refuses these arguments"
 *    (for example an unsupported dtype) and is recorded as a rejection.
 */
#ifndef KBLASTER_CANDIDATE_H
#define KBLASTER_CANDIDATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KB_ABI_VERSION 1
#define KB_MAX_DIMS 8

typedef enum kb_dtype {
  KB_FLOAT32 = 0,
  KB_FLOAT16 = 1,
  KB_BFLOAT16 = 2,
  KB_FLOAT64 = 3,
  KB_INT64 = 4,
  KB_INT32 = 5
} kb_dtype;

typedef struct kb_tensor {
  void* data; /* device memory */
  kb_dtype dtype;
  int32_t ndim;
  int64_t shape[KB_MAX_DIMS];
  int64_t strides[KB_MAX_DIMS]; /* in elements, not bytes */
} kb_tensor;

struct CUstream_st;

typedef struct kb_args {
  int32_t abi_version; /* KB_ABI_VERSION of the harness */
  int32_t num_inputs;
  const kb_tensor* inputs; /* in the order of the task contract's [[inputs]] */
  int32_t num_outputs;
  const kb_tensor* outputs; /* in the order of the task contract's [[outputs]] */
  int32_t num_scalars;
  const double* scalars; /* in the order of the task contract's [[params]] */
  void* workspace;       /* device memory, kb_workspace_bytes() long, or NULL */
  uint64_t workspace_bytes;
  struct CUstream_st* stream; /* the only stream the candidate may launch on */
} kb_args;

#if defined(_WIN32)
#define KB_EXPORT __declspec(dllexport)
#else
#define KB_EXPORT __attribute__((visibility("default")))
#endif

/* Required: enqueue the computation on args->stream. */
KB_EXPORT int kb_launch(const kb_args* args);

/* Optional: the scratch memory this call needs; the harness allocates it outside any timed
 * region and passes it as args->workspace. `args->workspace` is NULL during this query. */
KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes);

/* Optional: a one-line description (strategy and parameters) recorded with the candidate. */
KB_EXPORT const char* kb_candidate_info(void);

#ifdef __cplusplus
}
#endif

#endif /* KBLASTER_CANDIDATE_H */
