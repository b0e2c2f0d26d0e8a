// Baseline: the plain elementwise driver (one element per thread) over this task's math.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

KB_ELEMENTWISE_BASELINE(kb_op)
