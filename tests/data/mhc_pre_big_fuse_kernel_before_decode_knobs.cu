// mHC pre big-fuse: the post-GEMM half of the mHC pre step (docs/families.md §1).
//
// One token per block (or per h_split blocks). Warp 0 lanes 0..3 own the 24
// mixing values of the token (lane j: row j); the other warps stream the
// residual and write layer_input = sum_j pre_j * residual[t, j, :].
//
// Knobs arrive as macros EVO_<KNOB> (see family.py). Every floating-point
// operation of the metadata and of the streamed sum is written with explicit
// round-to-nearest intrinsics so that knobs marked exact really keep the
// output bits: only the split reduction order (split_reduce=warp, S > 1) and,
// in prenorm mode, the square-sum order change them.
//
// The file needs no CUDA headers, so NVRTC compiles it on machines without a
// GPU or a toolkit (the static gate runs in CI).

typedef unsigned int u32;
typedef unsigned short u16;

#ifndef EVO_BLOCK
#define EVO_BLOCK 256
#endif
#ifndef EVO_S
#define EVO_S 1
#endif
#ifndef EVO_PRENORM
#define EVO_PRENORM 0
#endif

#define HC 4
#define MIX 24
#define VEC_ELEMS (EVO_VEC / 2)

#if EVO_VEC == 16
typedef uint4 vec_t;
#elif EVO_VEC == 8
typedef uint2 vec_t;
#else
#error "EVO_VEC must be 8 or 16"
#endif

#if EVO_WARP0_STREAM
#define STREAM_THREADS EVO_BLOCK
#define STREAM_FIRST 0
#else
#define STREAM_THREADS (EVO_BLOCK - 32)
#define STREAM_FIRST 32
#endif

#define EPS 1e-6f
#define SINKHORN_REPEAT 20
#define POST_MULT 2.0f

__device__ __forceinline__ float bf16_lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(u32 w) { return __uint_as_float(w & 0xffff0000u); }

// float -> bf16 bits, round to nearest even (NaN stays NaN).
__device__ __forceinline__ u32 f2bf(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

__device__ __forceinline__ float sigmoidf_(float v) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v)));
}

__device__ __forceinline__ u32 vec_word(const vec_t& v, int i) {
#if EVO_VEC == 16
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
#else
  return i == 0 ? v.x : v.y;
#endif
}

// Sum of squares of one token's 4*H residual values, reduced over the block.
__device__ float block_square_sum(const u16* __restrict__ res, int n, float* s_part) {
  const vec_t* r = reinterpret_cast<const vec_t*>(res);
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n / VEC_ELEMS; i += EVO_BLOCK) {
    const vec_t v = r[i];
#pragma unroll
    for (int w = 0; w < EVO_VEC / 4; ++w) {
      const u32 x = vec_word(v, w);
      acc = __fmaf_rn(bf16_lo(x), bf16_lo(x), acc);
      acc = __fmaf_rn(bf16_hi(x), bf16_hi(x), acc);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_down_sync(0xffffffffu, acc, o));
  if ((threadIdx.x & 31) == 0) s_part[threadIdx.x >> 5] = acc;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x < 32) {
    total = threadIdx.x < EVO_BLOCK / 32 ? s_part[threadIdx.x] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) total = __fadd_rn(total, __shfl_down_sync(0xffffffffu, total, o));
  }
  return total;  // valid in thread 0 only
}

// Sum over splits of the 24 mixes and the square sum, spread over warp 0:
// lane l sums splits l, l+32, ...; a shuffle-down tree then lane 0 broadcasts,
// so every lane holds bit-identical totals.
__device__ __forceinline__ void warp_split_sum(const float* __restrict__ dot_mix, const float* __restrict__ sqrsum,
                                               int token, int T, float* y, float* sq) {
  const int lane = threadIdx.x & 31;
  float acc[MIX + 1];
#pragma unroll
  for (int c = 0; c <= MIX; ++c) acc[c] = 0.0f;
  for (int s = lane; s < EVO_S; s += 32) {
    const float* row = dot_mix + ((size_t)s * T + token) * MIX;
#pragma unroll
    for (int c = 0; c < MIX; ++c) acc[c] = __fadd_rn(acc[c], row[c]);
    acc[MIX] = __fadd_rn(acc[MIX], sqrsum[(size_t)s * T + token]);
  }
#pragma unroll
  for (int c = 0; c <= MIX; ++c) {
    float v = acc[c];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, o));
    acc[c] = __shfl_sync(0xffffffffu, v, 0);
  }
#pragma unroll
  for (int c = 0; c < MIX; ++c) y[c] = acc[c];
  *sq = acc[MIX];
}

