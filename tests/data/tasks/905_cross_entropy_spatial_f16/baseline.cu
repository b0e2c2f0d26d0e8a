// Baseline: the plain loss driver.
#include <kblaster/device/families/loss.cuh>
#include KB_TASK_MATH

static constexpr kb::loss::config config{/*begin=*/1, /*end=*/2, /*x=*/0, /*target=*/1};
KB_LOSS_BASELINE(kb_op, config)
