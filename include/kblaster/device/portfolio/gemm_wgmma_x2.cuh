// fp32 GEMM (A @ B) on Hopper's asynchronous warpgroup MMA (wgmma), at the accuracy of the
// strategy matmul.tensor_core's split = 2: per 8-deep k-step, a_big * b_big as one TF32 wgmma
// (m64n128k8) and the two cross terms a * b_small and a_small * b as one bf16 wgmma (m64n128k16)
// whose k runs 2t -> t, 2t + 1 -> t + 4 over the TF32 step (the same permutation in A and B; see
// tc::product_cross in strategies/matmul.cuh). sm_90a only.
//
// Block tile 128 x 128, 256 threads = 2 warpgroups of 64 rows x 128 columns (64 fp32
// accumulators per thread). K in 64-deep chunks. A: the fp32 chunk copied into shared memory by
// cp.async (pitch 68 floats, as the strategy's) and read per k-step into registers, split there
// (a wgmma's A may come from registers: the TF32 and bf16 fragments of a warp's 16 rows are those
// of mma.sync m16n8k8 and m16n8k16). B: loaded into registers, split, and stored K-major without
// swizzle in the layout wgmma reads through its descriptor: per k-step 4 KB of TF32 big values
// (n rows of 8 values; 8 x 16-byte core matrices, the K-direction neighbour 128 bytes on, the
// next 8 rows 256 bytes on) and 4 KB of bf16 pairs (n rows of 16 values, the same geometry).
// Per k-step each warpgroup fences, issues its two wgmma and commits; the A registers are double
// buffered so that the next step's split overlaps the wgmma in flight. The C tile goes through
// shared memory (the operands' space) and out in 16-byte row stores (tc::store_rows).
// Shared memory: 34,816 bytes of A and 65,536 of B = 100,352 bytes, 2 blocks per SM.
//
// Use: define kb_wgmma_params { store_hint } and include after KB_TASK_MATH; the file defines
// the candidate ABI, running fp32 storage with K and N multiples of 4 and A, B, C 16-byte
// aligned here and every other case through matmul.tensor_core at its split = 2 point.
#pragma once

#include "kblaster/device/strategies/matmul.cuh"

namespace kb::portfolio::wgmma_x2 {

namespace tc = kb::strategies::matmul::tc;
using kb::strategies::matmul::dims;

constexpr int bk = 64;
constexpr int steps = bk / 8;
constexpr int a_pitch = tc::tile<bk>::a_pitch;        // floats
constexpr int a_bytes = tc::bm * a_pitch * 4;         // 34,816
constexpr int step_bytes = tc::bn * 32;               // 4 KB: 128 rows x 32 bytes
constexpr int b_big_bytes = steps * step_bytes;       // 32 KB
constexpr int smem_bytes = a_bytes + 2 * b_big_bytes; // 100,352
static_assert(static_cast<size_t>(smem_bytes) >= tc::c_tile_bytes,
              "the C tile fits the operands' space");

// The wgmma instructions exist on sm_90a only; elsewhere the kernel traps (the host never
// launches it there: launch checks the device).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KB_WGMMA_X2 1
#endif

#if defined(__CUDACC__)

// A shared-memory matrix descriptor without swizzle: start address, leading (K-direction core
// matrix) byte offset 128, stride (next 8 rows) byte offset 256.
__device__ __forceinline__ uint64_t descriptor(const void* smem) {
  const auto addr = static_cast<uint64_t>(__cvta_generic_to_shared(smem));
  return ((addr & 0x3ffff) >> 4) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
}

// Byte offset of element (n, c) in a step's 128 x 32-byte K-major block, c counted in 4-byte
// columns (c = 0..7: 8 TF32 values, or 8 bf16 pairs).
__device__ __forceinline__ int b_offset(int n, int c) {
  return ((n / 8) * 2 + c / 4) * 128 + (n % 8) * 16 + (c % 4) * 4;
}

__device__ __forceinline__ void fence() {
#if defined(KB_WGMMA_X2)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if defined(KB_WGMMA_X2)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wait() {
#if defined(KB_WGMMA_X2)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

// The accumulators set to zero before a tile's first chunk.
__device__ __forceinline__ void zero(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    d[i] = 0.0f;
  }
}

// Keeps the accumulators in the registers the wgmma use (no copies between them).
__device__ __forceinline__ void pin(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    asm volatile("" : "+f"(d[i])::"memory");
  }
}

