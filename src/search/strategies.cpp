#include "search/strategies.hpp"

#include "common/error.hpp"
#include "kblaster/device/families/conv_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace kb::search {

using nlohmann::json;

namespace {

// The rows of a SM-count-sized grid: shapes with fewer rows leave the device idle under a
// row-per-block kernel. Only a threshold for offering strategies; kernels query the device.
constexpr int64_t device_sms = 132;
constexpr int64_t kib = 1024;

const task::tensor_spec* with_role(const std::vector<task::tensor_spec>& list,
                                   const std::string& role, int* index = nullptr) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].role == role) {
      if (index != nullptr) {
        *index = static_cast<int>(i);
      }
      return &list[i];
    }
  }
  return nullptr;
}

bool storage_type(task::dtype d) {
  return d == task::dtype::float32 || d == task::dtype::float16 || d == task::dtype::bfloat16;
}

param_axis ints(std::string name, std::vector<int> values, std::string description) {
  param_axis a;
  a.name = std::move(name);
  for (int v : values) {
    a.values.emplace_back(v);
  }
  a.description = std::move(description);
  return a;
}

param_axis names(std::string name, std::vector<std::string> values, std::string cpp_enum,
                 std::string description) {
  param_axis a;
  a.name = std::move(name);
  for (auto& v : values) {
    a.values.emplace_back(std::move(v));
  }
  a.cpp_enum = std::move(cpp_enum);
  a.description = std::move(description);
  return a;
}

const std::string vector_text = "bytes per load and store (16: one 128-bit access; used when the "
                                "pointers and the row length allow, "
                                "else scalar accesses)";

// The elementwise strategies.
void add_elementwise_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"elementwise.vectorized",
       family::elementwise,
       "Each thread maps `unroll` vectors of vector_bytes per step (all loads issued before the "
       "first use), a scalar head "
       "up to the first aligned element and a scalar tail; one pass over the tensor or a grid of "
       "blocks_per_sm x SMs "
       "blocks in a grid-stride loop.",
       "any elementwise task (fp32, fp16 or bf16 storage, fp32 compute)",
       "The baseline issues one 4-byte load per thread and iteration; 16-byte accesses and several "
       "independent loads "
       "in flight per thread keep enough bytes moving to reach the copy bandwidth with fewer "
       "instructions.",
       [](const shape_features&) { return true; },
       {ints("block", {128, 256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("unroll", {1, 2, 4, 8}, "vectors per thread per step, loaded before any is used"),
        ints("blocks_per_sm", {0, 2, 4, 8, 16, 32},
             "blocks per SM in a grid-stride loop, or one pass (a block per block*unroll vectors) "
             "when 0"),
        names("hint", {"normal", "streaming"}, "kb::strategies::cache_hint",
              "cache policy of the loads and stores (streaming: evict first)")},
       {{"block", 256},
        {"vector_bytes", 16},
        {"unroll", 4},
        {"blocks_per_sm", 0},
        {"hint", "normal"}},
       "kblaster/device/strategies/elementwise.cuh",
       "kb::strategies::elementwise::vectorized",
       false});
}

