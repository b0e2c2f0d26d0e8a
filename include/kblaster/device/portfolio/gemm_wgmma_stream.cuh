// fp32 GEMM (A @ B) for K <= 64 as a stream of C tiles: the product of gemm_wgmma_x2.cuh (per
// 8-deep k-step one TF32 m64n128k8 wgmma for a_big * b_big and one bf16 m64n128k16 for the two
// cross terms; see there and tc::product_cross) in a persistent kernel built so that C's write,
// the task's floor, never waits on the arithmetic:
// - B is split once, by a first kernel, into an image in the workspace: per 128-column block
//   64 KB, the K-major TF32 big values then the bf16 cross pairs in the layout the wgmma read
//   through their descriptors (gemm_wgmma_x2's store_b). A tile's B is then one bulk copy (TMA)
//   into shared memory, double buffered and issued two tiles ahead, completing on an mbarrier.
// - One block per SM (2 warpgroups of 64 rows x 128 columns) walks a contiguous range of the
//   128 x 128 tiles, row-block by row-block; A's fragments of the current row-block (8 k-steps,
//   split into TF32 and bf16 pairs) stay in registers and are reloaded only when the row-block
//   changes. So a tile reads 64 KB of B from L2 and does no splitting.
// - C is written by ordinary stores, which do not hold the warps up: store_mode::direct from
//   the accumulators (a quad's pairs fill a 32-byte sector), store_mode::rows through a staging
//   area in shared memory, 512 contiguous bytes per warp instruction (tc::store_rows). The warps
//   go on to the next tile's wgmma while the stores drain. (Bulk row stores from the staging
//   area, waited on before it is rewritten, made the block wait at that point: 2.95 ms.)
// Shared memory: 2 x 64 KB of B (direct), plus 69,632 bytes of C (rows): 1 block per SM.
//
// Use: include after KB_TASK_MATH; launch<Op, Store>(args, cfg) runs fp32 storage with K <= 64, N a
// multiple of 4 and C 16-byte aligned on sm_90 here and every other case through
// matmul.tensor_core at its split = 2 point; workspace_bytes sizes the B image. sm_90a only.
#pragma once

#include "kblaster/device/async_copy.cuh"
#include "kblaster/device/portfolio/gemm_wgmma_x2.cuh"

