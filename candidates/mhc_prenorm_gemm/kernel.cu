// mHC pre-norm GEMM + square sum (docs/families.md §2), split-K partials.
//
//   dot_mix[s, t, j] = sum over k in split s of x[t, k] * fn[j, k]     (j < 24)
//   sqrsum[s, t]     = sum over k in split s of x[t, k]^2
//
// x [T, K] bf16 (K = 4*H), fn [24, K] fp32; the outputs are the partials of
// the first EVO_SPLIT_K slices of [S_max, T, 24] / [S_max, T] buffers; their
// sums over s are x.fn^T and sum x^2 (the consumer, big-fuse, adds them up).
//
// Grid: (ceil(T / token_tile), split_k). A block owns token_tile tokens and
// one split's K/split_k columns, which it walks in k tiles of EVO_K_TILE.
//
// math = fma: threads are token slots x k lanes. A slot holds
//   EVO_TOKENS_PER_THREAD tokens; its KG = threads / slots lanes take float4
//   quads kl, kl + KG, ... of every k tile, accumulating 24 mixes and the
//   square sum per token in fp32 FMAs; a butterfly over the slot's lanes (and a
//   fixed-order sum over its warps when KG > 32) finishes the reduction.
// math = mma: warps are 16-token sub-tiles x k groups; each warp runs
//   mma.m16n8k16 bf16 (x is bf16 already; fn is split into three bf16 terms
//   hi + mid + lo that sum to the fp32 value) into fp32 accumulators, three
//   n8 tiles for the 24 mixes; the square sum is FMA'd from the same x
//   registers. Warps of one sub-tile are summed in a fixed order via shared
//   memory.
// stages: 0 reads fn straight from global memory (read-only path), 1 stages
//   each fn tile in shared memory with plain loads and two barriers, 2 double
//   buffers it with cp.async (the next tile's copy overlaps this tile's math).
//   The shared tile is XOR-swizzled per row (quad q of row j at q ^ (j & 7)),
//   so both the row-wise fma reads and the column-wise mma reads are free of
//   bank conflicts.
//
// Every reduction is in a fixed order (no atomics): a genome's output bits do
// not depend on timing. Which knobs change the order is worked out in
// family.py (inexact_knobs).
//
// The file needs no CUDA headers, so NVRTC compiles it without a GPU.

typedef unsigned int u32;
typedef unsigned short u16;

#ifndef EVO_H
#define EVO_H 4096
#endif
#ifndef EVO_SPLIT_K
#define EVO_SPLIT_K 1
#endif
#ifndef EVO_TOKEN_TILE
#define EVO_TOKEN_TILE 32
#endif
#ifndef EVO_K_TILE
#define EVO_K_TILE 256
#endif
#ifndef EVO_THREADS
#define EVO_THREADS 256
#endif
#ifndef EVO_STAGES
#define EVO_STAGES 1
#endif
#ifndef EVO_TOKENS_PER_THREAD
#define EVO_TOKENS_PER_THREAD 1
#endif
#ifndef EVO_MATH_FMA
#define EVO_MATH_FMA 0
#define EVO_MATH_MMA 1
#endif
#ifndef EVO_MATH
#define EVO_MATH EVO_MATH_FMA
#endif

#define MIX 24
#define COLS 25  // 24 mixes + the square sum
#define K_DIM (4 * EVO_H)
#define NT EVO_THREADS
#define NWARPS (NT / 32)
#define TT EVO_TOKEN_TILE
#define KT EVO_K_TILE
#define KC (K_DIM / EVO_SPLIT_K)  // columns per split
#define NTILES (KC / KT)          // k tiles per split
#define KQ (KT / 4)               // float4 quads per fn row of a tile
#define FULL 0xffffffffu

#if K_DIM % EVO_SPLIT_K != 0 || KC % KT != 0
#error "each split must cover a whole number of k tiles"
#endif
#if KQ % 8 != 0
#error "the shared-memory swizzle needs k tiles of a multiple of 32 columns"
#endif