// The normalize strategies.
void add_normalize_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  const param_axis row_cache =
      names("cache", {"none", "registers", "shared"}, "kb::strategies::row_cache",
            "where the row waits between statistics and output: none (read twice), registers "
            "(items_per_thread per thread), shared (when the rows fit in shared memory)");
  add({"normalize.warp_row",
       family::normalize,
       "A warp per row: vector loads, the row's state reduced with warp shuffles (no block "
       "barrier), the row kept in "
       "registers or shared memory for the output pass when it fits.",
       "contiguous rows (inner < 32) of at most 8192 elements",
       "Short rows give a block-per-row kernel too little work per barrier; a warp per row needs "
       "no shared-memory "
       "reduction and keeps many rows in flight per SM, and caching the row avoids the second "
       "read.",
       [](const shape_features& f) { return !f.channel_rows && f.inner < 32 && f.extent <= 8192; },
       {ints("block", {64, 128, 256, 512}, "threads per block (rows per block = block / 32)"),
        ints("vector_bytes", {4, 8, 16}, vector_text), row_cache,
        ints("items_per_thread", {8, 16, 32, 64},
             "elements per thread kept in registers (cache = registers)")},
       {{"block", 256}, {"vector_bytes", 16}, {"cache", "registers"}, {"items_per_thread", 32}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::warp_row",
       false});
  add({"normalize.block_row",
       family::normalize,
       "A block per row: vector loads, one fixed-order block reduction of the row's state, the row "
       "kept in registers or "
       "shared memory so it is read from memory once.",
       "contiguous rows (inner < 32) of 1024 elements up to 192 KiB",
       "The baseline reads every row twice (statistics, then output); keeping the row on chip "
       "between the passes cuts the "
       "traffic to one read and one write, and 16-byte accesses cut the instruction count.",
       [](const shape_features& f) {
         return !f.channel_rows && f.inner < 32 && f.extent >= 1024 && f.row_bytes() <= 192 * kib;
       },
       {ints("block", {128, 256, 512, 1024}, "threads per block, all on one row"),
        ints("vector_bytes", {4, 8, 16}, vector_text), row_cache,
        ints("items_per_thread", {4, 8, 16, 32},
             "elements per thread kept in registers (cache = registers)")},
       {{"block", 512}, {"vector_bytes", 16}, {"cache", "registers"}, {"items_per_thread", 16}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::block_row",
       false});
  add({"normalize.cluster_row",
       family::normalize,
       "A thread-block cluster per row (sm_90): each block keeps a slice of the row in shared "
       "memory, the blocks' partial "
       "states are combined through distributed shared memory in rank order, and the output is "
       "written from the slices; "
       "persistent clusters walk the rows.",
       "contiguous rows (inner < 32) of 32 KiB to 3 MiB (too long for one block's shared memory)",
       "A row longer than one SM's shared memory must otherwise be read twice from memory; a "
       "cluster of up to 16 SMs holds "
       "up to 3.5 MB on chip, so every element is read once and written once.",
       [](const shape_features& f) {
         return !f.channel_rows && f.inner < 32 && f.row_bytes() > 32 * kib &&
                f.row_bytes() <= 3 * 1024 * kib;
       },
       {ints("cluster", {2, 4, 8, 16}, "blocks per cluster (16 is a non-portable cluster size)"),
        ints("block", {256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text)},
       {{"cluster", 8}, {"block", 1024}, {"vector_bytes", 16}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::cluster_row",
       false});
  add({"normalize.split_row",
       family::normalize,
       "Several blocks per row: a first kernel writes each chunk's partial state to the workspace, "
       "a second combines the "
       "row's partials in a fixed order and writes its chunk (or, with a weight or bias and "
       "columns_apply, the row's statistics go to the workspace and the output pass walks the "
       "rows by columns, weight and bias held in registers); rows go in groups of l2_group_mb so "
       "the second read hits L2.",
       "contiguous rows (inner < 32) of at least 64Ki elements, or long rows that are fewer than "
       "the SMs",
       "With fewer rows than SMs (or very long rows) a block per row leaves most of the GPU idle; "
       "splitting rows fills "
       "every SM, and grouping rows to fit in L2 turns the second read into an L2 hit.",
       [](const shape_features& f) {
         return !f.channel_rows && f.inner < 32 &&
                (f.extent >= 65536 || (f.rows() < device_sms && f.extent >= 8192));
       },
       {ints("block", {256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("chunk", {16384, 65536, 262144}, "row elements per block"),
        ints("l2_group_mb", {16, 32, 48, 0},
             "MiB of rows (plus the weight and bias when applied by rows) per group of launches, "
             "so the second read hits L2 (0, the largest: all rows at once)"),
        ints("columns_apply", {0, 1},
             "with a weight or bias, 1 applies by columns: each thread keeps its weight and bias "
             "in registers and walks every row of the group, tiles from the end of the row")},
       {{"block", 512},
        {"vector_bytes", 16},
        {"chunk", 16384},
        {"l2_group_mb", 48},
        {"columns_apply", 0}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::split_row",
       true});
  add({"normalize.strided_columns",
       family::normalize,
       "Strided rows: each thread owns vector_bytes worth of adjacent columns (vector loads along "
       "the inner dimension, "
       "coalesced across the warp) and walks the reduced axis; `split` threads share a column and "
       "meet in shared memory; "
       "cache_values per thread stay in registers for the output pass.",
       "strided rows (inner >= 32), e.g. normalizing 64 channels of an NCHW tensor",
       "The baseline's thread per row issues 4-byte loads and reads every value twice; vectors "
       "along the contiguous inner "
       "dimension and registers holding the column between the passes make it one 16-byte-wide "
       "read and one write.",
       [](const shape_features& f) { return !f.channel_rows && f.groups == 0 && f.inner >= 32; },
       {ints("block_cols", {32, 64, 128}, "threads along the inner dimension per block"),
        ints("split", {1, 2, 4, 8}, "threads sharing one column's reduced axis"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("cache_values", {0, 32, 64, 128},
             "values per thread kept in registers between the passes (the rest is re-read)")},
       {{"block_cols", 64}, {"split", 4}, {"vector_bytes", 16}, {"cache_values", 64}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::columns",
       false});
  add({"normalize.channel_split",
       family::normalize,
       "Channel rows (a batch norm: statistics per channel over the batch and spatial axes): each "
       "row is cut into parts of about `chunk` elements; a first kernel writes each part's partial "
       "state to the workspace, a warp per channel combines them in a fixed order, and a third "
       "kernel writes each part's output with the channel's statistics, weight and bias in "
       "registers. Runs of 32 elements or more are read in vectors by one block per part; shorter "
       "runs (a [batch, features] tensor) by blocks of 32 neighbouring columns.",
       "channel rows (config::channel_rows)",
       "A channel's values are spread over the whole tensor (outer runs of inner elements), so a "
       "block per channel leaves most SMs idle when channels are few (64 channels of 64 MiB each) "
       "and reads strided columns when runs are short; parts of every channel fill the GPU and "
       "every warp reads neighbouring addresses.",
       [](const shape_features& f) { return f.channel_rows; },
       {ints("block", {256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("chunk", {4096, 16384, 65536, 262144}, "elements of a row per part")},
       {{"block", 512}, {"vector_bytes", 16}, {"chunk", 65536}},
       "kblaster/device/strategies/normalize.cuh",
       "kb::strategies::normalize::channel_split",
       true});
}

// The reduce strategies: along a contiguous axis (rows) or a strided one (columns).
void add_reduce_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"reduce.rows",
       family::reduce,
       "A warp (threads_per_row = 32) or a block per contiguous row, vector loads, `accumulators` "
       "independent states per "
       "thread, a fixed-order reduction.",
       "contiguous rows (inner < 32), unless they are few and long (reduce.split_row)",
       "More bytes per load and independent accumulation chains keep more loads in flight than the "
       "baseline's one scalar "
       "chain per thread.",
       [](const shape_features& f) {
         return f.inner < 32 && (f.rows() >= device_sms || f.extent < 16384);
       },
       {ints("threads_per_row", {32, 64, 128, 256, 512, 1024},
             "32: a warp per row (8 rows per block); more: a block per row"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("accumulators", {1, 2, 4}, "independent states per thread")},
       {{"threads_per_row", 256}, {"vector_bytes", 16}, {"accumulators", 2}},
       "kblaster/device/strategies/reduce.cuh",
       "kb::strategies::reduce::row_reduce",
       false});
  add({"reduce.split_row",
       family::reduce,
       "Several blocks per row, partial states in the workspace, then a warp per output combines "
       "them in a fixed order.",
       "contiguous rows (inner < 32) that are fewer than two per SM and at least 16Ki elements "
       "long",
       "A few long rows leave most SMs idle under a block per row; splitting them over blocks uses "
       "the whole device while "
       "the fixed-order second pass keeps the result reproducible.",
       [](const shape_features& f) {
         return f.inner < 32 && f.rows() < 2 * device_sms && f.extent >= 16384;
       },
       {ints("block", {256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("chunk", {16384, 65536, 262144}, "row elements per block")},
       {{"block", 512}, {"vector_bytes", 16}, {"chunk", 65536}},
       "kblaster/device/strategies/reduce.cuh",
       "kb::strategies::reduce::split_row",
       true});
  const std::vector<param_axis> column_axes = {
      ints("block_cols", {32, 64, 128, 256}, "threads along the inner dimension per block"),
      ints("split", {1, 2, 4}, "threads of a block sharing one column's reduced axis"),
      ints("vector_bytes", {4, 8, 16},
           "bytes of adjacent columns per thread (vector loads; shifted aligned pairs when the "
           "inner size breaks alignment)"),
      ints("unroll", {4, 8}, "lines in flight per thread"),
      ints("accumulators", {1, 2, 4}, "independent states per column")};
  std::vector<param_axis> grouped_axes = column_axes;
  grouped_axes.push_back(
      ints("grouped", {0, 1},
           "1: when the inner size breaks vector alignment and the extent is a multiple of the "
           "vector, read V consecutive lines as whole vectors (V states per thread in the "
           "workspace, combined per output by a second kernel)"));
  add({"reduce.columns",
       family::reduce,
       "A thread per V adjacent output columns walking the reduced axis with `unroll` lines in "
       "flight and independent "
       "accumulators; vector loads, or, when the inner size breaks their alignment, pairs of "
       "aligned vectors or (grouped) V lines read as whole vectors, V states per thread combined "
       "per output by a second kernel.",
       "strided reductions (inner >= 32)",
       "The baseline's one scalar load chain per thread limits the loads in flight; unrolled "
       "independent accumulators "
       "and wider loads raise memory-level parallelism while staying coalesced.",
       [](const shape_features& f) { return f.inner >= 32; },
       grouped_axes,
       {{"block_cols", 128},
        {"split", 2},
        {"vector_bytes", 16},
        {"unroll", 4},
        {"accumulators", 1},
        {"grouped", 1}},
       "kblaster/device/strategies/reduce.cuh",
       "kb::strategies::reduce::columns",
       true});
  std::vector<param_axis> split_axes = column_axes;
  split_axes.push_back(
      ints("splits", {0, 2, 4, 8, 16},
           "blocks along the reduced axis (0: enough for two waves of the device)"));
  add({"reduce.split_columns",
       family::reduce,
       "As reduce.columns, with the reduced axis also split over blocks: partial states in the "
       "workspace and a "
       "fixed-order second pass.",
       "strided reductions (inner >= 32) with a reduced axis of at least 256",
       "When the outputs are too few to fill the device (or the reduced axis is long) splitting it "
       "gives every SM work; "
       "the deterministic second pass costs one small extra kernel.",
       [](const shape_features& f) { return f.inner >= 32 && f.extent >= 256; },
       split_axes,
       {{"block_cols", 128},
        {"split", 1},
        {"vector_bytes", 16},
        {"unroll", 4},
        {"accumulators", 1},
        {"splits", 0}},
       "kblaster/device/strategies/reduce.cuh",
       "kb::strategies::reduce::split_columns",
       true});
}

// The loss strategies.
void add_loss_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"loss.warp_row",
       family::loss,
       "A warp per row: one pass of vector loads with the online state, the target's logit "
       "gathered by lane 0, rows' "
       "losses summed per block in a fixed order into the workspace, one block for the final sum.",
       "contiguous rows (inner < 32) of at most 16Ki classes",
       "One pass over each row with no block barrier per row, and a fixed-order two-level sum "
       "instead of a per-row "
       "workspace round trip; bitwise reproducible.",
       [](const shape_features& f) { return !f.pointwise && f.inner < 32 && f.extent <= 16384; },
       {ints("block", {128, 256, 512}, "threads per block (rows in flight per block = block / 32)"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("rows_per_block", {8, 16, 32, 64}, "consecutive rows per block and partial sum")},
       {{"block", 256}, {"vector_bytes", 16}, {"rows_per_block", 32}},
       "kblaster/device/strategies/loss.cuh",
       "kb::strategies::loss::warp_row",
       true});
  add({"loss.block_row",
       family::loss,
       "A block per row: one pass of vector loads with the online state, a fixed-order block "
       "reduction, the target's "
       "logit gathered by thread 0; rows_per_block rows per partial, one block for the final sum.",
       "contiguous rows (inner < 32) of at least 1024 classes",
       "Long rows need many threads per row to keep enough loads in flight; vector loads and one "
       "pass over the row with "
       "the target gather fused cut the traffic to the logits once.",
       [](const shape_features& f) { return !f.pointwise && f.inner < 32 && f.extent >= 1024; },
       {ints("block", {128, 256, 512, 1024}, "threads per block, all on one row"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("rows_per_block", {1, 2, 4, 8}, "consecutive rows per block and partial sum")},
       {{"block", 256}, {"vector_bytes", 16}, {"rows_per_block", 2}},
       "kblaster/device/strategies/loss.cuh",
       "kb::strategies::loss::block_row",
       true});
  add({"loss.columns",
       family::loss,
       "Strided rows (class axis not innermost): a thread per row, neighbouring threads on "
       "neighbouring inner positions "
       "(coalesced, vector loads along the inner dimension), `unroll` classes in flight; block "
       "partials in a fixed order.",
       "strided rows (inner >= 32), e.g. a per-pixel loss over (N, C, H*W)",
       "A block per strided row reads scattered elements; a thread per row with the warp along the "
       "inner dimension reads "
       "whole lines with 16-byte loads.",
       [](const shape_features& f) { return !f.pointwise && f.inner >= 32; },
       {ints("block", {64, 128, 256, 512}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("unroll", {2, 4, 8}, "classes in flight per thread")},
       {{"block", 128}, {"vector_bytes", 16}, {"unroll", 4}},
       "kblaster/device/strategies/loss.cuh",
       "kb::strategies::loss::columns",
       true});

  add({"loss.pointwise",
       family::loss,
       "Pointwise loss over two tensors: a fixed grid of `partials` blocks walks the elements, "
       "`unroll` pairs loaded per thread before use, each thread summing in double; the block sums "
       "in a fixed order, one block for the final sum and the finalize.",
       "pointwise losses (a floating-point target of x's shape or of its trailing axes: MSE, L1, "
       "Huber, KL divergence, hinge)",
       "The plain driver writes a partial per 1024 elements and sums them in one block; a grid "
       "sized to the machine keeps every load in flight with a few hundred partials, and double "
       "accumulation keeps long sums accurate.",
       [](const shape_features& f) { return f.pointwise; },
       {ints("block", {128, 256, 512, 1024}, "threads per block"),
        ints("unroll", {1, 2, 4, 8}, "element pairs loaded per thread before they are used"),
        ints("partials", {132, 528, 2112}, "blocks of the grid (and partial sums)")},
       {{"block", 256}, {"unroll", 4}, {"partials", 528}},
       "kblaster/device/strategies/loss.cuh",
       "kb::strategies::loss::pointwise",
       true});
}

// The dense matmul strategies.
void add_matmul_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"matmul.matvec",
       family::matmul,
       "A block per `rows` rows of A and one column of B over a chunk of K: each thread loads one "
       "vector of B and the "
       "rows' vectors of A, so B is read once per `rows` rows; with several chunks the partial "
       "sums meet in a fixed order "
       "in a second kernel.",
       "matrix-vector products and skinny products (N <= 4)",
       "The baseline reads B once per output row (from L2) and reduces one row per block; several "
       "rows per block cut the "
       "B traffic, 16-byte loads of A and split-K keep every SM streaming A at full bandwidth.",
       [](const shape_features& f) { return f.n <= 4 && !f.diag; },
       {ints("block", {128, 256, 512}, "threads per block"),
        ints("rows", {2, 4, 8, 16}, "rows of A per block"),
        ints("vector_bytes", {4, 8, 16},
             "bytes of A (and B) per load along K (used when N == 1 and K and the pointers allow)"),
        ints("k_chunk", {0, 16384, 65536, 262144},
             "elements of K per block (0: all of K, no workspace)")},
       {{"block", 256}, {"rows", 8}, {"vector_bytes", 16}, {"k_chunk", 65536}},
       "kblaster/device/strategies/matmul.cuh",
       "kb::strategies::matmul::matvec",
       true});
  add({"matmul.tensor_core",
       family::matmul,
       "Tensor cores at fp32 accuracy: fp32 operands split into big = tf32(v) and small = "
       "tf32(v - big), three mma.sync m16n8k8 per product (a_small*b_big + a_big*b_small + "
       "a_big*b_big; at split = 2 the two cross terms as one bf16 m16n8k16; fp16 and bf16 are "
       "exact in TF32 and take one), the mma sums flushed into fp32 totals by round-to-nearest "
       "adds every k-step or chunk (the tensor core's own accumulation truncates), a square "
       "tile of C per block of 8 warps, K in bk-deep chunks in shared memory, pairs of outputs "
       "per store.",
       "products with N > 4 in fp32, fp16 or bf16 storage (for the FMA-bound ones: large M and N)",
       "The SIMT kernels are bound by the fp32 FMA rate; the split keeps fp32 accuracy (error "
       "about 2^-22 to 2^-20 of each product, and with the flush an accumulation error of the "
       "fp32 FMA chain's order at any K) while the tensor cores run several times that rate, so "
       "the product moves toward the output-write bound.",
       [](const shape_features& f) { return f.n > 4 && !f.diag; },
       {ints("bk", {32, 64}, "depth of the K chunks held in shared memory"),
        ints("min_blocks", {1, 2},
             "blocks per SM the register budget is sized for (2: one block's stores overlap the "
             "other's math)"),
        ints("k_unroll", {1, 2}, "8-deep k-steps unrolled in the inner loop"),
        names("store_hint", {"normal", "streaming"}, "kb::strategies::cache_hint",
              "cache policy of the stores of C"),
        ints("staged", {0, 1},
             "1: fp32 C goes through shared memory and out in 16-byte row stores (whole lines, "
             "a quarter of the L2 requests of the fragments' 8-byte stores)"),
        ints("split", {0, 1, 2},
             "1: big = v with its low 13 bits cleared (one LOP) and small = v - big as raw fp32 "
             "bits, no cvt (0: both rounded by cvt.rna.tf32); 2: big rounded by integer add and "
             "mask, the two cross terms as one bf16 mma of depth 16 (two mma per product)"),
        ints("presplit", {0, 1},
             "1: each chunk split once per block into (big, small) pairs in shared memory, the "
             "inner loop only loads and mma (twice the bytes: bk = 32 keeps two blocks per SM)"),
        ints("persistent", {0, 1},
             "1 (fp32, aligned, K and N multiples of 4, presplit = 0): one block per SM over a "
             "sequence of tiles, the next chunk copied while the current one is multiplied, C "
             "out by bulk (TMA) stores that drain during the next tile"),
        ints("flush", {0, 1, 2},
             "how often the fp32 products leave the mma accumulator, whose adds truncate toward "
             "zero, for fp32 totals added with round to nearest: 0 never (the truncation "
             "accumulates over K, about 3 (K / 8) 2^-25 relative: 4.6e-5 at K = 4096); 1 every "
             "8-deep k-step (each step's mma from a zeroed fragment, one FADD per output: the "
             "error of an fp32 FMA chain); 2 every chunk (a second set of accumulators, 64 more "
             "registers: for min_blocks = 1)")},
       {{"bk", 64},
        {"min_blocks", 2},
        {"k_unroll", 2},
        {"store_hint", "normal"},
        {"staged", 0},
        {"split", 1},
        {"presplit", 0},
        {"persistent", 0},
        {"flush", 1}},
       "kblaster/device/strategies/matmul.cuh",
       "kb::strategies::matmul::tensor_core",
       true});
  add({"matmul.register_tiled",
       family::matmul,
       "Register-tiled fp32 SIMT product: a bm x bn tile per block, tm x tn outputs per thread "
       "from float4 reads of a "
       "transposed A slice and a B slice in double-buffered shared memory (the next slice loaded "
       "into registers during "
       "the FMAs), 16-byte stores of C. fp32 FMA only, no TF32.",
       "products with N > 4 (tuned for small K and large M, N, where the output write and the FMAs "
       "dominate)",
       "The baseline's 16x16 tile computes one output per thread and reloads shared memory for "
       "every FMA; an 8x8 register "
       "tile does 64 FMAs per 16 shared-memory values, which moves the kernel toward the FMA peak.",
       [](const shape_features& f) { return f.n > 4 && !f.diag; },
       {ints("bm", {64, 128}, "rows of C per block"),
        ints("bn", {64, 128}, "columns of C per block"),
        ints("bk", {8, 16, 32}, "depth of the K slices staged in shared memory"),
        ints("tm", {4, 8}, "rows of C per thread"), ints("tn", {4, 8}, "columns of C per thread"),
        names("store_hint", {"normal", "streaming"}, "kb::strategies::cache_hint",
              "cache policy of the stores of C")},
       {{"bm", 128}, {"bn", 128}, {"bk", 16}, {"tm", 8}, {"tn", 8}, {"store_hint", "normal"}},
       "kblaster/device/strategies/matmul.cuh",
       "kb::strategies::matmul::tiled",
       true});
}

// The argreduce strategies.
void add_argreduce_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"argreduce.rows",
       family::argreduce,
       "A warp (threads_per_row = 32) or a block per row of the reduced axis: vector loads with "
       "`unroll` vectors in flight per thread, (value, index) pairs reduced with warp shuffles and a "
       "fixed-order block reduction (first index on ties, NaN wins).",
       "arg-reductions over a contiguous axis (inner < 32), e.g. argmax over the last dim",
       "The baseline walks each row with one thread and 4-byte loads; a warp or block per row with "
       "16-byte loads keeps the loads in flight that the memory bandwidth needs.",
       [](const shape_features& f) { return f.inner < 32; },
       {ints("threads_per_row", {32, 64, 128, 256, 512, 1024},
             "32: a warp per row (8 rows per block); more: a block per row"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        ints("unroll", {1, 2, 4, 8}, "vectors per thread loaded before any is compared")},
       {{"threads_per_row", 32}, {"vector_bytes", 16}, {"unroll", 4}},
       "kblaster/device/strategies/argreduce.cuh",
       "kb::strategies::argreduce::by_rows",
       false});
  add({"argreduce.columns",
       family::argreduce,
       "A thread per output, neighbouring threads on neighbouring inner positions (coalesced "
       "loads), walking the reduced axis with `unroll` loads in flight; `split` threads share an "
       "output's axis and meet in shared memory in a fixed order.",
       "arg-reductions over a strided axis (inner >= 32), e.g. argmax over dim 1 of (B, D, N)",
       "A row-per-warp kernel reads a strided axis one scattered element per lane; threads along "
       "the contiguous inner dimension read whole lines, and unrolled loads raise the loads in "
       "flight.",
       [](const shape_features& f) { return f.inner >= 32; },
       {ints("block_cols", {32, 64, 128, 256}, "outputs (threads along the inner dimension) per block"),
        ints("split", {1, 2, 4}, "threads sharing one output's reduced axis"),
        ints("unroll", {1, 2, 4, 8}, "loads in flight per thread")},
       {{"block_cols", 128}, {"split", 2}, {"unroll", 4}},
       "kblaster/device/strategies/argreduce.cuh",
       "kb::strategies::argreduce::by_columns",
       false});
}

// The pool strategies.
void add_pool_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"pool.direct",
       family::pool,
       "A thread per output column and rows_per_thread consecutive output rows: a warp covers 32 "
       "consecutive outputs along the innermost dim (coalesced stores, loads `stride` apart), the "
       "thread's rows share window rows through L1; fp32 compute.",
       "every pooling task (max or avg, 1-3 pooled dims)",
       "The baseline's thread per output recomputes the full index decomposition for every output; "
       "several output rows per thread amortise it and reuse the window rows the neighbouring "
       "output row reads, while a warp along the innermost dim keeps the stores coalesced.",
       [](const shape_features&) { return true; },
       {ints("block", {128, 256, 512, 1024}, "threads per block"),
        ints("rows_per_thread", {1, 2, 4}, "consecutive output rows per thread")},
       {{"block", 256}, {"rows_per_thread", 2}},
       "kblaster/device/strategies/pool.cuh",
       "kb::strategies::pool::direct",
       false});
  add({"pool.tiled",
       family::pool,
       "A block per tile of tile_h x tile_w outputs: for each depth tap the tile's input footprint "
       "(with its halo; padding as -inf or 0) is staged in shared memory with coalesced loads "
       "along the innermost dim, and each thread pools its outputs from shared memory (footprints "
       "over 48 KiB fall back to the direct kernel).",
       "pooling with overlapping windows (a stride below the window's extent along some dim)",
       "With overlapping windows every input element is read by several windows; staging the "
       "tile's footprint once in shared memory turns those reads into shared-memory hits and the "
       "global loads into whole coalesced lines.",
       [](const shape_features& f) { return f.overlapping; },
       {ints("tile_w", {32, 64, 128}, "outputs along the innermost dim per tile"),
        ints("tile_h", {1, 2, 4, 8}, "output rows per tile (1 for 1-d pooling)"),
        ints("block", {128, 256, 512}, "threads per block")},
       {{"tile_w", 32}, {"tile_h", 8}, {"block", 256}},
       "kblaster/device/strategies/pool.cuh",
       "kb::strategies::pool::tiled",
       false});
}

// The scan strategies.
void add_scan_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  const param_axis compensated =
      ints("compensated", {1, 0},
           "1: the carries between warps and tiles in double (the error of a long row grows with "
           "the tile, not the row); 0: all in fp32");
  add({"scan.block_rows",
       family::scan,
       "A block per row, walked in tiles of block x items_per_thread elements in scan order: each "
       "warp scans its 32 x items_per_thread elements with shuffles (coalesced loads), the warps' "
       "totals meet in shared memory in warp order and the row's carry passes from tile to tile.",
       "scans along a contiguous axis (inner < 32), e.g. cumsum over the last dim",
       "The baseline walks each row with one thread, one dependent add and one scattered load at "
       "a time; a block per row reads whole lines per warp and scans them in parallel, so the row "
       "streams at memory speed.",
       [](const shape_features& f) { return f.inner < 32; },
       {ints("block", {128, 256, 512, 1024}, "threads per block (one row per block)"),
        ints("items_per_thread", {1, 2, 4, 8, 16}, "elements per thread and tile"), compensated},
       {{"block", 256}, {"items_per_thread", 8}, {"compensated", 1}},
       "kblaster/device/strategies/scan.cuh",
       "kb::strategies::scan::block_rows",
       false});
  add({"scan.split_row",
       family::scan,
       "Few long rows: each row in chunks of `chunk` elements, a block per chunk; a first kernel "
       "writes each chunk's total (double, fixed-order block reduction) to the workspace, a second "
       "starts each chunk from the fold of the row's earlier totals in chunk order and scans it "
       "as scan.block_rows does.",
       "scans along a contiguous axis (inner < 32) of fewer rows than two per SM, each at least "
       "64Ki elements long",
       "A block per row leaves most SMs idle when the rows are few and long; chunks spread every "
       "row over the device, at the cost of reading it twice (the second read mostly from L2).",
       [](const shape_features& f) {
         return f.inner < 32 && f.rows() < 2 * device_sms && f.extent >= 65536;
       },
       {ints("block", {256, 512, 1024}, "threads per block"),
        ints("items_per_thread", {2, 4, 8, 16}, "elements per thread and tile"),
        ints("chunk", {16384, 65536, 262144}, "row elements per block"), compensated},
       {{"block", 512}, {"items_per_thread", 8}, {"chunk", 16384}, {"compensated", 1}},
       "kblaster/device/strategies/scan.cuh",
       "kb::strategies::scan::split_row",
       true});
  add({"scan.columns",
       family::scan,
       "A thread per row of a strided axis, neighbouring threads on neighbouring inner positions "
       "(coalesced loads and stores), walking the axis with `unroll` loads in flight.",
       "scans along a strided axis (inner >= 32), e.g. cumsum over dim 1 of (B, N, D)",
       "A block per strided row reads one scattered element per lane; threads along the "
       "contiguous inner dimension read and write whole lines, and unrolled loads keep several "
       "lines in flight while the running value carries sequentially.",
       [](const shape_features& f) { return f.inner >= 32; },
       {ints("block", {64, 128, 256, 512}, "threads per block"),
        ints("unroll", {1, 2, 4, 8}, "loads in flight per thread"), compensated},
       {{"block", 128}, {"unroll", 4}, {"compensated", 1}},
       "kblaster/device/strategies/scan.cuh",
       "kb::strategies::scan::columns",
       false});
}

// The matmul strategies of a diagonal operand (diag(a) @ B); in the library after the scans.
void add_diagonal_matmul_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"matmul.row_scale",
       family::matmul,
       "diag(a) @ B as a row scaling: a thread per vector of vector_bytes along a row of B, "
       "c = epilogue(alpha * a[m] * b[m, n]) in one pass (B transposed first into the workspace "
       "when the task stores it transposed).",
       "diag(a) @ B (the contract's diag_a)",
       "A diagonal matrix times B needs one multiply per element of B: reading B once and writing "
       "C once is the whole cost, where a dense product would spend K times the FLOPs.",
       [](const shape_features& f) { return f.diag; },
       {ints("block", {128, 256, 512, 1024}, "threads per block"),
        ints("vector_bytes", {4, 8, 16}, vector_text),
        names("hint", {"normal", "streaming"}, "kb::strategies::cache_hint",
              "cache policy of the loads of B and the stores of C (streaming: evict first)")},
       {{"block", 256}, {"vector_bytes", 16}, {"hint", "streaming"}},
       "kblaster/device/strategies/matmul.cuh",
       "kb::strategies::matmul::row_scale",
       true});
}

