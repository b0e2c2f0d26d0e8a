// Variant of 007 (A @ B, fp32, small K), the portfolio kernel until the strategy kernel with
// cp.async tile copies measured faster (2.639 ms against 3.104; evidence/h200/variants/d20297b):
// 3xTF32 on tensor cores (header include/kblaster/device/portfolio/gemm_tf32x3.cuh), 128 x 128 x 64
// block tile, 8 warps of 64 x 32, 2 blocks per SM, tiles loaded through registers (the float4
// instance spills 88 bytes at the 128-register cap), 8-byte streaming stores.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_MMA_MIN_BLOCKS 2
#define KB_MMA_KUNROLL 1
#include <kblaster/device/portfolio/gemm_tf32x3.cuh>
