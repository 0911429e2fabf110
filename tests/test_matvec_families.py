"""CPU checks of the moe_q2_matvec and fp4_matvec families (docs/families.md §3, §4).

The formats are checked against decoders written here from the spec, independently of the families'
own dequantizers; the kernels are compiled with NVRTC for sm_90 (no GPU needed) but not run.
"""

from __future__ import annotations

import ast
import itertools
import math
import random
import re
import sys

import pytest
import torch

from evo.config import load_config
from evo.core.family import CANDIDATES_DIR, Geometry, load_family
from evo.core.genome import Genome
from harness.build import Builder

NAMES = ("moe_q2_matvec", "fp4_matvec")


def fam_of(name):
    return load_family(name)


def module_of(name):
    return sys.modules[type(load_family(name)).__module__]


# Real geometries (compiles, space size) and small ones (CPU reference, inputs).
REAL = {
    "moe_q2_matvec": [
        Geometry("in7168_k4_E256", {"in": 7168, "out": 2048, "top_k": 4, "experts": 256}),
        Geometry("in4096_k6_E64", {"in": 4096, "out": 2048, "top_k": 6, "experts": 64}),
    ],
    "fp4_matvec": [
        Geometry("in7168_out18432", {"in": 7168, "out": 18432, "x_dtype": "float32"}),
        Geometry("in4096_out4096_bf16", {"in": 4096, "out": 4096, "x_dtype": "bfloat16"}),
    ],
}
SMALL = {
    "moe_q2_matvec": Geometry("small", {"in": 256, "out": 16, "top_k": 3, "experts": 5}),
    "fp4_matvec": Geometry("small", {"in": 96, "out": 12, "x_dtype": "float32"}),  # 51-byte rows, padded to 64
}


# --- loading and self-containment ---------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_family_loads_and_config_validates(name):
    fam = fam_of(name)
    assert fam.name == name
    src = fam.source()
    assert re.search(r'extern "C" __global__ void __launch_bounds__\([^)]*\)\s*' + fam.entry + r"\(", src)
    cfg = load_config(CANDIDATES_DIR.parent / "configs" / f"{name}.yaml")
    assert cfg.family.name == name and cfg.backend == "auto"
    assert fam.check(fam.baseline(), cfg.geometries) is None
    assert any(g.weight > 0 for g in cfg.geometries)
    for g in cfg.geometries:
        assert fam.bytes_moved(g) > 0
        lc = fam.launch(fam.baseline(), g)
        assert lc.block[0] % 32 == 0 and lc.grid[0] * fam.baseline()["rows_per_block"] == g["out"]
    assert len(fam.arg_types()) == 6 if name == "moe_q2_matvec" else len(fam.arg_types()) == 4