namespace kb::portfolio::wgmma_stream {

namespace tc = kb::strategies::matmul::tc;
namespace x2 = kb::portfolio::wgmma_x2;
using kb::strategies::matmul::dims;

constexpr int max_k = x2::bk;                               // 64: one chunk, its A fragments held
constexpr int steps = x2::steps;                            // 8
constexpr int image_bytes = 2 * x2::b_big_bytes;            // 64 KB of B per 128 columns
constexpr int c_bytes = static_cast<int>(tc::c_tile_bytes); // 69,632
constexpr int smem_bytes = 2 * image_bytes + c_bytes;       // 200,704 (direct stores: 131,072)

KB_HD int64_t image_blocks(const dims& d) {
  return kb::strategies::ceil_div(d.n, tc::bn);
}

#if defined(__CUDACC__)

// The B image: block j of the grid writes columns 128j .. 128j + 127 (k in x2::permuted_k's
// order when Permuted).
template <bool Permuted>
__global__ void __launch_bounds__(tc::threads)
    split_b(const float* __restrict__ b, unsigned char* __restrict__ image, dims d) {
  unsigned char* big = image + static_cast<int64_t>(blockIdx.x) * image_bytes;
  x2::store_b<Permuted>(big, big + x2::b_big_bytes, b, d, static_cast<int64_t>(blockIdx.x) * tc::bn,
                        0, threadIdx.x);
}

// The first of block b's contiguous range of the tiles (the grid's blocks split them evenly).
__device__ __forceinline__ int64_t first_tile(int64_t tiles, unsigned b) {
  return tiles * b / gridDim.x;
}

// The A fragments of the warp's 16 rows m, m + 8 (m = row-block + row0 + g) over the 8 k-steps,
// zero past M and K.
__device__ __forceinline__ void load_a(const float* __restrict__ a, const dims& d, int64_t m, int t,
                                       uint32_t (&big)[steps][4], uint32_t (&cross)[steps][4]) {
  const bool in0 = m < d.m;
  const bool in1 = m + 8 < d.m;
  const float* r0 = a + m * d.k;
  const float* r1 = r0 + 8 * d.k;
#pragma unroll
  for (int s = 0; s < steps; ++s) {
    const int k0 = s * 8 + t;
    const int k1 = k0 + 4;
    const float v[4] = {in0 && k0 < d.k ? r0[k0] : 0.0f, in1 && k0 < d.k ? r1[k0] : 0.0f,
                        in0 && k1 < d.k ? r0[k1] : 0.0f, in1 && k1 < d.k ? r1[k1] : 0.0f};
    tc::a_cross_split(v, big[s], cross[s]);
  }
}

// How C leaves: straight from the accumulators (each quad writes 32-byte sectors), or staged in
// shared memory and written by whole 512-byte rows per warp instruction (tc::store_rows), right
// after staging (rows) or while the next tile's wgmma run (rows_ahead).
enum class store_mode { direct, rows, rows_ahead };

// The order of a block's tiles: along C's rows, A held in registers and B's image streamed
// (rows), or down C's columns, B's image held and A streamed (columns; stores as rows_ahead).
enum class walk { rows, columns };

template <template <class> class Op, store_mode Store>
__global__ void __launch_bounds__(tc::threads, 1)
    gemm_wgmma_stream(const float* __restrict__ a, const unsigned char* __restrict__ image,
                      float* __restrict__ c, dims d) {
#if !defined(KB_WGMMA_X2)
  __trap();
#endif
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  unsigned char* bufs = smem;                                   // 2 x image_bytes
  float* cs = reinterpret_cast<float*>(smem + 2 * image_bytes); // the C tile, pitch c_pitch
  __shared__ alignas(8) uint64_t full[2];
  const x2::place p;
  const int tid = p.tid, warp = p.warp, lane = p.lane, g = p.g, t = p.t, row0 = p.row0;
  const int64_t tiles_n = image_blocks(d);
  const int64_t tiles = kb::strategies::ceil_div(d.m, tc::bm) * tiles_n;
  const int64_t first = first_tile(tiles, blockIdx.x);
  const int64_t last = first_tile(tiles, blockIdx.x + 1);
  const auto fill = [&](int64_t tile, int buf) {
    kb::async::bulk_load(bufs + buf * image_bytes, image + tile % tiles_n * image_bytes,
                         image_bytes, &full[buf]);
  };
  if (tid == 0) {
    kb::async::barrier_init(&full[0]);
    kb::async::barrier_init(&full[1]);
    kb::async::barrier_init_fence();
    for (int i = 0; i < 2 && first + i < last; ++i) {
      fill(first + i, i);
    }
  }
  __syncthreads();

  uint32_t big[steps][4];
  uint32_t cross[steps][4];
  int64_t block_m = -1;
  int64_t staged_m0 = 0; // the tile in the staging area (rows_ahead)
  int64_t staged_n0 = 0;
  float acc[64];
  for (int64_t tile = first; tile < last; ++tile) {
    const int64_t i = tile - first;
    const int buf = static_cast<int>(i % 2);
    const int64_t m0 = tile / tiles_n * tc::bm;
    const int64_t n0 = tile % tiles_n * tc::bn;
    if (m0 != block_m) {
      load_a(a, d, m0 + row0 + g, t, big, cross);
      block_m = m0;
    }
    x2::zero(acc);
    kb::async::wait_parity(&full[buf], static_cast<uint32_t>(i / 2 % 2));
    const unsigned char* bb = bufs + buf * image_bytes; // both warpgroups read all of B
    x2::issue_chunk(acc, big, cross, bb, bb + x2::b_big_bytes);
    if constexpr (Store == store_mode::rows_ahead) {
      if (tile > first) {
        tc::store_rows<float, kb::strategies::cache_hint::streaming>(c, cs, d, staged_m0, staged_n0,
                                                                     warp, lane);
      }
    }
    x2::wait<0>();
    x2::pin(acc);
    // Both warpgroups are done with buf, and (staged modes) the staging area's reads by the tile
    // before are done: they precede this barrier in every thread.
    __syncthreads();
    if (tid == 0 && tile + 2 < last) {
      fill(tile + 2, buf);
    }
    if constexpr (Store == store_mode::direct) {
      // Accumulator v + 2h + 4j of a thread is C[row0 + g + 8h][8j + 2t + v]: a quad's pair
      // stores cover one 32-byte sector; N even, so a pair is in or out whole.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + row0 + g + 8 * h;
        if (row < d.m) {
          float* crow = c + row * d.n + n0 + 2 * t;
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            if (n0 + 8 * j + 2 * t < d.n) {
              const float out[2] = {Op<float>::epilogue(acc[4 * j + 2 * h]),
                                    Op<float>::epilogue(acc[4 * j + 2 * h + 1])};
              kb::strategies::store_vec<float, float, 2, kb::strategies::cache_hint::streaming>(
                  crow + 8 * j, out);
            }
          }
        }
      }
    } else {
      x2::stage<Op>(cs, acc, row0, g, t);
      __syncthreads();
      if constexpr (Store == store_mode::rows) {
        tc::store_rows<float, kb::strategies::cache_hint::streaming>(c, cs, d, m0, n0, warp, lane);
      }
      staged_m0 = m0;
      staged_n0 = n0;
    }
  }
  if constexpr (Store == store_mode::rows_ahead) {
    if (last > first) {
      tc::store_rows<float, kb::strategies::cache_hint::streaming>(c, cs, d, staged_m0, staged_n0,
                                                                   warp, lane);
    }
  }
}

