"""moe_q2_matvec: CPU emulation of the codebook values registers_pairs and split (no GPU here).

The emulator follows kernel.cu statement by statement: PTX prmt (with its sign-replicate bit) and
__byte_perm, mul.hi, the selector arithmetic, the nibble-pair table offsets, the scale-byte bit pattern
times 2^119, the three block-load widths with their funnel shifts, and fp32 fma / add with one rounding
(computed exactly with fractions). The new paths' outputs are compared bit for bit with the emulated
baseline fold (the spec's levels and scales) and with the family's float64 reference. The kernel text
is checked to still contain every expression emulated here, and every new value (with the 4-rows-per-warp
shapes the family now allows) is compiled with NVRTC for sm_90 with ptxas's report read.
"""

from __future__ import annotations

import itertools
import random
import struct
import sys
from fractions import Fraction

import pytest
import torch

from evo.core.family import Geometry, load_family
from gates.static import static_gate
from harness.build import Builder, Resources

FAM = load_family("moe_q2_matvec")
MOD = sys.modules[type(FAM).__module__]
M32 = 0xFFFFFFFF
NEW = ("registers_pairs", "split", "shared_replicated_prmt")


# --- fp32 arithmetic, as the GPU rounds it ------------------------------------------------------


def bits_to_f32(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u & M32))[0]


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def round_f32(x: Fraction) -> float:
    """The fp32 nearest to x (ties to even); an exact zero sum is +0 (round to nearest)."""
    if x == 0:
        return 0.0
    s = -1.0 if x < 0 else 1.0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = max(e - 23, -149)  # the quantum: 2^(e-23), 2^-149 for subnormals
    m = a / Fraction(2) ** q
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2):
        n += 1
    return s * float(Fraction(n) * Fraction(2) ** q)


def fma32(a: float, b: float, c: float) -> float:
    return round_f32(Fraction(a) * Fraction(b) + Fraction(c))


def add32(a: float, b: float) -> float:
    return round_f32(Fraction(a) + Fraction(b))


def mul32(a: float, b: float) -> float:
    return round_f32(Fraction(a) * Fraction(b))


def test_fp32_rounding_helpers():
    assert f32_bits(round_f32(Fraction(1) + Fraction(1, 2**24))) == f32_bits(1.0)  # tie to even
    assert f32_bits(round_f32(Fraction(1) + Fraction(3, 2**25))) == f32_bits(1.0) + 1
    assert round_f32(Fraction(1, 2**149)) == bits_to_f32(1)  # smallest subnormal
    assert round_f32(Fraction(1, 2**150)) == 0.0  # tie to even: 0
    g = torch.Generator().manual_seed(3)
    a, b = (
        torch.randn(3000, generator=g),
        torch.randn(3000, generator=g) * torch.exp2(torch.randint(-30, 30, (3000,), generator=g)),
    )
    for x, y, p, s in zip(a.tolist(), b.tolist(), (a * b).tolist(), (a + b).tolist()):  # IEEE fp32 on the CPU
        assert mul32(x, y) == p and add32(x, y) == s


# --- the instructions the new paths use ------------------------------------------------------


def prmt(a: int, b: int, s: int) -> int:
    """PTX prmt.b32 (default mode): byte i of d is byte s[4i+2:4i] of {b, a}, sign-replicated if s[4i+3]."""
    src = (a & M32) | ((b & M32) << 32)
    d = 0
    for i in range(4):
        nib = (s >> (4 * i)) & 15
        byte = (src >> (8 * (nib & 7))) & 0xFF
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        d |= byte << (8 * i)
    return d


def byte_perm(a: int, b: int, s: int) -> int:
    """CUDA __byte_perm: like prmt, but only the low 3 bits of each selector nibble count."""
    return prmt(a, b, s & 0x7777)


def umulhi(a: int, b: int) -> int:
    return ((a & M32) * (b & M32)) >> 32


def funnelshift_r(lo: int, hi: int, sh: int) -> int:
    return ((((hi & M32) << 32) | (lo & M32)) >> (sh & 31)) & M32


# --- kernel.cu, statement by statement ---------------------------------------------------------


