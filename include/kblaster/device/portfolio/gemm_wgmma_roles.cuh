// fp32 GEMM (A @ B) for K <= 64 with the warps split by role, so that C's write, the task's
// floor, runs without a break: the product of gemm_wgmma_x2.cuh (per 8-deep k-step one TF32
// m64n128k8 wgmma for a_big * b_big and one bf16 m64n128k16 for the two cross terms) in a
// persistent kernel of 3 or 4 warpgroups per SM (1 block).
// - Why roles: a warp's 16-byte stores of a 64 KB tile do not leave it free. It stalls on them
//   until the store path has taken most of the tile, so a warp that both computes and stores
//   spends the sum of the two per tile, not the larger (the stream kernel: 1.51 ms for 32768^2 x
//   64, against 1.04 ms for the same stores alone).
// - Two compute warpgroups (64 rows x 128 columns each) walk a contiguous range of 128 x 128
//   tiles down C's columns. B's image of the current column block (split once into the
//   workspace by wgmma_stream::split_b, k in x2::permuted_k's order) stays in shared memory,
//   reloaded by one bulk copy when the column changes. A's rows come from global memory straight
//   into registers, a thread's fragments as four 16-byte loads per row (K = 64) issued a tile
//   ahead, and are split there. The accumulators go through the epilogue into one of two C
//   staging buffers.
// - One or two store warpgroups take the staged tiles in turn, write them by whole rows (512
//   contiguous bytes per warp instruction) and free the buffer. mbarriers carry the handoffs
//   (staged: one arrival per compute thread, freed: one per store thread). setmaxnreg gives the
//   compute warps 224 registers and the store warps 56 (at 40 their loop spills); with two store
//   warpgroups (Stores = 2), 200 and 56.
//   Two store warpgroups write faster than one: in one run 1.3355 ms against 1.5041, the stream
//   kernel 1.5145 (evidence/h200/variants/16d866f).
// Shared memory: 64 KB of B and 2 x 69,632 bytes of C = 204,800 bytes, 1 block per SM.
//
// Use: include after KB_TASK_MATH; launch<Op, Stores>(args, cfg) runs fp32 storage with K <= 64, N
// a multiple of 4 and C 16-byte aligned on sm_90 here and every other case through
// matmul.tensor_core at its split = 2 point; wgmma_stream::workspace_bytes sizes the image.
#pragma once

#include "kblaster/device/portfolio/gemm_wgmma_stream.cuh"

namespace kb::portfolio::wgmma_roles {

namespace tc = kb::strategies::matmul::tc;
namespace x2 = kb::portfolio::wgmma_x2;
namespace stream = kb::portfolio::wgmma_stream;
using kb::strategies::matmul::dims;

constexpr int compute_threads = tc::threads;                  // 2 warpgroups
constexpr int c_bytes = static_cast<int>(tc::c_tile_bytes);   // 69,632
constexpr int smem_bytes = stream::image_bytes + 2 * c_bytes; // 204,800

// The block's make-up for `Stores` store warpgroups (1 or 2): threads and the registers of each
// role. setmaxnreg moves registers between the warps of a block, within what the block was
// launched with (its threads x the per-thread count that 65,536 allows, in steps of 8): a
// request beyond that waits forever.
template <int Stores> struct roles {
  static_assert(Stores == 1 || Stores == 2, "1 or 2 store warpgroups");
  static constexpr int store_threads = 128 * Stores;
  static constexpr int threads = compute_threads + store_threads;
  static constexpr int block_registers = threads * (65536 / threads / 8 * 8);
  static constexpr int store_registers = 56;
  static constexpr int compute_registers =
      (block_registers - store_threads * store_registers) / compute_threads / 8 * 8;
  static_assert(compute_registers == (Stores == 1 ? 224 : 200), "the counts measured");
};

#if defined(__CUDACC__)

template <int N> __device__ __forceinline__ void registers_up() {
#if defined(KB_WGMMA_X2)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N> __device__ __forceinline__ void registers_down() {
#if defined(KB_WGMMA_X2)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

// A thread's A values for its rows m and m + 8 (x2::permuted_rows), zero past M and K.
__device__ __forceinline__ void load_a(const float* __restrict__ a, const dims& d, int64_t m, int t,
                                       bool quads, x2::permuted_rows& out) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = m + 8 * h;
    const float* r = a + row * d.k + 4 * t;
    if (quads) { // K = 64, A 16-byte aligned
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float4 q = row < d.m ? __ldg(reinterpret_cast<const float4*>(r + 16 * c))
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        out.v[h][4 * c] = q.x;
        out.v[h][4 * c + 1] = q.y;
        out.v[h][4 * c + 2] = q.z;
        out.v[h][4 * c + 3] = q.w;
      }
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 16 * c + 4 * t + e;
          out.v[h][4 * c + e] = row < d.m && k < d.k ? __ldg(r + 16 * c + e) : 0.0f;
        }
      }
    }
  }
}

// The compute warps' barrier (named barrier 1): the store warpgroups do not take part.
__device__ __forceinline__ void compute_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(compute_threads) : "memory");
}

