// Variant of 023 (softmax over dim 1): the row kept on chip with the next row's loads in the same
// pass as this row's stores. The portfolio kernel (include/kblaster/device/portfolio/
// softmax_pipeline.cuh, one slice buffer per block) starts the next row's bulk copy only after
// this row's stores and ran at 4.607 ms, 65% of the 3.00 ms floor (evidence/h200/variants/
// 023-8b33036, evidence/h200/core10).
//
// Measured at 9af7530: 5.0804 ms against the portfolio kernel's 4.6295 (evidence/h200/variants/
// 9af7530/): verified and clean under the sanitizers, but slower; not promoted.
//
// Design: a cooperative grid (all blocks resident) of two 512-thread blocks per SM, cut into g
// groups of S blocks (S the smallest divisor of the grid whose slice fits half an SM's shared
// memory: official shape 264 blocks, S = 22, slices of 4469 float4 = 70 KB, 12 groups). Group j
// walks rows j, j + g, ...; block c of the group owns slice c of each. Prologue: the block streams
// its slice of its first row into shared memory (evict-first loads), folding it into four online
// (max, sum) states, reduces them over the block, publishes the block's state in the workspace and
// increments the row's arrival counter (release). Then per row: thread 0 waits for the S states
// (acquire), warp 0 combines them in a fixed order (lane l takes slices l, l + 32, ..., then a
// fixed shuffle tree: every block of the row gets bitwise the same statistics), and one pass
// writes y = kb_op::apply from shared memory with streaming stores while loading the slice of the
// group's next row into the slots just consumed (each thread refills only its own slots) and
// folding it into the states; publish, next row. Loads and stores of a block overlap in one pass,
// and the two blocks of an SM overlap one's wait with the other's streaming. The shared parts
// are in include/kblaster/device/portfolio/rows_on_chip.cuh. The counters are zeroed on the
// stream before the kernel. N % 4 != 0 or unaligned tensors use the same kernel with
// one float per slot; a row larger than the grid's shared memory is refused.
//
// Bytes: 8 * M * N = 12.9 GB at 4096 x 393216; floor 3.00 ms at 4.3 TB/s. Predicted 3.3-3.8 ms.
#include <kblaster/device/families/common.cuh>
#include KB_TASK_MATH
#include <kblaster/device/portfolio/rows_on_chip.cuh>