#if EVO_MATH == EVO_MATH_FMA
#define TPT EVO_TOKENS_PER_THREAD
#define SLOTS (TT / TPT)                 // token slots per block
#define KG (NT / SLOTS)                  // k lanes per slot
#define QPT ((KQ + KG - 1) / KG)         // quads per lane per tile
// Quads per load batch (x loads issued together): 4 / TPT with a staged fn tile, 2 / TPT reading fn
// from global (ptxas hoists those loads across the batch; more would spill at 255 registers).
#if EVO_STAGES == 0
#define QB_MAX (TPT >= 2 ? 1 : 2)
#else
#define QB_MAX (4 / TPT)
#endif
#define QB (QPT < QB_MAX ? QPT : QB_MAX)
#define LPG (KG < 32 ? KG : 32)          // lanes of a slot inside one warp
#define WPS (KG > 32 ? KG / 32 : 1)      // warps per slot
#if TT % TPT != 0 || NT % SLOTS != 0
#error "token_tile must be a multiple of tokens_per_thread, and threads of the slot count"
#endif
#if KG > 32
#define RED_FLOATS (NWARPS * TPT * COLS)
#else
#define RED_FLOATS 1
#endif
#elif EVO_MATH == EVO_MATH_MMA
#define M16 ((TT + 15) / 16)             // 16-token sub-tiles per block
#define KGW (NWARPS / M16)               // warps (k groups) per sub-tile
#define KCH (KT / 32)                    // 32-column chunks per tile
#define RED_FLOATS (NWARPS * 16 * COLS)
#if NWARPS % M16 != 0
#error "the warps must split evenly over the 16-token sub-tiles"
#endif
#else
#error "unknown EVO_MATH"
#endif

#define FN_FLOATS (EVO_STAGES * MIX * KT)
#define SMEM_FLOATS (FN_FLOATS > RED_FLOATS ? FN_FLOATS : RED_FLOATS)

__device__ __forceinline__ float bf16_lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(u32 w) { return __uint_as_float(w & 0xffff0000u); }

// Quad q (4 floats) of fn row j inside the current k tile. stages 0: src is fn
// plus the tile's first column (global); else src is the shared tile.
__device__ __forceinline__ float4 fn_quad(const float* __restrict__ src, int j, int q) {
#if EVO_STAGES == 0
  return __ldg(reinterpret_cast<const float4*>(src + (size_t)j * K_DIM) + q);
#else
  return reinterpret_cast<const float4*>(src)[j * KQ + (q ^ (j & 7))];
#endif
}

#define STAGE_ITERS ((MIX * KQ + NT - 1) / NT)

#if EVO_STAGES == 1
// Copy fn[:, k0 : k0 + KT] into the shared tile (plain loads; the caller syncs).
__device__ __forceinline__ void stage_sync(const float* __restrict__ fn, float* dst, int k0) {
#pragma unroll 8  // at most 8 float4 loads in flight (32 registers) beside the live accumulators
  for (int r = 0; r < STAGE_ITERS; ++r) {
    const int i = (int)threadIdx.x + r * NT;
    if ((MIX * KQ) % NT == 0 || i < MIX * KQ) {
      const int j = i / KQ, q = i % KQ;
      const float4 v = __ldg(reinterpret_cast<const float4*>(fn + (size_t)j * K_DIM + k0) + q);
      reinterpret_cast<float4*>(dst)[j * KQ + (q ^ (j & 7))] = v;
    }
  }
}
#endif

