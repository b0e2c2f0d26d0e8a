// Exploit: launches on a stream of its own instead of the one it was given, so events recorded on
// the given stream measure nothing. Correct results, untimed work.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

extern "C" int kb_launch(const kb_args* a) {
  static cudaStream_t side = nullptr;
  if (side == nullptr && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  kb_args redirected = *a;
  redirected.stream = reinterpret_cast<CUstream_st*>(side);
  return kb::elementwise::launch_naive<kb_op, float, float>(&redirected);
}
