// Variant of 007 (A @ B, fp32, small K): 3xTF32 on tensor cores at fp32 accuracy, 1 block per SM
// (no register cap), 2 k-steps unrolled. Design, bytes and FLOPs:
// include/kblaster/device/portfolio/gemm_tf32x3.cuh.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_MMA_MIN_BLOCKS 1
#define KB_MMA_KUNROLL 2
#include <kblaster/device/portfolio/gemm_tf32x3.cuh>