#if EVO_STAGES == 2
// The same copy with cp.async (16 bytes each, L2 only); the caller commits and waits.
__device__ __forceinline__ void stage_async(const float* __restrict__ fn, float* dst, int k0) {
#pragma unroll
  for (int r = 0; r < STAGE_ITERS; ++r) {
    const int i = (int)threadIdx.x + r * NT;
    if ((MIX * KQ) % NT == 0 || i < MIX * KQ) {
      const int j = i / KQ, q = i % KQ;
      const float* src = fn + (size_t)j * K_DIM + k0 + q * 4;
      const u32 d = (u32)__cvta_generic_to_shared(dst + (j * KQ + (q ^ (j & 7))) * 4);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
#endif

__device__ __forceinline__ void store_col(float* __restrict__ dot_mix, float* __restrict__ sqrsum, int s, int T,
                                          int tok, int c, float v) {
  if (c < MIX) dot_mix[((size_t)s * T + tok) * MIX + c] = v;
  else sqrsum[(size_t)s * T + tok] = v;
}

// ---------------------------------------------------------------------------
// math = fma

#if EVO_MATH == EVO_MATH_FMA
// One k tile for this lane: xt points at the slot's first token, tile column 0;
// ntok of the slot's TPT tokens exist (the rest read as zeros).
__device__ __forceinline__ void fma_tile(const u16* __restrict__ xt, int ntok, const float* __restrict__ fsrc,
                                         int kl, float (&acc)[TPT][COLS]) {
#pragma unroll 1
  for (int qb = 0; qb < QPT; qb += QB) {
    uint2 xv[QB][TPT];
    // Issue the batch's x loads before any arithmetic.
#pragma unroll
    for (int b = 0; b < QB; ++b) {
      const int q = kl + (qb + b) * KG;
      const bool live = (QPT % QB == 0 || qb + b < QPT) && (KQ % KG == 0 || q < KQ);
#pragma unroll
      for (int i = 0; i < TPT; ++i) {
        xv[b][i] = make_uint2(0u, 0u);
        if (live && i < ntok) xv[b][i] = __ldg(reinterpret_cast<const uint2*>(xt + (size_t)i * K_DIM) + q);
      }
    }
#pragma unroll
    for (int b = 0; b < QB; ++b) {
      const int q = kl + (qb + b) * KG;
      const bool live = (QPT % QB == 0 || qb + b < QPT) && (KQ % KG == 0 || q < KQ);
      if (live) {
        float xf[TPT][4];
#pragma unroll
        for (int i = 0; i < TPT; ++i) {
          xf[i][0] = bf16_lo(xv[b][i].x);
          xf[i][1] = bf16_hi(xv[b][i].x);
          xf[i][2] = bf16_lo(xv[b][i].y);
          xf[i][3] = bf16_hi(xv[b][i].y);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][MIX] = __fmaf_rn(xf[i][e], xf[i][e], acc[i][MIX]);
        }
#pragma unroll
        for (int j = 0; j < MIX; ++j) {
          const float4 w = fn_quad(fsrc, j, q);
#pragma unroll
          for (int i = 0; i < TPT; ++i) {
            float a = acc[i][j];
            a = __fmaf_rn(xf[i][0], w.x, a);
            a = __fmaf_rn(xf[i][1], w.y, a);
            a = __fmaf_rn(xf[i][2], w.z, a);
            a = __fmaf_rn(xf[i][3], w.w, a);
            acc[i][j] = a;
          }
        }
      }
    }
  }
}
#endif

// ---------------------------------------------------------------------------
// math = mma (bf16 m16n8k16, fn as hi + mid + lo bf16 terms)

#if EVO_MATH == EVO_MATH_MMA
// Two fp32 values -> bf16x2 (RN), the first in the low half.
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// (a, b) = hi + mid + lo exactly (three 8-bit significands cover fp32's 24;
// each residual is exact in fp32).
__device__ __forceinline__ void split3(float a, float b, u32& hi, u32& mid, u32& lo) {
  hi = pack_bf16(a, b);
  const float ra = __fsub_rn(a, bf16_lo(hi)), rb = __fsub_rn(b, bf16_hi(hi));
  mid = pack_bf16(ra, rb);
  lo = pack_bf16(__fsub_rn(ra, bf16_lo(mid)), __fsub_rn(rb, bf16_hi(mid)));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void sq_acc(u32 w, float& sq) {
  const float lo = bf16_lo(w), hi = bf16_hi(w);
  sq = __fmaf_rn(lo, lo, sq);
  sq = __fmaf_rn(hi, hi, sq);
}

// One k tile for this warp: chunks kw, kw + KGW, ... of 32 columns. Lane (g, tig)
// loads x columns tig*8 .. tig*8+7 of rows g and g+8 (16 bytes each). Because
// the sum over k does not care which k sits in which mma slot, k slots
// {2tig, 2tig+1, 2tig+8, 2tig+9} of the first mma take columns tig*8 + 0..3
// and those of the second mma columns tig*8 + 4..7, in A and B alike.
__device__ __forceinline__ void mma_tile(const u16* __restrict__ xr0, const u16* __restrict__ xr1, bool v0, bool v1,
                                         const float* __restrict__ fsrc, int kw, int g, int tig,
                                         float (&acc)[3][4], float& sq0, float& sq1) {
#pragma unroll 2
  for (int c = kw; c < KCH; c += KGW) {
    const int ke = c * 32 + tig * 8;
    uint4 a0 = make_uint4(0u, 0u, 0u, 0u), a1 = make_uint4(0u, 0u, 0u, 0u);
    if (v0) a0 = __ldg(reinterpret_cast<const uint4*>(xr0 + ke));
    if (v1) a1 = __ldg(reinterpret_cast<const uint4*>(xr1 + ke));
    sq_acc(a0.x, sq0); sq_acc(a0.y, sq0); sq_acc(a0.z, sq0); sq_acc(a0.w, sq0);
    sq_acc(a1.x, sq1); sq_acc(a1.y, sq1); sq_acc(a1.z, sq1); sq_acc(a1.w, sq1);
#pragma unroll
    for (int nt = 0; nt < 3; ++nt) {
      const int n = nt * 8 + g;
      const float4 f0 = fn_quad(fsrc, n, c * 8 + 2 * tig);
      const float4 f1 = fn_quad(fsrc, n, c * 8 + 2 * tig + 1);
      u32 h0, m0, l0, h1, m1, l1, h2, m2, l2, h3, m3, l3;
      split3(f0.x, f0.y, h0, m0, l0);
      split3(f0.z, f0.w, h1, m1, l1);
      split3(f1.x, f1.y, h2, m2, l2);
      split3(f1.z, f1.w, h3, m3, l3);
      mma_bf16(acc[nt], a0.x, a1.x, a0.y, a1.y, h0, h1);
      mma_bf16(acc[nt], a0.x, a1.x, a0.y, a1.y, m0, m1);
      mma_bf16(acc[nt], a0.x, a1.x, a0.y, a1.y, l0, l1);
      mma_bf16(acc[nt], a0.z, a1.z, a0.w, a1.w, h2, h3);
      mma_bf16(acc[nt], a0.z, a1.z, a0.w, a1.w, m2, m3);
      mma_bf16(acc[nt], a0.z, a1.z, a0.w, a1.w, l2, l3);
    }
  }
}
#endif

// ---------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(NT, 1)  // min 1 block: keeps ptxas from trading spills for occupancy
mhc_prenorm_gemm(const u16* __restrict__ x,      // [T, K] bf16
                 const float* __restrict__ fn,   // [24, K]
                 float* __restrict__ dot_mix,    // [S_max, T, 24], slices 0 .. split_k-1 written
                 float* __restrict__ sqrsum,     // [S_max, T]
                 int T) {
  __shared__ __align__(16) float smem[SMEM_FLOATS];
  const int t0 = blockIdx.x * TT;
  const int s = blockIdx.y;
  const int kb = s * KC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

#if EVO_MATH == EVO_MATH_FMA
  const int slot = tid / KG, kl = tid % KG;
  const int tok0 = t0 + slot * TPT;
  int ntok = T - tok0;
  ntok = ntok < 0 ? 0 : (ntok > TPT ? TPT : ntok);
  const u16* xs = x + (size_t)tok0 * K_DIM;
  float acc[TPT][COLS];
#pragma unroll
  for (int i = 0; i < TPT; ++i)
#pragma unroll
    for (int c = 0; c < COLS; ++c) acc[i][c] = 0.0f;
#define COMPUTE_TILE(k0, fsrc) fma_tile(xs + (k0), ntok, (fsrc), kl, acc)
#else
  const int m = warp / KGW, kw = warp % KGW;
  const int g = lane >> 2, tig = lane & 3;
  const int r0 = m * 16 + g, r1 = r0 + 8;
  const bool v0 = r0 < TT && t0 + r0 < T, v1 = r1 < TT && t0 + r1 < T;
  const u16* xr0 = x + (size_t)(t0 + r0) * K_DIM;
  const u16* xr1 = x + (size_t)(t0 + r1) * K_DIM;
  float acc[3][4];
#pragma unroll
  for (int nt = 0; nt < 3; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
  float sq0 = 0.0f, sq1 = 0.0f;
#define COMPUTE_TILE(k0, fsrc) mma_tile(xr0 + (k0), xr1 + (k0), v0, v1, (fsrc), kw, g, tig, acc, sq0, sq1)
#endif

  // --- the k loop over this split's tiles -----------------------------------
#if EVO_STAGES == 0
#pragma unroll 1
  for (int it = 0; it < NTILES; ++it) {  // fn read in place
    const int k0 = kb + it * KT;
    COMPUTE_TILE(k0, fn + k0);
  }
#elif EVO_STAGES == 1
#pragma unroll 1
  for (int it = 0; it < NTILES; ++it) {  // one fn tile per trip
    const int k0 = kb + it * KT;
    stage_sync(fn, smem, k0);
    __syncthreads();  // the staged fn tile is visible to every warp
    COMPUTE_TILE(k0, smem);
    __syncthreads();  // every warp is done with the tile before it is overwritten
  }
#else
  stage_async(fn, smem, kb);
#pragma unroll 1
  for (int it = 0; it < NTILES; ++it) {  // tile it computes while tile it+1 copies
    const int k0 = kb + it * KT;
    float* cur = smem + (it & 1) * (MIX * KT);
    if (it + 1 < NTILES) {
      stage_async(fn, smem + ((it + 1) & 1) * (MIX * KT), k0 + KT);
      cp_async_wait_one();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();  // tile it landed for every thread
    COMPUTE_TILE(k0, cur);
    __syncthreads();  // the buffer is free before the copy of tile it+2 lands in it
  }
#endif

  // --- reduction and the partial outputs --------------------------------------
  // (shared memory is free here: the k loop ended on a barrier, or never used it)
#if EVO_MATH == EVO_MATH_FMA
#pragma unroll
  for (int o = LPG / 2; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < TPT; ++i)
#pragma unroll
      for (int c = 0; c < COLS; ++c) acc[i][c] = __fadd_rn(acc[i][c], __shfl_xor_sync(FULL, acc[i][c], o));
#if KG <= 32
  // Every lane of the slot holds the totals: lane kl writes entries e with e % KG == kl.
#pragma unroll
  for (int i = 0; i < TPT; ++i)
#pragma unroll
    for (int c = 0; c < COLS; ++c)
      if ((i * COLS + c) % KG == kl && i < ntok) store_col(dot_mix, sqrsum, s, T, tok0 + i, c, acc[i][c]);
#else
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < TPT; ++i)
#pragma unroll
      for (int c = 0; c < COLS; ++c) smem[(warp * TPT + i) * COLS + c] = acc[i][c];
  }
  __syncthreads();
  for (int e = tid; e < TT * COLS; e += NT) {
    const int r = e / COLS, c = e % COLS;
    const int sl = r / TPT, i = r % TPT;
    float v = smem[((sl * WPS) * TPT + i) * COLS + c];
#pragma unroll
    for (int w = 1; w < WPS; ++w) v = __fadd_rn(v, smem[((sl * WPS + w) * TPT + i) * COLS + c]);
    if (t0 + r < T) store_col(dot_mix, sqrsum, s, T, t0 + r, c, v);
  }
#endif
#else
  sq0 = __fadd_rn(sq0, __shfl_xor_sync(FULL, sq0, 1));
  sq0 = __fadd_rn(sq0, __shfl_xor_sync(FULL, sq0, 2));
  sq1 = __fadd_rn(sq1, __shfl_xor_sync(FULL, sq1, 1));
  sq1 = __fadd_rn(sq1, __shfl_xor_sync(FULL, sq1, 2));
  float* red = smem + warp * 16 * COLS;
#pragma unroll
  for (int nt = 0; nt < 3; ++nt) {
    red[g * COLS + nt * 8 + 2 * tig] = acc[nt][0];
    red[g * COLS + nt * 8 + 2 * tig + 1] = acc[nt][1];
    red[(g + 8) * COLS + nt * 8 + 2 * tig] = acc[nt][2];
    red[(g + 8) * COLS + nt * 8 + 2 * tig + 1] = acc[nt][3];
  }
  if (tig == 0) {
    red[g * COLS + MIX] = sq0;
    red[(g + 8) * COLS + MIX] = sq1;
  }
  __syncthreads();
  for (int e = tid; e < TT * COLS; e += NT) {
    const int r = e / COLS, c = e % COLS;
    const int mm = r >> 4, row = r & 15;
    float v = smem[((mm * KGW) * 16 + row) * COLS + c];
#pragma unroll
    for (int w = 1; w < KGW; ++w) v = __fadd_rn(v, smem[((mm * KGW + w) * 16 + row) * COLS + c]);
    if (t0 + r < T) store_col(dot_mix, sqrsum, s, T, t0 + r, c, v);
  }
#endif
}
