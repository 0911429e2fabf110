// moe_q2_matvec: 2-bit codebook MoE expert gate/up mat-vec, batch-1 decode (FAMILIES.md §3).
//
// Weights: w [E, 2 (gate, up), out, NBLK * 10] bytes, NBLK = in / 32. Block b of a row is 10 bytes at
// byte 10*b of the row: bytes 0..7 hold 2-bit codes (weight 4j+i in bits 2i..2i+1 of byte j), byte 8 is
// the scale of weights 0..15 and byte 9 the scale of weights 16..31. A scale byte holds e = bits 3..6
// and m = bits 0..2 (bit 7 is ignored): (8+m)*2^(e-11), or m*2^-10 when e = 0. Each (expert, matrix)
// has a 4-entry fp32 codebook cb [E, 2, 4]; weight = scale * cb[code].
//
// Output y [top_k, 2, out] fp32: y[k, m, r] = sum_c W[ids[k], m][r, c] * x[c].
//
// THE FOLD (what every exact knob keeps): one row (of gate or up) is summed by 32 * row_groups
// "virtual lanes"; virtual lane v takes blocks v, v + 32*row_groups, ... in increasing order. Per block:
//   p = 0; p = fma(cb[code_j], x_j, p) for j = 0..15;  acc = fma(p, scale0, acc);
//   p = 0; p = fma(cb[code_j], x_j, p) for j = 16..31; acc = fma(p, scale1, acc);
// then a 32-lane xor butterfly (offsets 16, 8, 4, 2, 1) per warp; with row_groups > 1 the group sums are
// added in group order through shared memory. row_groups = 1 is the baseline fold, so row_groups > 1
// changes output bits; every other knob only changes how bytes and activations reach the registers.
//
// Knobs arrive as macros EVO_<KNOB> (see family.py). No headers: NVRTC compiles it without a toolkit.

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#ifndef EVO_IN
#define EVO_IN 7168
#endif

#define NBLK (EVO_IN / 32)
#define ROW_BYTES (NBLK * 10)
#define G EVO_ROW_GROUPS
#define NWARPS EVO_WARPS_PER_BLOCK
#define R EVO_ROWS_PER_BLOCK
#define WPG (NWARPS / G)  // warps per row group
#define RW (R / WPG)      // rows per warp
#define NF (2 * RW)       // folds per warp: gate and up of each row
#define STEP (32 * G)     // block stride of one lane
#define NITER ((NBLK + STEP - 1) / STEP)

#if (NWARPS % G) != 0 || (R % WPG) != 0
#error "warps_per_block must be a multiple of row_groups, rows_per_block a multiple of warps per group"
#endif
#if (NBLK % 4) != 0
#error "in must be a multiple of 128 (aligned block loads stay inside the row)"
#endif

#define X_SMEM (EVO_X_STAGING == EVO_X_STAGING_SMEM || EVO_X_STAGING == EVO_X_STAGING_SMEM_SWIZZLE)

struct qblk {
  u32 lo;  // codes of weights 0..15 (bytes 0..3)
  u32 hi;  // codes of weights 16..31 (bytes 4..7)
  u32 sc;  // bits 0..7: scale of weights 0..15, bits 8..15: scale of weights 16..31
};

// One 10-byte block of a row; rows start 8-byte aligned (ROW_BYTES = 10 * NBLK, NBLK % 4 == 0).
__device__ __forceinline__ qblk load_block(const u8* __restrict__ row, int b) {
  qblk q;
  const int a = b * 10;
#if EVO_LOAD_WIDTH == 2
  // Five 16-bit loads (a block always starts 2-byte aligned).
  const u16* p = reinterpret_cast<const u16*>(row + a);
  const u32 h0 = p[0], h1 = p[1], h2 = p[2], h3 = p[3], h4 = p[4];
  q.lo = h0 | (h1 << 16);
  q.hi = h2 | (h3 << 16);
  q.sc = h4;
#elif EVO_LOAD_WIDTH == 4
  // Three aligned 32-bit words and funnel shifts. Blocks at even b start word-aligned, odd b 2 bytes in;
  // an even block's third word takes 2 bytes of block b+1, which exists (NBLK is even): no byte outside
  // the row is read.
  const u32* p = reinterpret_cast<const u32*>(row + (a & ~3));
  const u32 sh = (u32)(a & 2) * 8u;
  const u32 w0 = p[0], w1 = p[1], w2 = p[2];
  q.lo = __funnelshift_r(w0, w1, sh);
  q.hi = __funnelshift_r(w1, w2, sh);
  q.sc = w2 >> sh;
#elif EVO_LOAD_WIDTH == 8
  // Two aligned 64-bit loads (16 bytes) cover the block at offset 0, 2, 4 or 6; with NBLK % 4 == 0 the
  // last block of a row sits at offset 6 and ends exactly at the row's end.
  const uint2* p = reinterpret_cast<const uint2*>(row + (a & ~7));
  const uint2 v0 = p[0], v1 = p[1];
  const u32 sh = (u32)(a & 2) * 8u;
  const bool up = (a & 4) != 0;
  const u32 a0 = up ? v0.y : v0.x;
  const u32 a1 = up ? v1.x : v0.y;
  const u32 a2 = up ? v1.y : v1.x;
  q.lo = __funnelshift_r(a0, a1, sh);
  q.hi = __funnelshift_r(a1, a2, sh);
  q.sc = a2 >> sh;
#else
#error "EVO_LOAD_WIDTH must be 2, 4 or 8"
#endif
  return q;
}

