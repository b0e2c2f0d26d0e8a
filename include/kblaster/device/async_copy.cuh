// Bulk copies from global to shared memory (cp.async.bulk, the TMA engine, sm_90) that complete
// on an mbarrier, and the waits on it. A buffer's barrier counts one arrival per fill (the thread
// that issues the copy arrives with the byte count it expects); its phase flips when the bytes
// have landed, so the n-th fill of a buffer is awaited with parity n % 2.
#pragma once

#include <cstdint>

namespace kb::async {

#if defined(__CUDACC__)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread: the barrier set to expect `count` arrivals per phase (then barrier_init_fence).
__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t count = 1) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// This thread's arrival on the barrier's current phase; its memory accesses before it are
// visible to the threads that see the phase complete (release, CTA scope).
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// One thread: the barrier's current phase is to receive `bytes` from bulk_copy calls (any thread).
__device__ __forceinline__ void expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// [src, src + bytes) into shared memory at dst (16-byte aligned, bytes a multiple of 16),
// counted against the bytes the barrier's phase expects.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// One thread: [src, src + bytes) into shared memory at dst (both 16-byte aligned, bytes a
// multiple of 16), completing on `bar`; bytes = 0 completes the phase at once.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  if (bytes == 0) {
    arrive(bar);
    return;
  }
  expect_bytes(bar, bytes);
  bulk_copy(dst, src, bytes, bar);
}

// Until the barrier's phase of the given parity has completed.
__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n"
               "}\n" ::"r"(smem_addr(bar)),
               "r"(parity)
               : "memory");
}

#endif

} // namespace kb::async