namespace {

namespace oc = kb::on_chip;
using op = kb_op<float>;
using state = op::state;
using stats = op::stats;

constexpr int threads = 512;
constexpr int blocks_per_sm = 2;
constexpr int batch = 2; // slots per thread per step: the next row's loads in flight

template <int V>
__global__ void __launch_bounds__(threads, blocks_per_sm)
    softmax_inplace(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                    int slices, int64_t chunk, state* __restrict__ partial,
                    unsigned* __restrict__ arrived, kb::scalars p) {
  using T = typename oc::vec<V>::type;
  extern __shared__ float4 stage4[];
  T* stage = reinterpret_cast<T*>(stage4);
  __shared__ stats row_stats;
  const int groups = static_cast<int>(gridDim.x) / slices;
  const int group = static_cast<int>(blockIdx.x) / slices;
  const int c = static_cast<int>(blockIdx.x) % slices;
  const int64_t nv = n / V;
  const int64_t lo = static_cast<int64_t>(c) * chunk;
  const int64_t cnt = nv - lo < chunk ? (nv - lo > 0 ? nv - lo : 0) : chunk;
  const T* xv = reinterpret_cast<const T*>(x) + lo;
  T* yv = reinterpret_cast<T*>(y) + lo;
  if (group >= groups || group >= rows) {
    return; // no row for this group
  }
  {
    state s[4] = {op::init(), op::init(), op::init(), op::init()};
    oc::load_slice<op, V, threads, batch>(xv + group * nv, stage, cnt, s);
    oc::publish<op>(s, partial + group * slices + c, arrived + group);
  }
  for (int64_t row = group; row < rows; row += groups) {
    const stats st = oc::gather<op>(partial + row * slices, arrived + row,
                                    static_cast<unsigned>(slices), n, p, &row_stats);
    const int64_t following = row + groups;
    const bool next = following < rows;
    state s[4] = {op::init(), op::init(), op::init(), op::init()};
    oc::store_and_refill<op, V, threads, batch>(stage, cnt, yv + row * nv,
                                                next ? xv + following * nv : nullptr, s,
                                                [&](float(&e)[V], int64_t) {
#pragma unroll
                                                  for (int j = 0; j < V; ++j) {
                                                    e[j] = op::apply(e[j], st, 1.0f, 0.0f);
                                                  }
                                                });
    if (next) {
      oc::publish<op>(s, partial + following * slices + c, arrived + following);
    }
  }
}

struct plan {
  int64_t rows;
  int64_t n;
  int grid;
};

bool plan_of(const kb_args* a, plan* pl) {
  if (!kb::float32_map_args(a, 2) || kb::product(a->inputs[0], 2, a->inputs[0].ndim) != 1) {
    return false;
  }
  pl->rows = kb::product(a->inputs[0], 0, 1);
  pl->n = a->inputs[0].shape[1];
  pl->grid = oc::resident_grid(blocks_per_sm);
  return pl->grid > 0;
}

// Room for up to `grid` states per row, whatever slice count the launch picks.
oc::workspace_layout<state> layout(const plan& pl) {
  return {pl.rows, pl.grid};
}

template <int V> int run(const kb_args* a, const plan& pl) {
  using T = typename oc::vec<V>::type;
  const int64_t nv = pl.n / V;
  // static: the statistics, the reduction's scratch
  const size_t limit = oc::slice_limit(blocks_per_sm, 2048);
  // The smallest divisor of the grid whose slice fits.
  int slices = 0;
  for (int s = 1; s <= pl.grid; ++s) {
    if (pl.grid % s == 0 && static_cast<size_t>((nv + s - 1) / s) * sizeof(T) <= limit) {
      slices = s;
      break;
    }
  }
  if (slices == 0) {
    return -1; // the row does not fit the grid's shared memory
  }
  const int64_t chunk = (nv + slices - 1) / slices;
  const size_t bytes = std::max<size_t>(static_cast<size_t>(chunk) * sizeof(T), sizeof(T));
  if (const int e = oc::prepare(softmax_inplace<V>, threads, blocks_per_sm, limit, bytes); e != 0) {
    return e;
  }
  state* partial = nullptr;
  unsigned* arrived = nullptr;
  if (const int e = layout(pl).carve(a, &partial, &arrived); e != 0) {
    return e;
  }
  const cudaStream_t stream = kb::stream_of(a);
  const float* x = static_cast<const float*>(a->inputs[0].data);
  float* y = static_cast<float*>(a->outputs[0].data);
  int64_t rows = pl.rows;
  int64_t n = pl.n;
  int64_t ch = chunk;
  kb::scalars p = kb::scalars_of(a);
  void* params[] = {&x, &y, &rows, &n, &slices, &ch, &partial, &arrived, &p};
  KB_RETURN_IF_CUDA_ERROR(cudaLaunchCooperativeKernel(
      reinterpret_cast<const void*>(softmax_inplace<V>), dim3(static_cast<unsigned>(pl.grid)),
      dim3(threads), params, bytes, stream));
  return static_cast<int>(cudaGetLastError());
}

} // namespace

extern "C" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) {
  plan pl{};
  if (!plan_of(args, &pl)) {
    return -1;
  }
  *bytes = layout(pl).total;
  return 0;
}

extern "C" KB_EXPORT int kb_launch(const kb_args* args) {
  plan pl{};
  if (!plan_of(args, &pl)) {
    return -1;
  }
  if (pl.rows == 0 || pl.n == 0) {
    return 0;
  }
  const bool aligned = pl.n % 4 == 0 &&
                       reinterpret_cast<uintptr_t>(args->inputs[0].data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(args->outputs[0].data) % 16 == 0;
  return aligned ? run<4>(args, pl) : run<1>(args, pl);
}

extern "C" KB_EXPORT const char* kb_candidate_info(void) {
  return "portfolio variant: softmax, cooperative grid of 2 blocks per SM in groups of S, each "
         "row's slices in shared memory, "
         "the group's next row loaded into the slots this row's stores free, fixed-order combine "
         "of the S states";
}
