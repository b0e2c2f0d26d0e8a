// Portfolio candidate for 088 (new_gelu), the elementwise family's streaming kernel: a grid sized
// to the data, 128 threads per block, 1 independent 16-byte load per thread, plain loads and
// stores: tiles of 512 floats (from the variant 088_grid_t128v1h0 (moved here), the fastest in
// evidence/h200/variants/elementwise-0b35fb1: 0.1304 ms against 0.1315 ms for the 128 x 4 tile it
// replaces, now a variant).
//
// Design (include/kblaster/device/portfolio/elementwise_grid.cuh): one tile of 128 x 1 float4 per
// block, every load of a thread issued before the first use, kb_op<float>::map on each value; full
// tiles run without bounds checks, the last block takes the partial tile and the n % 4 tail;
// unaligned tensors take a scalar grid-stride kernel.
//
// Bytes: 8 per element (read + write); floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 128
#define KB_EW_VECS 1
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