// The two m64n128 wgmma's shared asm text and operands: the predicate p made from the scale-d
// flag %69 (always 1: accumulate), the 64 accumulators %0 .. %63, A's four registers
// %64 .. %67 and B's descriptor %68.
#define KB_WGMMA_PROLOGUE "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
#define KB_WGMMA_D_A_B                                                                             \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "     \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1"
#define KB_WGMMA_ARGS(d, a, b_desc)                                                                \
  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),                       \
    "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),                     \
    "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),                 \
    "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                 \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),                 \
    "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),                 \
    "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),                 \
    "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),                 \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),                 \
    "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),                 \
    "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                            \
  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1)

__device__ __forceinline__ void wgmma_tf32(float (&d)[64], const uint32_t (&a)[4],
                                           uint64_t b_desc) {
#if defined(KB_WGMMA_X2)
  asm volatile(KB_WGMMA_PROLOGUE
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" KB_WGMMA_D_A_B
               ";\n}\n" KB_WGMMA_ARGS(d, a, b_desc));
#else
  (void)d, (void)a, (void)b_desc;
#endif
}

// bf16 takes a transpose flag for B (0: K-major).
__device__ __forceinline__ void wgmma_bf16(float (&d)[64], const uint32_t (&a)[4],
                                           uint64_t b_desc) {
#if defined(KB_WGMMA_X2)
  asm volatile(KB_WGMMA_PROLOGUE
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" KB_WGMMA_D_A_B
               ", 0;\n}\n" KB_WGMMA_ARGS(d, a, b_desc));
#else
  (void)d, (void)a, (void)b_desc;
#endif
}

#undef KB_WGMMA_ARGS
#undef KB_WGMMA_D_A_B
#undef KB_WGMMA_PROLOGUE

// A permutation of a 64-deep chunk's k under which a thread's A fragments for all 8 k-steps are
// 16 contiguous values of a row: the pair (t, t + 4) of k-step s (the mma's k positions, t =
// lane % 4) is the pair (p, p + 1) of the chunk, p = 16 (s / 2) + 4 t + 2 (s % 2); lane t's four
// 16-byte pieces of a row are at 16c + 4t, c = 0 .. 3. The same permutation of A and B leaves
// the product unchanged.
KB_HD int permuted_k(int s, int t) {
  return 16 * (s / 2) + 4 * t + 2 * (s % 2);
}

// The chunk k0 .. k0 + bk of B (columns n0 .. n0 + 127) split into the two K-major operands. A
// thread takes the pair of rows (k, k + 4) of one column per unit, 16 units: lane (q, r) =
// (lane % 4, lane / 4) takes k-step offset q of column r of an 8-column group, so that a warp's
// 4-byte stores land on the 32 banks once (a core matrix row is 16 bytes, 8 rows a 128-byte
// line) and its loads read 4 rows x 32 contiguous bytes.
// Permuted: the rows are taken in the order of permuted_k (k-step s's (q, q + 4) from B's rows
// p, p + 1), for a kernel whose A fragments come in that order.
template <bool Permuted = false>
__device__ __forceinline__ void store_b(unsigned char* b_big, unsigned char* b_cross,
                                        const float* __restrict__ b, const dims& d, int64_t n0,
                                        int64_t k0, int tid) {
#pragma unroll 4
  for (int it = 0; it < steps * 4 * tc::bn / tc::threads; ++it) {
    const int u = tid + it * tc::threads;
    const int q = u % 4;
    const int row = u / 4 % tc::bn;
    const int s = u / 4 / tc::bn;
    const int64_t n = n0 + row;
    float lo;
    float hi;
    if constexpr (Permuted) {
      const int64_t k = k0 + permuted_k(s, q);
      lo = n < d.n && k < d.k ? b[k * d.n + n] : 0.0f;
      hi = n < d.n && k + 1 < d.k ? b[(k + 1) * d.n + n] : 0.0f;
    } else {
      const int64_t k = k0 + s * 8 + q;
      lo = n < d.n && k < d.k ? b[k * d.n + n] : 0.0f;
      hi = n < d.n && k + 4 < d.k ? b[(k + 4) * d.n + n] : 0.0f;
    }
    uint32_t big_lo, small_lo, big_hi, small_hi;
    tc::split<true, 2>(lo, big_lo, small_lo);
    tc::split<true, 2>(hi, big_hi, small_hi);
    unsigned char* big = b_big + s * step_bytes;
    *reinterpret_cast<uint32_t*>(big + b_offset(row, q)) = big_lo;
    *reinterpret_cast<uint32_t*>(big + b_offset(row, q + 4)) = big_hi;
    // bf16 k positions 2q, 2q + 1: b_small at k, k + 4; 8 + 2q, 9 + 2q: b at k, k + 4.
    unsigned char* cross = b_cross + s * step_bytes;
    *reinterpret_cast<uint32_t*>(cross + b_offset(row, q)) =
        tc::pack_bf16(__uint_as_float(small_lo), __uint_as_float(small_hi));
    *reinterpret_cast<uint32_t*>(cross + b_offset(row, q + 4)) = tc::pack_bf16(lo, hi);
  }
}

