"""fp4_matvec: CPU emulation of the kernel's fold for expand = f16 and qload = cp_async (no GPU here).

The emulator follows kernel.cu statement by statement (fp32 fma with one rounding, computed exactly with
fractions; the f16 expansion bit by bit; the cp.async ring, the swizzled x in shared memory and the
persistent tile order index by index), so the new paths' outputs can be compared bit for bit with the
emulated baseline and with the family's float64 reference. It also compiles every new knob value with
NVRTC for sm_90 and reads ptxas's resource report.
"""

from __future__ import annotations

import itertools
import math
import struct
import sys
from fractions import Fraction

import pytest
import torch

from evo.family import Geometry, load_family
from evo.genome import Genome
from harness.build import Builder

FAM = load_family("fp4_matvec")
MOD = sys.modules["evo_family_fp4_matvec"]
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
M32 = 0xFFFFFFFF


# --- fp32 arithmetic, exactly as the GPU rounds it ------------------------------------------


def f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def bits_to_f32(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u & M32))[0]


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _round_f32(x: Fraction, neg_zero: bool) -> float:
    """The fp32 nearest to x (ties to even), with IEEE's sign of an exact zero."""
    if x == 0:
        return -0.0 if neg_zero else 0.0
    s = -1.0 if x < 0 else 1.0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2^e <= a < 2^(e+2)
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e - 23, -149)  # quantum: 2^(e-23), subnormals 2^-149
    m = a / Fraction(2) ** q
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2):
        n += 1
    v = n * Fraction(2) ** q
    if v >= Fraction(2) ** 128:
        return s * math.inf
    return s * float(v)


def fma32(a: float, b: float, c: float) -> float:
    """__fmaf_rn(a, b, c) on finite fp32 values: a * b + c rounded once."""
    prod = Fraction(a) * Fraction(b)
    prod_neg = (math.copysign(1.0, a) * math.copysign(1.0, b)) < 0
    exact = prod + Fraction(c)
    return _round_f32(exact, prod_neg and math.copysign(1.0, c) < 0)


def fadd32(a: float, b: float) -> float:
    return _round_f32(Fraction(a) + Fraction(b), math.copysign(1.0, a) < 0 and math.copysign(1.0, b) < 0)


def fmul32(a: float, b: float) -> float:
    return _round_f32(Fraction(a) * Fraction(b), (math.copysign(1.0, a) * math.copysign(1.0, b)) < 0)


def test_fp32_helpers_round_once():
    # 1 + 2^-24 is a tie: even -> 1; fma keeps the product's low bits that a separate multiply would lose
    assert fadd32(1.0, 2.0 ** -24) == 1.0 and fadd32(1.0, 3 * 2.0 ** -25) == 1.0 + 2.0 ** -23
    a = 1.0 + 2.0 ** -12
    assert fma32(a, a, -1.0) == 2.0 ** -11 + 2.0 ** -24 != fadd32(f32(a * a), -1.0)
    assert math.copysign(1.0, fma32(-0.0, 3.0, -0.0)) == -1.0 and math.copysign(1.0, fma32(-0.0, 3.0, 0.0)) == 1.0
    assert fmul32(2.0 ** -140, 2.0 ** -10) == 0.0 and fmul32(2.0 ** -126, 0.75) == 0.75 * 2.0 ** -126


# --- the kernel's pieces, bit by bit --------------------------------------------------------


def byte_perm(a: int, b: int, s: int) -> int:
    """__byte_perm(a, b, s) for selector nibbles 0..7 (what kernel.cu uses)."""
    src = (a & M32) | ((b & M32) << 32)
    out = 0
    for k in range(4):
        n = (s >> (4 * k)) & 7
        out |= ((src >> (8 * n)) & 255) << (8 * k)
    return out


def f16_to_f32(h: int) -> float:
    return float(struct.unpack("<e", struct.pack("<H", h & 0xFFFF))[0])