// The conv strategies.
void add_conv_strategies(std::vector<strategy>& lib) {
  const auto add = [&](strategy s) { lib.push_back(std::move(s)); };
  using task::family;

  add({"conv.implicit_gemm",
       family::conv,
       "Implicit GEMM on tensor cores at fp32 accuracy, per group: M = batch x output positions, "
       "N = output channels per group, K = input channels per group x kernel taps; each block's "
       "A chunk is gathered straight from x (zero for padding and, transposed, for taps between "
       "strides), B from the weights (or from a packed [group][N][K] copy in the workspace), "
       "both through `stages` cp.async buffers; 3xTF32 split (three mma.sync m16n8k8 per "
       "product; fp16 and bf16 take one), the mma sums flushed into fp32 totals by "
       "round-to-nearest adds every k-step or chunk; split-K partial sums added in split order "
       "by a second kernel; bias, scale and the task's epilogue applied to the output tile.",
       "convolutions whose GEMM view has K >= 16 and N >= 8 (input channels per group x kernel "
       "volume, output channels per group): standard, pointwise, grouped and transposed",
       "The baseline's thread per output re-reads every input value once per output channel and "
       "runs on the fp32 FMA pipe; the GEMM view reuses each input value over a tile of output "
       "channels from shared memory and runs the products on tensor cores, with the split "
       "keeping the fp32 tolerance.",
       [](const shape_features& f) { return kb::conv::implicit_gemm_fits(f.k, f.n); },
       {ints("bm", {64, 128}, "rows of the GEMM (batch x output positions) per block"),
        ints("bn", {32, 64, 128}, "output channels per block"),
        ints("bk", {16, 32}, "depth of the K chunks in shared memory"),
        ints("stages", {1, 2, 3}, "shared-memory buffers of the cp.async pipeline (1: load, "
                                   "wait, multiply)"),
        ints("split_k", {1, 2, 4, 8},
             "blocks along K, their partial sums added in split order (used when every split "
             "gets a chunk and the partial sums fit in 512 MiB, else 1)"),
        ints("transform", {0, 1},
             "1: the weights packed into the workspace as [group][N][K] fp32, zero padded to the "
             "tile, so B's chunks are 16-byte cp.async rows without bounds checks (pays for "
             "transposed weights, whose K is strided)"),
        ints("flush", {0, 1, 2},
             "how often the fp32 products leave the mma accumulator, whose adds truncate toward "
             "zero, for fp32 totals added with round to nearest: 0 never (the truncation "
             "accumulates over K, about 3 (K / 8) 2^-25 relative: 4.6e-5 at K = 4096); 1 every "
             "8-deep k-step (each step's mma from a zeroed fragment, one FADD per output: the "
             "error of an fp32 FMA chain); 2 every chunk (a second set of accumulators, bm x bn / "
             "256 more registers)")},
       {{"bm", 128},
        {"bn", 64},
        {"bk", 32},
        {"stages", 2},
        {"split_k", 1},
        {"transform", 0},
        {"flush", 2}},
       "kblaster/device/strategies/conv.cuh",
       "kb::strategies::conv::implicit_gemm",
       true});
  add({"conv.direct",
       family::conv,
       "A thread per outputs_per_thread adjacent outputs along the last spatial dim, gathering "
       "their taps (forward or transposed) with each weight loaded once for them, fp32 FMA.",
       "convolutions with a short reduction (K < 64, e.g. depthwise: one input channel per "
       "group) or few output channels per group (N < 8)",
       "A depthwise convolution has a reduction of only the kernel taps, too short for a GEMM "
       "tile: it is bound by memory. Several adjacent outputs per thread share each weight load "
       "and the overlapping input rows stay in L1.",
       [](const shape_features& f) { return kb::conv::direct_fits(f.k, f.n); },
       {ints("block", {128, 256, 512}, "threads per block"),
        ints("outputs_per_thread", {1, 2, 4}, "adjacent outputs along the last dim per thread")},
       {{"block", 256}, {"outputs_per_thread", 2}},
       "kblaster/device/strategies/conv.cuh",
       "kb::strategies::conv::direct",
       false});
}

