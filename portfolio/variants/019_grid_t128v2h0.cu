// Variant of 019, the portfolio kernel until 019_grid_t64v2h0 measured faster (3.0271 ms against
// 3.0368; evidence/h200/variants/d20297b). The elementwise family's streaming kernel: a grid sized
// to the data, 128 threads per block, 2 independent 16-byte loads per thread, plain loads and
// stores: tiles of 1024 floats, the size PyTorch's and Triton's elementwise kernels use (from the
// variant 019_grid_t128v2h0 (moved here), the fastest in
// evidence/h200/variants/elementwise-4cb185d: 3.020 ms against 3.092 ms for the 256 x 2 tile it
// replaces, now a variant).
//
// Design (include/kblaster/device/portfolio/elementwise_grid.cuh): one tile of 128 x 2 float4 per
// block, every load of a thread issued before the first use, kb_op<float>::map on each value; full
// tiles run without bounds checks, the last block takes the partial tile and the n % 4 tail;
// unaligned tensors take a scalar grid-stride kernel.
//
// Bytes: 8 per element (read + write); floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 128
#define KB_EW_VECS 2
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
