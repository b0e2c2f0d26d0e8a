// Variant of 095 (mean cross-entropy): a warp per row with the lane's maximum taken per round of 8
// float4 before one exponential per value (header
// include/kblaster/device/portfolio/cross_entropy_rows.cuh); evict-first loads, the mean in a
// second kernel. The portfolio kernel folds every value into the online state (a branch and an
// exponential on both paths per value) and reached 0.2024 ms against max-autotune's 0.1820
// (evidence/h200/core10/report.md). Bytes: 4 * N * C + 8 * N + 4 = 537 MB at 32768 x 4096; floor
// 0.125 ms at 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_CE_LOAD_HINT 1
#define KB_CE_FUSED_MEAN 0
#include <kblaster/device/portfolio/cross_entropy_rows.cuh>
