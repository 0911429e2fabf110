// fp4_matvec: dense MXFP4 mat-vec, batch-1 decode (docs/families.md §4).
//
// Weights: w [out, ROW_STRIDE] bytes. A row is NBLK = in / 32 blocks of 17 bytes, block b at byte 17*b:
// byte 0 is the E8M0 scale 2^(e-127) (e = 255 is NaN), bytes 1..16 are E2M1 codes, weight j (0..15) in
// the low nibble of byte 1+j and weight j+16 in the high nibble. E2M1: bit 3 sign, bits 0..2 index
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Rows are padded to ROW_STRIDE = 17*NBLK rounded up to 16 bytes, so every
// row starts 16-byte aligned (no padding when in % 512 == 0, as for in = 4096 and 7168).
// Activations x [in] fp32 (or bf16 with EVO_X_BF16); output y [out] fp32.
//
// THE FOLD (what every exact knob keeps): a row is summed by 64 "virtual lanes" (128 with
// row_groups = 4); virtual lane v takes blocks v, v + 64, ... in increasing order. Per block:
//   p = 0; p = fma(e2m1[code_j], x_j, p) for j = 0..31; acc = fma(p, scale, acc);
// then each group of 32 virtual lanes is summed by a 32-lane xor butterfly (16, 8, 4, 2, 1), and
// y = s0 + s1 (64 virtual lanes), or (s0 + s1) + (s2 + s3) with row_groups = 4. With row_groups = 1 a lane
// runs virtual lanes L and 32 + L; with row_groups = 2 warp group g runs virtual lanes 32g + L: the same
// fold. row_groups = 4 is a different fold (it changes output bits).
//
// expand = f16 keeps the fold: it builds e2m1 * 2^-14 as an f16 (the 3 magnitude bits at the f16's exponent
// low bits and mantissa top bit, the subnormal f16 covering 0 and 0.5) and converts it to fp32 exactly, and
// x arrives scaled by 2^14 (exact); every product, hence every fma, is the same real number as the
// baseline's, so the output bits are the same for every x with |x| < 2^114 (above that the scaled x
// overflows; finite activations never get near it).
// qload = cp_async keeps the fold: it only changes where the bytes come from. Persistent thread blocks
// (grid = SMs x resident blocks, tiles of rows_per_block rows taken round-robin) stage x once in shared
// memory (fp32, bf16 widened, scaled by 2^14 for expand = f16, each 128-byte block's 16-byte chunks
// XOR-swizzled so that 8 consecutive lanes read 8 different bank groups) and stream every (tile, step)
// slice of the quant bytes (rows_per_block rows x 17 * VL bytes, 16-byte aligned) through a ring of
// unroll + 1 stages filled with 16-byte cp.async, unroll slices in flight while one is folded; lanes then
// read their block from shared memory as aligned words (funnel shifts), as qload = words_funnel does. x and
// the ring are dynamic shared memory (up to 227 KiB a block: the harness opts in above 48 KiB).
//
// Knobs arrive as macros EVO_<KNOB> (see family.py). No headers: NVRTC compiles it without a toolkit.

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#ifndef EVO_IN
#define EVO_IN 7168
#endif
#ifndef EVO_X_BF16
#define EVO_X_BF16 0
#endif

#define NBLK (EVO_IN / 32)
#define ROW_STRIDE ((NBLK * 17 + 15) / 16 * 16)
#define G EVO_ROW_GROUPS
#define NWARPS EVO_WARPS
#define R EVO_ROWS_PER_BLOCK
#define U EVO_UNROLL
#define VL (G == 4 ? 128 : 64)  // virtual lanes of the fold
#define NCH (VL / (32 * G))     // chains (virtual lanes) per lane: 2, 1, 1
#define WPG (NWARPS / G)        // warps per row group
#define RW (R / WPG)            // rows per warp
#define NSTEP ((NBLK + VL - 1) / VL)

#if (NWARPS % G) != 0 || (R % WPG) != 0
#error "warps must be a multiple of row_groups, rows_per_block a multiple of warps per group"
#endif

// E2M1 values, sign bit 3.
#if EVO_EXPAND == EVO_EXPAND_LUT_GLOBAL || EVO_EXPAND == EVO_EXPAND_MMA  // (mma: unused)
__device__ float fp4_lut[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
#elif EVO_EXPAND == EVO_EXPAND_LUT_CONSTANT || EVO_EXPAND == EVO_EXPAND_LUT_SHARED
__constant__ float fp4_lut[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
#endif
#if EVO_EXPAND == EVO_EXPAND_LUT_SHARED
__shared__ float s_lut[16];
#define LUT(i) s_lut[i]
#else
#define LUT(i) fp4_lut[i]
#endif

struct fblk {
  u32 sb;    // scale byte
  u32 q[4];  // code bytes 0..15 (little-endian words)
};

__device__ __forceinline__ fblk load_block(const u8* __restrict__ row, int b) {
  fblk r;
  const int a = 17 * b;
#if EVO_QLOAD == EVO_QLOAD_BYTES
  const u8* p = row + a;
  r.sb = p[0];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    r.q[k] = (u32)p[1 + 4 * k] | ((u32)p[2 + 4 * k] << 8) | ((u32)p[3 + 4 * k] << 16) | ((u32)p[4 + 4 * k] << 24);
#elif EVO_QLOAD == EVO_QLOAD_WORDS_FUNNEL || EVO_QLOAD == EVO_QLOAD_CP_ASYNC || EVO_QLOAD == EVO_QLOAD_TMA  // (tma: unused)
  // Five aligned 32-bit words cover the 17 bytes at offset 0..3; with 16-byte padded rows they never
  // leave the row's padded extent (the last block sits at offset 3 when NBLK % 4 == 0).
  const u32* p = reinterpret_cast<const u32*>(row + (a & ~3));
  const u32 off = (u32)(a & 3);
  u32 w[5];
#pragma unroll
  for (int k = 0; k < 5; ++k) w[k] = p[k];
  r.sb = (w[0] >> (8u * off)) & 255u;
#pragma unroll
  for (int k = 0; k < 4; ++k) r.q[k] = __funnelshift_rc(w[k], w[k + 1], 8u * off + 8u);  // shift 32 -> w[k+1]
#elif EVO_QLOAD == EVO_QLOAD_VEC16
  // Two aligned 16-byte vectors cover the 17 bytes at offset 0..15; the window is selected with a
  // two-level barrel of selects (no dynamically indexed array, so no local memory).
  const uint4* p = reinterpret_cast<const uint4*>(row + (a & ~15));
  const uint4 v0 = p[0], v1 = p[1];
  const u32 off = (u32)(a & 15);
  const u32 wv[9] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w, 0u};
  const u32 j0 = off >> 2, sh = 8u * (off & 3u);
  u32 t[7], c[6], s[5];
#pragma unroll
  for (int i = 0; i < 7; ++i) t[i] = (j0 & 2u) ? wv[i + 2] : wv[i];
#pragma unroll
  for (int i = 0; i < 6; ++i) c[i] = (j0 & 1u) ? t[i + 1] : t[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) s[i] = __funnelshift_r(c[i], c[i + 1], sh);  // bytes off .. off+19
  r.sb = s[0] & 255u;
#pragma unroll
  for (int k = 0; k < 4; ++k) r.q[k] = __funnelshift_r(s[k], s[k + 1], 8u);
#else
#error "unknown EVO_QLOAD"
#endif
  return r;
}

// E8M0: 2^(e-127); e = 0 is the subnormal 2^-127, e = 255 is NaN.
__device__ __forceinline__ float e8m0(u32 sb) {
  const float v = sb ? __uint_as_float(sb << 23) : __uint_as_float(0x00400000u);
  return sb == 255u ? __uint_as_float(0x7fc00000u) : v;
}

// Four E2M1 codes (the low nibble of each byte of n) to fp32 with byte permutes, no table: the fp32
// bits of the magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} are a top byte {00,3F,3F,3F,40,40,40,40} and a
// second byte {00,00,80,C0,00,40,80,C0} followed by zeros; the sign is bit 3 of the code.
__device__ __forceinline__ void e2m1x4_prmt(u32 n, float* out) {
  const u32 t = n | (n >> 4);                  // byte 0: c1c0, byte 2: c3c2
  const u32 sel = __byte_perm(t, 0u, 0x4420u);  // c0 | c1 << 4 | c2 << 8 | c3 << 12
  const u32 mag = sel & 0x7777u;
  const u32 top = __byte_perm(0x3F3F3F00u, 0x40404040u, mag);
  const u32 sec = __byte_perm(0xC0800000u, 0xC0804000u, mag);
  const u32 p01 = __byte_perm(sec, top, 0x5140u);  // sec0 top0 sec1 top1
  const u32 p23 = __byte_perm(sec, top, 0x7362u);  // sec2 top2 sec3 top3
  out[0] = __uint_as_float((p01 << 16) | ((sel << 28) & 0x80000000u));
  out[1] = __uint_as_float((p01 & 0xFFFF0000u) | ((sel << 24) & 0x80000000u));
  out[2] = __uint_as_float((p23 << 16) | ((sel << 20) & 0x80000000u));
  out[3] = __uint_as_float((p23 & 0xFFFF0000u) | ((sel << 16) & 0x80000000u));
}

#if EVO_EXPAND == EVO_EXPAND_F16
// The f16 in the low / high half of w, as fp32 (exact: every f16 is an fp32).
__device__ __forceinline__ float f16lo(u32 w) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)w));
  return f;
}
__device__ __forceinline__ float f16hi(u32 w) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)(w >> 16)));
  return f;
}
// Four code bytes (word q) -> eight weights * 2^-14. A code s|e1 e0 m becomes the f16 high byte
// s 0 0 0 e1 e0 m 0 (low byte 0): exponent field e, mantissa top bit m, so the f16 is 2^(e-15) (1 + m/2) =
// e2m1 * 2^-14 for e > 0 and the subnormal m * 2^-15 = e2m1 * 2^-14 for e = 0 (code 8 gives -0, as the table).
__device__ __forceinline__ void e2m1x8_f16(u32 q, float* lo4, float* hi4) {
  const u32 lo = ((q << 4) & 0x80808080u) | ((q << 1) & 0x0E0E0E0Eu);  // low nibbles, one high byte each
  const u32 hi = (q & 0x80808080u) | ((q >> 3) & 0x0E0E0E0Eu);         // high nibbles
  const u32 l02 = __byte_perm(lo, 0u, 0x2404u), l13 = lo & 0xFF00FF00u;  // bytes 0, 2 and 1, 3 as f16 pairs
  const u32 h02 = __byte_perm(hi, 0u, 0x2404u), h13 = hi & 0xFF00FF00u;
  lo4[0] = f16lo(l02);
  lo4[1] = f16lo(l13);
  lo4[2] = f16hi(l02);
  lo4[3] = f16hi(l13);
  hi4[0] = f16lo(h02);
  hi4[1] = f16lo(h13);
  hi4[2] = f16hi(h02);
  hi4[3] = f16hi(h13);
}
#define X_SCALE 16384.0f  // x * 2^14 pairs with the weights' 2^-14 (exact)
#endif