def cb_regs(levels: list[int], lz: int = 0) -> dict[str, int]:
    """The setup: lo01 = __byte_perm(l0, l1, 0x5410) ^ lz, ..., hi23 = __byte_perm(l2, l3, 0x7632) ^ lz."""
    l0, l1, l2, l3 = levels
    return {
        "lo01": byte_perm(l0, l1, 0x5410) ^ lz,
        "lo23": byte_perm(l2, l3, 0x5410) ^ lz,
        "hi01": byte_perm(l0, l1, 0x7632) ^ lz,
        "hi23": byte_perm(l2, l3, 0x7632) ^ lz,
    }


def levels_pairs(word: int, cb: dict[str, int], selectors: list[int] | None = None) -> list[int]:
    """levels_pairs(): the 16 level bit patterns of a code word."""
    v = [None] * 16
    for q in range(4):
        wq = umulhi(word, (1 << ((32 - 2 * q) & 31)) & M32) if q else word
        sel = ((wq & 0x03030303) * 0x22 + 0x10101010) & M32
        for h in range(2):
            s = umulhi(sel, 0x10000) if h else sel
            if selectors is not None:
                selectors.append(s)
            lo = prmt(cb["lo01"], cb["lo23"], s)
            hi = prmt(cb["hi01"], cb["hi23"], s)
            v[q + 8 * h] = byte_perm(lo, hi, 0x5410)
            v[q + 8 * h + 4] = byte_perm(lo, hi, 0x7632)
    return v


def table_offsets(word: int) -> list[int]:
    """half_dot_table(): the byte offsets of the 8 nibble-pair entries."""
    return [((word * 8) & M32 if n == 0 else umulhi(word, 1 << ((35 - 4 * n) & 31))) & 0x78 for n in range(8)]


def prmt_table_offsets(word: int) -> list[int]:
    """half_dot() with codebook shared_replicated_prmt: the byte offsets of the 8 nibble-pair entries."""
    ev, od = ((word << 3) & M32) & 0x78787878, (word >> 1) & 0x78787878
    return [byte_perm(od if n & 1 else ev, 0, 0x4440 + (n >> 1)) for n in range(8)]


def pair_table(levels: list[float]) -> list[tuple[float, float]]:
    """The shared_replicated table of one matrix: entry n = (cb[n & 3], cb[n >> 2])."""
    return [(levels[n & 3], levels[n >> 2]) for n in range(16)]


def fp8_scale_bits(at20: int) -> float:
    """fp8_scale_bits(): fp32 bits (at20 & 0x07F00000) times 2^119 (0x1p119f), one fp32 multiply."""
    assert bits_to_f32(0x7B000000) == 2.0**119
    return mul32(bits_to_f32(at20 & 0x07F00000), 2.0**119)


def load_block(row: bytes, b: int, width: int) -> tuple[int, int, int]:
    """load_block(): (lo, hi, sc) words of block b of a row, for load widths 2, 4 and 8."""
    a = 10 * b
    u16 = lambda o: row[o] | (row[o + 1] << 8)  # noqa: E731
    u32 = lambda o: int.from_bytes(row[o : o + 4], "little")  # noqa: E731
    if width == 2:
        h = [u16(a + 2 * i) for i in range(5)]
        return h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4]
    if width == 4:
        base, sh = a & ~3, (a & 2) * 8
        w0, w1, w2 = u32(base), u32(base + 4), u32(base + 8)
        return funnelshift_r(w0, w1, sh), funnelshift_r(w1, w2, sh), w2 >> sh
    base, sh, up = a & ~7, (a & 2) * 8, (a & 4) != 0
    v0x, v0y, v1x, v1y = u32(base), u32(base + 4), u32(base + 8), u32(base + 12)
    a0, a1, a2 = (v0y, v1x, v1y) if up else (v0x, v0y, v1x)
    return funnelshift_r(a0, a1, sh), funnelshift_r(a1, a2, sh), a2 >> sh


def spec_fp8(byte: int) -> float:
    e, m = (byte >> 3) & 15, byte & 7
    return m * 2.0**-10 if e == 0 else (8 + m) * 2.0 ** (e - 11)