// A thread's A values in permuted_k's order: for each of its two rows (m, m + 8), the 16 at
// k = 16c + 4t .. 16c + 4t + 3, c = 0 .. 3 (four 16-byte pieces per row).
struct permuted_rows {
  float v[2][16];
};

// Those values split into the fragments of the 8 k-steps: step s = 2c + j takes the pair
// (16c + 4t + 2j, + 1) as its (t, t + 4) positions.
__device__ __forceinline__ void split_permuted(const permuted_rows& in, uint32_t (&big)[steps][4],
                                               uint32_t (&cross)[steps][4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float v[4] = {in.v[0][4 * c + 2 * j], in.v[1][4 * c + 2 * j],
                          in.v[0][4 * c + 2 * j + 1], in.v[1][4 * c + 2 * j + 1]};
      tc::a_cross_split(v, big[2 * c + j], cross[2 * c + j]);
    }
  }
}

// A thread's place in a block of 2 warpgroups: its lane's (g, t) = (lane / 4, lane % 4) in the
// mma fragments and row0, the first of its warp's 16 rows of the block's 128 (warpgroup, then
// warp).
struct place {
  int tid = static_cast<int>(threadIdx.x);
  int warp = tid / 32;
  int lane = tid % 32;
  int g = lane / 4;
  int t = lane % 4;
  int row0 = (warp / 4) * 64 + (warp % 4) * 16;
};

// The accumulators through the epilogue into a C tile in shared memory (pitch c_pitch):
// accumulator v + 2h + 4j of a thread is C[row0 + g + 8h][8j + 2t + v].
template <template <class> class Op>
__device__ __forceinline__ void stage(float* cs, const float (&acc)[64], int row0, int g, int t) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      *reinterpret_cast<float2*>(cs + (row0 + g + 8 * h) * tc::c_pitch + 8 * j + 2 * t) =
          make_float2(Op<float>::epilogue(acc[4 * j + 2 * h]),
                      Op<float>::epilogue(acc[4 * j + 2 * h + 1]));
    }
  }
}

// A warpgroup's 64 x 128 product of one 64-deep chunk: per k-step s the TF32 and the bf16 wgmma
// on A's fragments big[s], cross[s] and B's K-major blocks at b_big + s * step_bytes and
// b_cross + s * step_bytes, issued and committed as one group (the caller waits).
__device__ __forceinline__ void issue_chunk(float (&acc)[64], const uint32_t (&big)[steps][4],
                                            const uint32_t (&cross)[steps][4],
                                            const unsigned char* b_big,
                                            const unsigned char* b_cross) {
  fence();
  pin(acc);
#pragma unroll
  for (int s = 0; s < steps; ++s) {
    wgmma_tf32(acc, big[s], descriptor(b_big + s * step_bytes));
    wgmma_bf16(acc, cross[s], descriptor(b_cross + s * step_bytes));
  }
  commit();
  pin(acc);
}