// The 32 weight values of a block (without the scale), weight j at v[j] (times 2^-14 with expand = f16).
__device__ __forceinline__ void expand(const fblk& blk, float* v) {
#if EVO_EXPAND == EVO_EXPAND_F16
#pragma unroll
  for (int k = 0; k < 4; ++k) e2m1x8_f16(blk.q[k], v + 4 * k, v + 16 + 4 * k);
#elif EVO_EXPAND == EVO_EXPAND_PRMT
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    e2m1x4_prmt(blk.q[k] & 0x0F0F0F0Fu, v + 4 * k);
    e2m1x4_prmt((blk.q[k] >> 4) & 0x0F0F0F0Fu, v + 16 + 4 * k);
  }
#else
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    v[j] = LUT((blk.q[j >> 2] >> (8 * (j & 3))) & 15u);
    v[16 + j] = LUT((blk.q[j >> 2] >> (8 * (j & 3) + 4)) & 15u);
  }
#endif
}

__device__ __forceinline__ void load_x(const void* __restrict__ xp, int b, float* xv) {
#if EVO_X_BF16
  const uint4* p = reinterpret_cast<const uint4*>(reinterpret_cast<const u16*>(xp) + 32 * b);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint4 t = p[k];
    xv[8 * k + 0] = __uint_as_float(t.x << 16);
    xv[8 * k + 1] = __uint_as_float(t.x & 0xFFFF0000u);
    xv[8 * k + 2] = __uint_as_float(t.y << 16);
    xv[8 * k + 3] = __uint_as_float(t.y & 0xFFFF0000u);
    xv[8 * k + 4] = __uint_as_float(t.z << 16);
    xv[8 * k + 5] = __uint_as_float(t.z & 0xFFFF0000u);
    xv[8 * k + 6] = __uint_as_float(t.w << 16);
    xv[8 * k + 7] = __uint_as_float(t.w & 0xFFFF0000u);
  }
#else
  const float4* p = reinterpret_cast<const float4*>(reinterpret_cast<const float*>(xp) + 32 * b);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float4 t = p[k];
    xv[4 * k + 0] = t.x;
    xv[4 * k + 1] = t.y;
    xv[4 * k + 2] = t.z;
    xv[4 * k + 3] = t.w;
  }
#endif
#ifdef X_SCALE
#pragma unroll
  for (int j = 0; j < 32; ++j) xv[j] = __fmul_rn(xv[j], X_SCALE);
#endif
}

__device__ __forceinline__ float fold_block(float acc, const fblk& blk, const float* xv) {
  float v[32];
  expand(blk, v);
  float p = 0.0f;
#pragma unroll
  for (int j = 0; j < 32; ++j) p = __fmaf_rn(v[j], xv[j], p);
  return __fmaf_rn(p, e8m0(blk.sb), acc);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;  // identical in every lane (a + b == b + a)
}