def e2m1x8_f16(q: int) -> tuple[list[float], list[float]]:
    """kernel.cu e2m1x8_f16: (lo4, hi4)."""
    lo = (((q << 4) & 0x80808080) | ((q << 1) & 0x0E0E0E0E)) & M32
    hi = ((q & 0x80808080) | ((q >> 3) & 0x0E0E0E0E)) & M32
    l02, l13 = byte_perm(lo, 0, 0x2404), lo & 0xFF00FF00
    h02, h13 = byte_perm(hi, 0, 0x2404), hi & 0xFF00FF00
    return ([f16_to_f32(l02), f16_to_f32(l13), f16_to_f32(l02 >> 16), f16_to_f32(l13 >> 16)],
            [f16_to_f32(h02), f16_to_f32(h13), f16_to_f32(h02 >> 16), f16_to_f32(h13 >> 16)])


def spec_e2m1(code: int) -> float:
    v = E2M1[code & 7]
    return -v if code & 8 else v


def lut(code: int) -> float:
    return [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0][code]


def expand(q: list[int], mode: str) -> list[float]:
    """kernel.cu expand(): the 32 weights of a block (times 2^-14 for f16)."""
    v = [0.0] * 32
    if mode == "f16":
        for k in range(4):
            lo4, hi4 = e2m1x8_f16(q[k])
            v[4 * k:4 * k + 4] = lo4
            v[16 + 4 * k:16 + 4 * k + 4] = hi4
    else:  # the tables (lut_global / lut_constant / lut_shared hold the same 16 floats)
        for j in range(16):
            v[j] = lut((q[j >> 2] >> (8 * (j & 3))) & 15)
            v[16 + j] = lut((q[j >> 2] >> (8 * (j & 3) + 4)) & 15)
    return v


def test_f16_expansion_is_e2m1_times_2_to_minus_14_for_every_byte_everywhere():
    for pos in range(4):
        for byte in range(256):
            for other in (0x00, 0xFF, 0x5A):
                q = ((other * 0x01010101) & ~(0xFF << (8 * pos)) | (byte << (8 * pos))) & M32
                lo4, hi4 = e2m1x8_f16(q)
                for i in range(4):
                    bi = (q >> (8 * i)) & 255
                    for got, code in ((lo4[i], bi & 15), (hi4[i], bi >> 4)):
                        want = spec_e2m1(code) * 2.0 ** -14
                        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (q, i, code)
    # x * 2^14 is exact and every product is the baseline's: the fma sees the same real numbers
    for code in range(16):
        for xv in (1.0, -3.1415927, 2.0 ** -140, 1.7e30, f32(0.1)):
            xs = fmul32(f32(xv), 16384.0)
            assert Fraction(expand([code] + [0] * 3, "f16")[0]) * Fraction(xs) == Fraction(lut(code)) * Fraction(f32(xv))


def e8m0(sb: int) -> float:
    if sb == 255:
        return math.nan
    return bits_to_f32(sb << 23) if sb else bits_to_f32(0x00400000)


def funnel_rc(lo: int, hi: int, sh: int) -> int:
    return (((hi << 32) | lo) >> min(sh, 32)) & M32


def load_block_words(buf: bytes, base: int, b: int) -> tuple[int, list[int]]:
    """kernel.cu load_block, words_funnel / cp_async: 5 aligned words at (a & ~3), funnel shifts."""
    a = base + 17 * b
    p = a & ~3
    off = a & 3
    w = [int.from_bytes(buf[p + 4 * k:p + 4 * k + 4], "little") for k in range(5)]
    return (w[0] >> (8 * off)) & 255, [funnel_rc(w[k], w[k + 1], 8 * off + 8) for k in range(4)]


def fold_block(acc: float, sb: int, q: list[int], xv: list[float], mode: str) -> float:
    v = expand(q, mode)
    p = 0.0
    for j in range(32):
        p = fma32(v[j], xv[j], p)
    return fma32(p, e8m0(sb), acc)


