// Store-pattern probe: how fast a 32768 x 32768 fp32 matrix (4.3 GB, task 007's C) is written
// with a given pattern, and what per-tile busy work in the storing warps costs. Not a candidate:
// a standalone program, timed with CUDA events (median of 7 after a warm-up), no L2 flush (the
// writes are 70 times the L2). Prints one line per pattern: cudaMemset, grid-stride float4
// stores, and persistent blocks writing 128 x 128 (and other) tiles from shared memory by whole
// rows, walking rows or columns, with `spin` cycles of busy work after each tile's stores.
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a store_patterns.cu -o store_patterns
// Output on the H200: evidence/h200/probes/store-patterns.txt.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__global__ void grid_stride(float4* c, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x)
    __stcs(c + i, make_float4(1.f, 2.f, 3.f, 4.f));
}
__global__ void grid_stride_wb(float4* c, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x)
    c[i] = make_float4(1.f, 2.f, 3.f, 4.f);
}

// Persistent tile writer: tiles BM x BN, contiguous range per block, walk rows (cols_walk=0) or columns.
// spin: cycles of busy work per tile after issuing the stores (compute stand-in).
template <int BM, int BN, int THREADS>
__global__ void __launch_bounds__(THREADS) tiles(float* c, int64_t M, int64_t N, int cols_walk, int spin, int hint) {
  extern __shared__ float4 s4[];
  float* cs = reinterpret_cast<float*>(s4);
  constexpr int pitch = BN + 4;
  for (int i = threadIdx.x; i < BM * pitch; i += THREADS) cs[i] = (float)i;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tm = M / BM, tn = N / BN, T = tm * tn;
  const int64_t first = T * blockIdx.x / gridDim.x, last = T * (blockIdx.x + 1) / gridDim.x;
  float sink = 0.f;
  for (int64_t t = first; t < last; ++t) {
    int64_t m0, n0;
    if (cols_walk) { m0 = t % tm * BM; n0 = t / tm * BN; } else { m0 = t / tn * BM; n0 = t % tn * BN; }
    #pragma unroll 4
    for (int r = warp; r < BM; r += THREADS / 32) {
      float* crow = c + (m0 + r) * N + n0;
      #pragma unroll
      for (int j = 0; j < BN / 128; ++j) {
        float4 v = *reinterpret_cast<const float4*>(cs + r * pitch + 128 * j + 4 * lane);
        if (hint) __stcs(reinterpret_cast<float4*>(crow + 128 * j + 4 * lane), v);
        else *reinterpret_cast<float4*>(crow + 128 * j + 4 * lane) = v;
      }
    }
    if (spin) {
      long long t0 = clock64();
      while (clock64() - t0 < spin) sink += 1.f;
    }
    __syncthreads();
  }
  if (sink == 12345.f) c[0] = sink;
}

template <class F> float time_it(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  f(); cudaDeviceSynchronize();
  std::vector<float> v;
  for (int i = 0; i < 7; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); v.push_back(ms); }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int BM, int BN, int THREADS>
void run_tiles(float* c, int64_t M, int64_t N, int blocks_per_sm, int cols, int spin, int hint, int sms) {
  int smem = BM * (BN + 4) * 4;
  cudaFuncSetAttribute(tiles<BM, BN, THREADS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  float ms = time_it([&] { tiles<BM, BN, THREADS><<<sms * blocks_per_sm, THREADS, smem>>>(c, M, N, cols, spin, hint); });
  cudaError_t e = cudaGetLastError();
  double gbs = M * N * 4.0 / ms / 1e6;
  printf("tiles %4dx%-4d thr %4d blk/sm %d %s spin %5d %s : %.4f ms  %.0f GB/s %s\n", BM, BN, THREADS, blocks_per_sm,
         cols ? "cols" : "rows", spin, hint ? "cs" : "wb", ms, gbs, e ? cudaGetErrorString(e) : "");
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t M = 32768, N = 32768;
  float* c; cudaMalloc(&c, M * N * 4);
  const int64_t n4 = M * N / 4;
  printf("memset: %.4f ms\n", time_it([&] { cudaMemsetAsync(c, 0, M * N * 4); }));
  for (int b : {1, 2, 4, 8})
    printf("grid_stride cs blocks %d x %d/sm : %.4f ms\n", sms * b, 1024, time_it([&] { grid_stride<<<sms * b, 1024>>>((float4*)c, n4); }));
  printf("grid_stride wb 4/sm : %.4f ms\n", time_it([&] { grid_stride_wb<<<sms * 4, 1024>>>((float4*)c, n4); }));
  printf("grid_stride cs 1x256/sm : %.4f ms\n", time_it([&] { grid_stride<<<sms, 256>>>((float4*)c, n4); }));
  for (int hint : {1, 0}) {
    run_tiles<128, 128, 256>(c, M, N, 1, 0, 0, hint, sms);
  }
  run_tiles<128, 128, 256>(c, M, N, 1, 1, 0, 1, sms);
  run_tiles<128, 128, 256>(c, M, N, 2, 0, 0, 1, sms);
  run_tiles<128, 128, 384>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<128, 128, 512>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<128, 256, 256>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<64, 256, 256>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<64, 512, 256>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<32, 1024, 256>(c, M, N, 1, 0, 0, 1, sms);
  run_tiles<256, 128, 256>(c, M, N, 1, 0, 0, 1, sms);
  for (int spin : {1000, 2000, 2300, 3000, 4000}) {
    run_tiles<128, 128, 256>(c, M, N, 1, 0, spin, 1, sms);
  }
  for (int spin : {2000, 4000}) run_tiles<128, 256, 256>(c, M, N, 1, 0, spin, 1, sms);
  cudaFree(c);
  return 0;
}