#if EVO_QLOAD == EVO_QLOAD_CP_ASYNC
#ifndef EVO_MINB
#define EVO_MINB 1
#endif
#define NT (32 * NWARPS)
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const u32 sa = (u32)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The R rows of one slice, nch 16-byte chunks each (row r's chunk c: src + r * ROW_STRIDE + 16c to
// dst + r * PITCH + 16c). A thread's chunk and row within a pass are fixed (threads >= CH chunks: NT / CH rows
// per pass), so a copy costs an address add and the cp.async, not a division per chunk.
template <int CH, int PITCH>
__device__ __forceinline__ void copy_rows(u8* dst, const u8* __restrict__ src, int nch) {
  if (NT >= CH) {
    constexpr int RPP = NT >= CH ? NT / CH : 1;  // rows per pass
    const int rip = (int)threadIdx.x / CH, c = (int)threadIdx.x - rip * CH;
    if (rip < RPP && c < nch) {
#pragma unroll
      for (int p = 0; p < (R + RPP - 1) / RPP; ++p) {
        const int r = p * RPP + rip;
        if ((R % RPP) == 0 || r < R) cp_async16(dst + r * PITCH + 16 * c, src + (size_t)r * ROW_STRIDE + 16 * c);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r)
      for (int c = (int)threadIdx.x; c < nch; c += NT) cp_async16(dst + r * PITCH + 16 * c, src + (size_t)r * ROW_STRIDE + 16 * c);
  }
}
#endif

#if EVO_EXPAND == EVO_EXPAND_MMA
// ---- expand = mma: tensor cores (mma.sync m16n8k16, f16 in, fp32 accumulate); NOT the fold above ----
// A warp owns MT tiles of 16 rows and, with row_groups = G, every G-th chunk of U consecutive blocks of K
// (the G partial sums are added through shared memory). Per block and tile, two mma: k-chunk 0 takes the
// low nibbles (weights 0..15), k-chunk 1 the high nibbles (16..31). Lane (g = lane / 4, t = lane % 4) loads
// the 4 code bytes 4t..4t+3 of its rows g and g + 8 (one 32-bit window, funnel-shifted) and expands them with
// the f16 trick (weights * 2^-14, exact) into its A fragment; the order of k inside a chunk is free in a dot
// product, so the lane's weights 4t, 4t+2 | 4t+1, 4t+3 (and + 16) fill its k slots 2t, 2t+1 | 2t+8, 2t+9 and
// B holds x in the same order. x is staged once per thread block as three f16 parts (hi + mid + lo = x * 2^k
// exactly, with k per block of 32 chosen so that max |x * 2^k| lies in [2^14, 2^15)): B's columns 0, 1, 2 are
// the parts (columns 3..7 repeat part 2 and are dropped), so one mma gives the three partial dot products.
// y adds, per block, D * 2^(14 - k) * scale in fp32. Products are exact; the sums are the tensor cores' fp32 and the order
// differs from the fold: tolerance mode (family.inexact_knobs).
// With qload = cp_async the blocks are persistent (grid = SMs x resident blocks, tiles of R rows round-robin),
// x's parts are staged once per block and every (tile, step of 64 blocks) slice of the quant bytes streams
// through a ring of U + 1 stages in dynamic shared memory (16-byte cp.async), each row at a pitch of
// 1088 + 16 bytes so that the 8 rows of a fragment fall on 8 different bank quads (conflict-free window loads).
// Warp (kg, wi) takes the 4-block groups kg, kg + G, ... of every step: block 4j + u has lead (u + 1) & 3, a
// constant, and u keeps its own accumulators (4 shorter fp32 chains, independent work for the scheduler).
#define MT (R / (16 * WPG))  // 16-row tiles per warp
#if EVO_QLOAD != EVO_QLOAD_TMA && (MT < 1 || (R % (16 * WPG)) != 0)  // (tma: every warp takes every tile)
#error "expand = mma: rows_per_block must be a multiple of 16 x warps per row group"
#endif
#if EVO_QLOAD != EVO_QLOAD_CP_ASYNC && EVO_QLOAD != EVO_QLOAD_TMA
__shared__ __align__(16) uint4 s_xb[NBLK * 12];  // block b, lane t, part p: the 8 halves of lane (p, t)'s B
__shared__ float s_xf[NBLK];                      // 2^(14 - k_b): back to x's scale, and the weights' 2^-14
#endif

__device__ __forceinline__ u32 f16_bits(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float f16_value(u32 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)h));
  return f;
}
__device__ __forceinline__ void mma16816(float* d, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x_j of block b, already times 2^k, as three f16 parts (hi + mid + lo = xs exactly) at B's places in s_xb:
// x_{4t+0,2,1,3} (+16) are halves 0..3 (4..7) of lane t's entry, one entry per part.
__device__ __forceinline__ void put_x_parts(uint4* s_xb, int b, int j, float xs) {
  const u32 h = f16_bits(xs);
  const float r1 = xs - f16_value(h);  // exact (a float minus its rounding to fewer bits)
  const u32 mid = f16_bits(r1);
  const u32 lo = f16_bits(r1 - f16_value(mid));
  const int jj = j & 15, rr = jj & 3;
  const int pos = (j >> 4) * 4 + (((rr & 1) << 1) | (rr >> 1));
  u16* dst = reinterpret_cast<u16*>(s_xb + (b * 4 + (jj >> 2)) * 3);
  dst[pos] = (u16)h;
  dst[8 + pos] = (u16)mid;
  dst[16 + pos] = (u16)lo;
}

// Stage x as three f16 parts per block of 32 (one warp per block, lane j holds x_j) and the blocks' 2^(14 - k).
__device__ __forceinline__ void stage_x_parts(const void* __restrict__ x, uint4* s_xb, float* s_xf, int warp,
                                              int lane) {
  for (int b = warp; b < NBLK; b += NWARPS) {
#if EVO_X_BF16
    const float xv = __uint_as_float((u32)reinterpret_cast<const u16*>(x)[32 * b + lane] << 16);
#else
    const float xv = reinterpret_cast<const float*>(x)[32 * b + lane];
#endif
    float m = fabsf(xv);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const int em = (int)((__float_as_uint(m) >> 23) & 255u);  // max |x| in [2^(em-127), 2^(em-126))
    const int k = min(141 - em, 127);                         // 2^k: exact scaling, no overflow of 2^k itself
    put_x_parts(s_xb, b, lane, xv * __uint_as_float((u32)(k + 127) << 23));
    if (lane == 0) s_xf[b] = __uint_as_float((u32)(14 - k + 127) << 23);  // 14 - k in [-113, 128]
  }
}

// One block of one 16-row tile: q[r], sb[r] are the lane's code window and scale byte of rows g (r = 0) and
// g + 8 (r = 1); xb its B registers of the block, fx the block's 2^(14 - k). acc[c] += D[c] * scale * fx.
// D = the block's two mma (k-chunk 0: low nibbles, 1: high nibbles) of the lane's windows q[r] (rows g, g + 8)
// against its B registers xb.
__device__ __forceinline__ void mma_pair(const u32* q, uint4 xb, float* d) {
  u32 alo[4], ahi[4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const u32 qq = q[r];
    const u32 lo = ((qq << 4) & 0x80808080u) | ((qq << 1) & 0x0E0E0E0Eu);  // f16 high bytes, low nibbles
    const u32 hi = (qq & 0x80808080u) | ((qq >> 3) & 0x0E0E0E0Eu);        // high nibbles
    alo[r] = __byte_perm(lo, 0u, 0x2404u);  // weights 4t, 4t+2: k slots 2t, 2t+1
    alo[2 + r] = lo & 0xFF00FF00u;          // weights 4t+1, 4t+3: k slots 2t+8, 2t+9
    ahi[r] = __byte_perm(hi, 0u, 0x2404u);
    ahi[2 + r] = hi & 0xFF00FF00u;
  }
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  mma16816(d, alo, xb.x, xb.y);
  mma16816(d, ahi, xb.z, xb.w);
}

// One block of one 16-row tile: q[r], sb[r] are the lane's code window and scale byte of rows g (r = 0) and
// g + 8 (r = 1); xb its B registers of the block, fx the block's 2^(14 - k). acc[c] += D[c] * scale * fx.
__device__ __forceinline__ void mma_block(const u32* q, const u32* sb, uint4 xb, float fx, float* acc) {
  float d[4];
  mma_pair(q, xb, d);
  // 2^(sb - 127) * fx, exact (powers of two). e8m0's selects, not a branch: a branch here would end the basic
  // block after every block of every tile, and ptxas schedules within basic blocks only (no overlap of one
  // block's loads with another's mma).
  const float f0 = e8m0(sb[0]) * fx, f1 = e8m0(sb[1]) * fx;
  acc[0] = __fmaf_rn(d[0], f0, acc[0]);
  acc[1] = __fmaf_rn(d[1], f0, acc[1]);
  acc[2] = __fmaf_rn(d[2], f1, acc[2]);
  acc[3] = __fmaf_rn(d[3], f1, acc[3]);
}

#if EVO_QLOAD == EVO_QLOAD_CP_ASYNC
#define MSTEP 64                        // blocks of K per ring slice
#define MSLICE (17 * MSTEP)             // bytes of one row in one slice (1088, a multiple of 16)
#define MPITCH (MSLICE + 16)            // a row's pitch in the ring (276 words: 20 mod 32 banks)
#define MCHUNKS (MSLICE / 16)
#define MNSTEP ((NBLK + MSTEP - 1) / MSTEP)
#define MNSTAGE (U + 1)
#if (NBLK % 4) != 0
#error "expand = mma with qload = cp_async: in must be a multiple of 128 (whole 4-block groups)"
#endif
// Dynamic shared memory (family.py: mma_cp_async_smem): x parts [NBLK * 12] uint4 | ring [MNSTAGE][R][MPITCH]
// bytes | s_xf [NBLK] float | s_red [G][R] float.
extern __shared__ __align__(16) uint4 dsm[];

// Copy (tile, step) item `item` of this block into ring stage item % MNSTAGE; always commits a group (empty past
// the last item) so that group i is item i.
__device__ __forceinline__ void issue_slice_mma(const u8* __restrict__ w, u8* ring, int item, int nitems) {
  if (item < nitems) {
    const int tile = (int)blockIdx.x + (item / MNSTEP) * (int)gridDim.x, s = item % MNSTEP;
    const u8* src = w + (size_t)tile * R * ROW_STRIDE + (size_t)s * MSLICE;
    u8* dst = ring + (item % MNSTAGE) * (R * MPITCH);
    const int rem = (ROW_STRIDE - s * MSLICE) / 16;  // 16-byte chunks left in the (padded) row
    copy_rows<MCHUNKS, MPITCH>(dst, src, rem < MCHUNKS ? rem : MCHUNKS);
  }
  cp_async_commit();
}

__device__ __forceinline__ void zero_chains(float (&acc)[4][MT][4]) {
#pragma unroll
  for (int u = 0; u < 4; ++u)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[u][i][c] = 0.0f;
}

extern "C" __global__ void __launch_bounds__(NT, EVO_MINB)
fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]
           const void* __restrict__ x,  // [in] fp32 or bf16
           float* __restrict__ y,       // [out]
           int out) {
  uint4* s_xb = dsm;
  u8* ring = reinterpret_cast<u8*>(dsm + NBLK * 12);
  float* s_xf = reinterpret_cast<float*>(ring + MNSTAGE * R * MPITCH);
  float* s_red = s_xf + NBLK;  // [G][R]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kg = warp / WPG, wi = warp % WPG;  // K group, warp within it
  const int gq = lane >> 2, t = lane & 3;
  // B columns 3..7 (lanes gq >= 3) repeat part 2: no predicated load, no zeros; the D columns they make are
  // dropped below (lane t = 1's column 3; lanes t = 2, 3 are never read).
  const int gp = gq < 3 ? gq : 2;
  const int ntiles = out / R;
  const int my_tiles = (int)blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  const int nitems = my_tiles * MNSTEP;

  // The first slices go out before x is staged.
#pragma unroll
  for (int i = 0; i < MNSTAGE - 1; ++i) issue_slice_mma(w, ring, i, nitems);
  stage_x_parts(x, s_xb, s_xf, warp, lane);
  (void)s_red;
  // (the first __syncthreads of the loop publishes them)

  float acc[4][MT][4];
  zero_chains(acc);

  for (int item = 0; item < nitems; ++item) {
    cp_async_wait<MNSTAGE - 2>();  // this thread's copies of `item` have landed
    __syncthreads();               // everyone's have; and everyone is done with stage (item - 1) % MNSTAGE
    issue_slice_mma(w, ring, item + MNSTAGE - 1, nitems);

    const int s = item % MNSTEP;
    const u8* slot = ring + (item % MNSTAGE) * (R * MPITCH) + (wi * 16 * MT + gq) * MPITCH;
    const int ng = (NBLK - s * MSTEP < MSTEP ? NBLK - s * MSTEP : MSTEP) / 4;  // 4-block groups in this step
#pragma unroll
    for (int jj = 0; jj < MSTEP / (4 * G); ++jj) {
      const int jg = kg + G * jj;
      if ((NBLK % MSTEP) == 0 || jg < ng) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int bl = 4 * jg + u, b = MSTEP * s + bl;
          const int lead = (u + 1) & 3;              // (17 bl + 1) & 3 with bl & 3 == u
          const int wofs = 17 * bl + 1 - lead + 4 * t;  // a multiple of 4
          const uint4 xb = s_xb[(b * 4 + t) * 3 + gp];
          const float fx = s_xf[b];
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            u32 q[2], sb[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const u8* rowp = slot + (16 * i + 8 * r) * MPITCH;
              const u32* p = reinterpret_cast<const u32*>(rowp + wofs);
              q[r] = lead ? __funnelshift_r(p[0], p[1], 8u * lead) : p[0];
              sb[r] = rowp[17 * bl];
            }
            mma_block(q, sb, xb, fx, acc[u][i]);
          }
        }
      }
    }

    if (s == MNSTEP - 1) {  // the tile's last step (the same for the whole block)
      const int tile0 = ((int)blockIdx.x + (item / MNSTEP) * (int)gridDim.x) * R;
      if (t != 0) {  // column 3 of lane t = 1 (and 5, 7 of t = 2, 3) is a repeat of part 2
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int i = 0; i < MT; ++i) acc[u][i][1] = acc[u][i][3] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // Lane t = 0 holds columns 0, 1 (hi, mid), lane t = 1 columns 2, 3 (lo, 0 after the drop above).
          const float v = ((acc[0][i][2 * r] + acc[0][i][2 * r + 1]) + (acc[1][i][2 * r] + acc[1][i][2 * r + 1])) +
                          ((acc[2][i][2 * r] + acc[2][i][2 * r + 1]) + (acc[3][i][2 * r] + acc[3][i][2 * r + 1]));
          const float sum = v + __shfl_down_sync(0xffffffffu, v, 1);
          const int row = wi * 16 * MT + 16 * i + gq + 8 * r;
#if G == 1
          if (t == 0) y[tile0 + row] = sum;
#else
          if (t == 0) s_red[kg * R + row] = sum;
#endif
        }
