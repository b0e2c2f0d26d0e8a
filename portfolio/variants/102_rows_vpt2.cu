// Variant of 102 (RMSNorm deep case, float16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with 2 16-byte pack(s) of x per thread where a row
// fits that in one block of 512 threads (KB_RMSNORM_ROWS_VPT = 2; the portfolio kernel takes 4),
// longer rows as the portfolio kernel. torch.compile's kernel was 3-12% faster from 4096 tokens up
// (evidence/h200/llm/); this measures whether more, lighter threads per row close that.
#define KB_RMSNORM_ROWS_VPT 2
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
