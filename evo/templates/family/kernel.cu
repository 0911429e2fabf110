// {name}: a starter kernel, written as inference engines write theirs (made by `evo new`; replace it with yours).
//   out[i] = bf16(float(x[i]) * scale + float(y[i]))
// Its tuning parameters are template parameters of the entry point; family.py's `entry` names them, and evo
// compiles each genome's instantiation through NVRTC name expressions. Elementwise: no knob changes the bits.
#include <cuda_bf16.h>

template <int VEC>
struct alignas(2 * VEC) Pack {{
  __nv_bfloat16 v[VEC];
}};

template <int BLOCK, int VEC>
__global__ void __launch_bounds__(BLOCK) {name}(const __nv_bfloat16* __restrict__ x,
                                                const __nv_bfloat16* __restrict__ y,
                                                __nv_bfloat16* __restrict__ out, float scale, int n) {{
  const int i = (blockIdx.x * BLOCK + threadIdx.x) * VEC;  // n % VEC == 0 (family.check)
  if (i >= n) return;
  const Pack<VEC> a = *reinterpret_cast<const Pack<VEC>*>(x + i);
  const Pack<VEC> b = *reinterpret_cast<const Pack<VEC>*>(y + i);
  Pack<VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {{
    o.v[j] = __float2bfloat16_rn(fmaf(__bfloat162float(a.v[j]), scale, __bfloat162float(b.v[j])));
  }}
  *reinterpret_cast<Pack<VEC>*>(out + i) = o;
}}
