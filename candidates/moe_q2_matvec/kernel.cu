// moe_q2_matvec: 2-bit codebook MoE expert gate/up mat-vec, batch-1 decode (docs/families.md §3).
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
// The codebook values registers_pairs and split (and only they) decode differently, with the same fold:
// levels come from byte permutes that build two weights' fp32 levels from their 16-bit halves
// (4 PRMT per 2 weights, selectors from one IMAD per 4 codes), split takes weights 0..15 of each block from
// the shared nibble-pair table and 16..31 from the permutes (the table's shared-memory reads and the
// permutes' integer pipe are separate limits), and both decode a scale byte as the fp32 bit pattern
// (byte & 0x7f) << 20 times 2^119: e >= 1 is the normal 2^(e-127)(1+m/8) 2^119 = (8+m) 2^(e-11), e = 0 the
// fp32 subnormal m 2^-129 2^119 = m 2^-10 (NVRTC keeps subnormals: no -ftz). The values are the same fp32
// numbers in the same fold: the outputs are bit-identical to the baseline's.
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
#define CB_PAIRS (EVO_CODEBOOK == EVO_CODEBOOK_REGISTERS_PAIRS || EVO_CODEBOOK == EVO_CODEBOOK_SPLIT)
// The nibble-keyed pair table in shared memory, its offsets from shifts and masks or from byte permutes.
#define CB_TABLE (EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED || EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED_PRMT)
// With the new codebook values, loads_first also prefetches: the blocks of iteration it+1 are loaded before
// iteration it's FMAs, the first ones before the activations are staged.
#define PREFETCH (CB_PAIRS && EVO_LOADS_FIRST)

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

#if CB_PAIRS
// The 16 activations of half h (weights 16h..16h+15) of block b, as load_x reads them.
__device__ __forceinline__ void load_x_half(const float* __restrict__ x, const float* xs, int b, int h, float* xv) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int k = 4 * h + i;
#if EVO_X_STAGING == EVO_X_STAGING_PER_FOLD
    const float4 t = ldg_f4_every_time(x + 32 * b + 4 * k);
#elif EVO_X_STAGING == EVO_X_STAGING_SMEM
    const float4 t = reinterpret_cast<const float4*>(xs)[8 * b + k];
#elif EVO_X_STAGING == EVO_X_STAGING_SMEM_SWIZZLE
    const float4 t = reinterpret_cast<const float4*>(xs)[8 * b + (k ^ (b & 7))];
#else
    const float4 t = reinterpret_cast<const float4*>(x + 32 * b)[k];
#endif
    xv[4 * i + 0] = t.x;
    xv[4 * i + 1] = t.y;
    xv[4 * i + 2] = t.z;
    xv[4 * i + 3] = t.w;
  }
}
#endif

struct codebook {
#if EVO_CODEBOOK == EVO_CODEBOOK_GLOBAL
  const float* g;  // cb + (e*2 + m)*4 in global memory
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED
  const float* s;  // 4 floats in shared memory
#elif CB_TABLE
  const float2* s;  // 16 pairs in shared memory, keyed by a nibble of two codes
#elif EVO_CODEBOOK == EVO_CODEBOOK_REGISTERS
  u32 c0, c1, c2, c3;
#elif CB_PAIRS
#if EVO_CODEBOOK == EVO_CODEBOOK_SPLIT
  const float2* s;  // the nibble-pair table (as shared_replicated) for weights 0..15 of a block
#endif
  u32 lo01, lo23;  // low 16-bit halves of the levels: lo(cb0) | lo(cb1) << 16, lo(cb2) | lo(cb3) << 16
  u32 hi01, hi23;  // high 16-bit halves, same layout
#endif
};

