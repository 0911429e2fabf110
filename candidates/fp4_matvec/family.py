"""fp4_matvec: dense MXFP4 mat-vec, batch-1 decode (docs/families.md §4).

MXFP4 (OCP MX v1.0) blocks of 32 weights in 17 bytes:

* byte 0: E8M0 shared scale, 2^(e-127) (e = 0 is 2^-127; e = 255 is NaN and never written);
* bytes 1..16: E2M1 codes, weight j (0..15) in the low nibble of byte 1+j, weight j+16 in the high nibble.
  A code is sign (bit 3) and magnitude index (bits 0..2) into {0, 0.5, 1, 1.5, 2, 3, 4, 6}; code 8 is -0.

Layout: ``w`` [out, row_stride] uint8, row r's block b at byte r*row_stride + 17*b, with row_stride =
17*in/32 rounded up to a multiple of 16 so every row starts 16-byte aligned (the vector loads need it).
For in % 512 == 0 (4096, 7168) there is no padding; padding bytes, where present, are 0xFF (a scale read
from padding would be NaN). bytes_moved counts the real 17 bytes per block only.

``x`` [in] fp32 (or bf16, geometry x_dtype), output ``y`` [out] fp32, y[r] = sum_c W[r, c] x[c].

Quantizer: per block the shared exponent is floor(log2(amax)) - 2 (OCP: emax of E2M1 is 2), so
amax / scale lies in [4, 8) and values above 6 saturate to 6; each weight / scale (exact: a power of two)
rounds to the nearest E2M1 value, ties to the even code; negative values keep their sign (-0 included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec, SanitizerSuppression

BLOCK = 32
BLOCK_BYTES = 17
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
PAD_BYTE = 0xFF
SMEM_LIMIT = 48 * 1024  # static shared memory per block (the paths without dynamic shared memory)
SMEM_PER_SM = 228 * 1024  # H100 / H200: shared memory per SM (1 KiB of it reserved per resident block)
SMEM_OPTIN = 227 * 1024  # H100 / H200: most dynamic shared memory one block may ask for (the launch opts in)
THREADS_PER_SM = 2048
# qload = cp_async asks ptxas for as many resident blocks as leave each thread this many registers (what the
# expansions need at most without spilling, from the ptxas reports of the whole space: f16 95, prmt 96, tables 255)
MIN_REGS = {"f16": 80, "prmt": 96, "mma": 128}
MIN_REGS_TABLES = 128
DEFAULT_SMS = 132  # H200; the launch asks the device when torch sees one


def row_stride(n_in: int) -> int:
    """Bytes per row: 17 bytes per block, padded to 16-byte alignment."""
    return (n_in // BLOCK * BLOCK_BYTES + 15) // 16 * 16


def virtual_lanes(row_groups: int) -> int:
    """Virtual lanes of the fold: 64, or 128 with row_groups = 4 (kernel.cu, THE FOLD)."""
    return 128 if row_groups == 4 else 64


def cp_async_dynamic_smem(genome: Mapping[str, Any], n_in: int) -> int:
    """Dynamic shared memory of qload = cp_async (kernel.cu): x as fp32 and the ring of unroll + 1 stages."""
    R, G, U = genome["rows_per_block"], genome["row_groups"], genome["unroll"]
    return n_in * 4 + (U + 1) * R * BLOCK_BYTES * virtual_lanes(G)


def cp_async_smem(genome: Mapping[str, Any], n_in: int) -> int:
    """All shared memory of qload = cp_async: the dynamic part, the row-group partials and the table (static)."""
    R, G = genome["rows_per_block"], genome["row_groups"]
    static = (R * G * 4 if G > 1 else 0) + (64 if genome["expand"] == "lut_shared" else 0)
    return cp_async_dynamic_smem(genome, n_in) + static


def cp_async_blocks_per_sm(genome: Mapping[str, Any], n_in: int) -> int:
    """Resident blocks per SM that qload = cp_async is built for (__launch_bounds__ minimum) and launched with:
    what shared memory and the thread limit allow, capped so that ptxas keeps MIN_REGS registers a thread."""
    threads = 32 * genome["warps"]
    by_smem = SMEM_PER_SM // (cp_async_smem(genome, n_in) + 1024)
    regs = MIN_REGS.get(genome["expand"], MIN_REGS_TABLES)
    return max(1, min(by_smem, THREADS_PER_SM // threads, 32, 65536 // (threads * regs)))


# expand = mma with qload = cp_async (kernel.cu): slices of 64 blocks, each ring row at a pitch of 1088 + 16 bytes
MMA_STEP_BLOCKS = 64
MMA_PITCH = 17 * MMA_STEP_BLOCKS + 16


def mma_cp_async_smem(genome: Mapping[str, Any], n_in: int) -> int:
    """Dynamic shared memory of expand = mma with qload = cp_async: x as three f16 parts (192 B a block) and
    the blocks' factors (4 B), the ring of unroll + 1 stages, the row-group partials."""
    R, G, U = genome["rows_per_block"], genome["row_groups"], genome["unroll"]
    nblk = n_in // BLOCK
    return nblk * (192 + 4) + (U + 1) * R * MMA_PITCH + (G * R * 4 if G > 1 else 0)


