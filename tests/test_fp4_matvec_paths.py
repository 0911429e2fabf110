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

from evo.core.family import Geometry, load_family
from harness.build import Builder

FAM = load_family("fp4_matvec")
MOD = sys.modules[type(FAM).__module__]
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
    assert fadd32(1.0, 2.0**-24) == 1.0 and fadd32(1.0, 3 * 2.0**-25) == 1.0 + 2.0**-23
    a = 1.0 + 2.0**-12
    assert fma32(a, a, -1.0) == 2.0**-11 + 2.0**-24 != fadd32(f32(a * a), -1.0)
    assert math.copysign(1.0, fma32(-0.0, 3.0, -0.0)) == -1.0 and math.copysign(1.0, fma32(-0.0, 3.0, 0.0)) == 1.0
    assert fmul32(2.0**-140, 2.0**-10) == 0.0 and fmul32(2.0**-126, 0.75) == 0.75 * 2.0**-126


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
    return (
        [f16_to_f32(l02), f16_to_f32(l13), f16_to_f32(l02 >> 16), f16_to_f32(l13 >> 16)],
        [f16_to_f32(h02), f16_to_f32(h13), f16_to_f32(h02 >> 16), f16_to_f32(h13 >> 16)],
    )


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
            v[4 * k : 4 * k + 4] = lo4
            v[16 + 4 * k : 16 + 4 * k + 4] = hi4
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
                        want = spec_e2m1(code) * 2.0**-14
                        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (q, i, code)
    # x * 2^14 is exact and every product is the baseline's: the fma sees the same real numbers
    for code in range(16):
        for xv in (1.0, -3.1415927, 2.0**-140, 1.7e30, f32(0.1)):
            xs = fmul32(f32(xv), 16384.0)
            assert Fraction(expand([code] + [0] * 3, "f16")[0]) * Fraction(xs) == Fraction(lut(code)) * Fraction(
                f32(xv)
            )


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
    w = [int.from_bytes(buf[p + 4 * k : p + 4 * k + 4], "little") for k in range(5)]
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
                        xv = xl[32 * b : 32 * b + 32]
                        for r in range(RW):
                            row = blk * R + wi * RW + r
                            sb, q = load_block_words(w, row * RS, b)
                            acc[lane][r][c] = fold_block(acc[lane][r][c], sb, q, xv, mode)
            accs[warp] = acc
        y += finish_rows(accs, genome, G, R, RW, WPG, NCH)
    return y


def emulate_cp_async(
    genome, w: bytes, xs: list[float], n_in: int, n_out: int, grid: int, lookahead: int | None = None
) -> list[float]:
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
        ring = bytearray(b"\xab" * (NSTAGE * R * SLICE))  # stale bytes: any read of an unfilled chunk shows
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
                        ring[dst : dst + 16] = w[src : src + 16]
                        filled[(item % NSTAGE) * R * CHUNKS + i] = item

        for i in range(ahead):
            issue(i)
        sx = [None] * n_in  # s_x4 as floats: chunk (b << 3) | (k ^ (b & 7)) holds x[32b + 4k .. + 3]
        for i in range(n_in // 4):
            b, k = i >> 3, i & 7
            vals = xs[4 * i : 4 * i + 4]
            if mode == "f16":
                vals = [fmul32(v, 16384.0) for v in vals]
            j = ((b << 3) | (k ^ (b & 7))) * 4
            sx[j : j + 4] = vals
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
                            xv += sx[j : j + 4]
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


def rel_err(y, ref) -> float:
    """Relative error norm against the float64 reference (the tolerance gate's measure)."""
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(y, ref))) / math.sqrt(sum(b * b for b in ref))


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
    (
        dict(expand="lut_shared", qload="cp_async", row_groups=1, rows_per_block=1, warps=1, unroll=4),
        96,
        5,
        "float32",
        2,
    ),
    (
        dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=4, warps=4, unroll=1),
        4096 + 64,
        4,
        "float32",
        1,
    ),
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

REAL = [
    Geometry("in7168_out18432", {"in": 7168, "out": 18432, "x_dtype": "float32"}),
    Geometry("in4096_out4096", {"in": 4096, "out": 4096, "x_dtype": "float32"}),
    Geometry("in7168_out7168_bf16", {"in": 7168, "out": 7168, "x_dtype": "bfloat16"}),
]