#if !CB_PAIRS
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
#elif EVO_CODEBOOK == EVO_CODEBOOK_SHARED_REPLICATED_PRMT
  // The byte offset 8 * nibble of every pair at once: even nibbles 2k (bits 8k..8k+3) shifted to bits 3..6 of
  // byte k of ev, odd nibbles 2k + 1 of od; one byte permute then zero-extends byte k. 12 integer operations per
  // 16 codes instead of a shift and a mask per pair (16).
  const u32 ev = (word << 3) & 0x78787878u, od = (word >> 1) & 0x78787878u;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const u32 off = __byte_perm(n & 1 ? od : ev, 0u, 0x4440u + (u32)(n >> 1));
    const float2 pr = *reinterpret_cast<const float2*>(reinterpret_cast<const char*>(cb.s) + off);
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
#else
// Levels of weights 0..15 of a code word from registers, two weights per four byte permutes.
// e_q = (word >> 2q) & 0x03030303 holds codes q, q+4, q+8, q+12 in its bytes; e_q * 0x22 + 0x10101010 turns
// code c into the selector byte 0x10 + 0x22c (nibbles 2c, 2c+1: bytes 2c, 2c+1 of {lo01, lo23} are lo(cb[c]),
// the same bytes of {hi01, hi23} are hi(cb[c])). Its low 16 bits select two weights' halves at once, its high
// 16 bits (>> 16) the next two; the last two permutes put each weight's halves together.
// PTX prmt (selector nibble bit 3 = replicate the sign bit; bits 16..31 ignored). Here every selector
// nibble is 0..7, where prmt and __byte_perm agree; __byte_perm would first mask the selector with 0x7777.
__device__ __forceinline__ u32 prmt_sel(u32 a, u32 b, u32 s) {
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}

__device__ __forceinline__ void levels_pairs(u32 word, const codebook& cb, float* v) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const u32 wq = q ? __umulhi(word, 1u << ((32 - 2 * q) & 31)) : word;  // word >> 2q, on the multiply pipe
    const u32 sel = (wq & 0x03030303u) * 0x22u + 0x10101010u;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u32 s = h ? __umulhi(sel, 0x10000u) : sel;  // sel >> 16
      const u32 lo = prmt_sel(cb.lo01, cb.lo23, s);  // lo(cb[c_a]) | lo(cb[c_b]) << 16
      const u32 hi = prmt_sel(cb.hi01, cb.hi23, s);  // hi(cb[c_a]) | hi(cb[c_b]) << 16
      v[q + 8 * h] = __uint_as_float(__byte_perm(lo, hi, 0x5410));
      v[q + 8 * h + 4] = __uint_as_float(__byte_perm(lo, hi, 0x7632));
    }
  }
}

// The partial sum of 16 weights (one scale half) in the fold's order, starting from 0.
__device__ __forceinline__ float half_dot_pairs(u32 word, const float* xv, const codebook& cb) {
  float v[16];
  levels_pairs(word, cb, v);
  float p = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) p = __fmaf_rn(v[j], xv[j], p);
  return p;
}

#if EVO_CODEBOOK == EVO_CODEBOOK_SPLIT
// As shared_replicated: nibble n (codes 2n, 2n+1) keys one float2 of the table; its byte offset 8 * nibble
// is one shift (on the multiply pipe: << 3 as a multiply, >> k as the high word of a multiply by 2^(32-k))
// and one mask.
__device__ __forceinline__ float half_dot_table(u32 word, const float* xv, const float2* tab) {
  float p = 0.0f;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const u32 off = (n == 0 ? word * 8u : __umulhi(word, 1u << ((35 - 4 * n) & 31))) & 0x78u;
    const float2 pr = *reinterpret_cast<const float2*>(reinterpret_cast<const char*>(tab) + off);
    p = __fmaf_rn(pr.x, xv[2 * n], p);
    p = __fmaf_rn(pr.y, xv[2 * n + 1], p);
  }
  return p;
}
#endif

// A scale byte at bits 20..27 of a word (bit 27, the byte's ignored bit 7, is masked off) as fp32:
// the bit pattern (byte & 0x7f) << 20 is 2^(e-127)(1+m/8) for e >= 1 and the subnormal m 2^-129 for e = 0;
// times 2^119 (exact) that is (8+m) 2^(e-11) and m 2^-10, the format's values. mul.rn.f32 without .ftz
// keeps the subnormal input whatever the compile flags (-ftz, fast math) say.
__device__ __forceinline__ float fp8_scale_bits(u32 at20) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(__uint_as_float(at20 & 0x07F00000u)), "f"(0x1p119f));
  return r;
}

// Half h of the fold of one block (h = 0 must come before h = 1 for each fold): xv holds that half's x.
__device__ __forceinline__ float fold_half(float acc, const qblk& q, int h, const float* xv, const codebook& cb) {
  if (h == 0) {
#if EVO_CODEBOOK == EVO_CODEBOOK_SPLIT
    return __fmaf_rn(half_dot_table(q.lo, xv, cb.s), fp8_scale_bits(q.sc << 20), acc);
#else
    return __fmaf_rn(half_dot_pairs(q.lo, xv, cb), fp8_scale_bits(q.sc << 20), acc);
#endif
  }
  return __fmaf_rn(half_dot_pairs(q.hi, xv, cb), fp8_scale_bits(q.sc << 12), acc);
}
#endif

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

