// fused_add_rmsnorm: residual add + RMSNorm, one token row per block (decode-time kernel).
//
// For each row t of T rows with hidden size H:
//   r               = bf16(float(x[t]) + float(residual[t]))
//   residual_out[t] = r
//   out[t]          = bf16(float(r) * rsqrt(mean(float(r)^2) + eps) * float(weight))
//                     (rounds 2: the product before the weight rounded to bf16 first, as an engine may)
//
// Engines update x and residual in place; this is the out-of-place form (x, residual and
// weight are only read), so a CUDA graph can launch it again and again on the same inputs.
//
// Written as an inference engine writes it: <cuda_bf16.h> types and conversions, the tuning
// parameters as template parameters, __launch_bounds__(BLOCK), __restrict__ pointers. It uses
// no EVO_* macro: the harness picks an instantiation by its template-id (family.py, entry).
//
//   BLOCK  threads per block (a multiple of 32, at most 1024)
//   VEC    bf16 elements per load and store: 1, 2, 4 or 8 (2- to 16-byte accesses; H % VEC == 0)
//   CACHE  0: the second pass re-reads residual_out (what this thread itself wrote);
//          n > 0: r stays in registers between the passes, n vectors per thread
//          (needs H <= BLOCK * VEC * n), and pass 1 issues all its loads before any arithmetic
//   RED    how the warps' partial square sums are combined (Reduce below)
//
// Bits: the square sum is accumulated with explicit fmaf in element order per thread, so a
// thread's partial depends only on which elements it owns (BLOCK and VEC decide that); CACHE and
// RED keep every output bit.

#include <cuda_bf16.h>

// warp0: warp 0 sums the warp partials and broadcasts the total through shared memory (two barriers).
// all_warps: every warp sums the partials itself, in the same butterfly order (one barrier, same bits).
enum class Reduce { warp0, all_warps };

// VEC bf16 values moved as one access of 2, 4, 8 or 16 bytes: held as one machine word (so the
// compiler emits a single vector load or store) and read as bf16 pairs (VEC = 1: a single value).
template <int VEC> struct Word;
template <> struct Word<1> { using type = unsigned short; };
template <> struct Word<2> { using type = unsigned int; };
template <> struct Word<4> { using type = uint2; };
template <> struct Word<8> { using type = uint4; };

template <int VEC>
struct Pack {
  typename Word<VEC>::type raw;
  __device__ __forceinline__ __nv_bfloat162& pair(int i) { return reinterpret_cast<__nv_bfloat162*>(&raw)[i]; }
  __device__ __forceinline__ const __nv_bfloat162& pair(int i) const {
    return reinterpret_cast<const __nv_bfloat162*>(&raw)[i];
  }
  __device__ __forceinline__ __nv_bfloat16& one() { return reinterpret_cast<__nv_bfloat16&>(raw); }
  __device__ __forceinline__ const __nv_bfloat16& one() const { return reinterpret_cast<const __nv_bfloat16&>(raw); }
};

// r = bf16(float(a) + float(b)), element by element.
template <int VEC>
__device__ __forceinline__ Pack<VEC> add_round(Pack<VEC> a, Pack<VEC> b) {
  Pack<VEC> r;
  if constexpr (VEC == 1) {
    r.one() = __float2bfloat16_rn(__bfloat162float(a.one()) + __bfloat162float(b.one()));
  } else {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
      const float2 fa = __bfloat1622float2(a.pair(i));
      const float2 fb = __bfloat1622float2(b.pair(i));
      r.pair(i) = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
    }
  }
  return r;
}

// acc + sum of float(r)^2 over the pack, in element order (explicit fma: no contraction choices).
template <int VEC>
__device__ __forceinline__ float sum_squares(Pack<VEC> r, float acc) {
  if constexpr (VEC == 1) {
    const float v = __bfloat162float(r.one());
    acc = __fmaf_rn(v, v, acc);
  } else {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
      const float2 v = __bfloat1622float2(r.pair(i));
      acc = __fmaf_rn(v.x, v.x, acc);
      acc = __fmaf_rn(v.y, v.y, acc);
    }
  }
  return acc;
}

// bf16(float(r) * inv * float(w)), element by element; ROUNDS 2: bf16(float(bf16(float(r) * inv)) * float(w)),
// the normalized value rounded before the weight multiplies it, as transformers' LlamaRMSNorm and vLLM's kernel do.
__device__ __forceinline__ float scale(float r, float inv, float w, int rounds) {
  const float n = r * inv;
  return rounds == 2 ? __bfloat162float(__float2bfloat16_rn(n)) * w : n * w;
}

