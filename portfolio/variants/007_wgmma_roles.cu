// Variant of 007 (A @ B, fp32, K = 64): the split product of 007_wgmma_x2 with the warps split by
// role (header include/kblaster/device/portfolio/gemm_wgmma_roles.cuh): two compute warpgroups
// walk a block's tiles down C's columns, B's image of the column held in shared memory and A's
// rows loaded into registers a tile ahead; one store warpgroup writes the staged C tiles (two
// buffers) by whole rows while the compute warps go on. The stream kernel, whose warps both
// compute and store, took 1.5101 ms (evidence/h200/variants/571b7de).
// Other shapes, types and alignments run the portfolio kernel's strategy point.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/gemm_wgmma_roles.cuh>

static constexpr kb::matmul::config kb_family_config{0, 1};

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::portfolio::wgmma_stream::workspace_bytes(args, kb_family_config, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::portfolio::wgmma_roles::launch<kb_op>(args, kb_family_config);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "wgmma_roles: persistent, compute and store warpgroups, 128x128 tiles down columns, B "
         "image held, A in registers, C double staged";
}
