// Variant of 102 (RMSNorm deep case, float16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with the row's reduction by block_reduce_tree
// (KB_RMSNORM_ROWS_TREE = 1: one barrier, then a pairwise tree over the warps' partials in every
// warp's registers) instead of kb::block_reduce's three barriers and one thread's serial combine,
// with the portfolio's 4 packs per thread.
#define KB_RMSNORM_ROWS_TREE 1
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