#if G > 1
      __syncthreads();  // (the next write to s_red is a whole step later, past another __syncthreads)
      for (int r = threadIdx.x; r < R; r += NT) {
        float v = s_red[r];
#pragma unroll
        for (int gg = 1; gg < G; ++gg) v += s_red[gg * R + r];
        y[tile0 + r] = v;
      }
#endif
      zero_chains(acc);
    }
  }
  cp_async_wait<0>();  // no copy outlives the block
}

#elif EVO_QLOAD == EVO_QLOAD_TMA
// ---- expand = mma, qload = tma: bulk copies (the Hopper copy engine) into an mbarrier ring, int8 tensor cores ----
// One persistent thread block a SM: warps consumer warps per 16-row tile (so warps x rows_per_block / 16) and a
// producer warp. An item is (tile of R rows, step of TKB blocks of K: the whole padded row when it fits, else steps
// as even as 16-block units allow); the producer copies item i into stage i % S (S = unroll + 1) with one
// cp.async.bulk per row (the row's TKB * 17 bytes to a ring row of TPITCH bytes, a pitch of 4 mod 8 words so that
// the 8 rows of a fragment fall on 8 different bank quads) completing on full[stage], after every consumer warp has
// released the stage's previous item on empty[stage]. The warps of a 16-row tile take its 4-block groups
// round-robin across its steps (tma_first_group), the start rotating with the tile, or, where items are whole rows
// and the groups split evenly (TXREG), each warp the same groups of every tile with x's B in registers; a group's
// windows are 7 aligned words a row, and each block pair of a group keeps its own chains; the group loop is
// unrolled by 2 (one group's loads overlap the other's math; TXREG: wholly). A tile's rows are summed across the
// warps through shared memory in warp order (deterministic) by the producer warp, off the consumers' path
// (tile_rows).
// Not the f16 fragments of the other mma paths: the weights go to the tensor cores as int8 (mma m16n8k32 s8,
// exact int32 sums): the consumers, not the copy engine, bound this path, and the f16 decode was most of their
// integer-pipe work (docs/fp4-bandwidth.md, sessions 6 and 7):
// - a code word (8 codes) becomes its A registers with byte permutes that are a table lookup: 2 x E2M1 is the
//   integer {0, 1, 2, 3, 4, 6, 8, 12}[m] (m the code's magnitude bits) and prmt with the code nibble as the
//   selector picks that byte, or 0 where the code's bit 3 (its sign) is set (prmt's sign-replicate mode; every
//   table byte is below 128). So P = prmt(table, q) holds the positive weights and N = prmt(table, q ^ 0x8888..)
//   the magnitudes of the negative ones; two mma (P and N against the same B) take the place of the f16 pair,
//   and 4 permutes and an xor a word replace 9 shifts and masks.
// - x is one fixed-point integer for the vector, X = rint(x * 2^k) with max |X| in [2^26, 2^27) (one k for all of
//   x), in four signed base-128 digits in [-64, 64] (digit i of weight 128^(3 - i)). A digit times a weight times
//   32 fits an int32 many times.
// - an mma takes 8 rows and 2 blocks (session 8): A's rows 0..7 are the 8 rows' block b, rows 8..15 their block
//   b + 1; B's column 2i is block b's digit i and column 2i + 1 block b + 1's. Then D's c0 (row g, column 2t) is
//   block b's sum of digit t and c3 (row g + 8, column 2t + 1) block b + 1's, in every lane, while c1 and c2 mix
//   the blocks and are dropped: per 512 weights 2 fp32 updates a lane instead of 4, one B load per 2 blocks, and
//   no B column wasted (the layout with rows g, g + 8 of one block used 4 of B's 8 columns).
// - D starts at 0x4B400000 (the int32 bits of 1.5 x 2^23), so D read as an fp32 is 1.5 x 2^23 + the exact int sum
//   (|sum| < 2^22): the P sum minus the N sum is one exact fp32 subtraction, no int-to-float conversion.
// y = 2^(-k-1) x (sum over blocks of (P - N) x the block's E8M0 scale, by digit times its weight). x
// below 2^-27 of max |x| is rounded to that grid (fp32's own rounding of the sum is 2^-24 of its terms).
#define TKB EVO_TMA_KB            // blocks of K per item (a multiple of 16: 17 * TKB bytes, a multiple of 16)
#define TPITCH EVO_TMA_PITCH      // bytes per ring row
#define TNSTEP ((NBLK + TKB - 1) / TKB)
#define TNSTAGE (U + 1)
#define TMT (R / 16)              // 16-row tiles of an item
#define TNCW (NWARPS * TMT)       // consumer warps
#define TNC (32 * TNCW)           // consumer threads
constexpr int kGroupUnroll = TNCW > 8 ? 1 : 2;  // (a #pragma unroll argument: macros are not expanded there)
// A warp's first 4-block group of an item: the warps take a tile's groups round-robin across its steps (group J of
// the tile, J = s * TKB / 4 + jg, to warp (J - tile) mod warps), so that every warp gets the same number of groups
// a tile when a step's count is not a multiple of warps; the tile index rotates the start so that no warp always
// gets the odd groups.
__device__ __forceinline__ int tma_first_group(int wp, int item) {
  const int tile = item / TNSTEP, s = item % TNSTEP;
  constexpr int skip = (TKB / 4) % NWARPS;  // a step's groups past whole rounds of warps
  return (wp + tile + s * (NWARPS - skip)) % NWARPS;
}
#if G != 1 || (R % 16) != 0 || (NBLK % 4) != 0
#error "qload = tma: row_groups 1, rows_per_block a multiple of 16, in a multiple of 128"
#endif
typedef unsigned long long u64;
// Dynamic shared memory (family.py: tma_layout): ring [TNSTAGE][R][TPITCH] | x digits [NBLK][4 lanes t][4 columns]
// uint2 | full [TNSTAGE], empty [TNSTAGE], red_full [2], red_free [2] mbarriers | partials [2][NWARPS][R] float |
// warp maxima [TNCW] | the E8M0 table [256] float | E2M1X2_LO (16 bytes).
extern __shared__ __align__(16) uint4 dsm[];

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}
// (No L2 evict_first policy on the weights: where they fit in L2, as at out = 7168, the timing then depended on what
// ran before the kernel; session 8 calls f and h.)
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(TNC) : "memory"); }

// prmt's generic mode (not __byte_perm, which ignores a selector's bit 3): byte n of the result is byte
// (sel >> 4n) & 7 of {hi, lo}, or its sign replicated when bit 3 of that nibble is set.
__device__ __forceinline__ u32 prmt(u32 lo, u32 hi, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
}
#define E2M1X2_LO 0x03020100u  // 2 x E2M1 of magnitudes 0..3
#define E2M1X2_HI 0x0C080604u  // 4..7
#define IMMA_BIAS 0x4B400000  // 1.5 x 2^23 as fp32 bits

// The selectors of a code word whose 4 bytes start `lead` bytes into the aligned words p[0], p[1]: its codes
// 0..3 (lo) and 4..7 (hi) in the low 16 bits of each, straight from the words where the lead allows (one
// shift or funnel shift each at most, not a funnel shift and then two shifts).
__device__ __forceinline__ void code_selectors(const u32* p, int lead, u32& lo, u32& hi) {
  if (lead == 0) {
    lo = p[0];
    hi = p[0] >> 16;
  } else if (lead == 1) {
    lo = __funnelshift_r(p[0], p[1], 8u);
    hi = __funnelshift_r(p[0], p[1], 24u);
  } else if (lead == 2) {
    lo = p[0] >> 16;
    hi = p[1];
  } else {
    lo = __funnelshift_r(p[0], p[1], 24u);
    hi = p[1] >> 8;
  }
}

