// Baseline: one block per row, statistics then output (two reads of the row, one write).
#include <kblaster/device/families/normalize.cuh>
#include KB_TASK_MATH

static constexpr kb::normalize::config config{/*begin=*/1, /*end=*/2, /*x=*/0, /*weight=*/-1,
                                              /*bias=*/-1};
KB_NORMALIZE_BASELINE(kb_op, config)