@pytest.mark.parametrize("name", NAMES)
def test_family_needs_nothing_outside_its_folder(name):
    folder = CANDIDATES_DIR / name
    files = {p.name for p in folder.iterdir() if p.name != "__pycache__"}
    assert files <= {"kernel.cu", "family.py", "recorded", "ideas"}, files
    assert "#include" not in (folder / "kernel.cu").read_text()
    tree = ast.parse((folder / "family.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            mods = [node.module]
        else:
            continue
        for m in mods:
            top = m.split(".")[0]
            assert top in ("evo", "torch", "__future__") or top in sys.stdlib_module_names, m


@pytest.mark.parametrize("name", NAMES)
def test_knob_space_size_and_exactness(name):
    fam = fam_of(name)
    geos = REAL[name]
    space = [
        Genome(dict(zip([k.name for k in fam.knobs], v))) for v in itertools.product(*(k.values for k in fam.knobs))
    ]
    valid = [g for g in space if fam.check(g, geos) is None]
    # moe_q2_matvec: 6048 genomes (codebooks registers_pairs / split / shared_replicated_prmt, 4 rows per warp),
    # 3528 valid here; fp4_matvec: 1586 valid (qload = cp_async up to 227 KiB of dynamic shared memory)
    limit = {"moe_q2_matvec": 3600}.get(name, 1700)
    assert 100 < len(valid) <= limit, len(valid)
    assert name != "moe_q2_matvec" or len(space) <= 6100, len(space)
    # every knob value is reachable in some valid genome
    for k in fam.knobs:
        assert {g[k.name] for g in valid} == set(k.values), k.name
    base = fam.baseline()
    g = geos[0]
    for k in fam.knobs:
        for v in k.values:
            inexact = fam.inexact_knobs(base.replace(**{k.name: v}), g)
            if k.name == "row_groups" and (v == 4 or (name == "moe_q2_matvec" and v != 1)):
                assert inexact == ["row_groups"], (k.name, v)
            elif name == "fp4_matvec" and (k.name, v) == ("expand", "mma"):  # tensor-core sums
                assert inexact == ["expand"], (k.name, v)
            else:
                assert inexact == [], (k.name, v)
    # invalid genomes say why
    why = fam.check(
        base.replace(rows_per_block=2, row_groups=1, **{"warps_per_block" if name == "moe_q2_matvec" else "warps": 8}),
        geos,
    )
    assert why and "rows_per_block" in why


# --- the MoE 2.5-bit format -----------------------------------------------------


def spec_fp8(byte: int) -> float:
    e, m = (byte >> 3) & 15, byte & 7
    return m * 2.0**-10 if e == 0 else (8 + m) * 2.0 ** (e - 11)


def spec_q2_block(b: bytes, cb) -> list[float]:
    """Decode one 10-byte block per docs/families.md §3, weight by weight."""
    out = []
    for idx in range(32):
        j, i = divmod(idx, 4)
        code = (b[j] >> (2 * i)) & 3
        scale = spec_fp8(b[8] if idx < 16 else b[9])
        out.append(scale * float(cb[code]))
    return out


def test_moe_fp8_scale_bytes():
    mod = module_of("moe_q2_matvec")
    allb = torch.arange(256, dtype=torch.int64)
    got = mod.fp8_decode(allb).tolist()
    assert got == [spec_fp8(b) for b in range(256)]
    assert got[0] == 0.0 and got[1] == 2.0**-10 and got[7] == 7 * 2.0**-10  # e = 0: subnormal m * 2^-10
    assert got[8] == 2.0**-7 and got[127] == 240.0 and got[0x40] == 1.0
    assert got[128:] == got[:128]  # bit 7 is not part of the format
    # encoding is the exact inverse on every non-zero byte, and rounds to nearest in between
    enc = mod.fp8_encode(mod.fp8_decode(torch.arange(1, 128))).tolist()
    assert enc == list(range(1, 128))
    vals = sorted({spec_fp8(b) for b in range(1, 128)})
    probe = torch.tensor([0.0, 1e-9, 0.00123, 0.0101, 0.77, 1.06, 3.3, 17.0, 239.0, 1e6], dtype=torch.float64)
    for v, b in zip(probe.tolist(), mod.fp8_encode(probe).tolist()):
        want = min(vals, key=lambda s: abs(s - min(max(v, 2.0**-10), 240.0)))
        assert spec_fp8(b) == want, (v, b)


def test_moe_hand_built_block_decodes_to_known_values():
    mod = module_of("moe_q2_matvec")
    cb = torch.tensor([-2.0, -0.5, 0.5, 2.0])
    # codes 0,1,2,3 in every byte; second block: byte j holds codes (j%4) replicated
    blk0 = bytes([0b11100100] * 8 + [(0 << 3) | 5, (9 << 3) | 3])  # scales 5*2^-10 (e = 0) and 11/4
    blk1 = bytes([0b01010101 * (j % 4) for j in range(8)] + [0x40, 0x7F])  # scales 1 and 240
    row = torch.tensor(list(blk0 + blk1), dtype=torch.uint8)[None]
    got = mod.dequantize(row, cb)[0].tolist()
    s0, s1 = 5 * 2.0**-10, 11 / 4
    want0 = [s0 * [-2.0, -0.5, 0.5, 2.0][i % 4] for i in range(16)] + [
        s1 * [-2.0, -0.5, 0.5, 2.0][i % 4] for i in range(16)
    ]
    want1 = [1.0 * float(cb[(i // 4) % 4]) for i in range(16)] + [
        240.0 * float(cb[(i // 4) % 4]) for i in range(16, 32)
    ]
    assert got[:32] == want0 == spec_q2_block(blk0, cb.tolist())
    assert got[32:] == want1 == spec_q2_block(blk1, cb.tolist())


def test_moe_quantizer_round_trip():
    mod = module_of("moe_q2_matvec")
    g = torch.Generator().manual_seed(5)
    wf = torch.randn((24, 512), generator=g) * 0.02
    wf[3] *= 2.0**-9  # a row of subnormal scales
    blocks, cb = mod.quantize(wf)
    assert blocks.dtype == torch.uint8 and blocks.shape == (24, 512 // 32 * 10)
    lv = cb.tolist()
    assert lv[0] == -lv[3] and lv[1] == -lv[2] and 0 < lv[2] < lv[3]  # {-outer, -inner, +inner, +outer}
    deq = mod.dequantize(blocks, cb)
    # the family's dequantizer equals the spec decoder, block by block
    raw = blocks.reshape(24, -1, 10)
    for r in (0, 3, 23):
        for b in range(raw.shape[1]):
            assert deq[r, 32 * b : 32 * b + 32].tolist() == spec_q2_block(bytes(raw[r, b].tolist()), lv)
    assert (raw[3, :, 8:] >> 3 == 0).any(), "expected subnormal scales on the scaled-down row"
    # nearest code under the block's scale
    s = mod.fp8_decode(raw[..., 8:]).repeat_interleave(16, -1).reshape(24, -1)  # [24, 512]
    cands = s[..., None] * torch.tensor(lv, dtype=torch.float64)
    best = (wf.double()[..., None] - cands).abs().min(-1).values
    assert torch.allclose((wf.double() - deq).abs(), best, rtol=1e-6, atol=1e-12)
    rel = ((deq - wf.double()).norm() / wf.double().norm()).item()
    assert rel < 0.4, rel  # 4 levels on a Gaussian: ~0.33


# --- MXFP4 ---------------------------------------------------------------------

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def spec_e2m1(code: int) -> float:
    v = E2M1[code & 7]
    return -v if code & 8 else v


def spec_mx_block(b: bytes) -> list[float]:
    scale = float("nan") if b[0] == 255 else 2.0 ** (b[0] - 127)
    out = [0.0] * 32
    for j in range(16):
        out[j] = spec_e2m1(b[1 + j] & 15) * scale
        out[j + 16] = spec_e2m1(b[1 + j] >> 4) * scale
    return out


def test_fp4_hand_built_blocks_decode_to_known_values():
    mod = module_of("fp4_matvec")
    qs = bytes([(j & 15) | ((15 - j) << 4) for j in range(16)])  # low nibble j, high nibble 15 - j
    blocks = [bytes([127]) + qs, bytes([130]) + qs, bytes([0]) + qs, bytes([255]) + qs]
    n_in = 32 * len(blocks)
    stride = mod.row_stride(n_in)
    assert stride == 80  # 68 bytes padded to 16
    row = list(b"".join(blocks)) + [0xFF] * (stride - 68)
    got = mod.dequantize(torch.tensor(row, dtype=torch.uint8)[None], n_in)[0].tolist()
    want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    assert got[:16] == want and got[16:32] == want[::-1]
    assert math.copysign(1.0, got[8]) == -1.0 and math.copysign(1.0, got[16 + 7]) == -1.0  # code 8 is -0
    assert got[32:64] == [8.0 * v for v in got[:32]]
    assert got[64:96] == [2.0**-127 * v for v in got[:32]] == spec_mx_block(blocks[2])  # e = 0
    assert all(math.isnan(v) for v in got[96:128])  # e = 255: NaN
    for i, blk in enumerate(blocks[:3]):
        assert got[32 * i : 32 * i + 32] == spec_mx_block(blk)


def test_fp4_quantizer_round_trip():
    mod = module_of("fp4_matvec")
    g = torch.Generator().manual_seed(7)
    # exactly representable: E2M1 values times 2^k, each block holding a +-6 (its amax)
    codes = torch.randint(0, 16, (4, 8, 32), generator=g)
    codes[..., 5] = torch.where(torch.rand(4, 8, generator=g) < 0.5, 7, 15)
    k = torch.randint(-20, 20, (4, 8, 1), generator=g).double()
    vals = torch.tensor([spec_e2m1(c) for c in range(16)], dtype=torch.float64)[codes] * torch.exp2(k)
    wf = vals.reshape(4, 256).float()
    q = mod.quantize(wf)
    assert q.shape == (4, mod.row_stride(256)) and q.dtype == torch.uint8
    deq = mod.dequantize(q, 256)
    assert torch.equal(deq, wf.double())
    raw = q[:, : 8 * 17].reshape(4, 8, 17)
    assert torch.equal(raw[..., 0].long(), (k[..., 0] + 127).long())
    # ties go to the even code, beyond 6 saturates, tiny negatives keep the sign
    t = torch.tensor([[6.0, 2.5, 0.25, 0.75, 5.0, 3.5, 1.25, 1.75, 7.9, -0.1, -5.5] + [0.0] * 21])
    d = mod.dequantize(mod.quantize(t), 32)[0].tolist()
    assert d[:10] == [6.0, 2.0, 0.0, 1.0, 4.0, 4.0, 1.0, 2.0, 6.0, -0.0] and d[10] == -6.0
    assert math.copysign(1.0, d[9]) == -1.0
    # random weights: spec decode equals the dequantizer, error within half a step (or saturation)
    wf = torch.randn((6, 96), generator=g) * 0.02
    q = mod.quantize(wf)
    assert q[:, 51:].eq(0xFF).all()  # 3 blocks = 51 bytes, padded with 0xFF to 64
    deq = mod.dequantize(q, 96)
    for r in range(6):
        for b in range(3):
            assert deq[r, 32 * b : 32 * b + 32].tolist() == spec_mx_block(bytes(q[r, 17 * b : 17 * b + 17].tolist()))
    scale = torch.exp2(q[:, :51].reshape(6, 3, 17)[..., 0].double() - 127).repeat_interleave(32, -1)
    u = wf.double().abs() / scale
    err = (deq - wf.double()).abs() / scale
    assert (err[u <= 6] <= 1.0).all()  # largest gap between E2M1 values is 2 (4 -> 6)
    assert (err[u > 6] == u[u > 6] - 6).all() and (u < 8).all()  # amax / scale < 8 saturates to 6


# --- references, inputs ------------------------------------------------------------


def test_moe_reference_equals_naive_dequantize_then_matmul():
    fam = fam_of("moe_q2_matvec")
    g = SMALL["moe_q2_matvec"]
    inp = fam.make_inputs(g, 0, "cpu")
    ref = fam.reference(inp, g)["y"]
    assert ref.shape == (3, 2, 16) and ref.dtype == torch.float64
    x = inp["x"].double().tolist()
    for k, e in enumerate(inp["ids"].tolist()):
        for m in range(2):
            cbl = inp["cb"][e, m].tolist()
            for r in range(16):
                raw = bytes(inp["w"][e, m, r].tolist())
                wrow = sum((spec_q2_block(raw[10 * b : 10 * b + 10], cbl) for b in range(8)), [])
                naive = math.fsum(a * b for a, b in zip(wrow, x))
                assert ref[k, m, r].item() == pytest.approx(naive, rel=1e-12, abs=1e-15)
    assert fam.reference(inp, g, torch.float32)["y"].dtype == torch.float32


@pytest.mark.parametrize("x_dtype", ["float32", "bfloat16"])
def test_fp4_reference_equals_naive_dequantize_then_matmul(x_dtype):
    fam = fam_of("fp4_matvec")
    g = Geometry("small", {**SMALL["fp4_matvec"].params, "x_dtype": x_dtype})
    inp = fam.make_inputs(g, 0, "cpu")
    assert inp["x"].dtype == getattr(torch, x_dtype)
    ref = fam.reference(inp, g)["y"]
    assert ref.shape == (12,) and ref.dtype == torch.float64
    x = inp["x"].double().tolist()
    for r in range(12):
        raw = bytes(inp["w"][r].tolist())
        wrow = sum((spec_mx_block(raw[17 * b : 17 * b + 17]) for b in range(3)), [])
        naive = math.fsum(a * b for a, b in zip(wrow, x))
        assert ref[r].item() == pytest.approx(naive, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_make_inputs_seeded_and_never_zero(name):
    fam = fam_of(name)
    g = SMALL[name]
    a, b, c = fam.make_inputs(g, 0, "cpu"), fam.make_inputs(g, 0, "cpu"), fam.make_inputs(g, 1, "cpu")
    assert a.keys() == b.keys() == c.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
        assert a[key].is_contiguous(), key
        assert bool((a[key] != 0).any()), f"{key} is all zeros"
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert not torch.equal(a["x"], c["x"])
    if name == "moe_q2_matvec":
        ids = a["ids"].tolist()
        assert len(set(ids)) == len(ids) == g["top_k"] and all(0 <= e < g["experts"] for e in ids)
        assert a["ids"].dtype == torch.int32 and a["cb"].dtype == torch.float32
        assert a["w"].shape == (g["experts"], 2, g["out"], g["in"] // 32 * 10)
    else:
        assert a["w"].shape == (g["out"], fam.row_stride(g["in"]))
    ref = fam.reference(a, g)
    for o in fam.outputs(g):
        assert tuple(ref[o.name].shape) == o.shape
        assert torch.isfinite(ref[o.name]).all()


def test_bytes_moved_counts_real_bytes():
    moe, fp4 = fam_of("moe_q2_matvec"), fam_of("fp4_matvec")
    g = REAL["moe_q2_matvec"][0]
    assert moe.bytes_moved(g) == 4 * 2 * 2048 * 224 * 10 + 4 * 2 * 16 + 7168 * 4 + 4 * 4 + 4 * 2 * 2048 * 4
    g = REAL["fp4_matvec"][0]
    assert fp4.bytes_moved(g) == 18432 * 224 * 17 + 7168 * 4 + 18432 * 4
    g = Geometry("x", {"in": 96, "out": 12, "x_dtype": "bfloat16"})
    assert fp4.bytes_moved(g) == 12 * 51 + 96 * 2 + 12 * 4  # padding is not counted


# --- NVRTC compiles (sm_90, no GPU) ------------------------------------------------


def _nearest_valid(fam, geos, knob, value, valid):
    """The baseline with knob=value, or the valid genome with that value closest to the baseline."""
    base = fam.baseline()
    g = base.replace(**{knob: value})
    if fam.check(g, geos) is None:
        return g
    cands = [v for v in valid if v[knob] == value]
    return min(cands, key=lambda v: (len(v.diff(base)), v.key))


@pytest.mark.parametrize("name", NAMES)
def test_baseline_and_sampled_genomes_compile(name):
    fam = fam_of(name)
    geos = REAL[name]
    base = fam.baseline()
    built = Builder(fam, geos, "sm_90").build(base)
    assert len(built.modules) == 2
    for key, mod in built.modules.items():
        r = mod.resources
        assert r.registers > 0 and r.spills == 0 and r.stack_frame == 0, (key, r)

    one = Builder(fam, geos[:1], "sm_90")
    space = [
        Genome(dict(zip([k.name for k in fam.knobs], v))) for v in itertools.product(*(k.values for k in fam.knobs))
    ]
    valid = [g for g in space if fam.check(g, geos) is None and g != base]
    sample = random.Random(2024).sample(valid, 15)
    covered = {(k.name, g[k.name]) for g in sample + [base] for k in fam.knobs}
    extra = []
    for k in fam.knobs:
        for v in k.values:
            if (k.name, v) not in covered:
                extra.append(_nearest_valid(fam, geos, k.name, v, valid))
                covered |= {(kk.name, extra[-1][kk.name]) for kk in fam.knobs}
    assert covered == {(k.name, v) for k in fam.knobs for v in k.values}
    for g in sample + extra:
        b = one.build(g)  # raises BuildError with the first error line
        for mod in b.modules.values():
            assert mod.resources.registers <= 255


@pytest.mark.parametrize("name", NAMES)
def test_faults_apply_and_still_compile(name):
    fam = fam_of(name)
    assert len(fam.faults) == 2
    b = Builder(fam, REAL[name][:1], "sm_90")
    clean = b.build(fam.baseline())
    for title in fam.faults:
        src = fam.faulty_source(title)
        assert src != fam.source()
        bad = b.build(fam.baseline(), src)  # the correctness gate, not the compiler, must catch it
        assert bad.sass_sha256 != clean.sass_sha256, title