// The column walk (walk::columns): the block's tiles taken column-block by column-block, B's
// image of the current column-block held in shared memory (reloaded when it changes) and A's
// fp32 rows of each tile brought by one bulk copy (TMA; K = 64, so a tile's rows are 32 KB in
// one piece), two tiles ahead. The image's k are in x2::permuted_k's order, so a thread's A
// fragments for the 8 k-steps are 4 16-byte loads per row (rows 8 apart in a quarter-warp share
// banks: 2-way conflicts on 8 loads per tile). A tile reads 32 KB of A from L2 instead of 64 KB
// of B. (One bulk copy per 256-byte row into a conflict-free pitch instead: 3.67 ms, the block
// waiting on its 128 small copies per tile.) Needs K = 64 and A 16-byte aligned; launch runs
// other K through the row walk.
constexpr int a_pitch = max_k;                                               // floats
constexpr int a_tile_bytes = tc::bm * a_pitch * 4;                           // 32,768
constexpr int columns_smem_bytes = image_bytes + 2 * a_tile_bytes + c_bytes; // 200,704

template <template <class> class Op>
__global__ void __launch_bounds__(tc::threads, 1)
    gemm_wgmma_columns(const float* __restrict__ a, const unsigned char* __restrict__ image,
                       float* __restrict__ c, dims d) {
#if !defined(KB_WGMMA_X2)
  __trap();
#endif
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  unsigned char* bs = smem;                                 // image_bytes
  float* as = reinterpret_cast<float*>(smem + image_bytes); // 2 x a_tile_bytes
  float* cs = reinterpret_cast<float*>(smem + image_bytes + 2 * a_tile_bytes);
  __shared__ alignas(8) uint64_t a_full[2];
  __shared__ alignas(8) uint64_t b_full;
  const x2::place p;
  const int tid = p.tid, warp = p.warp, lane = p.lane, g = p.g, t = p.t, row0 = p.row0;
  const int64_t tiles_m = kb::strategies::ceil_div(d.m, tc::bm);
  const int64_t tiles = tiles_m * image_blocks(d);
  const int64_t first = first_tile(tiles, blockIdx.x);
  const int64_t last = first_tile(tiles, blockIdx.x + 1);
  // Thread 0: tile's A rows into buffer buf.
  const auto fill_a = [&](int64_t tile, int buf) {
    const int64_t m0 = tile % tiles_m * tc::bm;
    const int64_t rows = d.m - m0 < tc::bm ? d.m - m0 : tc::bm;
    kb::async::bulk_load(as + buf * (a_tile_bytes / 4), a + m0 * max_k,
                         static_cast<uint32_t>(rows * max_k * sizeof(float)), &a_full[buf]);
  };
  const auto fill_b = [&](int64_t tile) {
    kb::async::bulk_load(bs, image + tile / tiles_m * image_bytes, image_bytes, &b_full);
  };
  for (int i = tid; i < 2 * a_tile_bytes / 16; i += tc::threads) {
    reinterpret_cast<float4*>(as)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  tc::fence_async_shared(); // the zeros before the bulk copies that write next to them
  if (tid == 0) {
    kb::async::barrier_init(&a_full[0]);
    kb::async::barrier_init(&a_full[1]);
    kb::async::barrier_init(&b_full);
    kb::async::barrier_init_fence();
  }
  __syncthreads();
  if (tid == 0 && first < last) {
    fill_b(first);
    for (int i = 0; i < 2 && first + i < last; ++i) {
      fill_a(first + i, i);
    }
  }

  uint32_t b_loads = 1; // fills of the B buffer so far
  int64_t staged_m0 = 0;
  int64_t staged_n0 = 0;
  float acc[64];
  for (int64_t tile = first; tile < last; ++tile) {
    const int64_t i = tile - first;
    const int buf = static_cast<int>(i % 2);
    const int64_t m0 = tile % tiles_m * tc::bm;
    const int64_t n0 = tile / tiles_m * tc::bn;
    kb::async::wait_parity(&a_full[buf], static_cast<uint32_t>(i / 2 % 2));
    uint32_t big[steps][4];
    uint32_t cross[steps][4];
    {
      x2::permuted_rows rows;
      const float* r0 = as + buf * (a_tile_bytes / 4) + (row0 + g) * a_pitch + 4 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          *reinterpret_cast<float4*>(&rows.v[h][4 * q]) =
              *reinterpret_cast<const float4*>(r0 + 8 * h * a_pitch + 16 * q);
        }
      }
      x2::split_permuted(rows, big, cross);
    }
    x2::zero(acc);
    kb::async::wait_parity(&b_full, (b_loads - 1) % 2);
    x2::issue_chunk(acc, big, cross, bs, bs + x2::b_big_bytes);
    if (tile > first) {
      tc::store_rows<float, kb::strategies::cache_hint::streaming>(c, cs, d, staged_m0, staged_n0,
                                                                   warp, lane);
    }
    x2::wait<0>();
    x2::pin(acc);
    // Both warpgroups are done with A's buffer, B and the staging area's rows.
    __syncthreads();
    const bool next_column = tile + 1 < last && (tile + 1) / tiles_m != tile / tiles_m;
    if (tid == 0) {
      if (tile + 2 < last) {
        fill_a(tile + 2, buf);
      }
      if (next_column) {
        fill_b(tile + 1);
      }
    }
    b_loads += next_column ? 1 : 0;
    x2::stage<Op>(cs, acc, row0, g, t);
    __syncthreads();
    staged_m0 = m0;
    staged_n0 = n0;
  }
  if (last > first) {
    tc::store_rows<float, kb::strategies::cache_hint::streaming>(c, cs, d, staged_m0, staged_n0,
                                                                 warp, lane);
  }
}

