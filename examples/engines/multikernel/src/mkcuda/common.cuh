// mkcuda: helpers shared by the kernels of this backend (a fixture of evo, in the style of llama.cpp's ggml-cuda/).
#pragma once

#include <cstdint>

#define MK_WARP_SIZE 32

// Division by a run-time constant d without a divide instruction: the host computes (mp, L) once and passes the
// three values by value; then n / d = (umulhi(n, mp) + n) >> L for every n < 2^31.
struct fastdiv_consts {
  uint32_t mp;  // magic multiplier
  uint32_t L;   // shift: ceil(log2(d))
  uint32_t d;   // the divisor itself, for the modulo
};

static __host__ __device__ inline fastdiv_consts make_fastdiv_consts(uint32_t d) {
  uint32_t L = 0;
  while (L < 32 && (uint64_t(1) << L) < d) ++L;
  const uint32_t mp = uint32_t((uint64_t(1) << 32) * ((uint64_t(1) << L) - d) / d + 1);
  return {mp, L, d};
}

static __device__ __forceinline__ uint32_t fastdiv(uint32_t n, const fastdiv_consts c) {
  return (__umulhi(n, c.mp) + n) >> c.L;
}

static __device__ __forceinline__ uint32_t fastmodulo(uint32_t n, const fastdiv_consts c) {
  return n - fastdiv(n, c) * c.d;
}

static __device__ __forceinline__ float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = MK_WARP_SIZE / 2; offset > 0; offset >>= 1) {
    x += __shfl_xor_sync(0xffffffff, x, offset, MK_WARP_SIZE);
  }
  return x;
}