// D = A B + c (c in all four accumulators: no per-mma copies of it)
__device__ __forceinline__ void imma16832(int* d, const u32* a, u32 b0, u32 b1, int c) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c));
}

// x's chunk i of 4 values as fp32 (bf16 widened).
__device__ __forceinline__ float4 load_x4(const void* __restrict__ x, int i) {
#if EVO_X_BF16
  const uint2 v = reinterpret_cast<const uint2*>(x)[i];
  return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xFFFF0000u), __uint_as_float(v.y << 16),
                     __uint_as_float(v.y & 0xFFFF0000u));
#else
  return reinterpret_cast<const float4*>(x)[i];
#endif
}
__device__ __forceinline__ u32 abs_bits(float4 v) {  // max of |v|'s bits: a NaN above inf above every number
  return max(max(__float_as_uint(v.x) & 0x7FFFFFFFu, __float_as_uint(v.y) & 0x7FFFFFFFu),
             max(__float_as_uint(v.z) & 0x7FFFFFFFu, __float_as_uint(v.w) & 0x7FFFFFFFu));
}
// The low bytes of a, b, c, d as one word.
__device__ __forceinline__ u32 pack_low_bytes(u32 a, u32 b, u32 c, u32 d) {
  return __byte_perm(__byte_perm(a, b, 0x0040u), __byte_perm(c, d, 0x0040u), 0x5410u);
}
// Lane t's B registers of block b for every column: weights 4t, 4t+16, 4t+1, 4t+17 (k slots 4t..4t+3: the
// nibbles of code bytes 4t, 4t+1 in selector order) and 4t+2, 4t+18, 4t+3, 4t+19 (k slots 16+4t..): lo = x of
// weights 4t..4t+3, hi = x of 4t+16..4t+19. The digits of X = rint(x * 2^k) from the top, each rint(r / 128^i)
// by adding 1.5 x 2^23 (exact fp32 steps on the FMA pipe, no int conversions): d3, d2, d1 in [-64, 64], the
// remainders exact, d0 = rint of the last; the fp32 bits of (digit + 1.5 x 2^23) end in the digit's int8 byte.
__device__ __forceinline__ void put_x_digits(uint2* s_xd, int b, int t, float4 lo, float4 hi, float xscale) {
  const float M = 12582912.0f;
  const float v[8] = {lo.x, hi.x, lo.y, hi.y, lo.z, hi.z, lo.w, hi.w};
  u32 bits[4][8];  // [column: digit of weight 2^21, 2^14, 2^7, 1][k slot]
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float r0 = v[e] * xscale;  // exact (a power of two), |r0| < 2^27
    const float t3 = __fmaf_rn(r0, 0x1p-21f, M), r1 = __fmaf_rn(-(t3 - M), 0x1p21f, r0);
    const float t2 = __fmaf_rn(r1, 0x1p-14f, M), r2 = __fmaf_rn(-(t2 - M), 0x1p14f, r1);
    const float t1 = __fmaf_rn(r2, 0x1p-7f, M), r3 = __fmaf_rn(-(t1 - M), 128.0f, r2);
    const float t0 = r3 + M;
    bits[0][e] = __float_as_uint(t3);
    bits[1][e] = __float_as_uint(t2);
    bits[2][e] = __float_as_uint(t1);
    bits[3][e] = __float_as_uint(t0);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c)
    s_xd[(b * 4 + t) * 4 + c] = make_uint2(pack_low_bytes(bits[c][0], bits[c][1], bits[c][2], bits[c][3]),
                                           pack_low_bytes(bits[c][4], bits[c][5], bits[c][6], bits[c][7]));
}

// x's fixed-point exponent k from max |x|'s bits: max |x| * 2^k in [2^26, 2^27) (2^k exact, k >= -102)
__device__ __forceinline__ int x_exponent(u32 mb) { return min(153 - (int)(mb >> 23), 127); }
// 2^(-k-1) (the table's 2 x E2M1 back to E2M1), from two exact halves: -k-1 may be below fp32's normal range; a NaN
// where x has an inf or a NaN
__device__ __forceinline__ float y_scale(u32 mb) {
  const int k = x_exponent(mb);
  return (mb >> 23) == 255u ? __uint_as_float(0x7fc00000u)
                            : __uint_as_float((u32)(127 - (k + 1) / 2) << 23) *
                                  __uint_as_float((u32)(127 - (k + 1 - (k + 1) / 2)) << 23);
}
// Programmatic dependent launch (gates.perf.launch: pdl builds with EVO_PDL=1; harness/driver_launch.py): the
// next launch's blocks may be scheduled once every block here has issued its last copies (they take the SMs these
// blocks leave, set up and fill their ring meanwhile), and pdl_wait() holds a thread until the launch before has
// completed and its writes are visible. Nothing another kernel may write (x, y) is touched before it; the weights,
// which no kernel writes, stream in meanwhile. A trigger at the block's start instead: 1.021x against 1.028x at the
// anchor, 1.091x against 1.084x at in4096_out4096; the waits without a trigger 1.009x (session 16, calls n-p).
#ifndef EVO_PDL
#define EVO_PDL 0
#endif
__device__ __forceinline__ void pdl_launch_dependents() {
#if EVO_PDL
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if EVO_PDL
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// The producer warp's tile end: wait for every consumer warp's partials of the block's tile tj, sum each row in
// warp order (deterministic), write y, free the buffer. Off the consumers' path: they only write and arrive
// (session 9 call a: the tile end with its consumer barrier was 0.27 of every 2.03 µs item).
__device__ __forceinline__ void tile_rows(int tj, int lane, u64* red_full, u64* red_free, const float* s_red,
                                          const u32* s_max, float* __restrict__ y, float& fx) {
  const int b = tj & 1;
  mbar_wait(red_full + b, (u32)((tj >> 1) & 1));
  if (tj == 0) {  // x's maximum, published with the first partials (every warp wrote its own before arriving)
    u32 mb = s_max[0];
#pragma unroll
    for (int i = 1; i < TNCW; ++i) mb = max(mb, s_max[i]);
    fx = y_scale(mb);
    pdl_wait();  // (the consumers waited before x; this orders the producer's own writes explicitly)
  }
  const float* red = s_red + b * NWARPS * R;
  const int tile = (int)blockIdx.x + tj * (int)gridDim.x;
  for (int row = lane; row < R; row += 32) {
    float v = red[row];
#pragma unroll
    for (int ww = 1; ww < NWARPS; ++ww) v += red[ww * R + row];
    y[tile * R + row] = v * fx;
  }
  mbar_arrive(red_free + b);  // every lane (release: its reads above come before)
}

// One 4-block group of a warp's 16-row tile into acc: 2 row halves x 4 blocks (xb0, xb1: this lane's B registers of
// the group's block pairs 0-1 and 2-3)
__device__ __forceinline__ void tma_group(const u8* gp, uint2 xb0, uint2 xb1, int t, u32 tlo, int bias,
                                          const float* s_e8m0, float (&acc)[2][2][2]) {
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    const uint2 xb = v ? xb1 : xb0;  // block 2v (+ xo) of the group
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u8* rowp = gp + 8 * h * TPITCH;
      u32 P[4], N[4];
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // block 2v + r of the group: A's rows 8r..8r+7
        const int u = 2 * v + r;
        const int lead = (u + 1) & 3;                   // 17u + 1 = u + 1 (mod 4): a constant
        const int wofs = 17 * u + 1 - lead + 4 * t;  // a multiple of 4 (gp is too)
        const u32* p = reinterpret_cast<const u32*>(rowp + wofs);
        u32 lo, hi;  // selectors of the code word's low and high 4 codes (prmt reads a selector's low 16 bits)
        code_selectors(p, lead, lo, hi);
        P[r] = prmt(tlo, E2M1X2_HI, lo);
        P[2 + r] = prmt(tlo, E2M1X2_HI, hi);
        N[r] = prmt(tlo, E2M1X2_HI, lo ^ 0x8888u);
        N[2 + r] = prmt(tlo, E2M1X2_HI, hi ^ 0x8888u);
      }
      // the scales by table loads, not shift-compare-select: the integer pipe is the busy one
      const float f0 = s_e8m0[rowp[34 * v]], f1 = s_e8m0[rowp[34 * v + 17]];
      int dp[4], dn[4];
      imma16832(dp, P, xb.x, xb.y, bias);
      imma16832(dn, N, xb.x, xb.y, bias);
      // P's sum - N's sum: exact (both in [2^23, 2^24))
      acc[v][h][0] = __fmaf_rn(__int_as_float(dp[0]) - __int_as_float(dn[0]), f0, acc[v][h][0]);
      acc[v][h][1] = __fmaf_rn(__int_as_float(dp[3]) - __int_as_float(dn[3]), f1, acc[v][h][1]);
    }
  }
}
// x's B registers held for the whole kernel where every item is a whole row and a tile's groups split evenly over
// its warps (each warp then takes the same groups of every tile, no rotation), at most 8 groups a warp and 8 consumer
// warps (32 registers more, 150 in all at the anchor): the consumers' loads of x were 4 of their 34 shared-memory
// wavefronts a group, and the shared-memory pipe was their busiest (ncu, session 10 call c; 1.038x at the anchor,
// calls e and f)
#define TGPW (NBLK / 4 / NWARPS)  // groups a warp, where they split evenly
#define TXREG (TNSTEP == 1 && (NBLK / 4) % NWARPS == 0 && TGPW <= 8 && TNCW <= 8)

