// Broken: correct except for one element set to NaN.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

__global__ void poke_nan(float* y, int64_t i) { y[i] = __int_as_float(0x7fc00000); }

extern "C" int kb_launch(const kb_args* a) {
  const int rc = kb::elementwise::launch_naive<kb_op, float, float>(a);
  poke_nan<<<1, 1, 0, (cudaStream_t)a->stream>>>((float*)a->outputs[0].data, kb::numel(a->outputs[0]) / 3);
  return rc;
}