template <template <class> class Op, kb::strategies::cache_hint Hint>
__global__ void __launch_bounds__(tc::threads, 2)
    gemm_wgmma_x2(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                  dims d) {
#if !defined(KB_WGMMA_X2)
  __trap();
#endif
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  float* as = reinterpret_cast<float*>(smem);
  unsigned char* b_big = smem + a_bytes;
  unsigned char* b_cross = b_big + b_big_bytes;
  const place p;
  const int tid = p.tid, warp = p.warp, lane = p.lane, g = p.g, t = p.t, row0 = p.row0;
  const int64_t tiles_n = kb::strategies::ceil_div(d.n, tc::bn);
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) / tiles_n * tc::bm;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) % tiles_n * tc::bn;

  float acc[64];
  zero(acc);
  for (int64_t k0 = 0; k0 < d.k; k0 += bk) {
    tc::copy_a<bk>(as, a, d, m0, k0, tid);
    tc::copies_commit();
    store_b<>(b_big, b_cross, b, d, n0, k0, tid);
    tc::copies_wait<0>();
    tc::fence_async_shared(); // the generic proxy's B stores, before the wgmma read them
    __syncthreads();
    uint32_t big[2][4];
    uint32_t cross[2][4];
#pragma unroll
    for (int s = 0; s < steps; ++s) {
      tc::a_cross_fragments<a_pitch>(as, row0 + g, s * 8 + t, big[s % 2], cross[s % 2]);
      fence();
      pin(acc);
      wgmma_tf32(acc, big[s % 2], descriptor(b_big + s * step_bytes));
      wgmma_bf16(acc, cross[s % 2], descriptor(b_cross + s * step_bytes));
      commit();
      pin(acc);
      wait<1>(); // step s - 1's wgmma are done with the registers step s + 1 overwrites
    }
    wait<0>();
    pin(acc);
    __syncthreads(); // every warpgroup is done with the chunk before the next one is stored
  }

  float* cs = reinterpret_cast<float*>(smem);
  stage<Op>(cs, acc, row0, g, t);
  __syncthreads();
  tc::store_rows<float, Hint>(c, cs, d, m0, n0, warp, lane);
}

#endif

// The fallback for the shapes, storage types and alignments the wgmma kernel does not take.
struct fallback_params {
  static constexpr int bk = 64;
  static constexpr int min_blocks = 2;
  static constexpr int k_unroll = 2;
  static constexpr kb::strategies::cache_hint store_hint = kb::strategies::cache_hint::streaming;
  static constexpr int staged = 1;
  static constexpr int split = 2;
  static constexpr int presplit = 0;
};

template <template <class> class Op, kb::strategies::cache_hint Hint>
int launch(const kb_args* args, const kb::matmul::config& cfg) {
  using strategy = kb::strategies::matmul::tensor_core<Op, fallback_params>;
  dims dd{};
  if (!kb::strategies::matmul::operands_of(args, cfg, &dd)) {
    return -1;
  }
  const auto& A = args->inputs[cfg.a];
  const void* A_ = A.data;
  const void* B_ = args->inputs[cfg.b].data;
  void* C_ = args->outputs[0].data;
  const bool fits = A.dtype == KB_FLOAT32 && dd.k % 4 == 0 && dd.n % 4 == 0 &&
                    kb::strategies::aligned_to(A_, 16) && kb::strategies::aligned_to(B_, 16) &&
                    kb::strategies::aligned_to(C_, 16);
  const int64_t blocks =
      kb::strategies::ceil_div(dd.m, tc::bm) * kb::strategies::ceil_div(dd.n, tc::bn);
  int dev = 0;
  int major = 0;
  const bool hopper =
      cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
      major == 9;
  if (!fits || !hopper || blocks == 0 || blocks > (int64_t{1} << 31) - 1) {
    return strategy::launch(args, cfg);
  }
#if defined(__CUDACC__)
  const auto kernel = gemm_wgmma_x2<Op, Hint>;
  if (const int rc = kb::strategies::allow_dynamic_smem(kernel, smem_bytes); rc != 0) {
    return rc;
  }
  kernel<<<static_cast<unsigned>(blocks), tc::threads, smem_bytes, kb::stream_of(args)>>>(
      static_cast<const float*>(A_), static_cast<const float*>(B_), static_cast<float*>(C_), dd);
  return static_cast<int>(cudaGetLastError());
#else
  return -1;
#endif
}

} // namespace kb::portfolio::wgmma_x2