// The 8-bit scale: (8+m)*2^(e-11) for e >= 1, m*2^-10 for e = 0 (both exact in fp32).
__device__ __forceinline__ float fp8_scale(u32 byte) {
  const u32 e = (byte >> 3) & 15u, m = byte & 7u;
  const float normal = __uint_as_float(((e + 119u) << 23) | (m << 20));
  const float sub = __fmul_rn((float)(int)m, 0.0009765625f);
  return e ? normal : sub;
}

// Code of weight j (0..15) of a 16-weight code word: bits 2j..2j+1.
__device__ __forceinline__ u32 code_of(u32 word, int j) { return (word >> (2 * j)) & 3u; }

// Codebook selection from 4 registers through byte permutes (no table, no memory).
__device__ __forceinline__ float cb_select(u32 c0, u32 c1, u32 c2, u32 c3, u32 code) {
  const u32 s0 = 0x3210u + (code & 1u) * 0x4444u;
  const u32 s1 = 0x3210u + ((code >> 1) & 1u) * 0x4444u;
  const u32 lo = __byte_perm(c0, c1, s0);
  const u32 hi = __byte_perm(c2, c3, s0);
  return __uint_as_float(__byte_perm(lo, hi, s1));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;  // identical in every lane (a + b == b + a)
}

// A 16-byte activation load the compiler may not merge with an identical one (asm volatile): the
// per_fold form really re-reads x for every fold, as the reference campaign's baseline did (NVVM would
// otherwise merge the fold's loads, since x is const __restrict__, and the knob would change nothing).
__device__ __forceinline__ float4 ldg_f4_every_time(const float* p) {
  float4 r;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "l"(p));
  return r;
}

// The 32 activations of block b into registers.
__device__ __forceinline__ void load_x(const float* __restrict__ x, const float* xs, int b, float* xv) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
#if EVO_X_STAGING == EVO_X_STAGING_PER_FOLD
    const float4 t = ldg_f4_every_time(x + 32 * b + 4 * k);
#elif EVO_X_STAGING == EVO_X_STAGING_SMEM
    const float4 t = reinterpret_cast<const float4*>(xs)[8 * b + k];
#elif EVO_X_STAGING == EVO_X_STAGING_SMEM_SWIZZLE
    const float4 t = reinterpret_cast<const float4*>(xs)[8 * b + (k ^ (b & 7))];
#else
    const float4 t = reinterpret_cast<const float4*>(x + 32 * b)[k];
#endif
    xv[4 * k + 0] = t.x;
    xv[4 * k + 1] = t.y;
    xv[4 * k + 2] = t.z;
    xv[4 * k + 3] = t.w;
  }
}

struct codebook {
#if EVO_CODEBOOK == EVO_CODEBOOK_GLOBAL
  const float* g;  // cb + (e*2 + m)*4 in global memory
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED
  const float* s;  // 4 floats in shared memory
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED
  const float2* s;  // 16 pairs in shared memory, keyed by a nibble of two codes
#elif EVO_CODEBOOK == EVO_CODEBOOK_REGISTERS
  u32 c0, c1, c2, c3;
#endif
};

// The partial sum of 16 weights (one scale half) in the fold's order, starting from 0.
__device__ __forceinline__ float half_dot(u32 word, const float* xv, const codebook& cb) {
  float p = 0.0f;
#if EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const float2 pr = cb.s[(word >> (4 * n)) & 15u];
    p = __fmaf_rn(pr.x, xv[2 * n], p);
    p = __fmaf_rn(pr.y, xv[2 * n + 1], p);
  }
#else
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#if EVO_CODEBOOK == EVO_CODEBOOK_GLOBAL
    const float v = cb.g[code_of(word, j)];
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED
    const float v = cb.s[code_of(word, j)];
#else
    const float v = cb_select(cb.c0, cb.c1, cb.c2, cb.c3, code_of(word, j));
#endif
    p = __fmaf_rn(v, xv[j], p);
  }
#endif
  return p;
}

__device__ __forceinline__ float fold_block(float acc, const qblk& q, const float* xv, const codebook& cb) {
  acc = __fmaf_rn(half_dot(q.lo, xv, cb), fp8_scale(q.sc & 255u), acc);
  acc = __fmaf_rn(half_dot(q.hi, xv + 16, cb), fp8_scale((q.sc >> 8) & 255u), acc);
  return acc;
}