#endif

inline int workspace_bytes(const kb_args* args, const kb::matmul::config& cfg, uint64_t* bytes) {
  dims d{};
  if (!kb::strategies::matmul::operands_of(args, cfg, &d)) {
    return -1;
  }
  *bytes = args->inputs[cfg.a].dtype == KB_FLOAT32 && d.k <= max_k
               ? static_cast<uint64_t>(image_blocks(d)) * image_bytes
               : 0;
  return 0;
}

// Whether the persistent wgmma kernels take a call, and their grid: fp32 storage, K <= 64, N a
// multiple of 4, C and the workspace (holding the B image) 16-byte aligned, an sm_90 device;
// otherwise (taken = false) the strategy point runs. -1: the operands do not fit the config.
struct plan {
  dims d{};
  bool taken = false;
  unsigned blocks = 0; // one per SM, at most one per tile
};

inline int plan_of(const kb_args* args, const kb::matmul::config& cfg, plan* out) {
  uint64_t need = 0;
  if (!kb::strategies::matmul::operands_of(args, cfg, &out->d) ||
      workspace_bytes(args, cfg, &need) != 0) {
    return -1;
  }
  const dims& d = out->d;
  const int64_t tiles =
      kb::strategies::ceil_div(d.m, tc::bm) * kb::strategies::ceil_div(d.n, tc::bn);
  int dev = 0;
  int major = 0;
  int sms = 0;
  const bool hopper =
      cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
      major == 9;
  const bool fits = args->inputs[cfg.a].dtype == KB_FLOAT32 && d.k <= max_k && d.n % 4 == 0 &&
                    need > 0 && args->workspace != nullptr && args->workspace_bytes >= need &&
                    kb::strategies::aligned_to(args->outputs[0].data, 16) &&
                    kb::strategies::aligned_to(args->workspace, 16);
  out->taken = fits && hopper && tiles > 0 && sms > 0;
  out->blocks = out->taken ? static_cast<unsigned>(tiles < sms ? tiles : sms) : 0;
  return 0;
}

