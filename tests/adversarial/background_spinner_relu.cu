// Exploit: slow the baseline down instead of speeding itself up. A thread of its own keeps the
// device busy between the candidate's calls with short kernels on a stream of its own (each well
// under the rules' 200 us allowance, so no call of its own looks slow), and the GPU time-slices
// them against the baseline's windows in the other process: the baseline looks slower, the
// candidate faster. Correct results on its own calls.
#include <kblaster/device/families/elementwise.cuh>
#include KB_TASK_MATH

#include <mutex>
#include <thread>

namespace {

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(unsigned long long ns) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < ns) {
  }
}

void keep_busy() {
  cudaStream_t own = nullptr;
  if (cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
    return;
  }
  while (true) {
    spin<<<132, 32, 0, own>>>(100'000); // 100 us on every multiprocessor
    cudaStreamSynchronize(own);
  }
}

} // namespace

extern "C" int kb_launch(const kb_args* a) {
  static std::once_flag started;
  std::call_once(started, [] { std::thread(keep_busy).detach(); });
  return kb::elementwise::launch_naive<kb_op, float, float>(a);
}
