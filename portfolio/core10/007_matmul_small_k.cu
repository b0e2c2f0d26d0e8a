// Portfolio candidate for 007 (C = A @ B with small K, fp32 accuracy): tensor cores with the
// 3xTF32 split (the variant 007_tf32x3_mma, moved here, which won the variant run in
// evidence/h200/variants/table.md against the SIMT kernel now in portfolio/variants/007_simt_128x128.cu).
//
// Design (include/kblaster/device/portfolio/gemm_tf32x3.cuh): each fp32 operand split into
// big = tf32(v) and small = tf32(v - big); a_small * b_big + a_big * b_small + a_big * b_big
// accumulated in fp32 by mma.sync.m16n8k8, fixed order (bitwise reproducible), error about 2^-22
// of each product. Block tile 128 x 128, K in chunks of 64 in shared memory (bank-conflict-free
// pitches 68 and 136), 8 warps of 64 x 32, 2 blocks per SM at 128 registers, 8-byte streaming
// stores. K % 4 != 0, N % 4 != 0 or unaligned tensors load with guarded scalar code.
//
// Work at 32768 x 32768 x 64: 3 x 137 GFLOP of TF32 mma and 4.3 GB of output (1.0 ms at
// 4.3 TB/s).
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_MMA_MIN_BLOCKS 2
#define KB_MMA_KUNROLL 1
#include <kblaster/device/portfolio/gemm_tf32x3.cuh>