// The library, family by family: strategies_for and the listings keep this order.
std::vector<strategy> make_library() {
  std::vector<strategy> lib;
  add_elementwise_strategies(lib);
  add_normalize_strategies(lib);
  add_reduce_strategies(lib);
  add_loss_strategies(lib);
  add_matmul_strategies(lib);
  add_argreduce_strategies(lib);
  add_pool_strategies(lib);
  add_scan_strategies(lib);
  add_diagonal_matmul_strategies(lib);
  add_conv_strategies(lib);
  return lib;
}

std::string value_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

} // namespace

const param_axis& strategy::axis(const std::string& axis_name) const {
  for (const auto& a : space) {
    if (a.name == axis_name) {
      return a;
    }
  }
  fail_input("strategy {} has no parameter '{}'", name, axis_name);
}

uint64_t strategy::space_size() const {
  uint64_t n = 1;
  for (const auto& a : space) {
    n *= a.values.size();
  }
  return n;
}

bool chained(const task::contract& c) {
  return c.lowering.find_first_of("|>") != std::string::npos;
}

bool later_products(const task::contract& c) {
  size_t at = c.lowering.find('|');
  while (at != std::string::npos) {
    const size_t end = c.lowering.find('|', at + 1);
    const std::string step = c.lowering.substr(at + 1, end == std::string::npos ? end : end - at - 1);
    const std::string name = step.substr(0, step.find_first_of("+("));
    if (name == "linear" || name == "matmul" || name == "mm" || name.rfind("conv", 0) == 0) {
      return true;
    }
    at = end;
  }
  return false;
}

