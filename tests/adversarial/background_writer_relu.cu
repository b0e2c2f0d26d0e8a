// Exploit: a thread of its own that keeps writing into the last buffers it was given, between
// calls and during the other library's calls. Were the candidate and the baseline to share
// buffers, the baseline's outputs would be corrupted and the baseline blamed; with a lane of
// buffers per library it can only spoil its own results. Correct results on its own calls.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace {
std::atomic<void*> last_output{nullptr};
std::atomic<uint64_t> last_bytes{0};

void scribble() {
  cudaStream_t own = nullptr;
  if (cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
    return;
  }
  while (true) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    void* p = last_output.load();
    const uint64_t n = last_bytes.load();
    if (p != nullptr && n > 0) {
      cudaMemsetAsync(p, 0, n, own);
      cudaStreamSynchronize(own);
    }
  }
}
} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static std::once_flag started;
  std::call_once(started, [] { std::thread(scribble).detach(); });
  const kb_tensor& y = a->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y.ndim; ++d) {
    n *= y.shape[d];
  }
  const int rc = kb::elementwise::launch_naive<kb_op, float, float>(a);
  last_output.store(y.data);
  last_bytes.store(static_cast<uint64_t>(n) * sizeof(float));
  return rc;
}
