// Baseline of 945: the matmul family's tiled product, the bias (input 2) as epilogue operand 0.
#include <kblaster/device/families/matmul.cuh>
#include KB_TASK_MATH

static constexpr kb::matmul::config config{/*a=*/0, /*b=*/1, /*trans_a=*/0, /*trans_b=*/0,
                                           /*alpha=*/1.0, kb::matmul::mask_none, /*diag_a=*/0,
                                           /*epi=*/{2, -1, -1, -1, -1, -1, -1, -1}};
KB_MATMUL_BASELINE(kb_op, config)
