// Baseline: the plain elementwise driver.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

KB_ELEMENTWISE_BASELINE(kb_op)
