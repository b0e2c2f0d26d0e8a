// Variant of 102 (RMSNorm deep case, float16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with at most 6 rows (blocks) per SM, capped by
// unused dynamic shared memory (KB_RMSNORM_ROWS_CAP_BLOCKS = 6; the portfolio kernel has 9 at
// hidden 4096). Measures whether fewer loads in flight per SM contend less with the write-back of
// the dirty lines the judge's L2 flush leaves: under Nsight Compute (clean caches) our kernels
// are shorter than Inductor's at 4096 x 4096, under the judge's protocol slower (0.90x-0.95x of
// the fastest method; evidence/h200/llm/profiles-d3d07ce).
#define KB_RMSNORM_ROWS_CAP_BLOCKS 6
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
