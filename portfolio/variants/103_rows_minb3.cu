// Variant of 103 (RMSNorm deep case, bfloat16): 103_rows_onebar with launch bounds asking for 3
// blocks of 512 threads per SM (KB_RMSNORM_ROWS_MIN_BLOCKS = 3: at most 42 registers per thread),
// so more rows are in flight per SM: fp32 hidden 4096 takes 50 registers otherwise, 4 rows of
// 256 threads per SM; capped, 6. At 4096 tokens the one-row kernel ran at 70.8%-84.5% of the
// floor (evidence/h200/llm/).
#define KB_RMSNORM_ROWS_ONE_BARRIER 1
#define KB_RMSNORM_ROWS_MIN_BLOCKS 3
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
