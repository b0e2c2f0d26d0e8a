// Variant of 101 (RMSNorm deep case, float32): the portfolio kernel (kblaster/device/portfolio/rmsnorm_rows.cuh)
// with plain loads of x and plain stores of y instead of evict-first loads and streaming stores.
// evidence/h200/llm (build 78cc544): from 4096 tokens up the portfolio kernel ran at 71%-93% of
// the floor, 0.87x-0.93x of torch.compile's kernels, which run at the copy ceiling; on the H200
// the plain forms were faster for the elementwise kernels (019: 3.121 ms against 3.316 with the
// hints) and for the Core 10 RMSNorm (3.668 against 3.780).
#define KB_RMSNORM_ROWS_PLAIN 1
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
