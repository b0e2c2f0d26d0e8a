// Portfolio candidate for 036 (RMSNorm over dim 1 of [B, C, H, W], 64 channels of stride H*W):
// one read and one write of x, the channel column kept in registers.
//
// Design: x is viewed as [outer, C, inner]. Each thread owns 2 neighbouring positions of the
// inner axis (8-byte loads; a warp reads 256 contiguous bytes per channel, a 128-thread block
// 1 KB) and loads all C <= 64 channel values of both into registers up front (128 independent
// loads in flight, evict-first), folds them into the sum of squares in channel order
// (kb_op::accumulate), finalizes 1/rms (kb_op::finalize) and writes kb_op::apply with 8-byte
// streaming stores (include/kblaster/device/portfolio/rmsnorm_columns.cuh, both hints 1). Odd
// inner sizes or unaligned tensors use 1 position per thread; more than 64 channels (or a sample
// of 2^32 elements or more) fall back to a two-pass thread-per-column loop.
//
// Bytes: 8 * B * C * H * W = 15.0 GB at 112 x 64 x 512 x 512; floor 3.50 ms at 4.3 TB/s.
// Predicted 3.6-3.8 ms (1.03-1.09x of the floor), against 3.70 ms for the fastest PyTorch method
// (torch.compile max-autotune): this one is about matching it, the pattern is already simple.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_RMS_LOAD_HINT 1
#define KB_RMS_STORE_HINT 1
#include <kblaster/device/portfolio/rmsnorm_columns.cuh>