// Divide each column of the 4x4 matrix by (its sum + eps); lane j holds row j, columns are summed
// with shuffles among lanes 0..3 (xor 1 then xor 2: every lane gets bit-identical sums).
__device__ __forceinline__ void normalize_columns(float* cmv) {
  const unsigned mask = 0xfu;
#pragma unroll
  for (int k = 0; k < HC; ++k) {
    float cs = cmv[k];
    cs = __fadd_rn(cs, __shfl_xor_sync(mask, cs, 1));
    cs = __fadd_rn(cs, __shfl_xor_sync(mask, cs, 2));
    cmv[k] = __fdiv_rn(cmv[k], __fadd_rn(cs, EPS));
  }
}

// Row softmax, then 20 Sinkhorn normalisations of the 4x4 comb matrix (lane j holds row j).
__device__ __forceinline__ void sinkhorn_row(float* cmv) {
  const float m = fmaxf(fmaxf(cmv[0], cmv[1]), fmaxf(cmv[2], cmv[3]));
#pragma unroll
  for (int k = 0; k < HC; ++k) cmv[k] = expf(__fsub_rn(cmv[k], m));
  float rs = __fadd_rn(__fadd_rn(__fadd_rn(cmv[0], cmv[1]), cmv[2]), cmv[3]);
#pragma unroll
  for (int k = 0; k < HC; ++k) cmv[k] = __fadd_rn(__fdiv_rn(cmv[k], rs), EPS);
  normalize_columns(cmv);
  for (int it = 1; it < SINKHORN_REPEAT; ++it) {
    rs = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(cmv[0], cmv[1]), cmv[2]), cmv[3]), EPS);
#pragma unroll
    for (int k = 0; k < HC; ++k) cmv[k] = __fdiv_rn(cmv[k], rs);
    normalize_columns(cmv);
  }
}

__device__ __forceinline__ float affine(float y, float rstd, float scale, float base) {
  return __fadd_rn(__fmul_rn(__fmul_rn(y, rstd), scale), base);
}

