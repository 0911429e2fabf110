#pragma once
#include <cuda_bf16.h>

namespace engine {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <int BLOCK>
__device__ __forceinline__ float block_sum(float x) {
  static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32");
  __shared__ float red[BLOCK / 32];
  x = warp_sum(x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  float t = (threadIdx.x < BLOCK / 32) ? red[threadIdx.x] : 0.f;
  if (warp == 0) t = warp_sum(t);
  __shared__ float total;
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  return total;
}

}  // namespace engine
