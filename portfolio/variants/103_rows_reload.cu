// Variant of 103 (RMSNorm deep case, bfloat16): the whole row in one step per pass on blocks of up
// to 512 threads of 1, 2 or 4 16-byte packs, summed, then read again (from L1) for the normalise
// and store instead of held in registers across the reduction (KB_RMSNORM_ROWS_L2PASS = 3,
// kblaster/device/portfolio/rmsnorm_rows.cuh). Inductor's kernel for F.rms_norm is a looped
// reduction that loads x twice; with its persistent-rblock configuration (the whole row per
// step) it has this shape, and torch.compile was 2-10% faster than the portfolio kernel from
// 4096 tokens up (evidence/h200/llm/). The 256-thread, 2-pack loop (10x_rows_l2pass) lost.
#define KB_RMSNORM_ROWS_L2PASS 3
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