namespace {

// The shape a conv task's convolution reads at one shape: x's, or in a chain with passes over
// the forward's input before the convolution, the last pass's ([conv] input). Empty when an
// expression does not evaluate.
std::vector<int64_t> conv_input(const task::contract& c, const task::shape_case& s,
                                const std::vector<int64_t>& x) {
  if (!c.conv || c.conv->input.empty()) {
    return x;
  }
  std::vector<int64_t> out;
  try {
    for (const auto& e : c.conv->input) {
      out.push_back(task::eval_expr(e, s.dims));
    }
  } catch (const std::exception&) {
    return {};
  }
  return out;
}

// A chained task's anchor output at one shape (its contract's output is the chain's last): the
// product's [M, N] (x [M, K] times b, transposed for Linear) or the convolution's output from x,
// the weight and the [conv] table. Empty when the operands do not give one.
std::vector<int64_t> anchor_output(const task::contract& c, const task::shape_case& s,
                                   const std::vector<task::concrete_tensor>& inputs) {
  if (c.fam == task::family::matmul) {
    int ai = -1;
    int bi = -1;
    if (with_role(c.inputs, "a", &ai) == nullptr || with_role(c.inputs, "b", &bi) == nullptr) {
      return {};
    }
    const auto& a = inputs[static_cast<size_t>(ai)].shape;
    const auto& b = inputs[static_cast<size_t>(bi)].shape;
    const bool ta = c.matmul && c.matmul->trans_a;
    const bool tb = c.matmul && c.matmul->trans_b;
    if (a.size() < 2 || b.size() < 2) {
      return {};
    }
    const int64_t m = ta ? a[a.size() - 1] : a[a.size() - 2];
    const int64_t k = ta ? a[a.size() - 2] : a[a.size() - 1];
    const int64_t bk = tb ? b[b.size() - 1] : b[b.size() - 2];
    const int64_t n = tb ? b[b.size() - 2] : b[b.size() - 1];
    const std::vector<int64_t> lead_a(a.begin(), a.end() - 2);
    const std::vector<int64_t> lead_b(b.begin(), b.end() - 2);
    if (bk != k || (!lead_a.empty() && !lead_b.empty() && lead_a != lead_b)) {
      return {};
    }
    // The batch dims of the operand that has them, then the product's [M, N].
    std::vector<int64_t> y = lead_a.empty() ? lead_b : lead_a;
    y.push_back(m);
    y.push_back(n);
    return y;
  }
  int xi = -1;
  int wi = -1;
  if (c.fam != task::family::conv || !c.conv || with_role(c.inputs, "x", &xi) == nullptr ||
      with_role(c.inputs, "weight", &wi) == nullptr) {
    return {};
  }
  const auto x = conv_input(c, s, inputs[static_cast<size_t>(xi)].shape);
  const auto& w = inputs[static_cast<size_t>(wi)].shape;
  const auto& p = *c.conv;
  const size_t nd = static_cast<size_t>(p.rank) + 2;
  if (x.size() != nd || w.size() != nd) {
    return {};
  }
  std::vector<int64_t> y{x[0], 0};
  try {
    y[1] = task::eval_expr(p.out_channels, s.dims);
  } catch (const std::exception&) {
    return {};
  }
  for (size_t d = 0; d < nd - 2; ++d) {
    const int64_t o = task::conv_output_size(x[2 + d], w[2 + d], p.stride[d], p.padding[d],
                                             p.dilation[d], p.transposed ? p.output_padding[d] : 0,
                                             p.transposed);
    if (o <= 0) {
      return {};
    }
    y.push_back(o);
  }
  return y;
}

} // namespace

