// Variant of 103 (RMSNorm deep case, bfloat16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with evict-first loads of x and streaming stores of
// y (KB_RMSNORM_ROWS_PLAIN = 0), the portfolio kernel's form until the plain forms won: 32768 x
// 4096 0.1431 ms against 0.1350, 4096 x 4096 0.0207 against 0.0203
// (evidence/h200/variants/0343fe1/).
#define KB_RMSNORM_ROWS_PLAIN 0
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
