// Variant of 095: the portfolio's kernel until 78cc544 (replaced by the strategy loss.warp_row,
// 0.1552 ms against this kernel's 0.1570 in evidence/h200/variants/78cc544). Portfolio kernel,
// promoted from the variant 095_bmax (moved here): the fastest verified kernel of its task in
// evidence/h200/variants/d20297b (scripts/perf-variants.sh on the H200: 0.1565 ms, against 0.2025
// for the online-state kernel before it, now the variant 095_online; max-autotune took 0.1820 in
// evidence/h200/core10). Mean cross-entropy, fused log-softmax and gather in one read of the
// logits: a warp per row; each lane takes the maximum of a round of 8 float4 first and then one
// exponential per value against the running maximum (the online state pays a branch and an
// exponential on both paths per value), plain loads; the per-row losses summed in float64 in a
// fixed order by a second kernel (deterministic). Header:
// include/kblaster/device/portfolio/cross_entropy_rows.cuh. Bytes: 4 * N * C + 8 * N + 4 = 537 MB
// at 32768 x 4096; floor 0.125 ms at 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_CE_LOAD_HINT 0
#define KB_CE_FUSED_MEAN 0
#include <kblaster/device/portfolio/cross_entropy_rows.cuh>
