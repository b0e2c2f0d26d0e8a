// Variant of 102 (RMSNorm deep case, float16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with the row's reduction behind one barrier, every
// thread combining the warps' partials in warp order (KB_RMSNORM_ROWS_ONE_BARRIER = 1), instead
// of kb::block_reduce's three barriers and one thread's serial combine. At 4096 tokens the
// one-row kernel ran at 70.8%-84.5% of the floor (evidence/h200/llm/); the reduction sits
// between a row's loads and its stores.
#define KB_RMSNORM_ROWS_ONE_BARRIER 1
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