def warp_sum(vals: list[float]) -> list[float]:
    v = list(vals)
    for o in (16, 8, 4, 2, 1):
        v = [fadd32(v[i], v[i ^ o]) for i in range(32)]
    return v


# --- the two kernels ----------------------------------------------------------------------


def geometry_consts(genome, n_in):
    G, W, R = genome["row_groups"], genome["warps"], genome["rows_per_block"]
    VL = 128 if G == 4 else 64
    NCH = VL // (32 * G)
    WPG = W // G
    RW = R // WPG
    NBLK = n_in // 32
    NSTEP = (NBLK + VL - 1) // VL
    return G, W, R, VL, NCH, WPG, RW, NBLK, NSTEP


def x_fp32(x: torch.Tensor) -> list[float]:
    return [float(v) for v in x.to(torch.float32).tolist()]  # bf16 widens exactly


def finish_rows(acc_by_warp, genome, G, R, RW, WPG, NCH):
    """Warp sums, then y per row group count (kernel.cu epilogue)."""
    y = [None] * R
    red = [[None] * G for _ in range(R)]
    for warp, acc in acc_by_warp.items():
        g, wi = warp // WPG, warp % WPG
        for r in range(RW):
            sums = [warp_sum([acc[lane][r][c] for lane in range(32)])[0] for c in range(NCH)]
            if G == 1:
                y[wi * RW + r] = fadd32(sums[0], sums[1])
            else:
                red[wi * RW + r][g] = sums[0]
    if G == 2:
        y = [fadd32(red[t][0], red[t][1]) for t in range(R)]
    elif G == 4:
        y = [fadd32(fadd32(red[t][0], red[t][1]), fadd32(red[t][2], red[t][3])) for t in range(R)]
    return y


