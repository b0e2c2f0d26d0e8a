// Baseline: the plain normalize driver, channel rows (blocks of 32 neighbouring columns).
#include <kblaster/device/families/normalize.cuh>
#include KB_TASK_MATH

static constexpr kb::normalize::config config{/*begin=*/1, /*end=*/2, /*x=*/0, /*weight=*/1,
                                              /*bias=*/2, /*channel_rows=*/1};
KB_NORMALIZE_BASELINE(kb_op, config)
