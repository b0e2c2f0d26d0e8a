// Baseline: the plain conv driver (one thread per output).
#include <kblaster/device/families/conv.cuh>
#include KB_TASK_MATH

static constexpr kb::conv::config config{/*x=*/0, /*weight=*/1, /*bias=*/2, /*scale=*/3, /*rank=*/2, /*transposed=*/0,
                                          {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, {0, 0, 0}};
KB_CONV_BASELINE(kb_op, config)
