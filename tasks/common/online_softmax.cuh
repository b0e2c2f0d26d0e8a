// The running (max, sum of exp) pair of a softmax over a row: kept for the tasks that include it
// by this path; the helper lives in include/kblaster/device/online_softmax.cuh.
#pragma once

#include <kblaster/device/online_softmax.cuh>
