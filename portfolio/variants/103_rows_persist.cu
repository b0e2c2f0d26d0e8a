// Variant of 103 (RMSNorm deep case, bfloat16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) on a grid of the blocks that fit on the device at
// once, each walking rows with the next row's loads issued before this row's reduction and stores,
// the weight loaded once per block, plain loads and stores (KB_RMSNORM_ROWS_PERSIST,
// KB_RMSNORM_ROWS_PLAIN). evidence/h200/llm (build 78cc544): at 4096 tokens the one-row-per-block
// kernel ran at 70.8%-84.5% of the floor.
#define KB_RMSNORM_ROWS_PERSIST 1
#define KB_RMSNORM_ROWS_PLAIN 1
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
