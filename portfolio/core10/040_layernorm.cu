// Portfolio candidate for 040 (LayerNorm over the last three dims, affine): each 16 MB sample
// split across many blocks, partial Welford states in the workspace, a deterministic combine,
// then one normalize pass that reads weight and bias once.
//
// Design: x is viewed as [B, D] (D = F * D1 * D2). Stage 1 (statistics): slices of 32768 values;
// one 256-thread block per (slice, sample), blocks ordered slice-major, 8 float4 loads in flight
// per thread (default L2 policy, so the last slices read stay in L2 for stage 3), four Welford
// states per thread (kb_op::accumulate), combined in a fixed order and over the block
// (kb_op::combine), written as partial[sample, slice]. Stage 2 (finalize): one warp per sample
// combines its partials in slice order, then a fixed shuffle tree, and stores kb_op::finalize
// (mean, rstd). Stage 3 (normalize): one 256-thread block per slice of 4096 values, taken in
// reverse order so that the first blocks find the end of x that stage 1 left in L2; each thread
// loads its 4 float4 of weight and bias once into registers and walks all B samples, writing
// kb_op::apply with 16-byte streaming stores. No atomics anywhere. D % 4 != 0 or unaligned
// tensors use the same stages with scalar loads.
//
// Bytes at 16 x 64 x 256 x 256: the floor counts x once, y once and weight + bias once, 570 MB,
// 0.133 ms at 4.3 TB/s. This design reads x twice (the second read partly from L2) and weight and
// bias once: about 800 MB of DRAM traffic. Predicted 0.18-0.20 ms (1.4-1.5x of the floor), against
// 0.32 ms for the fastest PyTorch method (torch.compile). Measured 0.2416 ms at bc0f754
// (evidence/h200/core10). The code is in include/kblaster/device/portfolio/layernorm_slices.cuh
// (4 vectors per thread in stage 3, no prefetch), shared with the variant 040_norm_prefetch.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/layernorm_slices.cuh>

using kb_layernorm = kb::layernorm_slices::candidate<4, false>;

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb_layernorm::workspace_bytes(args, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  return kb_layernorm::launch(args);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio: layernorm, 32K-value Welford slices per block, warp finalize, reverse-order "
         "normalize with weight/bias in registers";
}