// Stream [h0, h1) of the token: layer_input[h] = sum_j pre_j * residual[j][h].
__device__ __forceinline__ void stream_layer_input(const u16* __restrict__ res, u16* __restrict__ out, int H,
                                                   int h0, int h1, const float* s_pre) {
  const int tid = (int)threadIdx.x - STREAM_FIRST;
  if (tid < 0) return;
  const float p0 = s_pre[0], p1 = s_pre[1], p2 = s_pre[2], p3 = s_pre[3];
  const int stride = STREAM_THREADS * VEC_ELEMS;
  for (int hb = h0 + tid * VEC_ELEMS; hb < h1; hb += stride * EVO_UNROLL) {
    vec_t v[EVO_UNROLL][HC];
    // Issue every load of this iteration before any arithmetic.
#pragma unroll
    for (int u = 0; u < EVO_UNROLL; ++u) {
      const int h = hb + u * stride;
      if (h < h1) {
#pragma unroll
        for (int j = 0; j < HC; ++j) v[u][j] = *reinterpret_cast<const vec_t*>(res + (size_t)j * H + h);
      }
    }
#pragma unroll
    for (int u = 0; u < EVO_UNROLL; ++u) {
      const int h = hb + u * stride;
      if (h < h1) {
        vec_t o;
#pragma unroll
        for (int w = 0; w < EVO_VEC / 4; ++w) {
          const u32 x0 = vec_word(v[u][0], w), x1 = vec_word(v[u][1], w);
          const u32 x2 = vec_word(v[u][2], w), x3 = vec_word(v[u][3], w);
          float a = __fmul_rn(p0, bf16_lo(x0));
          a = __fmaf_rn(p1, bf16_lo(x1), a);
          a = __fmaf_rn(p2, bf16_lo(x2), a);
          a = __fmaf_rn(p3, bf16_lo(x3), a);
          float b = __fmul_rn(p0, bf16_hi(x0));
          b = __fmaf_rn(p1, bf16_hi(x1), b);
          b = __fmaf_rn(p2, bf16_hi(x2), b);
          b = __fmaf_rn(p3, bf16_hi(x3), b);
          const u32 packed = f2bf(a) | (f2bf(b) << 16);
#if EVO_VEC == 16
          if (w == 0) o.x = packed; else if (w == 1) o.y = packed; else if (w == 2) o.z = packed; else o.w = packed;
#else
          if (w == 0) o.x = packed; else o.y = packed;
#endif
        }
        *reinterpret_cast<vec_t*>(out + h) = o;
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(EVO_BLOCK)
mhc_pre_big_fuse(const float* __restrict__ dot_mix,   // [S, T, 24]
                 const float* __restrict__ sqrsum,    // [S, T] (unused in prenorm mode)
                 const u16* __restrict__ residual,    // [T, 4, H] bf16
                 const float* __restrict__ scale,     // [3]
                 const float* __restrict__ base,      // [24]
                 float* __restrict__ post_mix,        // [T, 4]
                 float* __restrict__ comb_mix,        // [T, 4, 4]
                 u16* __restrict__ layer_input,       // [T, H] bf16
                 int T, int H) {
  __shared__ float s_pre[HC];
#if EVO_PRENORM
  __shared__ float s_part[32];
  __shared__ float s_sq;
#endif
  const int token = blockIdx.x / EVO_H_SPLIT;
  const int hblk = blockIdx.x % EVO_H_SPLIT;
  if (token >= T) return;
  const int lane = threadIdx.x & 31;
  const bool meta = threadIdx.x < HC;
  const bool writer = hblk == 0;  // only one block per token writes post/comb
  const u16* res = residual + (size_t)token * HC * H;
  const float K = (float)(HC * H);

#if EVO_PRENORM
  const float sq_block = block_square_sum(res, HC * H, s_part);
  if (threadIdx.x == 0) s_sq = sq_block;
  __syncthreads();
#endif

  float rstd = 0.0f;
  float y_pre = 0.0f, y_post = 0.0f, cmv[HC];
#if EVO_META == EVO_META_ARRAY
  float y_local[MIX];  // indexed by lane below: the portable form, spills to local memory
#endif

  if (threadIdx.x < 32) {
    float sq = 0.0f;
#if EVO_SPLIT_REDUCE == EVO_SPLIT_REDUCE_WARP && EVO_S > 1
    float yall[MIX];
    warp_split_sum(dot_mix, sqrsum, token, T, yall, &sq);
#if EVO_META == EVO_META_ARRAY
#pragma unroll
    for (int c = 0; c < MIX; ++c) y_local[c] = yall[c];
#else
    // Pick this lane's slice with compile-time indices only (no local memory).
#pragma unroll
    for (int j = 0; j < HC; ++j) {
      if (lane == j) {
        y_pre = yall[j];
        y_post = yall[HC + j];
#pragma unroll
        for (int k = 0; k < HC; ++k) cmv[k] = yall[2 * HC + j * HC + k];
      }
    }
#endif
#else
    if (meta) {
#if EVO_META == EVO_META_ARRAY
#pragma unroll
      for (int c = 0; c < MIX; ++c) y_local[c] = 0.0f;
      for (int s = 0; s < EVO_S; ++s) {
        const float* row = dot_mix + ((size_t)s * T + token) * MIX;
        for (int c = 0; c < MIX; ++c) y_local[c] = __fadd_rn(y_local[c], row[c]);
#if !EVO_PRENORM
        sq = __fadd_rn(sq, sqrsum[(size_t)s * T + token]);
#endif
      }
#else
#pragma unroll
      for (int k = 0; k < HC; ++k) cmv[k] = 0.0f;
#pragma unroll 4
      for (int s = 0; s < EVO_S; ++s) {
        const float* row = dot_mix + ((size_t)s * T + token) * MIX;
        y_pre = __fadd_rn(y_pre, row[lane]);
        y_post = __fadd_rn(y_post, row[HC + lane]);
#pragma unroll
        for (int k = 0; k < HC; ++k) cmv[k] = __fadd_rn(cmv[k], row[2 * HC + lane * HC + k]);
#if !EVO_PRENORM
        sq = __fadd_rn(sq, sqrsum[(size_t)s * T + token]);
#endif
      }
#endif
    }
#endif
#if EVO_PRENORM
    sq = s_sq;
#endif
    if (meta) {
#if EVO_META == EVO_META_ARRAY
      y_pre = y_local[lane];
      y_post = y_local[HC + lane];
      for (int k = 0; k < HC; ++k) cmv[k] = y_local[2 * HC + lane * HC + k];
#endif
      rstd = rsqrtf(__fadd_rn(__fdiv_rn(sq, K), EPS));
      s_pre[lane] = __fadd_rn(sigmoidf_(affine(y_pre, rstd, scale[0], base[lane])), EPS);
    }
  }

#if EVO_BARRIER == EVO_BARRIER_EARLY
  __syncthreads();  // only pre is needed by the streaming warps
#endif
  if (meta && writer) {
    post_mix[(size_t)token * HC + lane] =
        __fmul_rn(POST_MULT, sigmoidf_(affine(y_post, rstd, scale[1], base[HC + lane])));
#pragma unroll
    for (int k = 0; k < HC; ++k) cmv[k] = affine(cmv[k], rstd, scale[2], base[2 * HC + lane * HC + k]);
  }
  if (threadIdx.x < 32 && writer) {
    if (threadIdx.x < HC) sinkhorn_row(cmv);
    if (meta) {
#pragma unroll
      for (int k = 0; k < HC; ++k) comb_mix[(size_t)token * HC * HC + lane * HC + k] = cmv[k];
    }
  }
#if EVO_BARRIER == EVO_BARRIER_LATE
  __syncthreads();  // the portable form waits for the whole metadata
#endif

  const int hc = H / EVO_H_SPLIT;
  stream_layer_input(res, layer_input + (size_t)token * H, H, hblk * hc, hblk * hc + hc, s_pre);
}