def old_fp8_scale(byte: int) -> float:
    """The existing fp8_scale() (every other codebook value), for comparison."""
    e, m = (byte >> 3) & 15, byte & 7
    normal = bits_to_f32(((e + 119) << 23) | (m << 20))
    sub = mul32(float(m), 0.0009765625)
    return normal if e else sub


# --- the decode, exhaustively or nearly so -------------------------------------------------------


def test_kernel_still_contains_what_is_emulated():
    src = FAM.source()
    for snippet in [
        "const u32 wq = q ? __umulhi(word, 1u << ((32 - 2 * q) & 31)) : word;",
        "const u32 sel = (wq & 0x03030303u) * 0x22u + 0x10101010u;",
        "const u32 s = h ? __umulhi(sel, 0x10000u) : sel;",
        "const u32 lo = prmt_sel(cb.lo01, cb.lo23, s);",
        "const u32 hi = prmt_sel(cb.hi01, cb.hi23, s);",
        "v[q + 8 * h] = __uint_as_float(__byte_perm(lo, hi, 0x5410));",
        "v[q + 8 * h + 4] = __uint_as_float(__byte_perm(lo, hi, 0x7632));",
        'asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));',
        "const u32 off = (n == 0 ? word * 8u : __umulhi(word, 1u << ((35 - 4 * n) & 31))) & 0x78u;",
        'asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(__uint_as_float(at20 & 0x07F00000u)), "f"(0x1p119f));',
        "fp8_scale_bits(q.sc << 20)",
        "fp8_scale_bits(q.sc << 12)",
        "cbs[m].lo01 = __byte_perm(l0, l1, 0x5410) ^ lz;",
        "cbs[m].lo23 = __byte_perm(l2, l3, 0x5410) ^ lz;",
        "cbs[m].hi01 = __byte_perm(l0, l1, 0x7632) ^ lz;",
        "cbs[m].hi23 = __byte_perm(l2, l3, 0x7632) ^ lz;",
        "const u32 lz = (u32)lane & blockIdx.z;",
        "for (int j = 0; j < 16; ++j) p = __fmaf_rn(v[j], xv[j], p);",
        "p = __fmaf_rn(pr.x, xv[2 * n], p);",
        "p = __fmaf_rn(pr.y, xv[2 * n + 1], p);",
        "return __fmaf_rn(half_dot_table(q.lo, xv, cb.s), fp8_scale_bits(q.sc << 20), acc);",
        "return __fmaf_rn(half_dot_pairs(q.lo, xv, cb), fp8_scale_bits(q.sc << 20), acc);",
        "return __fmaf_rn(half_dot_pairs(q.hi, xv, cb), fp8_scale_bits(q.sc << 12), acc);",
        "acc[f] = fold_half(acc[f], q[f], h, xv, cbs[f & 1]);",
        "const float4 t = reinterpret_cast<const float4*>(xs)[8 * b + (k ^ (b & 7))];",
        "pr.x = cbe[4 * m + (n & 3)];",
        "pr.y = cbe[4 * m + (n >> 2)];",
        "const u32 ev = (word << 3) & 0x78787878u, od = (word >> 1) & 0x78787878u;",
        "const u32 off = __byte_perm(n & 1 ? od : ev, 0u, 0x4440u + (u32)(n >> 1));",
        "acc = __fmaf_rn(half_dot(q.lo, xv, cb), fp8_scale(q.sc & 255u), acc);",
        "acc = __fmaf_rn(half_dot(q.hi, xv + 16, cb), fp8_scale((q.sc >> 8) & 255u), acc);",
    ]:
        assert snippet in src, snippet
    # the grid is 2-D (blockIdx.z = 0, so lz = 0)
    g = FAM.launch(
        FAM.baseline().replace(codebook="split"), Geometry("g", {"in": 256, "out": 16, "top_k": 3, "experts": 5})
    )
    assert g.grid[2] == 1


def _levels_sets():
    rng = random.Random(11)
    sets = [[f32_bits(v) for v in (-0.75, -0.25, 0.25, 0.75)], [0x00000000, 0x80000000, 0x7F800000, 0xFFC00001]]
    sets += [[rng.getrandbits(32) for _ in range(4)] for _ in range(6)]  # any 4 bit patterns: a pure select
    return sets


