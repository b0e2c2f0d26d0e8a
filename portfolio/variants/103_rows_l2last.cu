// Variant of 103 (RMSNorm deep case, bfloat16): two passes per row instead of the row held in
// registers (KB_RMSNORM_ROWS_L2PASS = 2, kblaster/device/portfolio/rmsnorm_rows.cuh): blocks of
// at most 256 threads, 2 16-byte packs per thread per step, the sum of squares over the row, then
// the row read again from L2 with the weight, normalised and stored.
// The first pass loads x with an L2 evict-last policy, so it stays for the second.
// Inductor's RMSNorm kernel (a looped reduction that reads x twice, x with evict_last) beat the
// one-row kernel by 3-12% from 4096 tokens up (evidence/h200/llm/); this measures its shape.
#define KB_RMSNORM_ROWS_L2PASS 2
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rmsnorm_rows.cuh>