def mma_cp_async_blocks_per_sm(genome: Mapping[str, Any], n_in: int) -> int:
    """Resident blocks per SM of expand = mma with qload = cp_async (launch bounds minimum and the persistent
    grid): what shared memory, the thread limit and MIN_REGS registers a thread allow."""
    threads = 32 * genome["warps"]
    by_smem = SMEM_PER_SM // (mma_cp_async_smem(genome, n_in) + 1024)
    return max(1, min(by_smem, THREADS_PER_SM // threads, 32, 65536 // (threads * MIN_REGS["mma"])))


# expand = mma with qload = tma (kernel.cu): one block a SM, warps consumers + 1 producer warp; the ring's items
# are (tile of rows_per_block rows, step of TKB blocks), TKB a multiple of 16 blocks (17 * TKB bytes: whole 16-byte
# copies): the whole row when unroll + 1 stages of it fit, else as few steps as fit, as even as 16 blocks allow


# resident blocks a SM the tma ring is sized for (a probe may set 2: git show c6520b9:tools/h200/tma_blocks_probe.py)
TMA_SM_BLOCKS = 1


def tma_pitch(row_bytes: int) -> int:
    """A ring row's pitch: 4 mod 8 words, so the 8 rows of a fragment fall on 8 different bank quads."""
    return row_bytes + (16 if (row_bytes // 4) % 8 == 0 else 0)


def tma_fixed_smem(genome: Mapping[str, Any], n_in: int) -> int:
    """qload = tma's shared memory besides the ring: x's int8 digits (128 B a block: 4 lanes x 4 columns x 8),
    2 mbarriers a stage, two buffers of per-warp partials with 2 mbarriers each, the warp maxima, the E8M0 table
    (256 floats) and a word of the E2M1 table (16 bytes)."""
    W, R, U = genome["warps"], genome["rows_per_block"], genome["unroll"]
    return n_in // BLOCK * 128 + 16 * (U + 1) + 2 * (W * R * 4 + 16) + 4 * W * (R // 16) + 1024 + 16


def tma_step_blocks(genome: Mapping[str, Any], n_in: int) -> int:
    """Blocks of K per ring item (0: not even 16 fit)."""
    nblk, R, S = n_in // BLOCK, genome["rows_per_block"], genome["unroll"] + 1
    budget = min(SMEM_OPTIN, SMEM_PER_SM // TMA_SM_BLOCKS - 1024)
    per_row = (budget - tma_fixed_smem(genome, n_in)) // (S * R)
    if tma_pitch(row_stride(n_in)) <= per_row:
        return nblk
    kb = 0
    while kb + 16 < nblk and tma_pitch(17 * (kb + 16)) <= per_row:
        kb += 16
    if kb == 0:
        return 0
    # as many steps as the largest fitting step needs, as even as 16-block units allow (144 + 80 -> 112 + 112):
    # the consumer warps share each step's groups, and an uneven last step leaves most of them idle
    nsteps = -(-nblk // kb)
    return -(-nblk // (16 * nsteps)) * 16


def tma_layout(genome: Mapping[str, Any], n_in: int) -> tuple[int, int, int]:
    """(blocks of K per item, ring row pitch, dynamic shared memory) of qload = tma."""
    kb = tma_step_blocks(genome, n_in)
    row_bytes = row_stride(n_in) if kb == n_in // BLOCK else 17 * kb
    pitch = tma_pitch(row_bytes)
    R, S = genome["rows_per_block"], genome["unroll"] + 1
    return kb, pitch, S * R * pitch + tma_fixed_smem(genome, n_in)


def sm_count() -> int:
    """SMs of the current CUDA device (torch), else DEFAULT_SMS."""
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    except Exception:  # no torch CUDA runtime here: the recorded H200's count
        pass
    return DEFAULT_SMS


# --- the format --------------------------------------------------------------


def quantize(wf):
    """Float weights [rows, in] -> MXFP4 rows uint8 [rows, row_stride(in)]."""
    import torch

    rows, n = wf.shape
    if n % BLOCK:
        raise ValueError(f"in={n} is not a multiple of {BLOCK}")
    nb = n // BLOCK
    w = wf.to(torch.float64).reshape(rows, nb, BLOCK)
    amax = w.abs().amax(-1)
    _, ex = torch.frexp(amax)  # amax = mant * 2^ex, mant in [0.5, 1): floor(log2 amax) = ex - 1
    e = (ex.to(torch.int64) - 1 - 2 + 127).clamp(0, 254)
    e = torch.where(amax > 0, e, torch.zeros_like(e))
    scale = torch.ldexp(torch.ones_like(amax), e - 127)
    u = w / scale[..., None]  # exact: the scale is a power of two
    mag = u.abs()
    # Round to nearest E2M1 magnitude, ties to the even code (midpoints 0.25, 0.75, ..., 5).
    idx = (
        (mag > 0.25).to(torch.int64)
        + (mag >= 0.75)
        + (mag > 1.25)
        + (mag >= 1.75)
        + (mag > 2.5)
        + (mag >= 3.5)
        + (mag > 5.0)
    )
    codes = idx | ((u < 0).to(torch.int64) << 3)
    q = codes[..., :16] | (codes[..., 16:] << 4)
    blocks = torch.cat([e[..., None], q], dim=-1).to(torch.uint8).reshape(rows, nb * BLOCK_BYTES)
    stride = row_stride(n)
    out = torch.full((rows, stride), PAD_BYTE, dtype=torch.uint8, device=wf.device)
    out[:, : nb * BLOCK_BYTES] = blocks
    return out


def dequantize(rows_u8, n_in: int):
    """MXFP4 rows uint8 [rows, row_stride] -> float64 weights [rows, n_in] (exact)."""
    import torch

    rows = rows_u8.shape[0]
    nb = n_in // BLOCK
    bl = rows_u8[:, : nb * BLOCK_BYTES].reshape(rows, nb, BLOCK_BYTES).to(torch.int64)
    e = bl[..., 0]
    q = bl[..., 1:]
    codes = torch.cat([q & 15, q >> 4], dim=-1)  # weights 0..15 low nibbles, 16..31 high nibbles
    grid = torch.tensor(E2M1, dtype=torch.float64, device=rows_u8.device)
    val = grid[codes & 7]
    val = torch.where((codes & 8) != 0, -val, val)
    scale = torch.ldexp(torch.ones_like(e, dtype=torch.float64), e - 127)
    scale = torch.where(e == 255, torch.full_like(scale, float("nan")), scale)
    return (val * scale[..., None]).reshape(rows, n_in)


# --- the family --------------------------------------------------------------


class Fp4Matvec(Family):
    quantize = staticmethod(quantize)
    dequantize = staticmethod(dequantize)
    row_stride = staticmethod(row_stride)

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec("y", "float32", (geometry["out"],))]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["in"] % BLOCK:
            return f"in={params['in']} must be a multiple of {BLOCK} (whole MXFP4 blocks)"
        return None

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        W, R, G, U = genome["warps"], genome["rows_per_block"], genome["row_groups"], genome["unroll"]
        if W % G:
            return f"warps={W} is not a multiple of row_groups={G} (each row group is whole warps)"
        wpg = W // G
        if R % wpg:
            return f"rows_per_block={R} is not a multiple of the {wpg} warps of a row group"
        for g in geometries:
            if g["out"] % R:
                return f"out={g['out']} at {g.name} is not a multiple of rows_per_block={R} (no partial blocks)"
        if genome["expand"] == "mma":
            return self._check_mma(genome, geometries)
        if genome["qload"] == "tma":
            return "qload=tma feeds the tensor-core fragments: expand=mma only"
        chains = 2 if G == 1 else 1
        if genome["qload"] == "cp_async":
            # The ring lives in shared memory: registers hold one step (rows per warp x chains blocks).
            if (R // wpg) * chains > 8:
                return (
                    f"{R // wpg} rows per warp x {chains} chains = {(R // wpg) * chains} blocks per lane and "
                    "step, over 8 (register budget)"
                )
            for g in geometries:
                smem = cp_async_smem(genome, g["in"])
                if smem > SMEM_OPTIN:
                    return (
                        f"qload=cp_async at {g.name}: x ({g['in'] * 4} B) + {U + 1} ring stages x {R} rows x "
                        f"{BLOCK_BYTES * virtual_lanes(G)} B = {smem} B of shared memory, over {SMEM_OPTIN}"
                    )
        else:
            inflight = (R // wpg) * chains * U
            if inflight > 8:
                return (
                    f"{R // wpg} rows per warp x {chains} chains x unroll {U} = {inflight} blocks in flight per "
                    "lane, over 8 (register budget)"
                )
        return None

    def _check_mma(self, genome: Mapping[str, Any], geometries) -> str | None:
        W, R, G, U = genome["warps"], genome["rows_per_block"], genome["row_groups"], genome["unroll"]
        wpg = W // G
        if genome["qload"] not in ("words_funnel", "cp_async", "tma"):
            return (
                "expand=mma reads each lane's 4 code bytes as one funnel-shifted window, from global memory "
                "(qload=words_funnel), a cp.async ring (qload=cp_async) or a bulk-copy ring (qload=tma)"
            )
        if genome["qload"] == "tma":
            return self._check_tma(genome, geometries)
        if R % (16 * wpg):
            return (
                f"expand=mma: rows_per_block={R} is not a multiple of 16 rows x the {wpg} warps of a row group "
                "(one mma tile is 16 rows)"
            )
        tiles = R // (16 * wpg)
        if genome["qload"] == "cp_async":
            # U is the ring's depth here; registers hold 4 chains x tiles accumulators
            if tiles > 2:
                return f"expand=mma, qload=cp_async: {tiles} tiles per warp, over 2 (4 chains x 4 fp32 each)"
            for g in geometries:
                if g["in"] % 128:
                    return (
                        f"expand=mma, qload=cp_async at {g.name}: in={g['in']} is not a multiple of 128 "
                        "(4-block groups)"
                    )
                smem = mma_cp_async_smem(genome, g["in"])
                if smem > SMEM_OPTIN:
                    return (
                        f"expand=mma, qload=cp_async at {g.name}: x parts ({g['in'] // BLOCK * 196} B) + {U + 1} "
                        f"ring stages x {R} rows x {MMA_PITCH} B = {smem} B of shared memory, over {SMEM_OPTIN}"
                    )
            return None
        if tiles * U > 4:
            return f"expand=mma: {tiles} tiles x unroll {U} = {tiles * U} windows in flight per row pair, over 4"
        for g in geometries:
            smem = g["in"] // BLOCK * (12 * 16 + 4) + (G * R * 4 if G > 1 else 0)
            if smem > SMEM_LIMIT:
                return (
                    f"expand=mma at {g.name}: x staged as 3 f16 parts ({g['in'] // BLOCK * 196} B) and the row-group "
                    f"partials take {smem} B of shared memory, over {SMEM_LIMIT}"
                )
        return None

    def _check_tma(self, genome: Mapping[str, Any], geometries) -> str | None:
        R, G = genome["rows_per_block"], genome["row_groups"]
        if G != 1:
            return "qload=tma: row_groups must be 1 (the consumer warps split each step's K between them)"
        if R not in (16, 32):
            return (
                f"qload=tma: rows_per_block={R}, not 16 or 32 (warps consumer warps per 16-row tile, at most 1024 "
                "threads a block)"
            )
        for g in geometries:
            if g["in"] % 128:
                return f"qload=tma at {g.name}: in={g['in']} is not a multiple of 128 (4-block groups)"
            if tma_step_blocks(genome, g["in"]) == 0:
                return (
                    f"qload=tma at {g.name}: {genome['unroll'] + 1} ring stages of {R} rows do not fit 16 blocks "
                    f"of K each beside x's digits and the rest ({tma_fixed_smem(genome, g['in'])} B) in {SMEM_OPTIN} B"
                )
        return None

    def inexact_knobs(self, genome: Mapping[str, Any], geometry: Geometry) -> list[str]:
        # row_groups 2 splits the baseline's two 32-lane chains between two warp groups: the same fold.
        # expand = f16 (weights * 2^-14 against x * 2^14: the same products) and qload = cp_async (the same
        # bytes through shared memory) keep it too (kernel.cu, top).
        # expand = mma sums on the tensor cores, in another order: not bit-preserving whatever the other knobs.
        if genome["expand"] == "mma":
            return ["expand"]
        return ["row_groups"] if genome["row_groups"] == 4 else []

    def defines(self, genome: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
        out = super().defines(genome, spec)
        if genome["qload"] == "tma":
            out["EVO_TMA_KB"], out["EVO_TMA_PITCH"], _ = tma_layout(genome, spec["in"])
            if TMA_SM_BLOCKS != 1:  # (the default leaves the source as the recorded sweep built it)
                out["EVO_TMA_MINB"] = TMA_SM_BLOCKS
        if genome["qload"] == "cp_async":  # only there: the other genomes' sources stay as they were
            out["EVO_MINB"] = (
                mma_cp_async_blocks_per_sm(genome, spec["in"])
                if genome["expand"] == "mma"
                else cp_async_blocks_per_sm(genome, spec["in"])
            )
        return out

    def specialization(self, geometry: Geometry) -> Mapping[str, Any]:
        return {"in": geometry["in"], "x_bf16": geometry["x_dtype"] == "bfloat16"}

    # --- inputs and the float64 reference --------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        O, n = geometry["out"], geometry["in"]
        g = torch.Generator(device=device).manual_seed(1000003 * seed + 31)
        row = torch.exp(0.5 * torch.randn((O, 1), generator=g, device=device))
        wf = torch.randn((O, n), generator=g, device=device) * 0.02 * row
        w = quantize(wf)
        x = torch.randn(n, generator=g, device=device).to(getattr(torch, geometry["x_dtype"]))
        return {"w": w, "x": x}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        y = dequantize(inputs["w"], geometry["in"]).to(dt) @ inputs["x"].to(dt)
        return {"y": y}

    def error_bound(self, output: str) -> float:
        return 1e-4

    # --- launching --------------------------------------------------------
    def pdl_safe(self, genome: Mapping[str, Any]) -> bool:
        return genome["qload"] == "tma"  # (kernel.cu: pdl_wait before x and y under EVO_PDL)

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        tiles = geometry["out"] // genome["rows_per_block"]
        block = (32 * genome["warps"], 1, 1)
        if genome["qload"] == "tma":  # persistent, one block a SM, a producer warp
            smem = tma_layout(genome, geometry["in"])[2]
            return Launch(
                (min(tiles, sm_count() * TMA_SM_BLOCKS), 1, 1),
                (32 * genome["warps"] * genome["rows_per_block"] // 16 + 32, 1, 1),
                smem,
            )
        if genome["qload"] == "cp_async" and genome["expand"] == "mma":  # persistent, dynamic shared memory
            n_in = geometry["in"]
            grid = min(tiles, sm_count() * mma_cp_async_blocks_per_sm(genome, n_in))
            return Launch((grid, 1, 1), block, mma_cp_async_smem(genome, n_in))
        if genome["qload"] == "cp_async":  # persistent: every SM's resident blocks, tiles round-robin
            n_in = geometry["in"]
            tiles = min(tiles, sm_count() * cp_async_blocks_per_sm(genome, n_in))
            return Launch((tiles, 1, 1), block, cp_async_dynamic_smem(genome, n_in))
        return Launch((tiles, 1, 1), block, 0)

    def arg_types(self) -> str:
        return "pppi"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        return [inputs["w"], inputs["x"], outputs["y"], geometry["out"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        O, n = geometry["out"], geometry["in"]
        xb = 2 if geometry["x_dtype"] == "bfloat16" else 4
        return O * (n // BLOCK) * BLOCK_BYTES + n * xb + O * 4

    def flops(self, geometry: Geometry) -> int:
        return 2 * geometry["out"] * geometry["in"]


FAMILY = Fp4Matvec(
    name="fp4_matvec",
    description="dense MXFP4 (E2M1 + E8M0 per 32) mat-vec, batch-1 decode",
    entry="fp4_matvec",
    knobs=(
        Knob(
            "expand",
            ("lut_global", "lut_constant", "lut_shared", "prmt", "f16", "mma"),
            "lut_global",
            doc="E2M1 code -> fp32: a 16-float table in global, constant or shared memory, table-free "
            "with byte permutes (__byte_perm builds the fp32 bits), or f16: shifts and masks build "
            "e2m1 * 2^-14 as f16 pairs, one cvt each, against x * 2^14 (bit-preserving for |x| < 2^114), "
            "or mma: the same f16 pairs straight into tensor-core mma (m16n8k16) against x split into three "
            "f16 parts per block of 32 (not bit-preserving: tolerance mode; with qload=words_funnel or "
            "cp_async; qload=tma takes int8 tensor cores instead)",
        ),
        Knob(
            "qload",
            ("bytes", "words_funnel", "vec16", "cp_async", "tma"),
            "bytes",
            doc="quant bytes: 17 byte loads, 5 aligned 32-bit words + __funnelshift_r, 2 aligned 16-byte "
            "vectors + a select barrel, or cp_async: persistent blocks, x staged once in shared memory, "
            "(tile, step) slices streamed by 16-byte cp.async through a ring of unroll + 1 stages, "
            "words read from shared memory (expand=mma: 64-block slices, rows padded to 1104 B, dynamic shared "
            "memory up to 227 KiB, unroll + 1 stages), or tma (expand=mma only): one block a SM whose "
            "producer warp streams (tile, step) items by bulk copies (cp.async.bulk, one a row) into an "
            "mbarrier ring of unroll + 1 stages as deep in K as fits, warps consumer warps; its tensor "
            "cores take int8 (m16n8k32): the weights 2 x e2m1 by byte-permute table lookups, x as four "
            "base-128 digits of one fixed-point integer for the vector",
        ),
        Knob(
            "row_groups",
            (1, 2, 4),
            1,
            exact=False,
            doc="warp groups per row splitting K, reduced through shared memory; 2 keeps the baseline fold "
            "(its two 32-lane chains), 4 is a different fold (not bit-preserving)",
        ),
        Knob(
            "rows_per_block",
            (1, 2, 4, 8, 16, 32, 64),
            4,
            doc="output rows per thread block (expand=mma: 16-row tiles, 16 x warps per row group at least)",
        ),
        Knob("warps", (1, 2, 4, 8), 4, doc="warps per thread block"),
        Knob(
            "unroll",
            (1, 2, 4),
            1,
            doc="fold steps whose quant loads are all issued before any arithmetic "
            "(qload=cp_async: slices in flight, the ring has unroll + 1 stages)",
        ),
    ),
    faults={
        "wrong shift: weight j+16 read from the low nibble": ("(8 * (j & 3) + 4)) & 15u)", "(8 * (j & 3))) & 15u)"),
        "E8M0 scale read as 2^(e-126)": ("__uint_as_float(sb << 23)", "__uint_as_float((sb + 1u) << 23)"),
    },
    geometry_params=(
        GeometryParam("in", int, None, min=32, max=65536, doc="input features (4096 or 7168), multiple of 32"),
        GeometryParam("out", int, None, min=1, max=1 << 20, doc="output rows (4096, 7168 or 18432)"),
        GeometryParam("x_dtype", str, "float32", choices=("float32", "bfloat16"), doc="activation dtype"),
    ),
    sanitizer_suppressions=(
        SanitizerSuppression(
            name="tma-stage-release-after-syncwarp",
            tool="racecheck",
            kernel="fp4_matvec",
            # the offset moves with the genome (0x7500 in the H200 champion #75 of 2026-12-02, 0x76f0 in the probe)
            pattern=r"Race reported between Write access at fp4_matvec\+0x[0-9a-f]+",
            when={"qload": "tma"},
            argument=(
                "qload=tma: a consumer warp's lanes finish reading a ring stage, __syncwarp() orders them, and one "
                "lane then releases the stage (a one-lane mbarrier arrive) for its next write. racecheck does not "
                "model __syncwarp as ordering the other lanes' reads before that one-lane arrive, so it reports the "
                "stage's next write against those reads (a WAR hazard on stage reuse); docs/fp4-bandwidth.md, "
                "benchmarks/results/2026-12-01-fp4-matvec-pdl-vs-plain-probe/racecheck-tma.txt. Every lane arriving "
                "silences it and cost 0.996x (2026-12-01 session 10, probe a1). Push back here: the pattern matches "
                "any write-read race report in fp4_matvec under qload=tma, so a real new race there would be "
                "hidden too; read the racecheck report of the step before accepting it."
            ),
        ),
    ),
)