def test_levels_pairs_selects_every_code_at_every_position():
    rng = random.Random(5)
    for levels in _levels_sets():
        cb = cb_regs(levels)
        words = [rng.getrandbits(32) for _ in range(3000)] + [0, M32, 0x55555555, 0xAAAAAAAA, 0xE4E4E4E4]
        for j in range(16):  # code c at position j, random elsewhere
            for c in range(4):
                for _ in range(8):
                    w = rng.getrandbits(32)
                    words.append((w & ~(3 << (2 * j))) | (c << (2 * j)))
        for w in words:
            sels: list[int] = []
            got = levels_pairs(w, cb, sels)
            assert got == [levels[(w >> (2 * j)) & 3] for j in range(16)], hex(w)
            # every selector nibble is 0..7: prmt (no mask) and __byte_perm agree on it
            assert all(((s >> (4 * i)) & 8) == 0 for s in sels for i in range(4))


def test_table_offsets_are_eight_times_each_nibble():
    rng = random.Random(6)
    words = [rng.getrandbits(32) for _ in range(5000)] + [0, M32]
    for n in range(8):
        for v in range(16):
            words.append((rng.getrandbits(32) & ~(15 << (4 * n))) | (v << (4 * n)))
    for w in words:
        assert table_offsets(w) == [8 * ((w >> (4 * n)) & 15) for n in range(8)], hex(w)
        assert prmt_table_offsets(w) == [8 * ((w >> (4 * n)) & 15) for n in range(8)], hex(w)
    tab = pair_table([-3.0, -1.0, 1.0, 3.0])
    for nib in range(16):  # the entry a nibble keys holds the levels of its two codes
        assert tab[nib] == ([-3.0, -1.0, 1.0, 3.0][nib & 3], [-3.0, -1.0, 1.0, 3.0][nib >> 2])


def test_scale_bits_equal_the_format_and_the_old_decode():
    rng = random.Random(7)
    for byte in range(256):
        want = spec_fp8(byte & 0x7F)
        assert old_fp8_scale(byte & 0x7F) == want
        for _ in range(6):
            sc = (rng.getrandbits(32) & ~0xFF) | byte  # scale 0 in bits 0..7, garbage above
            assert fp8_scale_bits((sc << 20) & M32) == want
            sc1 = (rng.getrandbits(32) & ~0xFF00) | (byte << 8)  # scale 1 in bits 8..15
            assert fp8_scale_bits((sc1 << 12) & M32) == want
    assert f32_bits(fp8_scale_bits(0)) == 0  # e = m = 0: +0, as before


def test_load_widths_read_the_same_block_words():
    rng = random.Random(8)
    nb = 16
    row = bytes(rng.getrandbits(8) for _ in range(10 * nb))
    for b in range(nb):
        blk = row[10 * b : 10 * b + 10]
        want = (int.from_bytes(blk[0:4], "little"), int.from_bytes(blk[4:8], "little"), blk[8] | (blk[9] << 8))
        for width in (2, 4, 8):
            lo, hi, sc = load_block(row, b, width)
            assert (lo, hi, sc & 0xFFFF) == want, (b, width)


# --- the whole fold, emulated -------------------------------------------------------------------


