// Baseline: the plain normalize driver, one group a channel (a block per channel of a sample).
#include <kblaster/device/families/normalize.cuh>
#include KB_TASK_MATH

static constexpr kb::normalize::config config{/*begin=*/1, /*end=*/3,          /*x=*/0,
                                              /*weight=*/1, /*bias=*/2,       /*channel_rows=*/0,
                                              /*groups=*/16};
KB_NORMALIZE_BASELINE(kb_op, config)
