// Baseline: the plain reduce driver.
#include <kblaster/device/families/reduce.cuh>
#include KB_TASK_MATH

static constexpr kb::reduce::config config{/*begin=*/1, /*end=*/2, /*x=*/0};
KB_REDUCE_BASELINE(kb_op, config)