// The first fill where a block has many items: the other stages' first items go out once item 0 has landed or
// TMA_FIRST_GAP cycles after its copies, whichever comes first, so that the memory is not idle between item 0's last
// bytes and item 1's first (1.013x and 1.016x at the anchor, 9 items a block: session 12 call i, session 13 call a).
// With few items (in4096_out4096: 2, in7168_out7168_bf16: 3 or 4) item 1 only delays item 0 (0.995-0.998x there),
// and with more stages items 1 and 2 at once did not pay (session 13 call b): they wait for item 0's landing, as
// before. 2200 cycles since the light blocks' late start (below; session 14 call f: 1800 1.006x, 2200 1.005x beside
// 2700, 3200 0.991x; call i beside 2200: 0 0.972x, 1200 0.987x, 1800 0.999x; before it, session 13 call c: 2000
// and 3200 0.997x beside 2700).
#define TMA_FIRST_GAP 2200
#define TMA_FIRST_GAP_ITEMS 6
// The light blocks' late start: where the tiles do not split evenly over the blocks (the anchor: 96 blocks take 9
// tiles, 36 take 8), the blocks with a tile less start their copies later, so that the others have the memory to
// themselves meanwhile (item 0 lands 0.7 µs sooner for them) and the light blocks' slack is not idle time at the end.
// The delay is the heavy blocks' share of the grid times about an item's time at the anchor's rate (TMA_LIGHT_CYC_PER_KB
// cycles a KB of an item). 1.008-1.014x at the anchor and 1.020-1.028x at in4096_out4096 (session 14 calls a-d); with
// 0.5x and 1.5x the delay 1.007x and 1.004x where 1x read 1.011x (call a), 0.78x and 1.2x 1.001x and 0.999x beside 1x
// (call f); 2x lost 5.6% at in4096_out4096 (call a).
// Only where the heavy blocks are at least half the grid: they alone must keep the memory busy meanwhile
// (in7168_out7168_bf16, 52 of 132: 0.993x, call a).
#define TMA_LIGHT_CYC_PER_KB 58

#ifndef EVO_TMA_MINB
#define EVO_TMA_MINB 1
#endif
extern "C" __global__ void __launch_bounds__(TNC + 32, EVO_TMA_MINB)
fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]
           const void* __restrict__ x,  // [in] fp32 or bf16
           float* __restrict__ y,       // [out]
           int out) {
  u8* ring = reinterpret_cast<u8*>(dsm);
  uint2* s_xd = reinterpret_cast<uint2*>(ring + TNSTAGE * R * TPITCH);
  u64* full = reinterpret_cast<u64*>(s_xd + NBLK * 16);
  u64* empty = full + TNSTAGE;
  u64* red_full = empty + TNSTAGE;  // [2]: a tile's partials written (each warp's writer lanes arrive)
  u64* red_free = red_full + 2;     // [2]: read by the producer (its 32 lanes arrive)
  float* s_red = reinterpret_cast<float*>(red_free + 2);  // [2][NWARPS][R]
  u32* s_max = reinterpret_cast<u32*>(s_red + 2 * NWARPS * R);  // [TNCW]
  float* s_e8m0 = reinterpret_cast<float*>(s_max + TNCW);      // [256]: 2^(e - 127), e8m0() of every byte
  u32* s_e8m0_lo = reinterpret_cast<u32*>(s_e8m0 + 256);        // [1]: E2M1X2_LO
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ntiles = out / R;
  const int my_tiles = (int)blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  const int nitems = my_tiles * TNSTEP;
  if (warp < TNCW) pdl_wait();  // x may be the launch before's output (above)

  // x: a thread takes (block, lane t) pairs, x's chunks 8b + t and 8b + t + 4. With up to 4 pairs a thread the
  // consumers load them here, before the producer's first copies: behind those in the memory system, x's loads
  // waited about a microsecond longer, and the consumers wait for x before they start (session 7 call h: the split
  // of x was 0.98 µs of the anchor's time, 1.72 of in7168_out7168_bf16's). With more pairs (few consumer warps) the
  // split reads x again, 2 pairs at a time, after the copies are under way: 16 or more chunks held would spill.
#define TXP ((NBLK * 4 + TNC - 1) / TNC)  // pairs a thread
#if TXP <= 4
#define TXKEEP TXP
#define TX_UNROLL _Pragma("unroll")
#else
#define TXKEEP 1
#define TX_UNROLL _Pragma("unroll 2")
#endif
  float4 xv[TXKEEP][2];
  if (TXKEEP == TXP && warp < TNCW) {
    TX_UNROLL
    for (int c = 0; c < TXP; ++c) {
      const int p = (int)threadIdx.x + c * TNC;
      if ((NBLK * 4) % TNC == 0 || p < NBLK * 4) {
        const int i = 8 * (p >> 2) + (p & 3);
        xv[TXKEEP == TXP ? c : 0][0] = load_x4(x, i);
        xv[TXKEEP == TXP ? c : 0][1] = load_x4(x, i + 4);
      }
    }
  }

  if (warp == TNCW) {  // the producer, which also sums each tile's rows across the warps and writes y
    // It sets up the mbarriers and starts copying at once: the consumers meet it on a named barrier only before
    // their first item, after x's set-up (a __syncthreads here held the first copy back, session 9 call e).
    if (lane == 0) {
#pragma unroll
      for (int s = 0; s < TNSTAGE; ++s) {
        mbar_init(full + s, 1);
        mbar_init(empty + s, TNCW);
      }
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        mbar_init(red_full + b, 8 * TNCW);  // the 8 writer lanes of every consumer warp
        mbar_init(red_free + b, 32);  // the producer warp's lanes
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
    }
    __syncwarp();
    asm volatile("bar.arrive 2, %0;\n" ::"n"(TNC + 32) : "memory");
    {  // the light blocks' late start (above)
      const int max_tiles = (ntiles + (int)gridDim.x - 1) / (int)gridDim.x;
      const int n_heavy = ntiles - (max_tiles - 1) * (int)gridDim.x;  // blocks with max_tiles
      if (my_tiles > 0 && my_tiles < max_tiles && 2 * n_heavy >= (int)gridDim.x) {
        const long long d = (long long)n_heavy * (R * ROW_STRIDE) * TMA_LIGHT_CYC_PER_KB / 1024 / (int)gridDim.x;
        const long long t0 = clock64();
        while (clock64() - t0 < d) {
        }
      }
    }
    int reduced = 0;  // the block's tiles in y
    float fx = 0.0f;
    long long t_first = 0;  // when item 0's copies went out
    for (int item = 0; item < nitems; ++item) {
      const int st = item % TNSTAGE;
      if (item >= TNSTAGE)
        mbar_wait(empty + st, (u32)((item / TNSTAGE - 1) & 1));
      else if (item > 0 && (TNSTAGE > 2 || nitems < TMA_FIRST_GAP_ITEMS))  // the other stages' first items once item
        mbar_wait(full, 0u);  // 0 has landed: it lands sooner than beside them (session 9 call a)
      else if (item > 0) {  // or TMA_FIRST_GAP cycles after its copies, whichever comes first (above)
        u32 landed = 0;
        while (!landed && clock64() - t_first < (long long)TMA_FIRST_GAP)
          asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
                       : "=r"(landed) : "r"(smem_u32(full)) : "memory");
      }
      const int tile = (int)blockIdx.x + (item / TNSTEP) * (int)gridDim.x, s = item % TNSTEP;
      // a step's bytes: 17 * TKB (a multiple of 16), or the whole padded row; less in a short last step
      constexpr int STEP_BYTES = TKB == NBLK ? ROW_STRIDE : TKB * 17;
      const int left = ROW_STRIDE - s * TKB * 17;  // the (16-byte padded) row's bytes from this step on
      const u32 bytes = (u32)(left < STEP_BYTES ? left : STEP_BYTES);
      if (lane == 0) mbar_expect_tx(full + st, bytes * R);
      __syncwarp();
      for (int r = lane; r < R; r += 32)
        bulk_copy(ring + (st * R + r) * TPITCH, w + (size_t)(tile * R + r) * ROW_STRIDE + (size_t)s * TKB * 17, bytes,
                  full + st);
      if (item == 0) t_first = clock64();
      // the tiles whose items were all released by the wait above: their partials land about now
      while (reduced < (item - TNSTAGE + 1) / TNSTEP)
        tile_rows(reduced++, lane, red_full, red_free, s_red, s_max, y, fx);
    }
    pdl_launch_dependents();
    while (reduced < my_tiles) tile_rows(reduced++, lane, red_full, red_free, s_red, s_max, y, fx);
    return;
  }

  // x's exponent: max |x| over the vector (consumer warps only), then x's digits.
  u32 mb = 0;
  TX_UNROLL
  for (int c = 0; c < TXP; ++c) {
    const int p = (int)threadIdx.x + c * TNC;
    if ((NBLK * 4) % TNC == 0 || p < NBLK * 4) {
      const int i = 8 * (p >> 2) + (p & 3);
      const float4 lo = TXKEEP == TXP ? xv[TXKEEP == TXP ? c : 0][0] : load_x4(x, i);
      const float4 hi = TXKEEP == TXP ? xv[TXKEEP == TXP ? c : 0][1] : load_x4(x, i + 4);
      mb = max(mb, max(abs_bits(lo), abs_bits(hi)));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mb = max(mb, __shfl_xor_sync(0xffffffffu, mb, o));
  if (lane == 0) s_max[warp] = mb;
  for (int i = threadIdx.x; i < 256; i += TNC) s_e8m0[i] = e8m0((u32)i);  // (published by the syncs below)
  if (threadIdx.x == 0) s_e8m0_lo[0] = E2M1X2_LO;
  consumers_sync();
  mb = s_max[0];
#pragma unroll
  for (int i = 1; i < TNCW; ++i) mb = max(mb, s_max[i]);
  const float xscale = __uint_as_float((u32)(x_exponent(mb) + 127) << 23);
  TX_UNROLL
  for (int c = 0; c < TXP; ++c) {
    const int p = (int)threadIdx.x + c * TNC;
    if ((NBLK * 4) % TNC == 0 || p < NBLK * 4) {
      const int i = 8 * (p >> 2) + (p & 3);
      const float4 lo = TXKEEP == TXP ? xv[TXKEEP == TXP ? c : 0][0] : load_x4(x, i);
      const float4 hi = TXKEEP == TXP ? xv[TXKEEP == TXP ? c : 0][1] : load_x4(x, i + 4);
      put_x_digits(s_xd, p >> 2, p & 3, lo, hi, xscale);
    }
  }
  consumers_sync();

  const int gq = lane >> 2, t = lane & 3;
  const int ti = warp / NWARPS, wp = warp % NWARPS;  // the warp's 16-row tile in the item, its place among its peers
  // The table word from shared memory: as a literal NVCC keeps it in a uniform register and copies it to a
  // register again before every permute (a move a permute)
  const u32 tlo = s_e8m0_lo[0];
  const int bias = IMMA_BIAS;
  // (an mma takes 8 rows and 2 blocks: the section's head says how)
  const int xo = gq & 1;   // B: this lane's column is block b + xo's digit gq >> 1
  float acc[2][2][2];      // [block pair of the group][row half][block of the pair]
#pragma unroll
  for (int v = 0; v < 2; ++v)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) acc[v][h][c] = 0.0f;

#if TXREG
  uint2 xr[TGPW][2];  // B of the warp's groups wp + k * warps, blocks 0-1 and 2-3
  {
    const uint2* xp = s_xd + ((4 * wp + xo) * 4 + t) * 4 + (gq >> 1);
#pragma unroll
    for (int k = 0; k < TGPW; ++k) {
      xr[k][0] = xp[64 * NWARPS * k];
      xr[k][1] = xp[64 * NWARPS * k + 32];
    }
  }
#endif
  asm volatile("bar.sync 2, %0;\n" ::"n"(TNC + 32) : "memory");  // the producer's mbarriers are set up
  for (int item = 0; item < nitems; ++item) {
    const int st = item % TNSTAGE, s = item % TNSTEP;
    // (the slot's address before the wait: NVCC then allocates 127 registers, not 142, at the anchor, session 11)
    const u8* slot = ring + (st * R + 16 * ti + gq) * TPITCH;
    mbar_wait(full + st, (u32)((item / TNSTAGE) & 1));
#if TXREG
    const u8* gp = slot + 68 * wp;  // the warp's groups wp + k * warps, x's B from registers
#pragma unroll
    for (int k = 0; k < TGPW; ++k, gp += 68 * NWARPS) tma_group(gp, xr[k][0], xr[k][1], t, tlo, bias, s_e8m0, acc);
#else
    const int ng = (NBLK - s * TKB < TKB ? NBLK - s * TKB : TKB) / 4;  // 4-block groups in this step
    // the group loop unrolled by 2 (one group's loads overlap the other's math), by 1 where 16 consumer warps leave
    // fewer than 120 registers a thread (2 would spill)
    // (pointers stepped by constants: indices from jg left NVCC recomputing addresses in the loop, session 9 call b)
    const int jg0 = tma_first_group(wp, item);
    const u8* gp = slot + 68 * jg0;                                              // the group's 68 bytes a row
    const uint2* xp = s_xd + ((s * TKB + 4 * jg0 + xo) * 4 + t) * 4 + (gq >> 1);  // its first block's B (16 a block)
#pragma unroll kGroupUnroll
    for (int jg = jg0; jg < ng; jg += NWARPS, gp += 68 * NWARPS, xp += 64 * NWARPS)
      tma_group(gp, xp[0], xp[32], t, tlo, bias, s_e8m0, acc);
#endif
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + st);  // (release: this warp's reads of the stage come before)

    if (s == TNSTEP - 1) {  // the tile's last step: the warp's partials to the producer (tile_rows)
      const int tj = item / TNSTEP, b = tj & 1;
      float* red = s_red + b * NWARPS * R;  // two buffers: a fast warp may be a tile ahead
      // lane t's sums are of digit t, of weight 128^(3 - t)
      const float wt = __uint_as_float((u32)(127 + 7 * (3 - t)) << 23);
      float sum[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sum[h] = ((acc[0][h][0] + acc[1][h][0]) + (acc[0][h][1] + acc[1][h][1])) * wt;
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      }
      if (tj >= 2) mbar_wait(red_free + b, (u32)(((tj >> 1) - 1) & 1));  // tile tj - 2's partials read
      if (t == 0) {  // (each writer arrives: its release covers its own writes, s_max's in lane 0)
        red[wp * R + 16 * ti + gq] = sum[0];
        red[wp * R + 16 * ti + 8 + gq] = sum[1];
        mbar_arrive(red_full + b);
      }
#pragma unroll
      for (int v = 0; v < 2; ++v)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < 2; ++c) acc[v][h][c] = 0.0f;
    }
  }
}