def test_cp_async_launch_is_persistent_and_fits_shared_memory():
    gen = base_genome(expand="f16", qload="cp_async", row_groups=1, rows_per_block=8, warps=4, unroll=1)
    assert FAM.check(gen, REAL) is None
    for g in REAL:
        smem = MOD.cp_async_smem(gen, g["in"])
        assert smem == MOD.cp_async_dynamic_smem(gen, g["in"]) == g["in"] * 4 + 2 * 8 * 1088 <= MOD.SMEM_OPTIN
        nb = MOD.cp_async_blocks_per_sm(gen, g["in"])
        lc = FAM.launch(gen, g)
        assert lc.grid[0] == min(g["out"] // 8, MOD.sm_count() * nb) and lc.block == (128, 1, 1)
        assert lc.shared_bytes == smem  # x and the ring are dynamic shared memory
        assert FAM.defines(gen, FAM.specialization(g))["EVO_MINB"] == nb
    assert MOD.cp_async_blocks_per_sm(gen, 7168) == 4  # 46080 B + 1 KiB reserved, 4 per 228 KiB
    # the direct paths launch one block per tile, and their macros are unchanged (recorded genomes' sources)
    base = FAM.baseline()
    assert FAM.launch(base, REAL[0]).grid == (18432 // 4, 1, 1) and "EVO_MINB" not in FAM.defines(
        base, {"in": 7168, "x_bf16": False}
    )
    # too much shared memory, too many registers: refused with the reason
    assert FAM.check(gen.replace(unroll=2), REAL) is None  # 54784 B: over 48 KiB, the launch opts in
    big = [Geometry("big", {"in": 32768, "out": 4096, "x_dtype": "float32"})]  # x alone is 128 KiB
    assert FAM.check(gen.replace(rows_per_block=32, warps=8, row_groups=2, unroll=4), REAL) is None
    why = FAM.check(gen.replace(rows_per_block=32, warps=8, row_groups=2, unroll=4), big)
    assert why and "shared memory" in why
    why = FAM.check(gen.replace(rows_per_block=8, warps=1, row_groups=1), REAL)
    assert why and "register budget" in why
    assert FAM.check(gen.replace(qload="words_funnel", rows_per_block=8, warps=2, unroll=2), REAL)  # 4x2x2 > 8


def test_new_values_are_bit_preserving():
    g = REAL[0]
    for gen in (
        base_genome(expand="f16"),
        base_genome(qload="cp_async"),
        base_genome(expand="f16", qload="cp_async", row_groups=2, warps=4, rows_per_block=4),
    ):
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
    dict(expand="mma", qload="words_funnel", row_groups=1, rows_per_block=16, warps=1, unroll=4),
    dict(expand="mma", qload="words_funnel", row_groups=2, rows_per_block=64, warps=4, unroll=2),
    dict(expand="mma", qload="words_funnel", row_groups=4, rows_per_block=32, warps=8, unroll=1),
    dict(expand="f16", qload="cp_async", row_groups=1, rows_per_block=16, warps=8, unroll=1),  # 63488 B dynamic
    dict(expand="f16", qload="cp_async", row_groups=2, rows_per_block=32, warps=8, unroll=4),
    dict(expand="mma", qload="cp_async", row_groups=4, rows_per_block=32, warps=8, unroll=1),
    dict(expand="mma", qload="cp_async", row_groups=1, rows_per_block=16, warps=1, unroll=4),
    dict(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=8, unroll=1),
    dict(expand="mma", qload="tma", row_groups=1, rows_per_block=32, warps=8, unroll=2),
    dict(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=4, unroll=4),
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
        if gen["qload"] == "tma":  # all of it dynamic, one block a SM
            assert r.shared_static == 0 and MOD.tma_layout(gen, n_in)[2] <= MOD.SMEM_OPTIN, (key, r)
            assert r.registers * (32 * gen["warps"] * gen["rows_per_block"] // 16 + 32) <= 65536, (key, r)
        elif gen["qload"] == "cp_async" and gen["expand"] == "mma":  # all of it dynamic
            assert r.shared_static == 0, (key, r)
            nb = MOD.mma_cp_async_blocks_per_sm(gen, n_in)
            assert r.registers * 32 * gen["warps"] * nb <= 65536, (key, r, nb)
        elif gen["qload"] == "cp_async":
            assert r.shared_static == MOD.cp_async_smem(gen, n_in) - MOD.cp_async_dynamic_smem(gen, n_in), (key, r)
            nb = MOD.cp_async_blocks_per_sm(gen, n_in)
            assert r.registers * 32 * gen["warps"] * nb <= 65536, (key, r, nb)  # the residency launch assumes
        elif gen["expand"] == "mma":  # x as 3 f16 parts + one factor per block, the row-group partials
            g = gen["row_groups"]
            assert r.shared_static == n_in // 32 * 196 + (g * gen["rows_per_block"] * 4 if g > 1 else 0), (key, r)
        else:
            assert r.shared_static <= 64 + 4 * 8 * 4, (key, r)


# --- expand = mma: tensor-core fragments, emulated lane by lane -------------------------------------
# The emulator builds every lane's A and B registers with kernel.cu's index arithmetic, then assembles the
# 16x16 A and 16x8 B matrices from those registers by the PTX ISA's fragment layout for mma.m16n8k16 (.f16):
# A reg j of lane (g, t) holds rows g (j even) / g + 8 (j odd), k = 2t, 2t + 1 (j < 2) or 2t + 8, 2t + 9 (j >= 2);
# B reg j holds k = 2t, 2t + 1 (+ 8 for j = 1), column g; D element c of lane (g, t) is row g (+ 8 for c >= 2),
# column 2t + (c & 1). A wrong lane/slot mapping in the kernel shows up as a wrong y, not as a shared mistake.
# The tensor cores' fp32 sum is taken as the exact sum rounded once per mma (their order is not specified).


def f16_bits(v: float) -> int:
    return struct.unpack("<H", struct.pack("<e", v))[0]  # round to nearest even, subnormals included


def half(reg: int, i: int) -> Fraction:
    return Fraction(f16_to_f32(reg >> (16 * i)))


def mma_emulated(a_regs, b_regs, c):
    """D = A B + C for one warp: a_regs[lane] 4 f16x2, b_regs[lane] 2 f16x2, c[lane] 4 fp32 (PTX layout)."""
    A = [[None] * 16 for _ in range(16)]
    B = [[None] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(4):
            for e in range(2):
                A[g + 8 * (j & 1)][2 * t + e + 8 * (j >> 1)] = half(a_regs[lane][j], e)
        for j in range(2):
            for e in range(2):
                B[2 * t + e + 8 * j][g] = half(b_regs[lane][j], e)
    d = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        out = []
        for ci in range(4):
            row, col = g + 8 * (ci >> 1), 2 * t + (ci & 1)
            out.append(_round_f32(sum(A[row][k] * B[k][col] for k in range(16)) + Fraction(c[lane][ci]), False))
        d.append(out)
    return d


def stage_x_parts(xs: list[float], nblk: int, whole: bool = False) -> tuple[list[list[int]], list[float]]:
    """kernel.cu stage_x_parts(): s_xb as halves [entry][8] (three f16 parts), s_xf = 2^(14 - k) per block; with
    whole (qload = tma) one k for the vector, from max |x| over all of it."""
    s_xb = [[0] * 8 for _ in range(nblk * 12)]
    s_xf = [0.0] * nblk
    for b in range(nblk):
        m = max(abs(v) for v in (xs if whole else xs[32 * b : 32 * b + 32]))
        em = (f32_bits(m) >> 23) & 255
        k = min(141 - em, 127)
        for lane in range(32):
            x_s = fmul32(xs[32 * b + lane], bits_to_f32((k + 127) << 23))
            h = f16_bits(x_s)
            r1 = fadd32(x_s, -f16_to_f32(h))
            mid = f16_bits(r1)
            lo = f16_bits(fadd32(r1, -f16_to_f32(mid)))
            jj = lane & 15
            rr = jj & 3
            pos = (lane >> 4) * 4 + (((rr & 1) << 1) | (rr >> 1))
            for p, part in enumerate((h, mid, lo)):
                s_xb[(b * 4 + (jj >> 2)) * 3 + p][pos] = part
        s_xf[b] = bits_to_f32((14 - k + 127) << 23)
    return s_xb, s_xf


def a_fragment(q: int) -> tuple[list[int], list[int]]:
    """mma_block()'s decode of one lane's code window q: (A registers of k-chunk 0 for one row, of k-chunk 1)."""
    lo = (((q << 4) & 0x80808080) | ((q << 1) & 0x0E0E0E0E)) & M32
    hi = ((q & 0x80808080) | ((q >> 3) & 0x0E0E0E0E)) & M32
    return [byte_perm(lo, 0, 0x2404), lo & 0xFF00FF00], [byte_perm(hi, 0, 0x2404), hi & 0xFF00FF00]


def mma_block_lanes(qs, sbs, s_xb, s_xf, b):
    """mma_block() of one block and 16-row tile for the 32 lanes: qs[lane][r], sbs[lane][r] for rows g and g + 8.
    Returns each lane's (D, f) with f = e8m0(scale) * 2^(14 - k): the kernel adds D[c] * f[c >> 1] to its chain."""
    a_lo, a_hi, bregs = [], [], []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        (l0, l1), (h0, h1) = a_fragment(qs[lane][0])
        (m0, m1), (k0, k1) = a_fragment(qs[lane][1])
        a_lo.append([l0, m0, l1, m1])
        a_hi.append([h0, k0, h1, k1])
        e = s_xb[(b * 4 + t) * 3 + min(g, 2)]  # columns 3..7 repeat part 2
        bregs.append([e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16])
    zero = [[0.0] * 4 for _ in range(32)]
    d = mma_emulated(a_lo, [r[:2] for r in bregs], zero)
    d = mma_emulated(a_hi, [r[2:] for r in bregs], d)
    return [(d[lane], [fmul32(e8m0(sbs[lane][r]), s_xf[b]) for r in range(2)]) for lane in range(32)]


def emulate_mma(genome, w: bytes, xs: list[float], n_in: int, n_out: int) -> list[float]:
    nblk, stride = n_in // 32, MOD.row_stride(n_in)
    W, R, G, U = genome["warps"], genome["rows_per_block"], genome["row_groups"], genome["unroll"]
    wpg = W // G
    mt = R // (16 * wpg)
    s_xb, s_xf = stage_x_parts(xs, nblk)
    y = [None] * n_out

    def word(off: int) -> int:
        assert 0 <= off and off + 4 <= len(w), "read past the weights"
        return int.from_bytes(w[off : off + 4], "little")

    for blk in range(n_out // R):
        red = [[None] * R for _ in range(G)]
        for warp in range(W):
            kg, wi = warp // wpg, warp % wpg
            row0 = blk * R + wi * 16 * mt
            acc = [[[0.0] * 4 for _ in range(mt)] for _ in range(32)]
            b0 = kg * U
            while b0 < nblk:
                for u in range(U):
                    b = b0 + u
                    if b >= nblk:
                        continue
                    lead = (b + 1) & 3
                    for i in range(mt):
                        qs, sbs = [], []
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            wofs = 17 * b + 1 - lead + 4 * t
                            bases = [(row0 + 16 * i + g + 8 * r) * stride for r in range(2)]
                            qs.append(
                                [
                                    funnel_rc(word(bs + wofs), word(bs + wofs + 4) if lead else 0, 8 * lead)
                                    for bs in bases
                                ]
                            )
                            sbs.append([w[bs + 17 * b] for bs in bases])
                        for lane, (d, f) in enumerate(mma_block_lanes(qs, sbs, s_xb, s_xf, b)):
                            for c in range(4):
                                acc[lane][i][c] = fma32(d[c], f[c >> 1], acc[lane][i][c])
                b0 += G * U
            for lane in range(32):
                if lane & 3:  # the kernel drops column 3 (a repeat of part 2) of lane t = 1, and t = 2, 3's
                    for i in range(mt):
                        acc[lane][i][1] = acc[lane][i][3] = 0.0
            for i in range(mt):
                for r in range(2):
                    v = [fadd32(acc[lane][i][2 * r], acc[lane][i][2 * r + 1]) for lane in range(32)]
                    for lane in range(0, 32, 4):  # t = 0: its value plus lane + 1's (shfl_down 1)
                        s = fadd32(v[lane], v[lane + 1])
                        row = wi * 16 * mt + 16 * i + (lane >> 2) + 8 * r
                        if G == 1:
                            y[blk * R + row] = s
                        else:
                            red[kg][row] = s
        if G > 1:
            for row in range(R):
                v = red[0][row]
                for gg in range(1, G):
                    v = fadd32(v, red[gg][row])
                y[blk * R + row] = v
    return y


def tile_row_sums(chains):
    """The end of a 16-row tile in kernel.cu's mma paths: chains[lane] = its 4 chains of 4 D-sums. Lanes t != 0
    drop columns 1 and 3 (repeats of part 2), each lane adds (c0 + c1) over the chains in pairs, and lane t = 0
    adds lane t + 1's (shfl_down 1). Returns (row in the tile, sum) for rows g and g + 8."""

    def lane_sum(lane, r):
        a = [[0.0 if (lane & 3) and c & 1 else ch[c] for c in range(4)] for ch in chains[lane]]
        s = [fadd32(ch[2 * r], ch[2 * r + 1]) for ch in a]
        return fadd32(fadd32(s[0], s[1]), fadd32(s[2], s[3]))

    return [
        ((lane >> 2) + 8 * r, fadd32(lane_sum(lane, r), lane_sum(lane + 1, r)))
        for r in range(2)
        for lane in range(0, 32, 4)
    ]


def emulate_mma_ring(genome, w: bytes, xs: list[float], n_in: int, n_out: int, grid: int) -> list[float]:
    """expand = mma with qload = cp_async, lane by lane: persistent blocks, each (tile, step of 64 blocks) slice
    copied into a ring of unroll + 1 stages at the kernel's row pitch (stale bytes stay in the ring: a read of
    a chunk not copied for this item fails), windows read from the slot, 4 chains per lane (block position u in
    its 4-block group), and the tile's end: odd columns of lanes t != 0 dropped, chains summed, shfl_down 1,
    row groups through shared memory."""
    nblk, stride = n_in // 32, MOD.row_stride(n_in)
    W, R, G, U = genome["warps"], genome["rows_per_block"], genome["row_groups"], genome["unroll"]
    wpg, step, pitch = W // G, MOD.MMA_STEP_BLOCKS, MOD.MMA_PITCH
    mt, nstep, nstage, slice_ = R // (16 * wpg), (nblk + step - 1) // step, U + 1, 17 * step
    s_xb, s_xf = stage_x_parts(xs, nblk)
    y = [None] * n_out
    ntiles = n_out // R
    for blk in range(grid):
        ring = bytearray([0xEE]) * (nstage * R * pitch)
        fresh = [set() for _ in range(nstage)]  # byte offsets copied for the stage's current item
        my_tiles = (ntiles - 1 - blk) // grid + 1 if blk < ntiles else 0
        acc = {
            (warp, lane): [[[0.0] * 4 for _ in range(mt)] for _ in range(4)] for warp in range(W) for lane in range(32)
        }
        for item in range(my_tiles * nstep):
            tile, s = blk + (item // nstep) * grid, item % nstep
            st = item % nstage
            nch = min((stride - s * slice_) // 16, slice_ // 16)
            fresh[st] = set()
            for r in range(R):  # copy_rows(): nch 16-byte chunks of each row
                src = (tile * R + r) * stride + s * slice_
                dst = st * R * pitch + r * pitch
                ring[dst : dst + 16 * nch] = w[src : src + 16 * nch]
                fresh[st].update(range(dst, dst + 16 * nch))

            def word(off: int) -> int:
                assert all(o in fresh[st] for o in range(off, off + 4)), "read a byte not copied for this item"
                return int.from_bytes(ring[off : off + 4], "little")

            ng = min(nblk - s * step, step) // 4
            for warp in range(W):
                kg, wi = warp // wpg, warp % wpg
                for jj in range(step // (4 * G)):
                    jg = kg + G * jj
                    if jg >= ng:
                        continue
                    for u in range(4):
                        bl = 4 * jg + u
                        b, lead = step * s + bl, (u + 1) & 3
                        for i in range(mt):
                            qs, sbs = [], []
                            for lane in range(32):
                                g, t = lane >> 2, lane & 3
                                wofs = 17 * bl + 1 - lead + 4 * t
                                assert wofs % 4 == 0
                                rows = [st * R * pitch + (wi * 16 * mt + g + 16 * i + 8 * r) * pitch for r in range(2)]
                                qs.append(
                                    [
                                        funnel_rc(word(rp + wofs), word(rp + wofs + 4) if lead else 0, 8 * lead)
                                        for rp in rows
                                    ]
                                )
                                sbs.append([ring[rp + 17 * bl] for rp in rows])
                                assert all(rp + 17 * bl in fresh[st] for rp in rows)
                            for lane, (d, f) in enumerate(mma_block_lanes(qs, sbs, s_xb, s_xf, b)):
                                a = acc[(warp, lane)][u][i]
                                for c in range(4):
                                    a[c] = fma32(d[c], f[c >> 1], a[c])
            if s == nstep - 1:  # the tile's end
                red = [[None] * R for _ in range(G)]
                for warp in range(W):
                    kg, wi = warp // wpg, warp % wpg
                    for i in range(mt):
                        for row, v in tile_row_sums([[acc[(warp, ln)][u][i] for u in range(4)] for ln in range(32)]):
                            red[kg][wi * 16 * mt + 16 * i + row] = v
                for row in range(R):
                    v = red[0][row]
                    for gg in range(1, G):
                        v = fadd32(v, red[gg][row])
                    y[tile * R + row] = v
                for key in acc:
                    acc[key] = [[[0.0] * 4 for _ in range(mt)] for _ in range(4)]
    return y


MMA_CASES = [
    # (genome changes, in, out, x_dtype): every lead (b + 1) & 3, K split in 2 and 4, 2 tiles per warp, bf16 x
    (dict(rows_per_block=16, warps=1, row_groups=1, unroll=1), 256, 16, "float32"),
    (dict(rows_per_block=32, warps=4, row_groups=2, unroll=2), 224, 32, "bfloat16"),
    (dict(rows_per_block=16, warps=4, row_groups=4, unroll=1), 160, 32, "float32"),
    (dict(rows_per_block=32, warps=1, row_groups=1, unroll=2), 192, 32, "float32"),
]


@pytest.mark.parametrize("changes,n_in,n_out,x_dtype", MMA_CASES)
def test_mma_emulation_is_within_the_tolerance_of_the_reference(changes, n_in, n_out, x_dtype):
    g, w, xs, ref = inputs(n_in, n_out, x_dtype, seed=2)
    gen = base_genome(expand="mma", qload="words_funnel", **changes)
    assert FAM.check(gen, [g]) is None, FAM.check(gen, [g])
    assert FAM.inexact_knobs(gen, g) == ["expand"]
    got = emulate_mma(gen, w, xs, n_in, n_out)
    base = emulate_direct(FAM.baseline().replace(rows_per_block=16, warps=1), w, xs, n_in, n_out)
    err = lambda y: rel_err(y, ref)  # noqa: E731
    # the gate's rule (config tolerance_factor 2): within 2x the baseline's error against float64
    assert err(got) <= 2 * max(err(base), 1e-9), (err(got), err(base))


RING_CASES = [
    # (genome changes, in, out, x_dtype, grid): a short last step (96 blocks: 64 + 32), every block two tiles
    # (the ring reused across tiles), K split in 4 / 1, 2 tiles a warp, a deeper ring, bf16 x
    (dict(rows_per_block=16, warps=4, row_groups=4, unroll=1), 3072, 32, "float32", 1),
    (dict(rows_per_block=32, warps=1, row_groups=1, unroll=2), 4096, 32, "bfloat16", 1),
]


@pytest.mark.parametrize("changes,n_in,n_out,x_dtype,grid", RING_CASES)
def test_mma_ring_emulation_is_within_the_tolerance_of_the_reference(changes, n_in, n_out, x_dtype, grid):
    g, w, xs, ref = inputs(n_in, n_out, x_dtype, seed=4)
    gen = base_genome(expand="mma", qload="cp_async", **changes)
    assert FAM.check(gen, [g]) is None, FAM.check(gen, [g])
    assert FAM.inexact_knobs(gen, g) == ["expand"]
    got = emulate_mma_ring(gen, w, xs, n_in, n_out, grid)
    base = emulate_direct(FAM.baseline().replace(rows_per_block=16, warps=1), w, xs, n_in, n_out)
    err = lambda y: rel_err(y, ref)  # noqa: E731
    assert err(got) <= 2 * max(err(base), 1e-9), (err(got), err(base))


def test_mma_ring_pitch_makes_a_fragments_window_loads_conflict_free():
    """Why the ring's rows are 1088 + 16 bytes apart: the 32 lanes of a window load (rows g = 0..7 of a fragment,
    words t = 0..3) hit 32 different banks for every block of a slice, both words of the window; at the unpadded
    pitch 1088 (272 words, 16 mod 32) rows g and g + 2 share banks."""

    def banks(pitch: int, bl: int, second: int) -> set[int]:
        lead = ((bl & 3) + 1) & 3
        return {((g * pitch + 17 * bl + 1 - lead + 4 * t) // 4 + second) % 32 for g in range(8) for t in range(4)}

    assert MOD.MMA_PITCH == 17 * MOD.MMA_STEP_BLOCKS + 16 and "#define MPITCH (MSLICE + 16)" in FAM.source()
    for bl in range(MOD.MMA_STEP_BLOCKS):
        for second in (0, 1):
            assert len(banks(MOD.MMA_PITCH, bl, second)) == 32, bl
    assert all(len(banks(17 * MOD.MMA_STEP_BLOCKS, bl, 0)) < 32 for bl in range(MOD.MMA_STEP_BLOCKS))


def test_mma_emulation_catches_a_wrong_k_slot():
    """The emulator is not a restatement of the kernel: swapping two k slots of the A fragment breaks y."""
    n_in, n_out = 128, 16
    g, w, xs, ref = inputs(n_in, n_out, "float32", seed=3)
    gen = base_genome(expand="mma", qload="words_funnel", rows_per_block=16, warps=1, row_groups=1, unroll=1)
    real = byte_perm
    try:
        globals()["byte_perm"] = lambda a, b, s: real(a, b, 0x0424 if s == 0x2404 else s)  # halves swapped
        bad = emulate_mma(gen, w, xs, n_in, n_out)
    finally:
        globals()["byte_perm"] = real
    assert rel_err(bad, ref) > 1e-3


def test_mma_constraints():
    gen = base_genome(expand="mma", qload="words_funnel", rows_per_block=16, warps=1, row_groups=1, unroll=4)
    assert FAM.check(gen, REAL) is None
    assert "words_funnel" in FAM.check(gen.replace(qload="vec16"), REAL)
    assert "multiple of 16" in FAM.check(gen.replace(rows_per_block=8), REAL)
    assert "in flight" in FAM.check(gen.replace(rows_per_block=32), REAL)  # 2 tiles x unroll 4
    big = [Geometry("big", {"in": 8192, "out": 4096, "x_dtype": "float32"})]
    assert "shared memory" in FAM.check(gen, big)


# --- expand = mma, qload = tma: the bulk-copy ring, emulated lane by lane ---------------------------


def prmt(lo: int, hi: int, sel: int) -> int:
    """PTX prmt.b32 in its generic mode: byte n is byte (sel >> 4n) & 7 of {hi, lo}, or that byte's sign bit
    replicated when bit 3 of the nibble is set (what __byte_perm, and byte_perm above, leave out)."""
    src = (lo & M32) | ((hi & M32) << 32)
    out = 0
    for n in range(4):
        nib = (sel >> (4 * n)) & 15
        byte = (src >> (8 * (nib & 7))) & 255
        if nib & 8:
            byte = 255 if byte & 128 else 0
        out |= byte << (8 * n)
    return out


def s8(reg: int, i: int) -> int:
    v = (reg >> (8 * i)) & 255
    return v - 256 if v & 128 else v


def imma_emulated(a_regs, b_regs, c: int):
    """mma.m16n8k32 s8 x s8 -> s32 for one warp, every accumulator starting at c (PTX layout): A reg j of lane
    (g, t) holds row g (+ 8 for odd j), k = 4t..4t+3 (+ 16 for j >= 2); B reg j holds k = 4t..4t+3 (+ 16 for
    j = 1), column g; D element ci is row g (+ 8 for ci >= 2), column 2t + (ci & 1). Exact integers."""
    A = [[None] * 32 for _ in range(16)]
    B = [[None] * 8 for _ in range(32)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(4):
            for e in range(4):
                A[g + 8 * (j & 1)][4 * t + e + 16 * (j >> 1)] = s8(a_regs[lane][j], e)
        for j in range(2):
            for e in range(4):
                B[4 * t + e + 16 * j][g] = s8(b_regs[lane][j], e)
    return [
        [
            sum(A[(lane >> 2) + 8 * (ci >> 1)][k] * B[k][2 * (lane & 3) + (ci & 1)] for k in range(32)) + c
            for ci in range(4)
        ]
        for lane in range(32)
    ]


E2M1X2 = (0x03020100, 0x0C080604)  # 2 x E2M1 of the magnitudes 0..7, as int8
IMMA_BIAS = 0x4B400000  # 1.5 x 2^23 as fp32 bits


def stage_x_digits(xs: list[float], nblk: int):
    """qload = tma's x: X = rint(x * 2^k) with one k for the vector (max |X| in [2^26, 2^27)), in four signed
    base-128 digits from the top (put_x_digits: each a rint by adding 1.5 x 2^23, the remainders exact fp32).
    Returns (s_xd[(b * 4 + t) * 4 + column] = (b0, b1) int8x4 words, 2^(-k-1))."""
    mb = max(f32_bits(abs(v)) for v in xs)
    em = mb >> 23
    k = min(153 - em, 127)
    M = 12582912.0
    s_xd = [None] * (nblk * 16)
    for b in range(nblk):
        for t in range(4):
            # k slots 4t..4t+3: weights 4t, 4t+16, 4t+1, 4t+17; slots 16+4t..: 4t+2, 4t+18, 4t+3, 4t+19
            order = [4 * t, 4 * t + 16, 4 * t + 1, 4 * t + 17, 4 * t + 2, 4 * t + 18, 4 * t + 3, 4 * t + 19]
            cols = [[], [], [], []]
            for j in order:
                r = fmul32(xs[32 * b + j], math.ldexp(1.0, k))
                assert abs(r) < 2**27
                for c, sh in enumerate((21, 14, 7)):
                    tc = fma32(r, 2.0**-sh, M)
                    r = fma32(-fadd32(tc, -M), 2.0**sh, r)
                    cols[c].append(tc)
                cols[3].append(fadd32(r, M))
            X = 0
            for c in range(4):
                digits = [fadd32(v, -M) for v in cols[c]]
                assert all(-64 <= d <= 64 and d == int(d) for d in digits)
                col = [f32_bits(v) & 255 for v in cols[c]]
                assert [((v ^ 128) - 128) for v in col] == [int(d) for d in digits]  # the bits' low byte is the digit
                s_xd[(b * 4 + t) * 4 + c] = (
                    col[0] | col[1] << 8 | col[2] << 16 | col[3] << 24,
                    col[4] | col[5] << 8 | col[6] << 16 | col[7] << 24,
                )
            for e, j in enumerate(order):  # the digits are rint(x * 2^k), exactly
                X = sum(int(fadd32(cols[c][e], -M)) * 128 ** (3 - c) for c in range(4))
                v = fmul32(xs[32 * b + j], math.ldexp(1.0, k))
                assert X == round(v), (X, v)
    fx = float("nan") if em == 255 else math.ldexp(1.0, -k - 1)
    return s_xd, fx


def code_selectors(w0: int, w1: int, lead: int) -> tuple[int, int]:
    """kernel.cu code_selectors: the code word starting `lead` bytes into the aligned words w0, w1, as the
    selectors of its codes 0..3 (lo) and 4..7 (hi); only their low 16 bits are meant (prmt reads no more)."""
    if lead == 0:
        return w0, w0 >> 16
    if lead == 1:
        return funnel_rc(w0, w1, 8), funnel_rc(w0, w1, 24)
    if lead == 2:
        return w0 >> 16, w1
    return funnel_rc(w0, w1, 24), w1 >> 8


def imma_pair_lanes(sels, s_xd, b):
    """One pair of blocks (b, b + 1) of 8 rows for the 32 lanes (sels[lane][r]: the selectors of block b + r's
    code word of row g): A's rows 0..7 are block b, rows 8..15 block b + 1; B's column 2i is block b's digit i,
    column 2i + 1 block b + 1's. P and N by table permutes, two mma from the bias, and each lane's kept P - N
    entries as fp32 (exact): c0 (block b, digit t) and c3 (block b + 1, digit t)."""
    a_p, a_n, bregs = [], [], []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        P, N = [0] * 4, [0] * 4
        for r in range(2):
            lo, hi = sels[lane][r]
            P[r], P[2 + r] = prmt(*E2M1X2, lo), prmt(*E2M1X2, hi)
            N[r], N[2 + r] = prmt(*E2M1X2, lo ^ 0x8888), prmt(*E2M1X2, hi ^ 0x8888)
        a_p.append(P)
        a_n.append(N)
        bregs.append(s_xd[((b + (g & 1)) * 4 + t) * 4 + (g >> 1)])
    dp, dn = imma_emulated(a_p, bregs, IMMA_BIAS), imma_emulated(a_n, bregs, IMMA_BIAS)
    for lane in range(32):
        assert all(abs(v - IMMA_BIAS) < 2**22 for v in dp[lane] + dn[lane])  # the fp32 reading stays exact
    return [[fadd32(bits_to_f32(dp[lane][c]), -bits_to_f32(dn[lane][c])) for c in (0, 3)] for lane in range(32)]


def tma_tile_row_sums(chains):
    """The end of a 16-row tile in qload = tma: chains[lane][v][h][e] (block pair v of a group, row half h, kept
    entry e). Per row half, a lane sums its chains ((v0 e0 + v1 e0) + (v0 e1 + v1 e1)), times its digit's
    weight 128^(3 - t), and the quad adds its 4 lanes by two xor shuffles ((t0 + t1) + (t2 + t3)). Returns
    (row in the tile, sum) for rows g and g + 8."""

    def lane_sum(lane, h):
        ch = chains[lane]
        c = fadd32(fadd32(ch[0][h][0], ch[1][h][0]), fadd32(ch[0][h][1], ch[1][h][1]))
        return fmul32(c, 2.0 ** (7 * (3 - (lane & 3))))

    return [
        (
            (lane >> 2) + 8 * h,
            fadd32(
                fadd32(lane_sum(lane, h), lane_sum(lane + 1, h)), fadd32(lane_sum(lane + 2, h), lane_sum(lane + 3, h))
            ),
        )
        for h in range(2)
        for lane in range(0, 32, 4)
    ]


def tma_first_group(wp: int, item: int, W: int, kb: int, nstep: int) -> int:
    """kernel.cu tma_first_group: a tile's groups round-robin across its steps (group J = s * kb / 4 + jg to warp
    (J - tile) mod W), the start rotating with the tile."""
    tile, s = item // nstep, item % nstep
    return (wp + tile + s * (W - (kb // 4) % W)) % W


def emulate_mma_tma(
    genome, w: bytes, xs: list[float], n_in: int, n_out: int, grid: int, rotate: bool = True
) -> list[float]:
    """kernel.cu's qload = tma: persistent blocks, (tile, step) items copied row by row into ring stage
    item % (unroll + 1) at the family's pitch (bytes not copied for the item read as a failure), warps consumer
    warps per 16-row tile taking the step's 4-block groups round-robin from (warp + item) % warps, each group as 2
    block pairs of 8 rows x 2 blocks an mma for either row half (a chain per pair, row half and block of the pair),
    int8 mma sums (P - N) times the scale from the E8M0 table, and the tile's rows summed across warps in warp
    order, times 2^(-k-1) with one k for the whole x."""
    nblk, stride = n_in // 32, MOD.row_stride(n_in)
    W, R, U = genome["warps"], genome["rows_per_block"], genome["unroll"]
    kb, pitch, _ = MOD.tma_layout(genome, n_in)
    nstep, nstage, mt = (nblk + kb - 1) // kb, U + 1, R // 16
    s_xd, fx = stage_x_digits(xs, nblk)
    y = [None] * n_out
    ntiles = n_out // R
    for blk in range(grid):
        ring = bytearray([0xEE]) * (nstage * R * pitch)
        fresh = [set() for _ in range(nstage)]
        my_tiles = (ntiles - 1 - blk) // grid + 1 if blk < ntiles else 0
        new_acc = lambda: [[[0.0] * 2 for _ in range(2)] for _ in range(2)]  # noqa: E731
        acc = {(warp, lane): new_acc() for warp in range(W * mt) for lane in range(32)}
        for item in range(my_tiles * nstep):
            tile, s = blk + (item // nstep) * grid, item % nstep
            st = item % nstage
            nbytes = min(stride - s * kb * 17, stride if kb == nblk else kb * 17)
            assert nbytes % 16 == 0 and (s * kb * 17) % 16 == 0 and pitch % 16 == 0  # cp.async.bulk's alignment
            fresh[st] = set()
            for r in range(R):
                src = (tile * R + r) * stride + s * kb * 17
                dst = (st * R + r) * pitch
                ring[dst : dst + nbytes] = w[src : src + nbytes]
                fresh[st].update(range(dst, dst + nbytes))

            def word(off: int) -> int:
                assert all(o in fresh[st] for o in range(off, off + 4)), "read a byte not copied for this item"
                return int.from_bytes(ring[off : off + 4], "little")

            ng = min(nblk - s * kb, kb) // 4
            for warp in range(W * mt):
                ti, wp = warp // W, warp % W
                jg = tma_first_group(wp, item, W, kb, nstep) if rotate else wp
                while jg < ng:
                    for v in range(2):
                        b = s * kb + 4 * jg + 2 * v
                        for h in range(2):
                            sels, sbs = [], []
                            for lane in range(32):
                                g, t = lane >> 2, lane & 3
                                rp = (st * R + 16 * ti + 8 * h + g) * pitch
                                lane_sels = []
                                for r in range(2):
                                    u = 2 * v + r
                                    lead = (u + 1) & 3
                                    o = rp + 68 * jg + 17 * u + 1 - lead + 4 * t
                                    lane_sels.append(code_selectors(word(o), word(o + 4) if lead else 0, lead))
                                sels.append(lane_sels)
                                sbo = [rp + 68 * jg + 17 * (2 * v + r) for r in range(2)]
                                assert all(o in fresh[st] for o in sbo)
                                sbs.append([ring[o] for o in sbo])
                            for lane, d in enumerate(imma_pair_lanes(sels, s_xd, b)):
                                a = acc[(warp, lane)][v][h]
                                for e in range(2):
                                    a[e] = fma32(d[e], e8m0(sbs[lane][e]), a[e])
                    jg += W
            if s == nstep - 1:
                red = [[None] * R for _ in range(W)]
                for warp in range(W * mt):
                    ti, wp = warp // W, warp % W
                    for row, v in tma_tile_row_sums([acc[(warp, ln)] for ln in range(32)]):
                        red[wp][16 * ti + row] = v
                for row in range(R):
                    v = red[0][row]
                    for ww in range(1, W):
                        v = fadd32(v, red[ww][row])
                    y[tile * R + row] = fmul32(v, fx)
                for key in acc:
                    acc[key] = new_acc()
    return y


def test_tma_int8_weights_are_twice_e2m1_for_every_code_at_every_place():
    """P - N byte by byte is 2 x E2M1 of the code in selector order, for every code in every nibble."""
    for code in range(16):
        for pos in range(8):
            q = (code << (4 * pos)) | (0x1 << (4 * ((pos + 3) % 8)))  # another nibble set too: no cross-talk
            got = {}
            for half, sel in enumerate(code_selectors(q, 0, 0)):
                p = prmt(*E2M1X2, sel)
                n = prmt(*E2M1X2, sel ^ 0x8888)
                for e in range(4):
                    got[4 * half + e] = s8(p, e) - s8(n, e)
            assert got[pos] == 2 * spec_e2m1(code), (code, pos, got)


def test_tma_emulation_needs_prmts_sign_mode(monkeypatch):
    """With __byte_perm's selectors (bit 3 ignored) a negative code would count in P too: y shows it."""
    n_in, n_out = 256, 16
    g, w, xs, ref = inputs(n_in, n_out, "float32", seed=7)
    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=2, unroll=1)
    assert rel_err(emulate_mma_tma(gen, w, xs, n_in, n_out, 1), ref) < 1e-6
    monkeypatch.setattr(sys.modules[__name__], "prmt", byte_perm)
    assert rel_err(emulate_mma_tma(gen, w, xs, n_in, n_out, 1), ref) > 1e-2


TMA_CASES = [
    # (genome changes, in, out, x_dtype, grid): whole rows a step, the ring reused across 3 tiles of a block, bf16 x;
    # 16 consumer warps (2 tiles an item) and K in 2 steps (80 + 64 blocks); 5 stages, 2 steps of 80 blocks, 4 warps
    (dict(rows_per_block=16, warps=2, unroll=1), 256, 48, "bfloat16", 1),
    (dict(rows_per_block=32, warps=8, unroll=2), 4608, 32, "float32", 1),
    (dict(rows_per_block=16, warps=4, unroll=4), 5120, 32, "float32", 2),
]


@pytest.mark.parametrize("changes,n_in,n_out,x_dtype,grid", TMA_CASES)
def test_mma_tma_emulation_is_within_the_tolerance_of_the_reference(changes, n_in, n_out, x_dtype, grid):
    g, w, xs, ref = inputs(n_in, n_out, x_dtype, seed=5)
    gen = base_genome(expand="mma", qload="tma", row_groups=1, **changes)
    assert FAM.check(gen, [g]) is None, FAM.check(gen, [g])
    assert FAM.inexact_knobs(gen, g) == ["expand"]
    kb = MOD.tma_layout(gen, n_in)[0]
    assert kb < n_in // 32 or n_in == 256  # K in 2 steps, a short one last
    got = emulate_mma_tma(gen, w, xs, n_in, n_out, grid)
    base = emulate_direct(FAM.baseline().replace(rows_per_block=16, warps=1), w, xs, n_in, n_out)
    err = lambda y: rel_err(y, ref)  # noqa: E731
    assert err(got) <= 2 * max(err(base), 1e-9), (err(got), err(base))


def test_tma_warps_get_the_same_groups_a_tile_across_steps():
    """kernel.cu tma_first_group: a tile's 4-block groups go round-robin across its steps, so every consumer warp of
    a tile does the same number of groups (within one where the tile's count is not a multiple of warps), whatever
    the step sizes; the per-step round-robin of session 7 gave 8, 7 and 6 with 112 + 112 blocks and 8 warps."""
    for n_in in (4096, 4608, 5120, 7168, 16384):
        for W in (1, 2, 4, 8):
            for U in (1, 2, 4):
                for R in (16, 32):
                    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=R, warps=W, unroll=U)
                    kb = MOD.tma_layout(gen, n_in)[0]
                    if kb == 0:
                        continue
                    nblk = n_in // 32
                    nstep = -(-nblk // kb)
                    for tile in range(3):
                        count = [0] * W
                        for s in range(nstep):
                            ng = min(nblk - s * kb, kb) // 4
                            for wp in range(W):
                                jg = tma_first_group(wp, tile * nstep + s, W, kb, nstep)
                                count[wp] += len(range(jg, ng, W))
                        total = nblk // 4
                        assert sum(count) == total and max(count) - min(count) <= (0 if total % W == 0 else 1), (
                            n_in,
                            W,
                            U,
                            R,
                            kb,
                            count,
                        )


def test_tma_layout_steps_pitch_and_launch():
    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=8, unroll=2)
    # whole rows fit at 3 stages: 16 rows x (3808 + 16) B, the pitch 4 mod 8 words
    assert MOD.tma_layout(gen, 7168)[:2] == (224, 3824) and (3824 // 4) % 8 == 4
    kb, pitch, smem = MOD.tma_layout(gen.replace(rows_per_block=32), 7168)
    assert (kb, pitch) == (112, 1904) and (1904 // 4) % 8 == 4 and smem <= MOD.SMEM_OPTIN
    assert MOD.tma_layout(gen.replace(unroll=4), 7168)[:2] == (112, 1904)  # 5 stages: 2 even steps (144 fit)
    for g in REAL:
        kb, pitch, smem = MOD.tma_layout(gen, g["in"])
        assert kb % 16 == 0 or kb == g["in"] // 32
        # ring | x digits | 2 mbarriers a stage | 2 buffers of partials, 2 mbarriers each | maxima | E8M0 | E2M1
        assert smem == 3 * 16 * pitch + g["in"] // 32 * 128 + 16 * 3 + 2 * (8 * 16 * 4 + 16) + 4 * 8 + 1024 + 16
        assert smem <= MOD.SMEM_OPTIN
        la = FAM.launch(gen, g)
        assert la.block == (32 * 8 + 32, 1, 1) and la.shared_bytes == smem and la.grid[0] <= MOD.DEFAULT_SMS
    la = FAM.launch(gen.replace(rows_per_block=32), REAL[0])
    assert la.block == (32 * 16 + 32, 1, 1)  # warps consumer warps per 16-row tile, and the producer


def test_tma_bulk_copies_are_whole_16_byte_units_for_every_genome_and_in():
    """cp.async.bulk takes 16-byte multiples at 16-byte aligned addresses: every step's offset and size (the last
    step to the padded row's end), every ring row and the x digits behind the ring, for every tma genome the family
    accepts and every in from 128 to 16384."""
    checked = 0
    for n_in in range(128, 16385, 128):
        geo = [Geometry("g", {"in": n_in, "out": 4096, "x_dtype": "float32"})]
        nblk, stride = n_in // 32, MOD.row_stride(n_in)
        for rows, warps, unroll in itertools.product((16, 32), (1, 2, 4, 8), (1, 2, 4)):
            gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=rows, warps=warps, unroll=unroll)
            if FAM.check(gen, geo) is not None:
                continue
            kb, pitch, smem = MOD.tma_layout(gen, n_in)
            assert pitch % 16 == 0 and (unroll + 1) * rows * pitch % 16 == 0 and smem <= MOD.SMEM_OPTIN
            for s in range((nblk + kb - 1) // kb):
                off = s * kb * 17
                size = min(stride - off, stride if kb == nblk else kb * 17)
                assert off % 16 == 0 and size % 16 == 0 and 0 < size <= pitch, (n_in, rows, warps, unroll, s)
            checked += 1
    assert checked > 1000  # (most shapes fit)


def test_tma_banks_of_a_fragments_window_loads():
    """The 8 rows g of a fragment read words at the same offset: the pitch spreads them over 8 bank quads."""
    for n_in, rows, unroll in ((7168, 16, 2), (7168, 32, 2), (4096, 16, 1), (7168, 16, 4)):
        gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=rows, warps=8, unroll=unroll)
        kb, pitch, _ = MOD.tma_layout(gen, n_in)
        for jg in range(kb // 4):
            for u in range(4):
                lead = (u + 1) & 3
                banks = {
                    ((g * pitch + 68 * jg + 17 * u + 1 - lead + 4 * t) // 4) % 32 for g in range(8) for t in range(4)
                }
                assert len(banks) == 32, (n_in, rows, jg, u)


def test_tma_emulation_catches_overlapping_ring_rows(monkeypatch):
    """The emulator is not a restatement of the family's layout: a pitch 16 bytes short of a step's bytes makes
    each ring row's copy overwrite the previous row's tail, and y shows it."""
    n_in, n_out = 5120, 32  # 112 + 48 blocks, the pitch 1904 = 17 x 112 (no bank padding)
    g, w, xs, ref = inputs(n_in, n_out, "float32", seed=6)
    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=32, warps=8, unroll=2)
    real = MOD.tma_layout
    monkeypatch.setattr(MOD, "tma_layout", lambda gn, n: (real(gn, n)[0], real(gn, n)[1] - 16, real(gn, n)[2]))
    assert rel_err(emulate_mma_tma(gen, w, xs, n_in, n_out, 1), ref) > 1e-3


def test_tma_constraints():
    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=8, unroll=2)
    assert FAM.check(gen, REAL) is None
    assert "expand=mma only" in FAM.check(gen.replace(expand="f16"), REAL)
    assert "row_groups must be 1" in FAM.check(gen.replace(row_groups=2), REAL)
    assert "not 16 or 32" in FAM.check(gen.replace(rows_per_block=64), REAL)
    odd = [Geometry("odd", {"in": 4160, "out": 4096, "x_dtype": "float32"})]
    assert "multiple of 128" in FAM.check(gen, odd)
    huge = [Geometry("huge", {"in": 65536, "out": 4096, "x_dtype": "float32"})]
    assert "do not fit" in FAM.check(gen, huge)


def test_timeline_stamps_apply_to_the_committed_kernel_and_compile():
    """tools/probes/fp4_timeline.py's stamps (a device tool) find their anchors in kernel.cu and the stamped kernel
    builds: a change of the tma section that moves an anchor fails here, not on the GPU."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("evo_timeline_tool", root / "tools" / "probes" / "fp4_timeline.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    src = (root / "candidates" / "fp4_matvec" / "kernel.cu").read_text()
    stamped = tool.stamp(src)
    assert stamped.count("tl_clk()") == 11 and "__device__ u64 evo_tl[" in stamped  # every stamp in place
    assert "  if (threadIdx.x == 0) tl[15] = tl_clk();" in stamped  # the consumers past griddepcontrol.wait
    # every launch's span: its first start (the consumers' thread 0) and its last end (theirs and the producer's)
    assert stamped.count("atomicMin(&evo_tl_span[") == 1 and stamped.count("atomicMax(&evo_tl_span[") == 2
    gen = base_genome(expand="mma", qload="tma", row_groups=1, rows_per_block=16, warps=8, unroll=1)
    built = Builder(FAM, REAL, "sm_90").build(gen, base_source=stamped)
    assert all(m.resources.spills == 0 for m in built.modules.values())
    pdl = Builder(FAM, REAL, "sm_90", defines={"EVO_PDL": 1}).build(gen, base_source=stamped)  # timeline.py --pdl
    assert all(m.resources.spills == 0 for m in pdl.modules.values()) and pdl.sass_sha256 != built.sass_sha256
