// Portfolio kernel, promoted from the variant 019_grid_t64v2h0 (moved here): the fastest verified
// kernel of its task in evidence/h200/variants/d20297b (scripts/perf-variants.sh on the
// H200: 3.0271 ms, against 3.0368 for the 128 x 2 tile before it, now the variant
// 019_grid_t128v2h0; speedups over the baseline 1.166x [1.166, 1.167] and 1.163x [1.162, 1.163]).
// Elementwise relu, grid sized to the data: 64 threads per block (Triton's num_warps = 2), 2
// independent 16-byte loads per thread, plain loads and stores, full tiles unguarded (header
// include/kblaster/device/portfolio/elementwise_grid.cuh). Bytes: 8 per element (read + write);
// floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 64
#define KB_EW_VECS 2
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
