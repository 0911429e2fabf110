// Fused bf16 RMSNorm: out[t, :] = bf16(x[t, :] * rsqrt(mean(x^2) + eps) * w[:])
// x, out: [tokens, hidden] bf16 row-major; w: [hidden] bf16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/cstdint>
#include "engine_utils.cuh"

namespace myengine {

template <int BLOCK, int VEC, bool CACHE_IN_SMEM>
__global__ void __launch_bounds__(BLOCK)
rms_norm_bf16(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ x,
              const __nv_bfloat16* __restrict__ w, int64_t tokens, int hidden, float eps) {
  using V = engine::Vec<__nv_bfloat16, VEC>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  V* cache = reinterpret_cast<V*>(smem_raw);
  const int t = blockIdx.x;
  if (t >= tokens) return;
  const V* xr = reinterpret_cast<const V*>(x + (size_t)t * hidden);
  const V* wr = reinterpret_cast<const V*>(w);
  V* orow = reinterpret_cast<V*>(out + (size_t)t * hidden);
  const int nvec = hidden / VEC;

  float ss = 0.f;
  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    V v = xr[i];
    if (CACHE_IN_SMEM) cache[i] = v;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float f = __bfloat162float(v.v[k]);
      ss += f * f;
    }
  }
  const float total = engine::block_sum<BLOCK>(ss);
  const float rstd = rsqrtf(total / (float)hidden + eps);

  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    V v = CACHE_IN_SMEM ? cache[i] : xr[i];
    V wv = wr[i];
    V o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      o.v[k] = __float2bfloat16(__bfloat162float(v.v[k]) * rstd * __bfloat162float(wv.v[k]));
    }
    orow[i] = o;
  }
}

}  // namespace myengine