def emulate_direct(genome, w: bytes, xs: list[float], n_in: int, n_out: int) -> list[float]:
    """The existing kernel body (qload = bytes / words_funnel / vec16 all read the same 17 bytes)."""
    G, W, R, VL, NCH, WPG, RW, NBLK, NSTEP = geometry_consts(genome, n_in)
    RS = MOD.row_stride(n_in)
    mode = "f16" if genome["expand"] == "f16" else "lut"
    xl = [fmul32(v, 16384.0) for v in xs] if mode == "f16" else xs  # load_x scales after the load
    y = []
    for blk in range(n_out // R):
        accs = {}
        for warp in range(W):
            g, wi = warp // WPG, warp % WPG
            acc = [[[0.0] * NCH for _ in range(RW)] for _ in range(32)]
            for lane in range(32):
                for s in range(NSTEP):
                    for c in range(NCH):
                        b = VL * s + 32 * (g * NCH + c) + lane
                        if b >= NBLK:
                            continue
                        xv = xl[32 * b:32 * b + 32]
                        for r in range(RW):
                            row = blk * R + wi * RW + r
                            sb, q = load_block_words(w, row * RS, b)
                            acc[lane][r][c] = fold_block(acc[lane][r][c], sb, q, xv, mode)
            accs[warp] = acc
        y += finish_rows(accs, genome, G, R, RW, WPG, NCH)
    return y


def emulate_cp_async(genome, w: bytes, xs: list[float], n_in: int, n_out: int, grid: int,
                     lookahead: int | None = None) -> list[float]:
    """qload = cp_async, block by block of the grid, item by item, with the ring's stages (kernel.cu refills
    item + NSTAGE - 1; `lookahead` changes that, to show the stage check catches a wrong refill)."""
    G, W, R, VL, NCH, WPG, RW, NBLK, NSTEP = geometry_consts(genome, n_in)
    RS = MOD.row_stride(n_in)
    U = genome["unroll"]
    NSTAGE, SLICE = U + 1, 17 * VL
    ahead = NSTAGE - 1 if lookahead is None else lookahead
    CHUNKS = SLICE // 16
    NT = 32 * W
    mode = "f16" if genome["expand"] == "f16" else "lut"
    ntiles = n_out // R
    y = [None] * n_out
    for bid in range(grid):
        my_tiles = (ntiles - 1 - bid) // grid + 1 if bid < ntiles else 0
        nitems = my_tiles * NSTEP
        ring = bytearray(b"\xAB" * (NSTAGE * R * SLICE))  # stale bytes: any read of an unfilled chunk shows
        filled = {}  # ring chunk index -> item that wrote it

        def issue(item):
            if item >= nitems:
                return
            tile, s = bid + (item // NSTEP) * grid, item % NSTEP
            nch = min((RS - s * SLICE) // 16, CHUNKS)
            for t in range(NT):
                for i in range(t, R * CHUNKS, NT):
                    r, c = divmod(i, CHUNKS)
                    if c < nch:
                        src = (tile * R + r) * RS + s * SLICE + 16 * c
                        dst = ((item % NSTAGE) * R * CHUNKS + i) * 16
                        ring[dst:dst + 16] = w[src:src + 16]
                        filled[(item % NSTAGE) * R * CHUNKS + i] = item

        for i in range(ahead):
            issue(i)
        sx = [None] * n_in  # s_x4 as floats: chunk (b << 3) | (k ^ (b & 7)) holds x[32b + 4k .. + 3]
        for i in range(n_in // 4):
            b, k = i >> 3, i & 7
            vals = xs[4 * i:4 * i + 4]
            if mode == "f16":
                vals = [fmul32(v, 16384.0) for v in vals]
            j = ((b << 3) | (k ^ (b & 7))) * 4
            sx[j:j + 4] = vals
        accs = {warp: [[[0.0] * NCH for _ in range(RW)] for _ in range(32)] for warp in range(W)}
        for item in range(nitems):
            issue(item + ahead)  # after the barrier, before this item's fold: must not hit its stage
            s = item % NSTEP
            slot = (item % NSTAGE) * R * SLICE
            for warp in range(W):
                g, wi = warp // WPG, warp % WPG
                for lane in range(32):
                    for c in range(NCH):
                        bl = 32 * (g * NCH + c) + lane
                        b = VL * s + bl
                        if b >= NBLK:
                            continue
                        xv = []
                        for k in range(8):
                            j = ((b << 3) | (k ^ (b & 7))) * 4
                            xv += sx[j:j + 4]
                        for r in range(RW):
                            base = slot + (wi * RW + r) * SLICE
                            a0 = base + 17 * bl
                            for ch in range((a0 & ~3) // 16, ((a0 & ~3) + 19) // 16 + 1):  # the words it reads
                                assert filled.get(ch) == item, (bid, item, ch, filled.get(ch))
                            sb, q = load_block_words(ring, base, bl)
                            accs[warp][lane][r][c] = fold_block(accs[warp][lane][r][c], sb, q, xv, mode)
            if s == NSTEP - 1:
                tile0 = (bid + (item // NSTEP) * grid) * R
                ys = finish_rows(accs, genome, G, R, RW, WPG, NCH)
                for t in range(R):
                    assert y[tile0 + t] is None
                    y[tile0 + t] = ys[t]
                accs = {warp: [[[0.0] * NCH for _ in range(RW)] for _ in range(32)] for warp in range(W)}
    assert all(v is not None for v in y)
    return y


def inputs(n_in: int, n_out: int, x_dtype: str, seed: int = 0):
    g = Geometry("emu", {"in": n_in, "out": n_out, "x_dtype": x_dtype})
    inp = FAM.make_inputs(g, seed, "cpu")
    ref = FAM.reference(inp, g)["y"].tolist()
    return g, bytes(inp["w"].flatten().tolist()), x_fp32(inp["x"]), ref


def base_genome(**kw):
    return FAM.baseline().replace(**kw)


def check_close(y, ref):
    num = math.sqrt(sum((a - b) ** 2 for a, b in zip(y, ref)))
    den = math.sqrt(sum(b * b for b in ref))
    assert num / den < FAM.error_bound("y"), num / den


# 65 blocks: one full step of 64 and a one-block step (G = 4: a 65-block step); rows padded 1105 -> 1120 bytes.
CASES = [
    # (genome changes, in, out, x_dtype, grid)
    (dict(expand="f16", qload="cp_async", row_groups=1, rows_per_block=2, warps=1, unroll=1), 2080, 8, "float32", 3),
    (dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=2, warps=2, unroll=2), 2080, 6, "bfloat16", 2),
    (dict(expand="lut_shared", qload="cp_async", row_groups=1, rows_per_block=1, warps=1, unroll=4), 96, 5, "float32", 2),
    (dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=4, warps=4, unroll=1), 4096 + 64, 4, "float32", 1),
]


@pytest.mark.parametrize("changes,n_in,n_out,x_dtype,grid", CASES)
def test_cp_async_and_f16_emulation_equals_the_baseline_bit_for_bit(changes, n_in, n_out, x_dtype, grid):
    g, w, xs, ref = inputs(n_in, n_out, x_dtype)
    gen = base_genome(**changes)
    assert FAM.check(gen, [g]) is None and FAM.inexact_knobs(gen, g) == []
    base = emulate_direct(FAM.baseline().replace(rows_per_block=changes["rows_per_block"], warps=1), w, xs, n_in, n_out)
    check_close(base, ref)
    got = emulate_cp_async(gen, w, xs, n_in, n_out, grid)
    assert [f32_bits(v) for v in got] == [f32_bits(v) for v in base]
    direct = emulate_direct(gen.replace(qload="words_funnel"), w, xs, n_in, n_out)
    assert [f32_bits(v) for v in direct] == [f32_bits(v) for v in base]


def test_cp_async_row_groups_4_is_the_row_groups_4_fold():
    n_in, n_out = 2080, 4
    g, w, xs, ref = inputs(n_in, n_out, "float32", seed=1)
    gen = base_genome(expand="f16", qload="cp_async", row_groups=4, rows_per_block=2, warps=4, unroll=1)
    assert FAM.check(gen, [g]) is None and FAM.inexact_knobs(gen, g) == ["row_groups"]
    got = emulate_cp_async(gen, w, xs, n_in, n_out, 2)
    want = emulate_direct(gen.replace(expand="lut_global", qload="bytes"), w, xs, n_in, n_out)
    assert [f32_bits(v) for v in got] == [f32_bits(v) for v in want]
    check_close(got, ref)


def test_emulated_ring_catches_a_refill_of_the_stage_being_read():
    n_in, n_out = 2080, 2
    g, w, xs, _ = inputs(n_in, n_out, "float32")
    gen = base_genome(qload="cp_async", rows_per_block=1, warps=1, unroll=2)
    emulate_cp_async(gen, w, xs, n_in, n_out, 1)
    with pytest.raises(AssertionError):
        emulate_cp_async(gen, w, xs, n_in, n_out, 1, lookahead=3)  # refills stage item % 3 before reading it


# --- launch, constraints, compiles ----------------------------------------------------------

REAL = [Geometry("in7168_out18432", {"in": 7168, "out": 18432, "x_dtype": "float32"}),
        Geometry("in4096_out4096", {"in": 4096, "out": 4096, "x_dtype": "float32"}),
        Geometry("in7168_out7168_bf16", {"in": 7168, "out": 7168, "x_dtype": "bfloat16"})]


def test_cp_async_launch_is_persistent_and_fits_shared_memory():
    gen = base_genome(expand="f16", qload="cp_async", row_groups=1, rows_per_block=8, warps=4, unroll=1)
    assert FAM.check(gen, REAL) is None
    for g in REAL:
        smem = MOD.cp_async_smem(gen, g["in"])
        assert smem == g["in"] * 4 + 2 * 8 * 1088 <= MOD.SMEM_LIMIT
        nb = MOD.cp_async_blocks_per_sm(gen, g["in"])
        lc = FAM.launch(gen, g)
        assert lc.grid[0] == min(g["out"] // 8, MOD.sm_count() * nb) and lc.block == (128, 1, 1)
        assert FAM.defines(gen, FAM.specialization(g))["EVO_MINB"] == nb
    assert MOD.cp_async_blocks_per_sm(gen, 7168) == 4  # 46080 B + 1 KiB reserved, 4 per 228 KiB
    # the direct paths launch one block per tile, and their macros are unchanged (recorded genomes' sources)
    base = FAM.baseline()
    assert FAM.launch(base, REAL[0]).grid == (18432 // 4, 1, 1) and "EVO_MINB" not in FAM.defines(base, {"in": 7168, "x_bf16": False})
    # too much shared memory, too many registers: refused with the reason
    why = FAM.check(gen.replace(unroll=2), REAL)
    assert why and "shared memory" in why
    why = FAM.check(gen.replace(rows_per_block=8, warps=1, row_groups=1), REAL)
    assert why and "register budget" in why
    assert FAM.check(gen.replace(qload="words_funnel", rows_per_block=8, warps=2, unroll=2), REAL)  # 4x2x2 > 8


def test_new_values_are_bit_preserving():
    g = REAL[0]
    for gen in (base_genome(expand="f16"), base_genome(qload="cp_async"),
                base_genome(expand="f16", qload="cp_async", row_groups=2, warps=4, rows_per_block=4)):
        assert FAM.inexact_knobs(gen, g) == []
    assert FAM.inexact_knobs(base_genome(qload="cp_async", row_groups=4), g) == ["row_groups"]


COMPILE = [
    dict(expand="f16"),
    dict(expand="f16", qload="words_funnel", row_groups=2, rows_per_block=8, warps=4),
    dict(expand="f16", qload="vec16", row_groups=4, rows_per_block=8, warps=4),
    dict(expand="f16", qload="cp_async", row_groups=1, rows_per_block=8, warps=4, unroll=1),
    dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=8, warps=4, unroll=1),
    dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=4, warps=2, unroll=2),
    dict(expand="f16", qload="cp_async", row_groups=4, rows_per_block=4, warps=4, unroll=1),
    dict(expand="prmt", qload="cp_async", row_groups=1, rows_per_block=4, warps=1, unroll=2),
    dict(expand="lut_shared", qload="cp_async", row_groups=2, rows_per_block=4, warps=8, unroll=2),
    dict(expand="lut_global", qload="cp_async", row_groups=4, rows_per_block=1, warps=4, unroll=4),
]


@pytest.mark.parametrize("changes", COMPILE, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_new_paths_compile_without_spills(changes):
    gen = base_genome(**changes)
    assert FAM.check(gen, REAL) is None, FAM.check(gen, REAL)
    built = Builder(FAM, REAL, "sm_90").build(gen)
    assert len(built.modules) == 3
    for key, m in built.modules.items():
        r = m.resources
        assert 0 < r.registers <= 255 and r.spills == 0 and r.stack_frame == 0, (key, r)
        n_in = 7168 if "in=7168" in key else 4096
        if gen["qload"] == "cp_async":
            assert r.shared_static == MOD.cp_async_smem(gen, n_in), (key, r)
            nb = MOD.cp_async_blocks_per_sm(gen, n_in)
            assert r.registers * 32 * gen["warps"] * nb <= 65536, (key, r, nb)  # the residency launch assumes
        else:
            assert r.shared_static <= 64 + 4 * 8 * 4, (key, r)
