// Portfolio kernel: the variant 007_wgmma_roles2 (header
// include/kblaster/device/portfolio/gemm_wgmma_roles.cuh), split = 2's product on Hopper's
// wgmma (per 8-deep k-step one TF32 m64n128k8 for a_big * b_big and one bf16 m64n128k16 for the
// two cross terms) in a persistent kernel whose warps split by role, so that C's write, the
// task's floor, never stops: two compute warpgroups walk the block's tiles down C's columns (B's
// image of the column held in shared memory, A's rows loaded into registers a tile ahead) and
// stage each C tile into one of two buffers; two store warpgroups write the staged tiles by whole
// 512-byte rows. 1.3067 ms against the kernel it replaced, 1.5152 ms, in one run
// (evidence/h200/variants/16d866f). The kernel it replaced, whose warps both compute and store,
// is the variant 007_wgmma_stream_ahead. Verified on the task's checks and, clean under the four
// sanitizers, on a copy of the task with shapes its tiles do not divide
// (evidence/h200/variants/16d866f; the task copy is bd863c2/ragged-task.toml there). Other
// shapes, types and alignments (K above 64, N not a multiple of 4, unaligned C, not sm_90) run
// matmul.tensor_core at split = 2.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/gemm_wgmma_roles.cuh>

static constexpr kb::matmul::config kb_family_config{0, 1};

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::portfolio::wgmma_stream::workspace_bytes(args, kb_family_config, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::portfolio::wgmma_roles::launch<kb_op, 2>(args, kb_family_config);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "wgmma_roles: persistent, 2 compute and 2 store warpgroups, 128x128 tiles down columns, B "
         "image held, A in registers, C double staged";
}
