// Portfolio candidate for the RMSNorm deep case, task 103 (bfloat16). 101, 102 (float16) and 103
// (bfloat16) share the kernel in
// kblaster/device/portfolio/rmsnorm_rows.cuh; it dispatches on the dtype.
// y = x / sqrt(mean(x^2) + eps) * weight over the last dim, fp32 accumulation.
//
// Plain loads and stores of x and y since the variant 103_rows_plain won (the header's default
// KB_RMSNORM_ROWS_PLAIN = 1; the evict-first and streaming forms are now the variant
// 103_rows_hints): 32768 x 4096 0.1350 ms against 0.1431, 4096 x 4096 0.0203 against 0.0207
// (evidence/h200/variants/0343fe1/).
//
// Design: one block per token row, the row held in registers: each thread loads up to 4 16-byte
// vectors of x (plain loads) and the matching 4 vectors of weight (kept in L2/L1: every row
// reads them) before any arithmetic, so a row costs one round trip to memory. The sum of squares
// runs in fp32 over 4 interleaved states (kb_op::accumulate, combined in a fixed order), then a
// fixed-order block reduction, kb_op::finalize (1/rms) and kb_op::apply per element, rounded once
// to the storage type and written with 16-byte plain stores. Block size = the row's vector
// count / 4 rounded up to a warp (hidden 4096: 128 threads at 16 bits, 256 at fp32; hidden 8192:
// 256 and 512), so a small hidden size still gets a full-width row and a large token count gets
// many resident rows (about 1150 threads at 53 registers, 72 KB of loads in flight per SM). Rows
// of more than 4 x 512 vectors use 8 vectors per thread, more than 8 x 512 a two-pass loop (the
// second pass from L1/L2); hidden sizes that are not a whole number of 16-byte vectors (or
// unaligned tensors) run the same kernel with one element per load. 16-bit elements are unpacked
// from the raw 16-byte words with bit operations (no local memory).
//
// Bytes: sizeof(T) * (2 * T * H + H). Floors at 4.3 TB/s (16-bit): 4096 x 4096 15.6 us,
// 4096 x 8192 31.2 us, 32768 x 4096 125 us, 32768 x 8192 250 us (fp32: twice). Predicted 85-93%
// of the floor from 4096 tokens up (launch ramp and the last wave weigh most at 4096 x 4096:
// about 18-20 us there), 2.5-4 us at 1 and 128 tokens (latency: one load round trip, one block
// reduction, one store). Against torch.nn.functional.rms_norm (fp16): 26.0 / 56.4 / 155.6 /
// 405.7 us at those four shapes and 9.8 / 15.7 us at 1 x 4096 / 128 x 8192, about 1.3-1.5x overall.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