shape_features features_of(const task::contract& c, const task::shape_case& s) {
  shape_features f;
  f.fam = c.fam;
  const auto inputs = task::concrete_inputs(c, s);
  auto outputs = task::concrete_outputs(c, s);
  if (chained(c) && !outputs.empty()) {
    // The strategy runs the anchor: its features are the anchor output's.
    outputs[0].shape = anchor_output(c, s, inputs);
    if (outputs[0].shape.empty()) {
      return f;
    }
  }
  const auto supported = [](const task::concrete_tensor& t) { return storage_type(t.type); };
  if (inputs.empty() || outputs.empty()) {
    return f;
  }
  const auto layout_of = [&](const task::concrete_tensor& x) {
    const auto [begin, end] = task::row_span_of(c);
    f.channel_rows = c.fam == task::family::normalize && c.channel_rows;
    f.outer = f.extent = f.inner = 1;
    for (int i = 0; i < static_cast<int>(x.shape.size()); ++i) {
      (i < begin ? f.outer : (i < end ? f.extent : f.inner)) *= x.shape[i];
    }
    // Groups: a row is one group of channels (the device's layout_of).
    if (c.fam == task::family::normalize && c.groups > 0) {
      f.groups = c.groups;
      f.outer *= c.groups;
      f.extent /= c.groups;
    }
  };
  switch (c.fam) {
  case task::family::elementwise:
    f.storage = inputs[0].type;
    f.elements = inputs[0].numel();
    f.supported_dtypes = supported(inputs[0]) && outputs[0].type == inputs[0].type;
    break;
  case task::family::normalize:
  case task::family::reduce:
  case task::family::loss: {
    int xi = -1;
    if (with_role(c.inputs, "x", &xi) == nullptr) {
      return f;
    }
    const auto& x = inputs[xi];
    f.storage = x.type;
    f.elements = x.numel();
    layout_of(x);
    f.supported_dtypes = supported(x);
    if (c.fam == task::family::loss) {
      int ti = -1;
      const bool has_target = with_role(c.inputs, "target", &ti) != nullptr;
      f.pointwise = has_target && task::is_floating(inputs[ti].type);
      f.supported_dtypes =
          f.supported_dtypes && has_target && supported(outputs[0]) &&
          (f.pointwise ? inputs[ti].type == x.type && inputs[ti].numel() > 0 &&
                             x.numel() % inputs[ti].numel() == 0
                       : inputs[ti].type == task::dtype::int64);
    } else {
      f.supported_dtypes = f.supported_dtypes && outputs[0].type == x.type;
    }
    for (const auto& [role, flag] :
         {std::pair{"weight", &f.has_weight}, std::pair{"bias", &f.has_bias}}) {
      int pi = -1;
      if (c.fam == task::family::normalize && with_role(c.inputs, role, &pi) != nullptr) {
        *flag = true;
        f.supported_dtypes = f.supported_dtypes && inputs[pi].type == x.type;
      }
    }
    break;
  }
  case task::family::scan:
  case task::family::argreduce: {
    int xi = -1;
    if (with_role(c.inputs, "x", &xi) == nullptr) {
      return f;
    }
    const auto& x = inputs[xi];
    f.storage = x.type;
    f.elements = x.numel();
    layout_of(x);
    f.supported_dtypes = supported(x) && outputs[0].type == (c.fam == task::family::argreduce
                                                                 ? task::dtype::int64
                                                                 : x.type);
    int mi = -1;
    if (c.fam == task::family::scan && with_role(c.inputs, "mask", &mi) != nullptr) {
      f.supported_dtypes = f.supported_dtypes && inputs[mi].type != task::dtype::float64 &&
                           inputs[mi].numel() == x.numel();
    }
    break;
  }
  case task::family::pool: {
    int xi = -1;
    if (with_role(c.inputs, "x", &xi) == nullptr || !c.pool) {
      return f;
    }
    const auto& x = inputs[xi];
    f.storage = x.type;
    f.elements = outputs[0].numel();
    f.pool_rank = c.pool->rank;
    f.outer = f.extent = f.inner = 1;
    const int first = static_cast<int>(x.shape.size()) - c.pool->rank;
    for (int i = 0; i < static_cast<int>(x.shape.size()); ++i) {
      (i < first ? f.outer : f.extent) *= x.shape[i];
    }
    f.window = 1;
    for (int i = 0; i < c.pool->rank; ++i) {
      f.window *= c.pool->kernel[i];
      f.overlapping = f.overlapping || c.pool->stride[i] < (c.pool->kernel[i] - 1) * c.pool->dilation[i] + 1;
    }
    f.supported_dtypes = supported(x) && outputs[0].type == x.type;
    break;
  }
  case task::family::matmul: {
    int ai = -1;
    int bi = -1;
    if (with_role(c.inputs, "a", &ai) == nullptr || with_role(c.inputs, "b", &bi) == nullptr) {
      return f;
    }
    const auto& a = inputs[ai];
    const auto& b = inputs[bi];
    f.storage = a.type;
    const auto product = task::matmul_shape_of(c, s);
    if (product) {
      f.m = product->m;
      f.n = product->n;
      f.k = product->k;
      f.batch = product->batch;
    }
    f.diag = c.matmul && c.matmul->diag_a;
    f.elements = outputs[0].numel();
    f.supported_dtypes = supported(a) && b.type == a.type && outputs[0].type == a.type &&
                         product.has_value();
    if (chained(c)) {
      // The anchor's product: [batch..., M, N] from anchor_output, K from a.
      const auto& y = outputs[0].shape;
      const bool ta = c.matmul && c.matmul->trans_a;
      f.m = y[y.size() - 2];
      f.n = y[y.size() - 1];
      f.k = ta ? a.shape[a.shape.size() - 2] : a.shape.back();
      f.batch = 1;
      for (size_t d = 0; d + 2 < y.size(); ++d) {
        f.batch *= y[d];
      }
      // The chain's intermediates are float32.
      f.supported_dtypes = a.type == task::dtype::float32 && b.type == a.type &&
                           outputs[0].type == a.type;
    }
    break;
  }
  case task::family::conv: {
    int xi = -1;
    int wi = -1;
    if (!c.conv || with_role(c.inputs, "x", &xi) == nullptr ||
        with_role(c.inputs, "weight", &wi) == nullptr) {
      return f;
    }
    const auto& x = inputs[xi];
    const auto& w = inputs[wi];
    const auto& y = outputs[0];
    const size_t nd = static_cast<size_t>(c.conv->rank) + 2;
    const auto xs = conv_input(c, s, x.shape); // what the convolution reads
    if (xs.size() != nd || w.shape.size() != nd || y.shape.size() != nd) {
      return f;
    }
    f.storage = x.type;
    f.elements = y.numel();
    f.transposed = c.conv->transposed;
    f.groups = (c.conv->transposed ? y.shape[1] : xs[1]) / std::max<int64_t>(w.shape[1], 1);
    if (f.groups < 1) {
      return f;
    }
    f.m = y.shape[0];
    f.k = (c.conv->transposed ? w.shape[0] / f.groups : w.shape[1]);
    for (size_t d = 2; d < nd; ++d) {
      f.m *= y.shape[d];
      f.k *= w.shape[d];
    }
    f.n = y.shape[1] / f.groups;
    f.supported_dtypes = supported(x) && w.type == x.type && y.type == x.type &&
                         (!chained(c) || x.type == task::dtype::float32);
    for (const char* role : {"bias", "scale"}) {
      int pi = -1;
      if (with_role(c.inputs, role, &pi) != nullptr) {
        f.has_bias = f.has_bias || std::string(role) == "bias";
        f.supported_dtypes = f.supported_dtypes && inputs[pi].type == x.type;
      }
    }
    break;
  }
  }
  return f;
}