extern "C" __global__ void __launch_bounds__(32 * NWARPS)
moe_q2_matvec(const u8* __restrict__ w,      // [E, 2, out, ROW_BYTES]
              const float* __restrict__ cb,  // [E, 2, 4]
              const float* __restrict__ x,   // [in]
              const int* __restrict__ ids,   // [top_k]
              float* __restrict__ y,         // [top_k, 2, out]
              int out) {
  const int k = blockIdx.y;
  const int e = ids[k];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp / WPG, wi = warp % WPG;
  const int lrow0 = wi * RW;  // first row of this warp within the block
  const int row0 = blockIdx.x * R + lrow0;
  const float* cbe = cb + (size_t)e * 8;

#if X_SMEM
  __shared__ __align__(16) float xs[EVO_IN];
  {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* xs4 = reinterpret_cast<float4*>(xs);
    for (int q = threadIdx.x; q < EVO_IN / 4; q += 32 * NWARPS) {
#if EVO_X_STAGING == EVO_X_STAGING_SMEM_SWIZZLE
      xs4[(q & ~7) | ((q & 7) ^ ((q >> 3) & 7))] = x4[q];
#else
      xs4[q] = x4[q];
#endif
    }
  }
#else
  const float* xs = x;
#endif

  codebook cbs[2];
#if EVO_CODEBOOK == EVO_CODEBOOK_GLOBAL
  cbs[0].g = cbe;
  cbs[1].g = cbe + 4;
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED
  __shared__ float s_cb[8];
  if (threadIdx.x < 8) s_cb[threadIdx.x] = cbe[threadIdx.x];
  cbs[0].s = s_cb;
  cbs[1].s = s_cb + 4;
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED
  __shared__ float2 s_pair[32];
  if (threadIdx.x < 32) {
    const int m = threadIdx.x >> 4, n = threadIdx.x & 15;
    float2 pr;
    pr.x = cbe[4 * m + (n & 3)];
    pr.y = cbe[4 * m + (n >> 2)];
    s_pair[threadIdx.x] = pr;
  }
  cbs[0].s = s_pair;
  cbs[1].s = s_pair + 16;
#elif EVO_CODEBOOK == EVO_CODEBOOK_REGISTERS
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    cbs[m].c0 = __float_as_uint(cbe[4 * m + 0]);
    cbs[m].c1 = __float_as_uint(cbe[4 * m + 1]);
    cbs[m].c2 = __float_as_uint(cbe[4 * m + 2]);
    cbs[m].c3 = __float_as_uint(cbe[4 * m + 3]);
  }
#endif

#if X_SMEM || EVO_CODEBOOK == EVO_CODEBOOK_SHARED || EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED
  __syncthreads();  // staged activations / codebook visible to every warp
#endif

  // Fold f: row row0 + f/2 of matrix f%2 (0 gate, 1 up).
  const u8* rowp[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f)
    rowp[f] = w + (((size_t)e * 2 + (f & 1)) * out + row0 + (f >> 1)) * ROW_BYTES;

  float acc[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) acc[f] = 0.0f;

  for (int it = 0; it < NITER; ++it) {
    const int b = 32 * g + lane + STEP * it;
    if ((NBLK % STEP) == 0 || b < NBLK) {
#if EVO_X_STAGING != EVO_X_STAGING_PER_FOLD
      float xv[32];
      load_x(x, xs, b, xv);  // once per block, shared by the NF folds
#endif
#if EVO_LOADS_FIRST
      qblk q[NF];
#pragma unroll
      for (int f = 0; f < NF; ++f) q[f] = load_block(rowp[f], b);
#endif
#pragma unroll
      for (int f = 0; f < NF; ++f) {
#if EVO_LOADS_FIRST
        const qblk qf = q[f];
#else
        const qblk qf = load_block(rowp[f], b);
#endif
#if EVO_X_STAGING == EVO_X_STAGING_PER_FOLD
        float xv[32];
        load_x(x, xs, b, xv);  // re-read for every fold
#endif
        acc[f] = fold_block(acc[f], qf, xv, cbs[f & 1]);
      }
    }
  }

#pragma unroll
  for (int f = 0; f < NF; ++f) acc[f] = warp_sum(acc[f]);

#if G == 1
  if (lane == 0) {
#pragma unroll
    for (int f = 0; f < NF; ++f) y[((size_t)k * 2 + (f & 1)) * out + row0 + (f >> 1)] = acc[f];
  }
#else
  __shared__ float s_red[G][2 * R];
  if (lane == 0) {
#pragma unroll
    for (int f = 0; f < NF; ++f) s_red[g][2 * (lrow0 + (f >> 1)) + (f & 1)] = acc[f];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < 2 * R; t += 32 * NWARPS) {
    float s = s_red[0][t];
#pragma unroll
    for (int gg = 1; gg < G; ++gg) s = __fadd_rn(s, s_red[gg][t]);
    y[((size_t)k * 2 + (t & 1)) * out + blockIdx.x * R + (t >> 1)] = s;
  }
#endif
}
