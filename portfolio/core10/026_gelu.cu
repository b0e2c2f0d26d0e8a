// Portfolio candidate for 026 (gelu), the elementwise family's streaming kernel: a grid sized to the
// data, 128 threads per block, 4 independent 16-byte loads per thread, plain loads and stores (from
// the variant 026_grid_t128v4h0 (moved here), the fastest of the variants in
// evidence/h200/variants/table.md; the persistent grid it replaces is
// include/kblaster/device/portfolio/elementwise_stream.cuh).
//
// Design (include/kblaster/device/portfolio/elementwise_grid.cuh): one tile of 128 x 4 float4 per
// block, every load of a thread issued before the first use, kb_op<float>::map on each value; full
// tiles run without bounds checks, the last block takes the partial tile and the n % 4 tail;
// unaligned tensors take a scalar grid-stride kernel.
//
// Bytes: 8 per element (read + write); floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 128
#define KB_EW_VECS 4
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
