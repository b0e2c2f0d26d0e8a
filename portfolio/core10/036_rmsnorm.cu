// Portfolio kernel, promoted from the variant 036_plain_ldst (moved here): the fastest verified
// kernel of its task in evidence/h200/variants/a1a4ed8 (scripts/perf-variants.sh on the H200: 3.668
// ms, against 3.780 for the same kernel with streaming hints, now the variant 036_cs_ldst). RMSNorm
// over dim 1 of [B, C, H, W], 64 channels of stride H*W: one read and one write of x, the channel
// column kept in registers.
//
// Design: x is viewed as [outer, C, inner]. Each thread owns 2 neighbouring positions of the
// inner axis (8-byte loads; a warp reads 256 contiguous bytes per channel, a 128-thread block
// 1 KB) and loads all C <= 64 channel values of both into registers up front (128 independent
// loads in flight), folds them into the sum of squares in channel order (kb_op::accumulate),
// finalizes 1/rms (kb_op::finalize) and writes kb_op::apply with 8-byte stores
// (include/kblaster/device/portfolio/rmsnorm_columns.cuh, plain loads and stores). Odd inner sizes
// or unaligned tensors use 1 position per thread; more than 64 channels (or a sample of 2^32
// elements or more) fall back to a two-pass thread-per-column loop.
//
// Bytes: 8 * B * C * H * W = 15.0 GB at 112 x 64 x 512 x 512; floor 3.50 ms at 4.29 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_RMS_LOAD_HINT 0
#define KB_RMS_STORE_HINT 0
#include <kblaster/device/portfolio/rmsnorm_columns.cuh>