template <template <class> class Op, int Stores>
__global__ void __launch_bounds__(roles<Stores>::threads, 1)
    gemm_wgmma_roles(const float* __restrict__ a, const unsigned char* __restrict__ image,
                     float* __restrict__ c, dims d, bool a_quads) {
#if !defined(KB_WGMMA_X2)
  __trap();
#endif
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  unsigned char* bs = smem; // the current column block's B image
  float* cs = reinterpret_cast<float*>(smem + stream::image_bytes); // 2 C tiles, pitch c_pitch
  __shared__ alignas(8) uint64_t b_full;
  __shared__ alignas(8) uint64_t staged[2];
  __shared__ alignas(8) uint64_t freed[2];
  using R = roles<Stores>;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t tiles_m = kb::strategies::ceil_div(d.m, tc::bm);
  const int64_t tiles = tiles_m * stream::image_blocks(d);
  const int64_t first = stream::first_tile(tiles, blockIdx.x);
  const int64_t last = stream::first_tile(tiles, blockIdx.x + 1);
  if (tid == 0) {
    kb::async::barrier_init(&b_full);
    for (int s = 0; s < 2; ++s) {
      kb::async::barrier_init(&staged[s], compute_threads);
      kb::async::barrier_init(&freed[s], R::store_threads);
    }
    kb::async::barrier_init_fence();
    if (first < last) {
      kb::async::bulk_load(bs, image + first / tiles_m * stream::image_bytes, stream::image_bytes,
                           &b_full);
    }
  }
  __syncthreads();

  if (tid >= compute_threads) {
    // The store warpgroup: tile i is in buffer i % 2, its (i / 2)-th use.
    registers_down<R::store_registers>();
    constexpr int warps = R::store_threads / 32;
    const int w = (tid - compute_threads) / 32;
    const int lane = tid % 32;
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t i = tile - first;
      const int s = static_cast<int>(i % 2);
      kb::async::wait_parity(&staged[s], static_cast<uint32_t>(i / 2 % 2));
      const float* tile_cs = cs + s * (c_bytes / 4);
      const int64_t m0 = tile % tiles_m * tc::bm;
      const int64_t col = tile / tiles_m * tc::bn + 4 * lane;
      const bool in = col < d.n; // N % 4 == 0 and C 16-byte aligned (launch)
#pragma unroll 2
      for (int r0 = w; r0 < tc::bm; r0 += 4 * warps) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          v[u] =
              *reinterpret_cast<const float4*>(tile_cs + (r0 + warps * u) * tc::c_pitch + 4 * lane);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t row = m0 + r0 + warps * u;
          if (in && row < d.m) {
            const float out[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
            kb::strategies::store_vec<float, float, 4, kb::strategies::cache_hint::streaming>(
                c + row * d.n + col, out);
          }
        }
      }
      kb::async::arrive(&freed[s]);
    }
    return;
  }

  registers_up<R::compute_registers>();
  const x2::place p;
  const int g = p.g, t = p.t, row0 = p.row0;
  uint32_t b_loads = 1; // fills of the B buffer so far
  x2::permuted_rows next;
  if (first < last) {
    load_a(a, d, first % tiles_m * tc::bm + row0 + g, t, a_quads, next);
  }
  float acc[64];
  for (int64_t tile = first; tile < last; ++tile) {
    const int64_t i = tile - first;
    const int s = static_cast<int>(i % 2);
    uint32_t big[x2::steps][4];
    uint32_t cross[x2::steps][4];
    x2::split_permuted(next, big, cross);
    if (tile + 1 < last) {
      load_a(a, d, (tile + 1) % tiles_m * tc::bm + row0 + g, t, a_quads, next);
    }
    x2::zero(acc);
    kb::async::wait_parity(&b_full, (b_loads - 1) % 2);
    x2::issue_chunk(acc, big, cross, bs, bs + x2::b_big_bytes);
    x2::wait<0>();
    x2::pin(acc);
    if (tile + 1 < last && (tile + 1) / tiles_m != tile / tiles_m) {
      compute_sync(); // both compute warpgroups are done with this column's B
      if (tid == 0) {
        kb::async::bulk_load(bs, image + (tile + 1) / tiles_m * stream::image_bytes,
                             stream::image_bytes, &b_full);
      }
      ++b_loads;
    }
    // Buffer s is free once the store warps have taken tile i - 2 from it.
    kb::async::wait_parity(&freed[s], static_cast<uint32_t>((i / 2 + 1) % 2));
    x2::stage<Op>(cs + s * (c_bytes / 4), acc, row0, g, t);
    kb::async::arrive(&staged[s]);
  }
}

#endif

template <template <class> class Op, int Stores = 1>
int launch(const kb_args* args, const kb::matmul::config& cfg) {
  return stream::dispatch<Op>(args, cfg, [&](const stream::plan& pl, unsigned char* image) -> int {
#if defined(__CUDACC__)
    const dims d = pl.d;
    const auto& A = args->inputs[cfg.a];
    stream::split_b<true>
        <<<static_cast<unsigned>(stream::image_blocks(d)), tc::threads, 0, kb::stream_of(args)>>>(
            static_cast<const float*>(args->inputs[cfg.b].data), image, d);
    const auto kernel = gemm_wgmma_roles<Op, Stores>;
    if (const int rc = kb::strategies::allow_dynamic_smem(kernel, smem_bytes); rc != 0) {
      return rc;
    }
    kernel<<<pl.blocks, roles<Stores>::threads, smem_bytes, kb::stream_of(args)>>>(
        static_cast<const float*>(A.data), image, static_cast<float*>(args->outputs[0].data), d,
        d.k == stream::max_k && kb::strategies::aligned_to(A.data, 16));
    return static_cast<int>(cudaGetLastError());
#else
    (void)pl, (void)image;
    return -1;
#endif
  });
}

} // namespace kb::portfolio::wgmma_roles
