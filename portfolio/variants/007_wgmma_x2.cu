// Variant of 007 (A @ B, fp32, small K): the split of the portfolio kernel (matmul.tensor_core at
// split = 2: a_big * b_big in TF32, the two cross terms as one bf16 product of depth 16) on
// Hopper's asynchronous warpgroup MMA instead of mma.sync (header
// include/kblaster/device/portfolio/gemm_wgmma_x2.cuh): two wgmma per warpgroup and k-step
// (m64n128k8 TF32, m64n128k16 bf16), A's fragments from registers, B split once per block into
// K-major shared memory, 2 blocks per SM. The portfolio kernel keeps the tensor pipe 42% busy and
// is bound by the latency of mma.sync's dependent chains at 4 warps per scheduler; wgmma issues
// asynchronously. Other shapes, types and alignments run the portfolio kernel's strategy point.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/gemm_wgmma_x2.cuh>

static constexpr kb::matmul::config kb_family_config{0, 1};

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  (void)args;
  *bytes = 0;
  return 0;
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb::portfolio::wgmma_x2::launch<kb_op, kb::strategies::cache_hint::streaming>(
      args, kb_family_config);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "wgmma_x2 128x128x64, 2 warpgroups, split 2";
}