#else  // expand = mma straight from global memory (qload = words_funnel)
extern "C" __global__ void __launch_bounds__(32 * NWARPS)
fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]
           const void* __restrict__ x,  // [in] fp32 or bf16
           float* __restrict__ y,       // [out]
           int out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kg = warp / WPG, wi = warp % WPG;  // K group, warp within it
  const int gq = lane >> 2, t = lane & 3;
  // B columns 3..7 (lanes gq >= 3) repeat part 2: no predicated load, no zeros; the D columns they make are
  // dropped below (lane t = 1's column 3; lanes t = 2, 3 are never read).
  const int gp = gq < 3 ? gq : 2;

  stage_x_parts(x, s_xb, s_xf, warp, lane);
  __syncthreads();

  const int row0 = (int)blockIdx.x * R + wi * 16 * MT;
  const u8* rp[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    rp[i][0] = w + (size_t)(row0 + 16 * i + gq) * ROW_STRIDE;
    rp[i][1] = rp[i][0] + (size_t)8 * ROW_STRIDE;
  }
  float acc[MT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;

  for (int b0 = kg * U; b0 < NBLK; b0 += G * U) {
    u32 q[U][MT][2], sb[U][MT][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int b = b0 + u;
      if (NBLK % U == 0 || b < NBLK) {
        // The lane's 4 code bytes start at 17b + 1 + 4t; the aligned window below them starts (b + 1) & 3 bytes
        // earlier for every lane (17b + 1 = b + 1 mod 4). With U = 4, b0 % 4 == 0 and both are constants.
        const int lead = (b + 1) & 3;
        const u32 sh = 8u * (u32)lead;
        const int wofs = 17 * b + 1 - lead + 4 * t;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const u32* p = reinterpret_cast<const u32*>(rp[i][r] + wofs);
            const u32 w0 = p[0];
            const u32 w1 = sh ? p[1] : 0u;  // never past the row's last byte when the window is aligned
            q[u][i][r] = __funnelshift_r(w0, w1, sh);
            sb[u][i][r] = rp[i][r][17 * b];
          }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int b = b0 + u;
      if (NBLK % U == 0 || b < NBLK) {
        const uint4 xb = s_xb[(b * 4 + t) * 3 + gp];
        const float fx = s_xf[b];
#pragma unroll
        for (int i = 0; i < MT; ++i) mma_block(q[u][i], sb[u][i], xb, fx, acc[i]);
      }
    }
  }

  // Lane t = 0 holds columns 0, 1 (hi, mid), lane t = 1 columns 2, 3 (lo, a repeat: dropped): y = (hi + mid) + lo.
  if (t != 0) {
#pragma unroll
    for (int i = 0; i < MT; ++i) acc[i][1] = acc[i][3] = 0.0f;
  }
  float s[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = acc[i][2 * r] + acc[i][2 * r + 1];
      s[i][r] = v + __shfl_down_sync(0xffffffffu, v, 1);
    }
#if G == 1
  if (t == 0) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      y[row0 + 16 * i + gq] = s[i][0];
      y[row0 + 16 * i + gq + 8] = s[i][1];
    }
  }
#else
  __shared__ float s_red[G][R];
  if (t == 0) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      s_red[kg][wi * 16 * MT + 16 * i + gq] = s[i][0];
      s_red[kg][wi * 16 * MT + 16 * i + gq + 8] = s[i][1];
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < R; r += 32 * NWARPS) {
    float v = s_red[0][r];
#pragma unroll
    for (int gg = 1; gg < G; ++gg) v += s_red[gg][r];
    y[(int)blockIdx.x * R + r] = v;
  }
