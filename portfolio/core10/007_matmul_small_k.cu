// Portfolio kernel: the variant 007_wgmma_stream_ahead (header
// include/kblaster/device/portfolio/gemm_wgmma_stream.cuh), split = 2's product on Hopper's
// wgmma (per 8-deep k-step one TF32 m64n128k8 for a_big * b_big and one bf16 m64n128k16 for the
// two cross terms) in a persistent kernel built around C's write: B split once into a workspace
// image that each tile reads by one bulk copy (TMA) two tiles ahead; A's fragments held in
// registers across a row-block's tiles; C staged in shared memory and stored by whole 512-byte
// rows while the next tile's wgmma run. 1.5101 ms against the kernel it replaced, 2.0141 ms, in
// one run (evidence/h200/variants/571b7de); 1.5255 against 2.0174 in a later run
// (evidence/h200/variants/cc30c45). The kernel it replaced, matmul.tensor_core at split = 2, is the
// variant 007_tc_bf16x. Verified on the task's checks and, clean under the four sanitizers, on a
// copy of the task with shapes its tiles do not divide (evidence/h200/variants/bd863c2). Other
// shapes, types and alignments (K above 64, N not a multiple of 4, unaligned C, not sm_90) run
// that strategy point.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/gemm_wgmma_stream.cuh>

static constexpr kb::matmul::config kb_family_config{0, 1};

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::portfolio::wgmma_stream::workspace_bytes(args, kb_family_config, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::portfolio::wgmma_stream::launch<kb_op,
                                             kb::portfolio::wgmma_stream::store_mode::rows_ahead>(
      args, kb_family_config);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "wgmma_stream: persistent, 128x128 tiles, B image by bulk copy, A in registers, C staged, "
         "stored by rows";
}
