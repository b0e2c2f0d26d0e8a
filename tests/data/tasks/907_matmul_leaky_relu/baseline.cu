// Baseline: the plain matmul driver.
#include <kblaster/device/families/matmul.cuh>
#include KB_TASK_MATH

static constexpr kb::matmul::config config{/*a=*/0, /*b=*/1};
KB_MATMUL_BASELINE(kb_op, config)
