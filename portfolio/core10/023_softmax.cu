// Portfolio kernel, promoted from the variant 023_pipe1_b2t512 (moved here): the fastest verified
// kernel of its task in evidence/h200/variants/023-8b33036 (scripts/perf-variants.sh on the H200:
// 4.607 ms, against 5.208 for the cooperative kernel before it, now the variant 023_coop16).
// Softmax over dim 1 with the row kept on chip (1 read + 1 write): a cooperative grid of resident
// blocks, 2 of 512 threads per SM, in groups of S; each group walks rows, block c of a group owning
// slice c of its row, loaded into shared memory by one bulk copy (TMA, mbarrier); the S partial
// (max, sum) states go through the workspace with an arrival counter per row, one warp reads them
// at once, and the block writes the output from shared memory (header
// include/kblaster/device/portfolio/softmax_pipeline.cuh, one slice buffer per block: the next
// row's copy starts after this row's stores, and twice as many rows fit on chip as with two
// buffers). Bytes: 8 * M * N = 12.9 GB at 4096 x 393216; floor 3.00 ms at 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_SOFTMAX_BLOCKS_PER_SM 2
#define KB_SOFTMAX_THREADS 512
#define KB_SOFTMAX_BUFFERS 1
#include <kblaster/device/portfolio/softmax_pipeline.cuh>
