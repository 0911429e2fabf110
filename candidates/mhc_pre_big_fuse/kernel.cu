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
//
// Decode knobs (the mhc_pre_decode family, decode/family.py): at T = 1..128 the
// time is the metadata's dependent chain, not bandwidth. EVO_SPLIT_LANES,
// EVO_SINKHORN, EVO_FAST_MATH, EVO_EARLY_LOADS, EVO_PRE_PER_WARP and
// EVO_PDL_OVERLAP default to today's code, so mhc_pre_big_fuse (which never sets
// them) builds the same machine code (tests/test_decode_knobs.py compares SASS).
// Only EVO_FAST_MATH changes bits.

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
#ifndef EVO_SPLIT_LANES
#define EVO_SPLIT_LANES 0
#endif
#ifndef EVO_SINKHORN
#define EVO_SINKHORN_ROW4 0
#define EVO_SINKHORN_LANE16 1
#define EVO_SINKHORN_FULL 2
#define EVO_SINKHORN EVO_SINKHORN_ROW4
#endif
#ifndef EVO_FAST_MATH
#define EVO_FAST_MATH 0
#endif
#ifndef EVO_EARLY_LOADS
#define EVO_EARLY_LOADS 0
#endif
#ifndef EVO_PRE_PER_WARP
#define EVO_PRE_PER_WARP 0
#endif
#ifndef EVO_PDL_OVERLAP
#define EVO_PDL_OVERLAP 0
#endif
#ifndef EVO_PDL
#define EVO_PDL 0
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
#define FULL_MASK 0xffffffffu
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

#if EVO_FAST_MATH
// 1/s by the approximate reciprocal (about 1 ulp), computed once per divisor and multiplied: the Sinkhorn
// divides each row and column by one sum, and IEEE division is a subroutine on the critical path.
__device__ __forceinline__ float rcp_approx(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return r;
}
#define SK_EXP __expf
#define SK_DIV(x, s) __fmul_rn((x), rcp_approx(s))
__device__ __forceinline__ float sigmoidf_(float v) { return rcp_approx(__fadd_rn(1.0f, __expf(-v))); }
#else
#define SK_EXP expf
#define SK_DIV __fdiv_rn
__device__ __forceinline__ float sigmoidf_(float v) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v)));
}
#endif

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
    cmv[k] = SK_DIV(cmv[k], __fadd_rn(cs, EPS));
  }
}

// Row softmax, then 20 Sinkhorn normalisations of the 4x4 comb matrix (lane j holds row j).
__device__ __forceinline__ void sinkhorn_row(float* cmv) {
  const float m = fmaxf(fmaxf(cmv[0], cmv[1]), fmaxf(cmv[2], cmv[3]));
#pragma unroll
  for (int k = 0; k < HC; ++k) cmv[k] = SK_EXP(__fsub_rn(cmv[k], m));
  float rs = __fadd_rn(__fadd_rn(__fadd_rn(cmv[0], cmv[1]), cmv[2]), cmv[3]);
#pragma unroll
  for (int k = 0; k < HC; ++k) cmv[k] = __fadd_rn(SK_DIV(cmv[k], rs), EPS);
  normalize_columns(cmv);
  for (int it = 1; it < SINKHORN_REPEAT; ++it) {
    rs = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(cmv[0], cmv[1]), cmv[2]), cmv[3]), EPS);
#pragma unroll
    for (int k = 0; k < HC; ++k) cmv[k] = SK_DIV(cmv[k], rs);
    normalize_columns(cmv);
  }
}

#if EVO_SINKHORN == EVO_SINKHORN_LANE16
// One comb entry per lane: entry (j, k) in lane 4j + k of each 16-lane half. Row sums gather the row (4
// shuffles, summed in the row layout's order); column sums are the row layout's xor tree over lanes 4 and 8
// apart, so every entry gets the row layout's bits.
__device__ __forceinline__ float gather_row_sum(float c, int rb) {
  const float r0 = __shfl_sync(FULL_MASK, c, rb, 16), r1 = __shfl_sync(FULL_MASK, c, rb + 1, 16);
  const float r2 = __shfl_sync(FULL_MASK, c, rb + 2, 16), r3 = __shfl_sync(FULL_MASK, c, rb + 3, 16);
  return __fadd_rn(__fadd_rn(__fadd_rn(r0, r1), r2), r3);
}

__device__ __forceinline__ float normalize_column16(float c) {
  float cs = __fadd_rn(c, __shfl_xor_sync(FULL_MASK, c, 4, 16));
  cs = __fadd_rn(cs, __shfl_xor_sync(FULL_MASK, cs, 8, 16));
  return SK_DIV(c, __fadd_rn(cs, EPS));
}

