// Variant of 036_rmsnorm: the same kernel (include/kblaster/device/portfolio/rmsnorm_columns.cuh)
// with evict-first loads and streaming stores (ld/st.global.cs), the portfolio kernel until plain
// loads and stores measured faster (3.780 ms against 3.668; evidence/h200/variants/a1a4ed8).
// Bytes: 8 * B * C * H * W = 15.0 GB at 112 x 64 x 512 x 512; floor 3.50 ms at 4.29 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_RMS_LOAD_HINT 1
#define KB_RMS_STORE_HINT 1
#include <kblaster/device/portfolio/rmsnorm_columns.cuh>
