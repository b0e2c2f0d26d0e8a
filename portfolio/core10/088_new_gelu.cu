// Portfolio candidate for 088 (new_gelu), the elementwise family's streaming kernel.
//
// Design: a persistent grid (as many 256-thread blocks as fit on each SM) walks the tensor in tiles of
// 256 x 4 float4; each thread issues its 4 independent 16-byte loads (evict-first) before the
// first use, maps the 16 values with kb_op<float>::map and writes them with 16-byte streaming
// stores. The last n % 4 elements (and any tensor whose pointers are not 16-byte aligned) take a
// scalar path. 64 B in flight per thread, about 128 KB per SM: enough for full DRAM bandwidth.
//
// Bytes: 8 * M * N = 12.9 GB at the official 4096 x 393216. Floor 3.00 ms at 4.3 TB/s;
// predicted 3.05-3.15 ms (within 1.05x), against 3.04 ms for torch.relu.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/elementwise_stream.cuh>
