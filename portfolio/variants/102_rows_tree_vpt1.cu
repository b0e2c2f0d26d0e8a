// Variant of 102 (RMSNorm deep case, float16): the portfolio kernel
// (kblaster/device/portfolio/rmsnorm_rows.cuh) with the row's reduction by block_reduce_tree
// (KB_RMSNORM_ROWS_TREE = 1: one barrier, then a pairwise tree over the warps' partials in every
// warp's registers) instead of kb::block_reduce's three barriers and one thread's serial combine,
// and 1 16-byte pack(s) of x per thread where a row fits that in one block of 512 threads
// (KB_RMSNORM_ROWS_VPT = 1). 10x_rows_vpt1 (kb::block_reduce) lost or tied at 4096 x 4096
// (evidence/h200/variants/b9c9a72) while Inductor's kernel, one row per block of 512 threads, beat
// ours: this measures whether the serial combine was the cost.
#define KB_RMSNORM_ROWS_VPT 1
#define KB_RMSNORM_ROWS_TREE 1
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
