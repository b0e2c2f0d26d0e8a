// Variant of 007 (A @ B, fp32, K = 64): 007_wgmma_stream_ahead's kernel walking down C's
// columns instead of along its rows (header include/kblaster/device/portfolio/
// gemm_wgmma_stream.cuh, walk::columns): B's split image of the current column-block held in
// shared memory, A's fp32 rows of each tile (32 KB in one piece at K = 64) brought by one bulk
// copy two tiles ahead and split in registers (k permuted so that a thread's fragments are 4
// 16-byte loads per row). A tile reads 32 KB from L2 instead of 64 KB: _stream_ahead (1.5101 ms
// against the portfolio kernel's 2.0141, evidence/h200/variants/571b7de) kept the crossbar into
// L2 82% busy. K below 64 runs _stream_ahead's kernel; other shapes, types and alignments the
// portfolio kernel's strategy point.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/gemm_wgmma_stream.cuh>

static constexpr kb::matmul::config kb_family_config{0, 1};

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  return kb::portfolio::wgmma_stream::workspace_bytes(args, kb_family_config, bytes);
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  namespace ws = kb::portfolio::wgmma_stream;
  return ws::launch<kb_op, ws::store_mode::rows_ahead, ws::walk::columns>(args, kb_family_config);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "wgmma_columns: persistent, 128x128 tiles down C's columns, B image held, A by bulk "
         "copies, C staged, stored by rows during the next tile";
}
