// Variant of 040: the portfolio kernel (portfolio/core10/040_layernorm.cu) with its normalize pass
// software-pipelined: each thread issues sample s + 1's loads of x before it normalizes and
// stores sample s, and takes 2 vectors per sample instead of 4 (48 registers instead of 64).
// Hypothesis: the portfolio kernel moves about 800 MB in 0.24 ms (3.3 TB/s); its normalize pass
// (64 registers, 4 blocks of 256 per SM) waits for each sample's loads before it stores, so the
// bytes in flight drop to nothing at every sample's turn. Two samples in flight per thread, and
// half the registers for weight and bias, keep loads outstanding through the stores.
// Unchanged (include/kblaster/device/portfolio/layernorm_slices.cuh): stages 1 and 2, the
// reverse block order, weight and bias in registers, the fixed reduction order (the same bits as
// the portfolio kernel).
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/layernorm_slices.cuh>

using kb_layernorm = kb::layernorm_slices::candidate<2, true>;

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb_layernorm::workspace_bytes(args, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb_layernorm::launch(args);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "variant: layernorm, the portfolio kernel with the next sample's loads in flight during "
         "the normalize pass";
}