template <int VEC>
__device__ __forceinline__ Pack<VEC> normalize(Pack<VEC> r, Pack<VEC> w, float inv, int rounds) {
  Pack<VEC> o;
  if constexpr (VEC == 1) {
    o.one() = __float2bfloat16_rn(scale(__bfloat162float(r.one()), inv, __bfloat162float(w.one()), rounds));
  } else {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
      const float2 fr = __bfloat1622float2(r.pair(i));
      const float2 fw = __bfloat1622float2(w.pair(i));
      o.pair(i) = __floats2bfloat162_rn(scale(fr.x, inv, fw.x, rounds), scale(fr.y, inv, fw.y, rounds));
    }
  }
  return o;
}

// Sum over the warp; every lane ends with the same bits (a butterfly of commutative adds).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, returned to every thread.
template <int BLOCK, Reduce RED>
__device__ __forceinline__ float block_sum(float v) {
  constexpr int WARPS = BLOCK / 32;
  static_assert(BLOCK % 32 == 0 && WARPS >= 1 && WARPS <= 32, "BLOCK: whole warps, at most 1024 threads");
  __shared__ float warp_partial[WARPS];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_partial[warp] = v;
  __syncthreads();  // every warp's partial is in shared memory
  if constexpr (RED == Reduce::all_warps) {
    return warp_sum(lane < WARPS ? warp_partial[lane] : 0.0f);
  } else {
    __shared__ float total;
    if (warp == 0) {
      const float s = warp_sum(lane < WARPS ? warp_partial[lane] : 0.0f);
      if (lane == 0) total = s;
    }
    __syncthreads();  // the total is published
    return total;
  }
}

template <int BLOCK, int VEC, int CACHE, Reduce RED>
__global__ void __launch_bounds__(BLOCK)
fused_add_rmsnorm(__nv_bfloat16* __restrict__ out,             // [T, H]
                  __nv_bfloat16* __restrict__ residual_out,    // [T, H]: x + residual, rounded to bf16
                  const __nv_bfloat16* __restrict__ x,         // [T, H]
                  const __nv_bfloat16* __restrict__ residual,  // [T, H]
                  const __nv_bfloat16* __restrict__ weight,    // [H]
                  float eps, int T, int H,
                  int rounds) {  // of out: 1 (once) or 2 (the normalized value first: an engine's own order)
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: 1, 2, 4 or 8 bf16 values per access");
  static_assert(CACHE >= 0 && CACHE <= 16, "CACHE: 0 (re-read) or up to 16 vectors a thread in registers");
  using P = Pack<VEC>;
  if (blockIdx.x >= T) return;
  const size_t row = (size_t)blockIdx.x * H;
  const P* __restrict__ xv = reinterpret_cast<const P*>(x + row);
  const P* __restrict__ rv = reinterpret_cast<const P*>(residual + row);
  const P* __restrict__ wv = reinterpret_cast<const P*>(weight);
  P* __restrict__ rov = reinterpret_cast<P*>(residual_out + row);
  P* __restrict__ ov = reinterpret_cast<P*>(out + row);
  const int n = H / VEC;  // vectors per row

  // Pass 1: r = x + residual, stored, and this thread's part of the square sum.
  float ss = 0.0f;
  P keep[CACHE > 0 ? CACHE : 1];
  if constexpr (CACHE > 0) {
    P xs[CACHE];
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {  // every load first
      const int j = threadIdx.x + i * BLOCK;
      if (j < n) {
        xs[i] = xv[j];
        keep[i] = rv[j];
      }
    }
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const int j = threadIdx.x + i * BLOCK;
      if (j < n) {
        keep[i] = add_round(xs[i], keep[i]);
        rov[j] = keep[i];
        ss = sum_squares(keep[i], ss);
      }
    }
  } else {
    for (int j = threadIdx.x; j < n; j += BLOCK) {
      const P r = add_round(xv[j], rv[j]);
      rov[j] = r;
      ss = sum_squares(r, ss);
    }
  }

  const float inv = rsqrtf(block_sum<BLOCK, RED>(ss) / (float)H + eps);

  // Pass 2: out = r * inv * weight.
  if constexpr (CACHE > 0) {
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const int j = threadIdx.x + i * BLOCK;
      if (j < n) ov[j] = normalize(keep[i], wv[j], inv, rounds);
    }
  } else {
    // residual_out[j] was written by this same thread in pass 1: no barrier needed to read it back.
    for (int j = threadIdx.x; j < n; j += BLOCK) {
      ov[j] = normalize(rov[j], wv[j], inv, rounds);
    }
  }
}