#endif
}
#endif  // EVO_QLOAD (expand = mma)

#elif EVO_QLOAD == EVO_QLOAD_CP_ASYNC
// ---- qload = cp_async: persistent blocks, x in shared memory, quant slices through a cp.async ring ----
#define NSTAGE (U + 1)        // ring stages: U slices in flight while one is folded
#define SLICE (17 * VL)       // bytes of one row in one step (1088 or 2176: a multiple of 16)
#define CHUNKS (SLICE / 16)   // 16-byte chunks of a row's slice

// Dynamic shared memory (family.py: cp_async_dynamic_smem; the launch opts in above 48 KiB):
//   x [EVO_IN / 4] float4, block b's chunk k at 8b + (k ^ (b & 7)) | the ring [NSTAGE][R][CHUNKS] uint4
extern __shared__ __align__(16) uint4 dsm[];
#define s_x4 reinterpret_cast<float4*>(dsm)
#define s_w4 (dsm + EVO_IN / 4)


// x block b (32 values) from shared memory: 8 swizzled 16-byte reads.
__device__ __forceinline__ void load_xs(int b, float* xv) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float4 t = s_x4[(b << 3) | (k ^ (b & 7))];
    xv[4 * k + 0] = t.x;
    xv[4 * k + 1] = t.y;
    xv[4 * k + 2] = t.z;
    xv[4 * k + 3] = t.w;
  }
}

// Copy (tile, step) item `item` of this block into ring stage item % NSTAGE; always commits a group (empty past
// the last item) so that group i is item i.
__device__ __forceinline__ void issue_slice(const u8* __restrict__ w, int item, int nitems) {
  if (item < nitems) {
    const int tile = (int)blockIdx.x + (item / NSTEP) * (int)gridDim.x, s = item % NSTEP;
    const u8* src = w + (size_t)tile * R * ROW_STRIDE + (size_t)s * SLICE;
    u8* dst = reinterpret_cast<u8*>(s_w4 + (item % NSTAGE) * (R * CHUNKS));
    // chunks of this step inside the (16-byte padded) row: CHUNKS except in a short last step
    const int nch = (ROW_STRIDE - s * SLICE) / 16 < CHUNKS ? (ROW_STRIDE - s * SLICE) / 16 : CHUNKS;
    copy_rows<CHUNKS, SLICE>(dst, src, nch);
  }
  cp_async_commit();
}

extern "C" __global__ void __launch_bounds__(32 * NWARPS, EVO_MINB)
fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]
           const void* __restrict__ x,  // [in] fp32 or bf16
           float* __restrict__ y,       // [out]
           int out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp / WPG, wi = warp % WPG;
  const int lrow0 = wi * RW;
  const int ntiles = out / R;
  const int my_tiles = (int)blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  const int nitems = my_tiles * NSTEP;

  // The first slices go out before x is staged.
#pragma unroll
  for (int i = 0; i < NSTAGE - 1; ++i) issue_slice(w, i, nitems);

#if EVO_EXPAND == EVO_EXPAND_LUT_SHARED
  if (threadIdx.x < 16) s_lut[threadIdx.x] = fp4_lut[threadIdx.x];
#endif
  for (int i = threadIdx.x; i < EVO_IN / 4; i += NT) {
#if EVO_X_BF16
    const uint2 t = reinterpret_cast<const uint2*>(x)[i];
    float4 f = make_float4(__uint_as_float(t.x << 16), __uint_as_float(t.x & 0xFFFF0000u),
                           __uint_as_float(t.y << 16), __uint_as_float(t.y & 0xFFFF0000u));
#else
    float4 f = reinterpret_cast<const float4*>(x)[i];
#endif
#ifdef X_SCALE
    f.x = __fmul_rn(f.x, X_SCALE);
    f.y = __fmul_rn(f.y, X_SCALE);
    f.z = __fmul_rn(f.z, X_SCALE);
    f.w = __fmul_rn(f.w, X_SCALE);
#endif
    const int b = i >> 3, k = i & 7;
    s_x4[(b << 3) | (k ^ (b & 7))] = f;
  }
  // (the first __syncthreads of the loop publishes x and the table)

  float acc[RW][NCH];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int c = 0; c < NCH; ++c) acc[r][c] = 0.0f;

  for (int item = 0; item < nitems; ++item) {
    cp_async_wait<NSTAGE - 2>();  // this thread's copies of `item` have landed
    __syncthreads();              // everyone's have; and everyone is done with stage (item - 1) % NSTAGE
    issue_slice(w, item + NSTAGE - 1, nitems);  // refills that stage

    const int s = item % NSTEP;
    const u8* slot = reinterpret_cast<const u8*>(s_w4 + (item % NSTAGE) * (R * CHUNKS));
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int bl = 32 * (g * NCH + c) + lane;  // block within the step
      const int b = VL * s + bl;
      if (NBLK % VL == 0 || b < NBLK) {
        float xv[32];
        load_xs(b, xv);  // once per block, shared by the RW rows
#pragma unroll
        for (int r = 0; r < RW; ++r) acc[r][c] = fold_block(acc[r][c], load_block(slot + (lrow0 + r) * SLICE, bl), xv);
      }
    }

    if (s == NSTEP - 1) {  // the tile's last step (the same for the whole block)
      const int tile0 = ((int)blockIdx.x + (item / NSTEP) * (int)gridDim.x) * R;
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int c = 0; c < NCH; ++c) acc[r][c] = warp_sum(acc[r][c]);
#if G == 1
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < RW; ++r) y[tile0 + lrow0 + r] = __fadd_rn(acc[r][0], acc[r][1]);
      }
#else
      __shared__ float s_red[R][G];
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < RW; ++r) s_red[lrow0 + r][g] = acc[r][0];
      }
      __syncthreads();  // (the next write to s_red is a whole step later, past another __syncthreads)
      for (int t = threadIdx.x; t < R; t += NT) {
#if G == 2
        y[tile0 + t] = __fadd_rn(s_red[t][0], s_red[t][1]);
#else
        y[tile0 + t] = __fadd_rn(__fadd_rn(s_red[t][0], s_red[t][1]), __fadd_rn(s_red[t][2], s_red[t][3]));
#endif
      }
#endif
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int c = 0; c < NCH; ++c) acc[r][c] = 0.0f;
    }
  }
  cp_async_wait<0>();  // no copy outlives the block
}

#else  // qload = bytes, words_funnel, vec16: straight from global memory
extern "C" __global__ void __launch_bounds__(32 * NWARPS)
fp4_matvec(const u8* __restrict__ w,   // [out, ROW_STRIDE]
           const void* __restrict__ x,  // [in] fp32 or bf16
           float* __restrict__ y,       // [out]
           int out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp / WPG, wi = warp % WPG;
  const int lrow0 = wi * RW;
  const int row0 = blockIdx.x * R + lrow0;

#if EVO_EXPAND == EVO_EXPAND_LUT_SHARED
  if (threadIdx.x < 16) s_lut[threadIdx.x] = fp4_lut[threadIdx.x];
  __syncthreads();  // the table is read by every warp
#endif

  const u8* rows[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) rows[r] = w + (size_t)(row0 + r) * ROW_STRIDE;

  float acc[RW][NCH];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int c = 0; c < NCH; ++c) acc[r][c] = 0.0f;

  for (int s0 = 0; s0 < NSTEP; s0 += U) {
    // Every quant load of U steps, NCH chains and RW rows is issued before any arithmetic.
    fblk qb[U][NCH][RW];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int b = VL * (s0 + u) + 32 * (g * NCH + c) + lane;
        if ((NSTEP % U == 0 || s0 + u < NSTEP) && (NBLK % VL == 0 || b < NBLK)) {
#pragma unroll
          for (int r = 0; r < RW; ++r) qb[u][c][r] = load_block(rows[r], b);
        }
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int b = VL * (s0 + u) + 32 * (g * NCH + c) + lane;
        if ((NSTEP % U == 0 || s0 + u < NSTEP) && (NBLK % VL == 0 || b < NBLK)) {
          float xv[32];
          load_x(x, b, xv);  // once per block, shared by the RW rows
#pragma unroll
          for (int r = 0; r < RW; ++r) acc[r][c] = fold_block(acc[r][c], qb[u][c][r], xv);
        }
      }
  }

#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int c = 0; c < NCH; ++c) acc[r][c] = warp_sum(acc[r][c]);

#if G == 1
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < RW; ++r) y[row0 + r] = __fadd_rn(acc[r][0], acc[r][1]);
  }
#else
  __shared__ float s_red[R][G];
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < RW; ++r) s_red[lrow0 + r][g] = acc[r][0];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < R; t += 32 * NWARPS) {
#if G == 2
    y[blockIdx.x * R + t] = __fadd_rn(s_red[t][0], s_red[t][1]);
#else
    y[blockIdx.x * R + t] = __fadd_rn(__fadd_rn(s_red[t][0], s_red[t][1]), __fadd_rn(s_red[t][2], s_red[t][3]));
#endif
  }
#endif
}
#endif  // EVO_QLOAD
