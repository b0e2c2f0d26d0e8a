// Variant of 019: elementwise, grid sized to the data, 64 threads per block, 4 independent 16-byte
// loads per thread, plain loads and stores. Full tiles run unguarded. The portfolio's 128 x 2
// tile took 3.0244 ms against max-autotune's 3.0045 (evidence/h200/core10/report.md); 64-thread
// blocks (Triton's num_warps = 2) were not yet measured.
// Bytes: 8 bytes per element (read + write); floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 64
#define KB_EW_VECS 4
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
