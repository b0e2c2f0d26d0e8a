// Variant of 019: elementwise, grid sized to the data, 256 threads per block, 2 independent 16-byte
// loads per thread, streaming hints 0 (2: ld.global.nc.L1::no_allocate.L2::256B, 1:
// ld/st.global.cs, 0: plain). Full tiles run unguarded. The portfolio's kernel until the H200 run
// in evidence/h200/variants/elementwise-4cb185d measured 019_grid_t128v2h0 faster (3.020 ms
// against 3.092). Bytes: 8 bytes per element (read + write); floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 256
#define KB_EW_VECS 2
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