// The call through the persistent kernels, `fast(plan, image)` with the workspace as B's image,
// when they take it; through the strategy point otherwise.
template <template <class> class Op, class Fast>
int dispatch(const kb_args* args, const kb::matmul::config& cfg, Fast&& fast) {
  plan pl;
  if (plan_of(args, cfg, &pl) != 0) {
    return -1;
  }
  if (!pl.taken) {
    return kb::strategies::matmul::tensor_core<Op, x2::fallback_params>::launch(args, cfg);
  }
  return fast(pl, static_cast<unsigned char*>(args->workspace));
}

template <template <class> class Op, store_mode Store, walk Walk = walk::rows>
int launch(const kb_args* args, const kb::matmul::config& cfg) {
  return dispatch<Op>(args, cfg, [&](const plan& pl, unsigned char* image) -> int {
#if defined(__CUDACC__)
    const dims d = pl.d;
    const auto& A = args->inputs[cfg.a];
    // B's image (k permuted for the column walk), then the kernel.
    const auto run = [&](auto permuted, auto kernel, int smem) {
      split_b<decltype(permuted)::value>
          <<<static_cast<unsigned>(image_blocks(d)), tc::threads, 0, kb::stream_of(args)>>>(
              static_cast<const float*>(args->inputs[cfg.b].data), image, d);
      if (const int rc = kb::strategies::allow_dynamic_smem(kernel, smem); rc != 0) {
        return rc;
      }
      kernel<<<pl.blocks, tc::threads, smem, kb::stream_of(args)>>>(
          static_cast<const float*>(A.data), image, static_cast<float*>(args->outputs[0].data), d);
      return 0;
    };
    int rc = 0;
    if constexpr (Walk == walk::columns) {
      if (d.k == max_k && kb::strategies::aligned_to(A.data, 16)) {
        rc = run(std::true_type{}, gemm_wgmma_columns<Op>, columns_smem_bytes);
      } else {
        rc = run(std::false_type{}, gemm_wgmma_stream<Op, store_mode::rows_ahead>, smem_bytes);
      }
    } else {
      rc = run(std::false_type{}, gemm_wgmma_stream<Op, Store>,
               Store == store_mode::direct ? 2 * image_bytes : smem_bytes);
    }
    if (rc != 0) {
      return rc;
    }
    return static_cast<int>(cudaGetLastError());
#else
    (void)pl, (void)image;
    return -1;
#endif
  });
}

} // namespace kb::portfolio::wgmma_stream
