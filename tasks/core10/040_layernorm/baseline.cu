// Baseline: one block per (sample) row of 64*256*256 values, statistics then output.
#include <kblaster/device/families/normalize.cuh>
#include KB_TASK_MATH

static constexpr kb::normalize::config config{/*begin=*/1, /*end=*/4, /*x=*/0, /*weight=*/1,
                                              /*bias=*/2};
KB_NORMALIZE_BASELINE(kb_op, config)
