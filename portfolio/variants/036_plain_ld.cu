// Variant of 036_rmsnorm: the same kernel (include/kblaster/device/portfolio/rmsnorm_columns.cuh)
// with plain loads, streaming stores. On the H200 the streaming hints made a plain
// elementwise stream slower (evict-first loads 3.28 ms against 3.09, streaming stores 3.13), and
// the portfolio's RMSNorm uses both.
// Bytes: 8 * B * C * H * W = 15.0 GB at 112 x 64 x 512 x 512; floor 3.50 ms at 4.29 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_RMS_LOAD_HINT 0
#define KB_RMS_STORE_HINT 1
#include <kblaster/device/portfolio/rmsnorm_columns.cuh>
