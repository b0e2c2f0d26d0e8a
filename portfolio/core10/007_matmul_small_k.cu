// Portfolio kernel, promoted from portfolio/variants/007_tf32x3_mma.cu: the fastest verified kernel of its task in
// evidence/h200/variants/table.md (scripts/perf-variants.sh on the H200).
// Variant of 007 (A @ B, fp32, small K): 3xTF32 on tensor cores at fp32 accuracy, 2 blocks per SM (128 registers), k-steps not unrolled.
// Design, bytes and FLOPs: include/kblaster/device/portfolio/gemm_tf32x3.cuh.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_MMA_MIN_BLOCKS 2
#define KB_MMA_KUNROLL 1
#include <kblaster/device/portfolio/gemm_tf32x3.cuh>