const std::vector<strategy>& all_strategies() {
  static const std::vector<strategy> lib = make_library();
  return lib;
}

const strategy& find_strategy(const std::string& name) {
  std::string known;
  for (const auto& s : all_strategies()) {
    if (s.name == name) {
      return s;
    }
    known += (known.empty() ? "" : ", ") + s.name;
  }
  fail_input("no strategy named '{}' (known: {})", name, known);
}

bool applies(const strategy& st, const task::contract& c, const task::shape_case& s) {
  if (!c.has_family() || st.fam != c.fam) {
    return false;
  }
  const shape_features f = features_of(c, s);
  // Every conv strategy takes every geometry: a later convolution the anchor's features do not
  // describe (a pointwise after a depthwise) may want one the anchor's would not offer. The
  // matmul strategies differ in the forms they take, which the anchor's features tell.
  return f.supported_dtypes &&
         (st.fits(f) || (c.fam == task::family::conv && later_products(c)));
}

std::vector<const strategy*> strategies_for(const task::contract& c) {
  std::vector<const strategy*> out;
  for (const auto& s : all_strategies()) {
    if (applies(s, c, c.official())) {
      out.push_back(&s);
    }
  }
  return out;
}

json resolve_params(const strategy& st, const json& params) {
  if (!params.is_null() && !params.is_object()) {
    fail_input("parameters of {}: expected an object of parameter names to values, got {}", st.name,
               params.dump());
  }
  json point = st.defaults;
  if (params.is_object()) {
    for (const auto& [key, value] : params.items()) {
      const param_axis& a = st.axis(key);
      if (std::find(a.values.begin(), a.values.end(), value) == a.values.end()) {
        std::string allowed;
        for (const auto& v : a.values) {
          allowed += (allowed.empty() ? "" : ", ") + value_text(v);
        }
        fail_input("parameter {} of {}: {} is not one of {}", key, st.name, value.dump(), allowed);
      }
      point[key] = value;
    }
  }
  return point;
}

std::string candidate_info(const strategy& st, const json& params) {
  const json point = resolve_params(st, params);
  std::string info = st.name;
  for (const auto& a : st.space) {
    info += fmt::format(" {}={}", a.name, value_text(point.at(a.name)));
  }
  return info;
}

namespace {

// A point's parameters as the members of a params struct (`static constexpr`).
std::string param_members(const strategy& st, const json& point) {
  std::string members;
  for (const auto& a : st.space) {
    const json& v = point.at(a.name);
    if (a.cpp_enum.empty()) {
      members += fmt::format("  static constexpr int {} = {};\n", a.name, v.get<int>());
    } else {
      members += fmt::format("  static constexpr {0} {1} = {0}::{2};\n", a.cpp_enum, a.name,
                             v.get<std::string>());
    }
  }
  return members;
}

// A conv strategy's `fits` at run time: its entry's name with `_fits`
// (kblaster/device/strategies/conv.cuh), the library's offer at a call's geometry.
std::string conv_fit(const strategy& st) {
  return st.entry + "_fits";
}

// The chain's anchor family: the strategy at this point over every product of the chain. In a
// conv chain with later convolutions, one the strategy does not fit runs with the other conv
// strategy at its default point (its params struct, kb_fallback_params, first).
std::string anchor_family_source(const task::contract& c, const strategy& st) {
  const auto workspace_of = [](const strategy& s, const std::string& params) {
    return s.has_workspace
               ? fmt::format("    return {}<Op, {}>::workspace_bytes(args, config, bytes);\n",
                             s.entry, params)
               : std::string("    (void)args;\n    (void)config;\n    *bytes = 0;\n    return 0;\n");
  };
  const strategy* other = nullptr;
  if (c.fam == task::family::conv && later_products(c)) {
    for (const auto& s : all_strategies()) {
      if (s.fam == task::family::conv && s.name != st.name) {
        other = &s;
      }
    }
  }
  if (other == nullptr) {
    return fmt::format(
        "// The strategy at this point over the chain's products: the anchor (kb_op under\n"
        "// kb_family_config) and any later one (its own op and config).\n"
        "struct kb_anchor_family {{\n"
        "  template <template <class> class Op, class C>\n"
        "  static int launch(const kb_args* args, const C& config) {{\n"
        "    return {}<Op, kb_strategy_params>::launch(args, config);\n  }}\n"
        "  template <template <class> class Op, class C>\n"
        "  static int workspace(const kb_args* args, const C& config, uint64_t* bytes) {{\n"
        "{}  }}\n}};\n\n",
        st.entry, workspace_of(st, "kb_strategy_params"));
  }
  const std::string fit = conv_fit(st);
  return fmt::format(
      "// {other}'s default point, for a product {name} does not fit.\n"
      "struct kb_fallback_params {{\n{members}}};\n\n"
      "// The strategy at this point over the chain's products: the anchor (kb_op under\n"
      "// kb_family_config) and any later one (its own op and config); a convolution it does not\n"
      "// fit (the library's condition for offering it) runs with {other} at its default point.\n"
      "struct kb_anchor_family {{\n"
      "  template <template <class> class Op, class C>\n"
      "  static int launch(const kb_args* args, const C& config) {{\n"
      "    if (!{fit}(args, config)) {{\n"
      "      return {other_entry}<Op, kb_fallback_params>::launch(args, config);\n    }}\n"
      "    return {entry}<Op, kb_strategy_params>::launch(args, config);\n  }}\n"
      "  template <template <class> class Op, class C>\n"
      "  static int workspace(const kb_args* args, const C& config, uint64_t* bytes) {{\n"
      "    if (!{fit}(args, config)) {{\n{other_workspace}    }}\n"
      "{workspace}  }}\n}};\n\n",
      fmt::arg("other", other->name), fmt::arg("name", st.name),
      fmt::arg("members", param_members(*other, other->defaults)), fmt::arg("fit", fit),
      fmt::arg("other_entry", other->entry), fmt::arg("entry", st.entry),
      fmt::arg("other_workspace", "  " + workspace_of(*other, "kb_fallback_params")),
      fmt::arg("workspace", workspace_of(st, "kb_strategy_params")));
}

} // namespace