__device__ __forceinline__ float sinkhorn_lane16(float c) {
  const int rb = threadIdx.x & 12;  // this row's first lane within the half
  const float r0 = __shfl_sync(FULL_MASK, c, rb, 16), r1 = __shfl_sync(FULL_MASK, c, rb + 1, 16);
  const float r2 = __shfl_sync(FULL_MASK, c, rb + 2, 16), r3 = __shfl_sync(FULL_MASK, c, rb + 3, 16);
  const float m = fmaxf(fmaxf(r0, r1), fmaxf(r2, r3));
  c = SK_EXP(__fsub_rn(c, m));
  c = __fadd_rn(SK_DIV(c, gather_row_sum(c, rb)), EPS);
  c = normalize_column16(c);
  for (int it = 1; it < SINKHORN_REPEAT; ++it) {
    c = SK_DIV(c, __fadd_rn(gather_row_sum(c, rb), EPS));
    c = normalize_column16(c);
  }
  return c;
}
#endif

#if EVO_SINKHORN == EVO_SINKHORN_FULL
// The whole 4x4 matrix in one thread's registers: no shuffles on the chain, 4x the divisions. The sums are
// the row layout's: rows left to right, columns (r0 + r1) + (r2 + r3) as its xor tree gives every lane.
__device__ __forceinline__ void normalize_columns_full(float (&m)[HC][HC]) {
#pragma unroll
  for (int k = 0; k < HC; ++k) {
    const float cs = __fadd_rn(__fadd_rn(m[0][k], m[1][k]), __fadd_rn(m[2][k], m[3][k]));
#pragma unroll
    for (int j = 0; j < HC; ++j) m[j][k] = SK_DIV(m[j][k], __fadd_rn(cs, EPS));
  }
}

__device__ __forceinline__ void sinkhorn_full(float (&m)[HC][HC]) {
#pragma unroll
  for (int j = 0; j < HC; ++j) {
    const float mx = fmaxf(fmaxf(m[j][0], m[j][1]), fmaxf(m[j][2], m[j][3]));
#pragma unroll
    for (int k = 0; k < HC; ++k) m[j][k] = SK_EXP(__fsub_rn(m[j][k], mx));
    const float rs = __fadd_rn(__fadd_rn(__fadd_rn(m[j][0], m[j][1]), m[j][2]), m[j][3]);
#pragma unroll
    for (int k = 0; k < HC; ++k) m[j][k] = __fadd_rn(SK_DIV(m[j][k], rs), EPS);
  }
  normalize_columns_full(m);
  for (int it = 1; it < SINKHORN_REPEAT; ++it) {
#pragma unroll
    for (int j = 0; j < HC; ++j) {
      const float rs = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(m[j][0], m[j][1]), m[j][2]), m[j][3]), EPS);
#pragma unroll
      for (int k = 0; k < HC; ++k) m[j][k] = SK_DIV(m[j][k], rs);
    }
    normalize_columns_full(m);
  }
}
#endif

__device__ __forceinline__ float affine(float y, float rstd, float scale, float base) {
  return __fadd_rn(__fmul_rn(__fmul_rn(y, rstd), scale), base);
}

// One trip of the stream: EVO_UNROLL vector positions, stride apart from hb, of the 4 residual rows.
__device__ __forceinline__ void load_trip(const u16* __restrict__ res, int H, int hb, int h1, int stride,
                                          vec_t (&v)[EVO_UNROLL][HC]) {
#pragma unroll
  for (int u = 0; u < EVO_UNROLL; ++u) {
    const int h = hb + u * stride;
    if (h < h1) {
#pragma unroll
      for (int j = 0; j < HC; ++j) v[u][j] = *reinterpret_cast<const vec_t*>(res + (size_t)j * H + h);
    }
  }
}

__device__ __forceinline__ void store_trip(u16* __restrict__ out, int hb, int h1, int stride,
                                           const vec_t (&v)[EVO_UNROLL][HC], float p0, float p1, float p2,
                                           float p3) {
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
    load_trip(res, H, hb, h1, stride, v);
    store_trip(out, hb, h1, stride, v, p0, p1, p2, p3);
  }
}

#if EVO_EARLY_LOADS || EVO_PRE_PER_WARP
// The stream with pre in registers; under EVO_EARLY_LOADS the first trip's loads are already in v (issued at
// the top of the kernel: they need no metadata, so their latency overlaps the metadata's).
__device__ __forceinline__ void stream_pre(const u16* __restrict__ res, u16* __restrict__ out, int H, int h0, int h1,
                                           float p0, float p1, float p2, float p3, vec_t (&v)[EVO_UNROLL][HC]) {
  const int tid = (int)threadIdx.x - STREAM_FIRST;
  if (tid < 0) return;
  const int stride = STREAM_THREADS * VEC_ELEMS;
  const int hb0 = h0 + tid * VEC_ELEMS;
  for (int hb = hb0; hb < h1; hb += stride * EVO_UNROLL) {
#if EVO_EARLY_LOADS
    if (hb != hb0) load_trip(res, H, hb, h1, stride, v);
#else
    load_trip(res, H, hb, h1, stride, v);
#endif
    store_trip(out, hb, h1, stride, v, p0, p1, p2, p3);
  }
}
#endif

