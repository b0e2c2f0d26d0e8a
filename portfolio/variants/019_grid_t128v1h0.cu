// Variant of 019: elementwise, grid sized to the data, 128 threads per block, 1 independent 16-byte
// loads per thread, streaming hints 0 (2: ld.global.nc.L1::no_allocate.L2::256B, 1:
// ld/st.global.cs, 0: plain). Full tiles run unguarded. Bytes: 8 bytes per element (read + write);
// floor = bytes / 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_EW_THREADS 128
#define KB_EW_VECS 1
#define KB_EW_HINTS 0
#include <kblaster/device/portfolio/elementwise_grid.cuh>