#if PREFETCH
  // Fold f: row row0 + f/2 of matrix f%2 (0 gate, 1 up).
  const u8* rowp[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f)
    rowp[f] = w + (((size_t)e * 2 + (f & 1)) * out + row0 + (f >> 1)) * ROW_BYTES;
  qblk qn[NF];  // the blocks of the next iteration, in flight while activations are staged / FMAs run
  if ((NBLK % STEP) == 0 || 32 * g + lane < NBLK) {
#pragma unroll
    for (int f = 0; f < NF; ++f) qn[f] = load_block(rowp[f], 32 * g + lane);
  }
#endif

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
#elif CB_TABLE
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
#elif CB_PAIRS
  // lz = 0 (the grid is 2-D: blockIdx.z = 0), but per lane as far as ptxas can tell: it would otherwise
  // keep the warp-uniform table words in uniform registers and copy one into a regular register before
  // every permute (prmt takes both data operands from regular registers).
  const u32 lz = (u32)lane & blockIdx.z;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const u32 l0 = __float_as_uint(cbe[4 * m + 0]), l1 = __float_as_uint(cbe[4 * m + 1]);
    const u32 l2 = __float_as_uint(cbe[4 * m + 2]), l3 = __float_as_uint(cbe[4 * m + 3]);
    cbs[m].lo01 = __byte_perm(l0, l1, 0x5410) ^ lz;
    cbs[m].lo23 = __byte_perm(l2, l3, 0x5410) ^ lz;
    cbs[m].hi01 = __byte_perm(l0, l1, 0x7632) ^ lz;
    cbs[m].hi23 = __byte_perm(l2, l3, 0x7632) ^ lz;
  }
#if EVO_CODEBOOK == EVO_CODEBOOK_SPLIT
  __shared__ float2 s_pair[32];  // the shared_replicated table: entry 16m + n = (cb[m][n & 3], cb[m][n >> 2])
  if (threadIdx.x < 32) {
    const int m = threadIdx.x >> 4, n = threadIdx.x & 15;
    float2 pr;
    pr.x = cbe[4 * m + (n & 3)];
    pr.y = cbe[4 * m + (n >> 2)];
    s_pair[threadIdx.x] = pr;
  }
  cbs[0].s = s_pair;
  cbs[1].s = s_pair + 16;
#endif
#endif

#if X_SMEM || EVO_CODEBOOK == EVO_CODEBOOK_SHARED || CB_TABLE || \
    EVO_CODEBOOK == EVO_CODEBOOK_SPLIT
  __syncthreads();  // staged activations / codebook visible to every warp
#endif

#if !PREFETCH
  // Fold f: row row0 + f/2 of matrix f%2 (0 gate, 1 up).
  const u8* rowp[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f)
    rowp[f] = w + (((size_t)e * 2 + (f & 1)) * out + row0 + (f >> 1)) * ROW_BYTES;
#endif

  float acc[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) acc[f] = 0.0f;

  for (int it = 0; it < NITER; ++it) {
    const int b = 32 * g + lane + STEP * it;
    if ((NBLK % STEP) == 0 || b < NBLK) {
#if CB_PAIRS
      // Weights 0..15 of every fold, then 16..31: only one half's activations are live at a time. Each
      // fold's acc still takes half 0 then half 1 of the block, so the fold is unchanged.
      qblk q[NF];
#if PREFETCH
#pragma unroll
      for (int f = 0; f < NF; ++f) q[f] = qn[f];
      if (it + 1 < NITER && ((NBLK % STEP) == 0 || b + STEP < NBLK)) {
#pragma unroll
        for (int f = 0; f < NF; ++f) qn[f] = load_block(rowp[f], b + STEP);
      }
#endif
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#if EVO_X_STAGING != EVO_X_STAGING_PER_FOLD
        float xv[16];
        load_x_half(x, xs, b, h, xv);  // once per half-block, shared by the NF folds
#endif
#pragma unroll
        for (int f = 0; f < NF; ++f) {
#if !EVO_LOADS_FIRST
          if (h == 0) q[f] = load_block(rowp[f], b);
#endif
#if EVO_X_STAGING == EVO_X_STAGING_PER_FOLD
          float xv[16];
          load_x_half(x, xs, b, h, xv);  // re-read for every fold
#endif
          acc[f] = fold_half(acc[f], q[f], h, xv, cbs[f & 1]);
        }
      }
#else
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
#endif
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