#if EVO_PRE_PER_WARP
// pre_j of the token in lane j (j < 4) of the calling warp, by the operations warp 0 uses for the same knobs
// (each mix's sum is its own chain, so summing only pre's four and the square sum gives warp 0's bits).
__device__ __forceinline__ float warp_pre(const float* __restrict__ dot_mix, const float* __restrict__ sqrsum,
                                          int token, int T, float K, const float* __restrict__ scale,
                                          const float* __restrict__ base, float sq_prenorm) {
  const int lane = threadIdx.x & 31;
  float y = 0.0f, sq = 0.0f;
#if EVO_SPLIT_REDUCE == EVO_SPLIT_REDUCE_WARP && EVO_S > 1
  float acc[HC + 1];
#pragma unroll
  for (int c = 0; c <= HC; ++c) acc[c] = 0.0f;
  for (int s = lane; s < EVO_S; s += 32) {
    const float* row = dot_mix + ((size_t)s * T + token) * MIX;
#pragma unroll
    for (int c = 0; c < HC; ++c) acc[c] = __fadd_rn(acc[c], row[c]);
    acc[HC] = __fadd_rn(acc[HC], sqrsum[(size_t)s * T + token]);
  }
#pragma unroll
  for (int c = 0; c <= HC; ++c) {
    float v = acc[c];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_down_sync(FULL_MASK, v, o));
    acc[c] = __shfl_sync(FULL_MASK, v, 0);
  }
#pragma unroll
  for (int j = 0; j < HC; ++j)
    if (lane == j) y = acc[j];
  sq = acc[HC];
#else
  // The serial order (s = 0, 1, ...): lanes 0..3 their pre mix, lane 4 the square sum.
  if (lane < HC) {
#pragma unroll 4
    for (int s = 0; s < EVO_S; ++s) y = __fadd_rn(y, dot_mix[((size_t)s * T + token) * MIX + lane]);
  }
#if !EVO_PRENORM
  if (lane == HC) {
#pragma unroll 4
    for (int s = 0; s < EVO_S; ++s) sq = __fadd_rn(sq, sqrsum[(size_t)s * T + token]);
  }
  sq = __shfl_sync(FULL_MASK, sq, HC);
#endif
#endif
#if EVO_PRENORM
  sq = sq_prenorm;
#endif
  const float rstd = rsqrtf(__fadd_rn(__fdiv_rn(sq, K), EPS));
  return __fadd_rn(sigmoidf_(affine(y, rstd, scale[0], base[lane & (HC - 1)])), EPS);
}
#endif

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
#if EVO_PDL && EVO_PDL_OVERLAP
  // PDL (gates.perf.launch: pdl): let the next launch start its blocks now, and touch nothing another kernel may
  // write (every input and output) before the launch before has finished.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int lane = threadIdx.x & 31;
  const bool meta = threadIdx.x < HC;
  const bool writer = hblk == 0;  // only one block per token writes post/comb
  const u16* res = residual + (size_t)token * HC * H;
  const float K = (float)(HC * H);
#if EVO_EARLY_LOADS || EVO_PRE_PER_WARP
  vec_t v_first[EVO_UNROLL][HC];
#endif
#if EVO_EARLY_LOADS
  if ((int)threadIdx.x >= STREAM_FIRST) {
    const int hc0 = H / EVO_H_SPLIT;
    load_trip(res, H, hblk * hc0 + ((int)threadIdx.x - STREAM_FIRST) * VEC_ELEMS, hblk * hc0 + hc0,
              STREAM_THREADS * VEC_ELEMS, v_first);
  }
#endif

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
#elif EVO_SPLIT_LANES
    // The serial order (s = 0, 1, ...) with one lane per sum: lane c < 24 mix c, lane 24 the square sum; each
    // lane's loads are all in flight at once, and a row of dot_mix is one coalesced read. Shuffles then hand
    // lanes 0..3 their slice (the same bits as the serial form).
    float acc = 0.0f;
    if (lane < MIX) {
#pragma unroll
      for (int s = 0; s < EVO_S; ++s) acc = __fadd_rn(acc, dot_mix[((size_t)s * T + token) * MIX + lane]);
    }
#if !EVO_PRENORM
    if (lane == MIX) {
#pragma unroll
      for (int s = 0; s < EVO_S; ++s) acc = __fadd_rn(acc, sqrsum[(size_t)s * T + token]);
    }
    sq = __shfl_sync(FULL_MASK, acc, MIX);
