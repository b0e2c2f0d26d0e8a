// Variant of 036_rmsnorm: the same kernel (include/kblaster/device/portfolio/rmsnorm_columns.cuh)
// with plain loads and plain stores. On the H200 the streaming hints (ld/st.global.cs)
// made the grid elementwise kernel slower (019, 128 x 4 float4: 3.316 ms with them, 3.121 without;
// evidence/h200/variants/elementwise-4cb185d), and the portfolio's RMSNorm uses both.
// Bytes: 8 * B * C * H * W = 15.0 GB at 112 x 64 x 512 x 512; floor 3.50 ms at 4.29 TB/s.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#define KB_RMS_LOAD_HINT 0
#define KB_RMS_STORE_HINT 0
#include <kblaster/device/portfolio/rmsnorm_columns.cuh>
