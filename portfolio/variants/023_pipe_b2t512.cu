// Variant of 023 (softmax over dim 1): the row kept on chip (1 read + 1 write) across a group of
// resident blocks, each slice brought in by a bulk copy (TMA) one row ahead, so the next row's
// load overlaps this row's exchange of statistics and its stores (header
// include/kblaster/device/portfolio/softmax_pipeline.cuh); 2 block(s) of 512 threads per SM.
// The portfolio's cooperative kernel (023_coop16) loads a slice only after the previous one is
// written, and reached 2.5 TB/s (5.24 ms) where torch.compile's two-read kernel takes 4.67 ms.
// Bytes: 8 * M * N = 12.9 GB at 4096 x 393216; floor 3.00 ms at 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_SOFTMAX_BLOCKS_PER_SM 2
#define KB_SOFTMAX_THREADS 512
#include <kblaster/device/portfolio/softmax_pipeline.cuh>