#endif
#if EVO_META == EVO_META_ARRAY
#pragma unroll
    for (int c = 0; c < MIX; ++c) y_local[c] = __shfl_sync(FULL_MASK, acc, c);
#else
    y_pre = __shfl_sync(FULL_MASK, acc, lane & (HC - 1));
    y_post = __shfl_sync(FULL_MASK, acc, HC + (lane & (HC - 1)));
#pragma unroll
    for (int k = 0; k < HC; ++k) cmv[k] = __shfl_sync(FULL_MASK, acc, 2 * HC + (lane & (HC - 1)) * HC + k);
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

#if EVO_PRE_PER_WARP
  // (no barrier: every streaming warp computes pre itself below)
#elif EVO_BARRIER == EVO_BARRIER_EARLY
  __syncthreads();  // only pre is needed by the streaming warps
#endif
  if (meta && writer) {
    post_mix[(size_t)token * HC + lane] =
        __fmul_rn(POST_MULT, sigmoidf_(affine(y_post, rstd, scale[1], base[HC + lane])));
#pragma unroll
    for (int k = 0; k < HC; ++k) cmv[k] = affine(cmv[k], rstd, scale[2], base[2 * HC + lane * HC + k]);
  }
#if EVO_SINKHORN == EVO_SINKHORN_ROW4
  if (threadIdx.x < 32 && writer) {
    if (threadIdx.x < HC) sinkhorn_row(cmv);
    if (meta) {
#pragma unroll
      for (int k = 0; k < HC; ++k) comb_mix[(size_t)token * HC * HC + lane * HC + k] = cmv[k];
    }
  }
#elif EVO_SINKHORN == EVO_SINKHORN_LANE16
  if (threadIdx.x < 32 && writer) {
    // Entry (j, k) to lane 4j + k (both halves of the warp; the upper one mirrors and stores nothing).
    const int j = (lane >> 2) & (HC - 1), k = lane & (HC - 1);
    float t[HC];
#pragma unroll
    for (int q = 0; q < HC; ++q) t[q] = __shfl_sync(FULL_MASK, cmv[q], j);
    const float c = sinkhorn_lane16(k == 0 ? t[0] : k == 1 ? t[1] : k == 2 ? t[2] : t[3]);
    if (lane < HC * HC) comb_mix[(size_t)token * HC * HC + lane] = c;
  }
#else
  if (threadIdx.x < 32 && writer) {
    float m[HC][HC];
#pragma unroll
    for (int j = 0; j < HC; ++j) {
#pragma unroll
      for (int k = 0; k < HC; ++k) m[j][k] = __shfl_sync(FULL_MASK, cmv[k], j);
    }
    sinkhorn_full(m);
    // lane j stores row j (compile-time indices: m stays in registers)
#pragma unroll
    for (int j = 0; j < HC; ++j) {
      if (lane == j) {
#pragma unroll
        for (int k = 0; k < HC; ++k) comb_mix[(size_t)token * HC * HC + j * HC + k] = m[j][k];
      }
    }
  }
#endif
#if EVO_PRE_PER_WARP
#elif EVO_BARRIER == EVO_BARRIER_LATE
  __syncthreads();  // the portable form waits for the whole metadata
#endif

  const int hc = H / EVO_H_SPLIT;
#if EVO_PRE_PER_WARP
  float p0, p1, p2, p3;
  if (threadIdx.x >= 32) {
#if EVO_PRENORM
    const float pre = warp_pre(dot_mix, sqrsum, token, T, K, scale, base, s_sq);
#else
    const float pre = warp_pre(dot_mix, sqrsum, token, T, K, scale, base, 0.0f);
#endif
    p0 = __shfl_sync(FULL_MASK, pre, 0);
    p1 = __shfl_sync(FULL_MASK, pre, 1);
    p2 = __shfl_sync(FULL_MASK, pre, 2);
    p3 = __shfl_sync(FULL_MASK, pre, 3);
  } else {
    __syncwarp();  // warp 0's own pre, published by its lanes 0..3
    p0 = s_pre[0], p1 = s_pre[1], p2 = s_pre[2], p3 = s_pre[3];
  }
  stream_pre(res, layer_input + (size_t)token * H, H, hblk * hc, hblk * hc + hc, p0, p1, p2, p3, v_first);
#elif EVO_EARLY_LOADS
  stream_pre(res, layer_input + (size_t)token * H, H, hblk * hc, hblk * hc + hc, s_pre[0], s_pre[1], s_pre[2],
             s_pre[3], v_first);
#else
  stream_layer_input(res, layer_input + (size_t)token * H, H, hblk * hc, hblk * hc + hc, s_pre);
#endif
}