def _row_value(
    row: bytes, xs: list[float], levels_f: list[float], levels_u: list[int], codebook: str, width: int, nblk: int
) -> float:
    """One output element as the kernel computes it (row_groups = 1): 32 lanes, lane v takes blocks
    v, v+32, ... in order, each block half 0 then half 1, then the xor butterfly."""
    acc = [0.0] * 32
    if codebook == "baseline":
        for v in range(32):
            for b in range(v, nblk, 32):
                for hh in range(2):
                    p = 0.0
                    for j in range(16):
                        idx = 32 * b + 16 * hh + j
                        jj, i = divmod(16 * hh + j, 4)
                        code = (row[10 * b + jj] >> (2 * i)) & 3
                        p = fma32(levels_f[code], xs[idx], p)
                    acc[v] = fma32(p, spec_fp8(row[10 * b + 8 + hh]), acc[v])
    elif codebook == "shared_replicated_prmt":  # fold_block(): both halves from the table, fp8_scale()
        tab = pair_table(levels_f)
        for v in range(32):
            for b in range(v, nblk, 32):
                lo, hi, sc = load_block(row, b, width)
                for hh, word in enumerate((lo, hi)):
                    xv = xs[32 * b + 16 * hh : 32 * b + 16 * hh + 16]
                    p = 0.0
                    for n, off in enumerate(prmt_table_offsets(word)):
                        pr = tab[off // 8]
                        p = fma32(pr[0], xv[2 * n], p)
                        p = fma32(pr[1], xv[2 * n + 1], p)
                    acc[v] = fma32(p, old_fp8_scale((sc >> (8 * hh)) & 255), acc[v])
    else:
        cb = cb_regs(levels_u)
        tab = pair_table(levels_f)
        for v in range(32):
            for b in range(v, nblk, 32):
                lo, hi, sc = load_block(row, b, width)
                for hh in range(2):  # fold_half(h = 0), then fold_half(h = 1)
                    xv = xs[32 * b + 16 * hh : 32 * b + 16 * hh + 16]
                    word = lo if hh == 0 else hi
                    p = 0.0
                    if codebook == "split" and hh == 0:
                        for n, off in enumerate(table_offsets(word)):
                            pr = tab[off // 8]
                            p = fma32(pr[0], xv[2 * n], p)
                            p = fma32(pr[1], xv[2 * n + 1], p)
                    else:
                        vals = [bits_to_f32(u) for u in levels_pairs(word, cb)]
                        for j in range(16):
                            p = fma32(vals[j], xv[j], p)
                    s = fp8_scale_bits(((sc << 20) if hh == 0 else (sc << 12)) & M32)
                    acc[v] = fma32(p, s, acc[v])
    o = 16
    while o:
        acc = [add32(acc[ln], acc[ln ^ o]) for ln in range(32)]
        o >>= 1
    assert len({f32_bits(a) for a in acc}) == 1  # every lane holds the same sum
    return acc[0]


@pytest.mark.parametrize(
    "codebook,width",
    [
        ("registers_pairs", 2),
        ("registers_pairs", 4),
        ("registers_pairs", 8),
        ("split", 4),
        ("split", 8),
        ("shared_replicated_prmt", 2),
        ("shared_replicated_prmt", 4),
        ("shared_replicated_prmt", 8),
    ],
)
def test_new_paths_fold_bit_identical_to_baseline_and_close_to_float64(codebook, width):
    # in = 2048: 64 blocks per row, every virtual lane takes 2 (and the 8-byte loads reach a row's end)
    geo = Geometry("emu", {"in": 2048, "out": 2, "top_k": 2, "experts": 3})
    inp = FAM.make_inputs(geo, 0, "cpu")
    # scale bytes the quantizer rarely writes: e = 0 (subnormal m * 2^-10, m = 0 included) and bit 7 set
    g = torch.Generator().manual_seed(9)
    for e in inp["ids"].tolist():
        blk = inp["w"][e].view(2, geo["out"], -1, 10)
        pick = torch.rand(blk.shape[:3], generator=g) < 0.25
        sub = torch.randint(0, 8, blk.shape[:3], generator=g, dtype=torch.uint8)
        blk[..., 8] = torch.where(pick, sub, blk[..., 8])
        blk[..., 9] = torch.where(torch.rand(blk.shape[:3], generator=g) < 0.25, blk[..., 9] | 0x80, blk[..., 9])
    ref = FAM.reference(inp, geo)["y"]
    xs = inp["x"].tolist()
    nblk = geo["in"] // 32
    got, base = [], []
    for _k, e in enumerate(inp["ids"].tolist()):
        for m in range(2):
            levels_f = inp["cb"][e, m].tolist()
            levels_u = [f32_bits(v) for v in levels_f]
            for r in range(geo["out"]):
                row = bytes(inp["w"][e, m, r].tolist())
                base.append(_row_value(row, xs, levels_f, levels_u, "baseline", width, nblk))
                got.append(_row_value(row, xs, levels_f, levels_u, codebook, width, nblk))
    assert [f32_bits(v) for v in got] == [f32_bits(v) for v in base]
    g = torch.tensor(got, dtype=torch.float64).reshape(ref.shape)
    rel = ((g - ref).norm() / ref.norm()).item()
    assert rel < FAM.error_bound("y"), rel
    used = inp["w"][inp["ids"].long()].reshape(-1, 10)[:, 8:]
    assert ((used & 0x78) == 0).any() and (used >= 0x80).any()  # subnormal scales and bit 7 were exercised


# --- the knob space and the compiler -------------------------------------------------------------

REAL = [
    Geometry("in7168_k6_E256", {"in": 7168, "out": 2048, "top_k": 6, "experts": 256}),
    Geometry("in4096_k6_E64", {"in": 4096, "out": 2048, "top_k": 6, "experts": 64}),
]


def test_new_values_are_bit_preserving_and_four_rows_per_warp_is_allowed():
    base = FAM.baseline()
    for cbk in NEW:
        for lf in (False, True):
            g = base.replace(codebook=cbk, loads_first=lf)
            assert FAM.check(g, REAL) is None
            assert FAM.inexact_knobs(g, REAL[0]) == []
    assert FAM.check(base.replace(rows_per_block=16, warps_per_block=4), REAL) is None  # 4 rows per warp
    assert FAM.check(base.replace(rows_per_block=8, warps_per_block=2), REAL) is None
    why = FAM.check(base.replace(rows_per_block=16, warps_per_block=2), REAL)  # 8 rows per warp
    assert why and "rows per warp" in why
    assert FAM.inexact_knobs(
        base.replace(codebook="split", row_groups=2, warps_per_block=4, rows_per_block=8), REAL[0]
    ) == ["row_groups"]


def _shapes():
    """Every block shape (rows, warps, row groups) valid at the real geometries."""
    out = []
    for R, W, G in itertools.product(
        FAM.knob("rows_per_block").values, FAM.knob("warps_per_block").values, FAM.knob("row_groups").values
    ):
        g = FAM.baseline().replace(rows_per_block=R, warps_per_block=W, row_groups=G)
        if FAM.check(g, REAL) is None:
            out.append((R, W, G))
    return out


def test_new_values_compile_without_spills():
    """Each new codebook value at every block shape (in = 7168; the 4-rows-per-warp shapes at in = 4096 too),
    with every x staging, load width and loads_first reached across the set; ptxas: no stack frame, no
    spills, at most 255 registers."""
    b7, b4 = Builder(FAM, REAL[:1], "sm_90"), Builder(FAM, REAL[1:], "sm_90")
    shapes = _shapes()
    assert len(shapes) == 21
    xs = FAM.knob("x_staging").values
    widths = FAM.knob("load_width").values
    seen = set()
    for cbk in NEW:
        for i, (R, W, G) in enumerate(shapes):
            g = FAM.baseline().replace(
                codebook=cbk,
                rows_per_block=R,
                warps_per_block=W,
                row_groups=G,
                x_staging=xs[(i + len(cbk)) % len(xs)],
                load_width=widths[i % 3],
                loads_first=bool(i % 2),
            )
            seen |= {(k, g[k]) for k in ("x_staging", "load_width", "loads_first")}
            mods = list(b7.build(g).modules.values())
            if R // (W // G) == 4:
                mods += list(b4.build(g).modules.values())
            for mod in mods:
                r = mod.resources
                if (cbk, g["x_staging"], R, W, G) == ("shared_replicated_prmt", "smem", 8, 8, 2):
                    # ptxas (NVRTC 13) caps this one shape at 64 registers and spills 8 bytes; the static gate
                    # rejects it, with the reason, before it is ever run
                    v = static_gate({"s": r}, {"s": Resources()})
                    assert (r.spills and not v.ok and "spill" in v.reason) or r.spills == 0, (r, v)
                    continue
                assert r.stack_frame == 0 and r.spills == 0 and 0 < r.registers <= 255, (g.key, r)
    assert len(seen) == len(xs) + len(widths) + 2