std::string generate(const task::contract& c, const strategy& st, const json& params) {
  if (!c.has_family()) {
    fail_input("task {} is a pytorch task that is not lowered onto a family{}", c.id,
               c.not_lowered.empty() ? std::string(" (it has no graph.json)")
                                     : ": " + c.not_lowered.front());
  }
  if (st.fam != c.fam) {
    fail_input("strategy {} is for family {}, task {} is of family {}", st.name,
               task::to_string(st.fam), c.id, task::to_string(c.fam));
  }
  const json point = resolve_params(st, params);
  const std::string info = candidate_info(st, point);
  const std::string members = param_members(st, point);
  const bool has_config = c.fam != task::family::elementwise;
  const std::string config_arg = has_config ? ", kb_family_config" : "";
  const std::string workspace =
      st.has_workspace
          ? fmt::format("  return kb_strategy::workspace_bytes(args{}, bytes);\n", config_arg)
          : "  (void)args;\n  *bytes = 0;\n  return 0;\n";
  std::string description = st.description;
  std::string wrapped;
  size_t line = 0;
  for (size_t pos = 0; pos < description.size();) {
    const size_t space = description.find(' ', pos);
    const std::string word =
        description.substr(pos, space == std::string::npos ? std::string::npos : space - pos);
    if (line > 0 && line + 1 + word.size() > 96) {
      wrapped += "\n//";
      line = 0;
    }
    wrapped += " " + word;
    line += 1 + word.size();
    pos = space == std::string::npos ? description.size() : space + 1;
  }
  if (chained(c)) {
    // The plan's kernels after the anchor (the math's kb_chain, kblaster/device/chain.cuh): the
    // strategy runs the anchor into the workspace, the chain the kernels after it.
    return fmt::format(
        "// Candidate generated by the KernelBlaster strategy library: the anchor of the chain {}.\n"
        "// {}\n"
        "//{}\n"
        "#include <{}>\n"
        "#include KB_TASK_MATH\n\n"
        "{}"
        "struct kb_strategy_params {{\n{}}};\n\n"
        "{}"
        "extern \"C\" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) "
        "{{\n  return kb_chain::workspace_bytes(args, kb_family_config, kb_anchor_family{{}}, "
        "bytes);\n}}\n\n"
        "extern \"C\" KB_EXPORT int kb_launch(const kb_args* args) {{\n  return "
        "kb_chain::launch(args, kb_family_config, kb_anchor_family{{}});\n}}\n\n"
        "extern \"C\" KB_EXPORT const char* kb_candidate_info(void) {{ return \"{}\"; }}\n",
        c.lowering, info, wrapped, st.header, task::family_config_source(c) + "\n", members,
        anchor_family_source(c, st), info);
  }
  return fmt::format(
      "// Candidate generated by the KernelBlaster strategy library.\n"
      "// {}\n"
      "//{}\n"
      "#include <{}>\n"
      "#include KB_TASK_MATH\n\n"
      "{}"
      "struct kb_strategy_params {{\n{}}};\n\n"
      "using kb_strategy = {}<kb_op, kb_strategy_params>;\n\n"
      "extern \"C\" KB_EXPORT int kb_workspace_bytes(const kb_args* args, uint64_t* bytes) "
      "{{\n{}}}\n\n"
      "extern \"C\" KB_EXPORT int kb_launch(const kb_args* args) {{ return "
      "kb_strategy::launch(args{}); }}\n\n"
      "extern \"C\" KB_EXPORT const char* kb_candidate_info(void) {{ return \"{}\"; }}\n",
      info, wrapped, st.header, has_config ? task::family_config_source(c) + "\n" : "", members,
      st.entry, workspace, config_arg, info);
}

std::vector<json> corner_points(const strategy& st) {
  std::vector<json> points{st.defaults};
  json first = st.defaults;
  json last = st.defaults;
  for (const auto& a : st.space) {
    for (const json& v : {a.values.front(), a.values.back()}) {
      json p = st.defaults;
      p[a.name] = v;
      points.push_back(p);
    }
    first[a.name] = a.values.front();
    last[a.name] = a.values.back();
  }
  points.push_back(first);
  points.push_back(last);
  std::vector<json> unique;
  std::set<std::string> seen;
  for (auto& p : points) {
    if (seen.insert(p.dump()).second) {
      unique.push_back(std::move(p));
    }
  }
  return unique;
}

std::vector<profile::state> addressed_states(const strategy& st) {
  using profile::state;
  // memory_bound: fewer or wider accesses, one read instead of two. latency_bound: more
  // independent work in flight per thread and per SM. small_grid: more blocks for few rows or
  // columns. compute_bound and balanced: reuse from registers and shared memory. unknown (the
  // analytic roofline below 60% of both ceilings): every strategy, since nothing is excluded.
  static const std::map<std::string, std::vector<state>> table{
      {"elementwise.vectorized", {state::memory_bound, state::latency_bound, state::unknown}},
      {"normalize.warp_row", {state::latency_bound, state::memory_bound, state::unknown}},
      {"normalize.block_row", {state::memory_bound, state::unknown}},
      {"normalize.cluster_row", {state::small_grid, state::latency_bound, state::unknown}},
      {"normalize.split_row", {state::small_grid, state::latency_bound, state::unknown}},
      {"normalize.strided_columns", {state::memory_bound, state::latency_bound, state::unknown}},
      {"reduce.rows", {state::memory_bound, state::latency_bound, state::unknown}},
      {"reduce.split_row", {state::small_grid, state::latency_bound, state::unknown}},
      {"reduce.columns", {state::memory_bound, state::latency_bound, state::unknown}},
      {"reduce.split_columns", {state::small_grid, state::latency_bound, state::unknown}},
      {"loss.warp_row", {state::latency_bound, state::memory_bound, state::unknown}},
      {"loss.block_row", {state::memory_bound, state::unknown}},
      {"loss.columns", {state::memory_bound, state::latency_bound, state::unknown}},
      {"matmul.matvec", {state::memory_bound, state::small_grid, state::unknown}},
      {"argreduce.rows", {state::memory_bound, state::latency_bound, state::unknown}},
      {"argreduce.columns", {state::memory_bound, state::latency_bound, state::unknown}},
      {"pool.direct", {state::latency_bound, state::memory_bound, state::unknown}},
      {"scan.block_rows", {state::latency_bound, state::memory_bound, state::small_grid, state::unknown}},
      {"scan.columns", {state::memory_bound, state::latency_bound, state::unknown}},
      {"scan.split_row", {state::small_grid, state::latency_bound, state::unknown}},
      {"pool.tiled", {state::memory_bound, state::compute_bound, state::balanced, state::unknown}},
      {"matmul.row_scale", {state::memory_bound, state::latency_bound, state::unknown}},
      {"matmul.register_tiled",
       {state::compute_bound, state::balanced, state::latency_bound, state::unknown}},
      {"matmul.tensor_core",
       {state::compute_bound, state::balanced, state::latency_bound, state::unknown}},
      {"conv.implicit_gemm",
       {state::compute_bound, state::balanced, state::latency_bound, state::unknown}},
      {"conv.direct", {state::memory_bound, state::latency_bound, state::unknown}},
  };
  const auto it = table.find(st.name);
  return it == table.end() ? std::vector<state>{state::unknown} : it->second;
}

bool addresses(const strategy& st, profile::state s) {
  const auto states = addressed_states(st);
  return std::find(states.begin(), states.end(), s) != states.end();
}

} // namespace kb::search
