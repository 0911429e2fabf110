"""moe_q2_matvec: 2-bit codebook MoE expert gate/up mat-vec, batch-1 decode (docs/families.md §3).

The 2.5-bit block format (32 weights in 10 bytes):

* bytes 0..7: 2-bit codes, weight 4j+i in bits 2i..2i+1 of byte j;
* byte 8: scale of weights 0..15, byte 9: scale of weights 16..31. A scale byte is an 8-bit float with
  4 exponent bits e (bits 3..6) and 3 mantissa bits m (bits 0..2): (8+m)*2^(e-11), and m*2^-10 when
  e = 0. Bit 7 is not part of the format: the quantizer writes 0 and the kernel and dequantizer ignore it.
  There are no infinities or NaNs (e = 15, m = 7 is 240).
* Each (expert, matrix) has a 4-entry fp32 codebook {-outer, -inner, +inner, +outer}: weight =
  scale * codebook[code].

Tensors: ``w`` [experts, 2 (gate, up), out, in/32*10] uint8, ``cb`` [experts, 2, 4] fp32, ``x`` [in]
fp32, ``ids`` [top_k] int32 (distinct). Output ``y`` [top_k, 2, out] fp32,
y[k, m, r] = sum_c W[ids[k], m][r, c] * x[c]. Rows are 10*in/32 bytes; with in % 128 == 0 every row
starts 8-byte aligned (16-byte aligned when in % 256 == 0).

Only the selected experts' weights are quantized from float weights; the other experts' bytes are
random (they are allocated, so expert strides are real, but never read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

BLOCK = 32  # weights per block
BLOCK_BYTES = 10
FP8_MAX = 240.0
FP8_MIN = 2.0**-10  # smallest non-zero scale (e = 0, m = 1)
STATIC_SMEM = 48 * 1024


# --- the format: scales, quantizer, dequantizer -------------------------------


def fp8_decode(byte):
    """Scale bytes (any integer tensor) -> float64 values, exactly as the format defines them."""
    import torch

    b = byte.to(torch.int64)
    e, m = (b >> 3) & 15, b & 7
    normal = (m + 8).to(torch.float64) * torch.exp2((e - 11).to(torch.float64))
    sub = m.to(torch.float64) * 2.0**-10
    return torch.where(e == 0, sub, normal)


def fp8_encode(v):
    """Positive values -> the nearest scale byte (ties to even mantissa), clamped to [2^-10, 240]."""
    import torch

    v = v.to(torch.float64).clamp(FP8_MIN, FP8_MAX)
    mant, ex = torch.frexp(v)  # v = mant * 2^ex, mant in [0.5, 1)
    big = ex.to(torch.int64) - 1  # v = (2 mant) * 2^big, 2 mant in [1, 2)
    m = torch.round((2.0 * mant - 1.0) * 8.0).to(torch.int64)
    carry = m >= 8
    m = torch.where(carry, torch.zeros_like(m), m)
    e = big + carry.to(torch.int64) + 8
    over = e > 15
    e = torch.where(over, torch.full_like(e, 15), e)
    m = torch.where(over, torch.full_like(m, 7), m)
    # e < 1: subnormal, m * 2^-10 with m in 1..8 (8 is e = 1, m = 0).
    ms = torch.round(v * 1024.0).clamp(1, 8).to(torch.int64)
    sub = e < 1
    e = torch.where(sub, (ms >= 8).to(torch.int64), e)
    m = torch.where(sub, torch.where(ms >= 8, torch.zeros_like(ms), ms), m)
    return ((e << 3) | m).to(torch.uint8)


def quantize(wf):
    """Float weights [rows, in] -> (blocks uint8 [rows, in/32*10], codebook fp32 [4]).

    Per half-block the scale is the half's absolute maximum divided by a matrix-wide unit (the median of
    those maxima, which the codebook carries), rounded to the nearest 8-bit scale. The codebook levels
    are a symmetric 4-level Lloyd-Max quantizer of the normalized magnitudes (start at the median, 12
    iterations). Each weight takes the code whose dequantized value is nearest.
    """
    import torch

    rows, n = wf.shape
    if n % BLOCK:
        raise ValueError(f"in={n} is not a multiple of {BLOCK}")
    nb = n // BLOCK
    w = wf.to(torch.float32).reshape(rows, nb, 2, 16)
    amax = w.abs().amax(-1)  # [rows, nb, 2]
    unit = amax.median().clamp_min(1e-30)
    sbyte = fp8_encode(amax / unit)
    s = fp8_decode(sbyte).to(torch.float32)
    u = (w / (s * unit)[..., None]).abs()
    t = u.median()
    inner = outer = t
    for _ in range(12):
        lo = (u < t).to(torch.float32)
        inner = (u * lo).sum() / lo.sum().clamp_min(1.0)
        outer = (u * (1.0 - lo)).sum() / (1.0 - lo).sum().clamp_min(1.0)
        t = 0.5 * (inner + outer)
    cb = (torch.stack([-outer, -inner, inner, outer]) * unit).to(torch.float32)
    cand = s.to(torch.float64)[..., None, None] * cb.to(torch.float64)  # [rows, nb, 2, 1, 4]
    codes = (w.to(torch.float64)[..., None] - cand).abs().argmin(-1)  # [rows, nb, 2, 16]
    c = codes.reshape(rows, nb, 8, 4).to(torch.int64)
    qbytes = c[..., 0] | (c[..., 1] << 2) | (c[..., 2] << 4) | (c[..., 3] << 6)
    blocks = torch.cat([qbytes.to(torch.uint8), sbyte.reshape(rows, nb, 2)], dim=-1)
    return blocks.reshape(rows, nb * BLOCK_BYTES).contiguous(), cb


def dequantize(blocks, cb):
    """Blocks uint8 [rows, in/32*10] and codebook [4] -> float64 weights [rows, in] (exact)."""
    import torch

    rows, nbytes = blocks.shape
    nb = nbytes // BLOCK_BYTES
    bl = blocks.reshape(rows, nb, BLOCK_BYTES).to(torch.int64)
    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.int64, device=blocks.device)
    codes = ((bl[..., :8, None] >> shifts) & 3).reshape(rows, nb, 2, 16)  # weight 4j+i: bits 2i of byte j
    s = fp8_decode(bl[..., 8:10])  # [rows, nb, 2]
    lv = cb.to(device=blocks.device, dtype=torch.float64)[codes]
    return (lv * s[..., None]).reshape(rows, nb * BLOCK)


# --- the family --------------------------------------------------------------


class MoeQ2Matvec(Family):
    # The format, for tests and tools.
    quantize = staticmethod(quantize)
    dequantize = staticmethod(dequantize)
    fp8_encode = staticmethod(fp8_encode)
    fp8_decode = staticmethod(fp8_decode)

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec("y", "float32", (geometry["top_k"], 2, geometry["out"]))]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["in"] % 128:
            return f"in={params['in']} must be a multiple of 128 (aligned block loads stay inside a row)"
        if params["top_k"] > params["experts"]:
            return f"top_k={params['top_k']} distinct experts cannot be drawn from experts={params['experts']}"
        return None

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        W, R, G = genome["warps_per_block"], genome["rows_per_block"], genome["row_groups"]
        if W % G:
            return f"warps_per_block={W} is not a multiple of row_groups={G} (each row group is whole warps)"
        wpg = W // G
        if R % wpg or R // wpg not in (1, 2, 4):
            return (
                f"rows_per_block={R} over {wpg} warps per row group is not 1, 2 or 4 rows per warp "
                "(a warp keeps gate and up of 1, 2 or 4 rows in flight)"
            )
        for g in geometries:
            if g["out"] % R:
                return f"out={g['out']} at {g.name} is not a multiple of rows_per_block={R} (no partial blocks)"
            if genome["x_staging"] in ("smem", "smem_swizzle") and g["in"] * 4 + 1024 > STATIC_SMEM:
                return (
                    f"x_staging={genome['x_staging']} stages in={g['in']} floats ({g['in'] * 4} B) at {g.name}, "
                    f"over the {STATIC_SMEM} B of static shared memory"
                )
        return None

    def specialization(self, geometry: Geometry) -> Mapping[str, Any]:
        return {"in": geometry["in"]}

    # --- inputs and the float64 reference --------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        E, K, O, n = geometry["experts"], geometry["top_k"], geometry["out"], geometry["in"]
        nb = n // BLOCK
        g = torch.Generator(device=device).manual_seed(1000003 * seed + 29)
        ids = torch.randperm(E, generator=g, device=device)[:K].to(torch.int32)
        x = torch.randn(n, generator=g, device=device, dtype=torch.float32)
        # Unselected experts: random bytes and a random symmetric codebook (allocated, never read).
        w = torch.randint(0, 256, (E, 2, O, nb * BLOCK_BYTES), generator=g, device=device, dtype=torch.uint8)
        inner = torch.rand((E, 2, 1), generator=g, device=device) * 0.01 + 0.005
        outer = inner * (2.0 + torch.rand((E, 2, 1), generator=g, device=device))
        cb = torch.cat([-outer, -inner, inner, outer], dim=-1).contiguous()
        for e in ids.tolist():
            for m in range(2):
                # Gaussian weights with a per-row spread; ~3% of rows 2^-9 smaller (subnormal scales, e = 0).
                row = torch.exp(0.4 * torch.randn((O, 1), generator=g, device=device))
                tiny = torch.rand((O, 1), generator=g, device=device) < 1.0 / 32
                row = torch.where(tiny, row * 2.0**-9, row)
                wf = torch.randn((O, n), generator=g, device=device) * 0.02 * row
                blocks, levels = quantize(wf)
                w[e, m] = blocks
                cb[e, m] = levels
        return {"w": w, "cb": cb, "x": x, "ids": ids}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        x = inputs["x"].to(dt)
        ys = []
        for e in inputs["ids"].tolist():
            for m in range(2):
                ys.append(dequantize(inputs["w"][e, m], inputs["cb"][e, m]).to(dt) @ x)
        return {"y": torch.stack(ys).reshape(geometry["top_k"], 2, geometry["out"])}

    def error_bound(self, output: str) -> float:
        return 1e-4

    # --- launching --------------------------------------------------------
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        R = genome["rows_per_block"]
        return Launch((geometry["out"] // R, geometry["top_k"], 1), (32 * genome["warps_per_block"], 1, 1), 0)

    def arg_types(self) -> str:
        return "pppppi"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        return [inputs["w"], inputs["cb"], inputs["x"], inputs["ids"], outputs["y"], geometry["out"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        K, O, n = geometry["top_k"], geometry["out"], geometry["in"]
        weights = K * 2 * O * (n // BLOCK) * BLOCK_BYTES
        return weights + K * 2 * 4 * 4 + n * 4 + K * 4 + K * 2 * O * 4

    def flops(self, geometry: Geometry) -> int:
        return 2 * geometry["top_k"] * 2 * geometry["out"] * geometry["in"]


FAMILY = MoeQ2Matvec(
    name="moe_q2_matvec",
    description="2-bit codebook MoE expert gate/up mat-vec (2.5-bit blocks, fp8 half scales), batch-1 decode",
    entry="moe_q2_matvec",
    knobs=(
        Knob(
            "x_staging",
            ("per_fold", "per_block", "smem", "smem_swizzle"),
            "per_fold",
            doc="activations of a block: re-read from global for every fold (gate/up of each row), read once "
            "per block into registers, or staged whole in shared memory (coalesced) plain or XOR-swizzled "
            "so a warp's float4 reads hit distinct banks",
        ),
        Knob(
            "loads_first",
            (False, True),
            False,
            doc="issue the block loads of every fold of the warp before any FMA (with codebook registers_pairs "
            "or split: one iteration ahead, the first ones before the activations are staged)",
        ),
        Knob(
            "codebook",
            (
                "global",
                "shared",
                "shared_replicated",
                "shared_replicated_prmt",
                "registers",
                "registers_pairs",
                "split",
            ),
            "global",
            doc="level lookup: global table per weight, 4 floats in shared memory, a nibble-keyed pair table "
            "in shared memory (the levels replicated into 16 float2 entries: one 64-bit load per two "
            "weights, each entry on its own 2 banks), shared_replicated_prmt: that table with its offsets from two "
            "masked copies of the code word and one byte permute per pair (12 integer operations per 16 codes "
            "instead of 16), 4 registers selected with byte permutes (3 per "
            "weight), registers_pairs: the levels' 16-bit halves in 4 registers, two weights' levels from "
            "4 byte permutes whose selectors come from one multiply-add per 4 codes (no shared-memory "
            "reads), or split: weights 0..15 of each block from the pair table and 16..31 from the "
            "registers_pairs permutes, so shared-memory reads and integer work share the decode. "
            "registers_pairs and split also decode a scale byte as the fp32 bits (byte & 0x7f) << 20 "
            "times 2^119 (same values). All keep the fold: bit-identical",
        ),
        Knob("rows_per_block", (2, 4, 8, 16), 4, doc="output rows per thread block (each row: gate and up)"),
        Knob(
            "warps_per_block",
            (2, 4, 8),
            4,
            doc="warps per thread block (with rows_per_block: 1, 2 or 4 rows, i.e. 2, 4 or 8 folds, per warp)",
        ),
        Knob(
            "row_groups",
            (1, 2, 4),
            1,
            exact=False,
            doc="split K across this many warp groups, partial sums added through shared memory "
            "(a different fold: not bit-preserving)",
        ),
        Knob(
            "load_width",
            (2, 4, 8),
            2,
            doc="bytes per quant load: five 16-bit loads, three aligned 32-bit words + funnel shifts, or "
            "two aligned 64-bit loads + funnel shifts",
        ),
    ),
    faults={
        "wrong shift: weight 4j+i decoded from bits 2i+1..2i+2": (
            "return (word >> (2 * j)) & 3u;",
            "return (word >> (2 * j + 1)) & 3u;",
        ),
        "reduction misses lanes 16-31 (butterfly starts at offset 8)": (
            "for (int o = 16; o > 0; o >>= 1) v = __fadd_rn",
            "for (int o = 8; o > 0; o >>= 1) v = __fadd_rn",
        ),
    },
    geometry_params=(
        GeometryParam("in", int, None, min=128, max=65536, doc="input features (4096 or 7168), multiple of 128"),
        GeometryParam("out", int, 2048, min=1, max=1 << 20, doc="output rows per matrix"),
        GeometryParam("top_k", int, 4, min=1, max=16, doc="selected experts (4, 6 or 8)"),
        GeometryParam("experts", int, 256, min=1, max=1024, doc="experts allocated (64 or 256)"),
    ),
)
