// Variant of 023 (softmax over dim 1): the pipeline of 023_pipe_* (header
// include/kblaster/device/portfolio/softmax_pipeline.cuh) with one slice buffer per block: the
// next row's bulk copy starts only after this row's stores, as in the portfolio's cooperative
// kernel, but twice as many rows fit on chip; 2 block(s) of 512 threads per SM.
// Bytes: 8 * M * N = 12.9 GB at 4096 x 393216; floor 3.00 ms at 4.3 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_SOFTMAX_BLOCKS_PER_SM 2
#define KB_SOFTMAX_THREADS 512
#define KB_SOFTMAX_BUFFERS 1
#include <kblaster/device/portfolio/softmax_pipeline.cuh>
