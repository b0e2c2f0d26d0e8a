// Variant of 007 (A @ B, fp32, K = 64): the split product of 007_wgmma_x2 (per k-step one TF32
// and one bf16 wgmma) in a persistent kernel built around C's write, the task's floor (header
// include/kblaster/device/portfolio/gemm_wgmma_stream.cuh): B split once into a workspace image
// that each tile reads by one bulk copy, two tiles ahead; A's fragments held in registers across
// a row-block's tiles; C staged in shared memory and stored by whole rows (tc::store_rows) while
// the next tile's wgmma run. 007_wgmma_x2, one tile per block with no overlap between a block's
// phases, took 2.4077 ms against the portfolio kernel's 2.0157 (evidence/h200/variants/c829b2c).
// Other shapes, types and alignments run the portfolio kernel's strategy point.
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
