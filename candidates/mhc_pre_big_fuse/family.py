"""mhc_pre_big_fuse: the post-GEMM part of the mHC pre step (docs/families.md §1).

Inputs per call: dot_mix [S, T, 24] fp32 (split partials of the GEMM), sqrsum
[S, T] fp32, residual [T, 4, H] bf16, scale [3], base [24]. Outputs: post_mix
[T, 4] fp32, comb_mix [T, 4, 4] fp32, layer_input [T, H] bf16. In prenorm mode
(S = 1) the kernel computes the square sum from the residual itself.

``DECODE_FAMILY`` (loaded through ../mhc_pre_decode/family.py as ``mhc_pre_decode``) is the same kernel with
the decode knobs added (DECODE_KNOBS): they target the latency-bound metadata path at T = 1..128. They are a family
of their own, not knobs of this one, because the recorded sweep (recorded/) covers this family's knob space; at
their defaults the kernel builds the same machine code as without them (tests/test_decode_knobs.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

HC = 4
MIX = 24
EPS = 1e-6
SINKHORN_REPEAT = 20
POST_MULT = 2.0


class MhcPreBigFuse(Family):
    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        T, H = geometry["T"], geometry["H"]
        return [
            OutputSpec("post_mix", "float32", (T, HC)),
            OutputSpec("comb_mix", "float32", (T, HC, HC)),
            OutputSpec("layer_input", "bfloat16", (T, H)),
        ]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["H"] % 64:
            return f"H={params['H']} must be a multiple of 64 (16-byte loads per h-split block)"
        if params["prenorm"] and params["S"] != 1:
            return "prenorm mode computes the square sum itself and takes S = 1 only"
        return None

    def check(self, genome: Mapping[str, Any], geometries) -> str | None:
        elems = genome["vec"] // 2
        for g in geometries:
            if (g["H"] // genome["h_split"]) % elems:
                return (
                    f"h_split={genome['h_split']} leaves H/h_split={g['H'] // genome['h_split']} at {g.name}, "
                    f"not a multiple of {elems} elements per {genome['vec']}-byte load"
                )
        return None

    def inexact_knobs(self, genome: Mapping[str, Any], geometry: Geometry) -> list[str]:
        out = []
        if genome["split_reduce"] != "serial" and geometry["S"] > 1:
            out.append("split_reduce")
        if genome.get("fast_math"):  # (a decode knob: absent from this family's genomes)
            out.append("fast_math")
        if geometry["prenorm"]:
            # The in-kernel square sum is partitioned by block size and load width.
            out += [k for k in ("block", "vec") if genome[k] != self.knob(k).default]
        return out

    def specialization(self, geometry: Geometry) -> Mapping[str, Any]:
        return {"S": geometry["S"], "prenorm": bool(geometry["prenorm"])}

    # --- inputs and the float64 reference --------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H, S = geometry["T"], geometry["H"], geometry["S"]
        g = torch.Generator(device=device).manual_seed(1000003 * seed + 17)
        residual = torch.randn((T, HC, H), generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)
        # Square sums consistent with the residual, cut into S positive partials.
        sq = residual.float().pow(2).sum(dim=(1, 2))
        cuts = torch.rand((S, T), generator=g, device=device) + 0.5
        sqrsum = (cuts / cuts.sum(0, keepdim=True) * sq).contiguous()
        dot_mix = torch.randn((S, T, MIX), generator=g, device=device) * (float(HC * H) ** 0.5 / S**0.5) * 0.5
        scale = torch.rand(3, generator=g, device=device) + 0.5
        base = torch.randn(MIX, generator=g, device=device) * 0.5
        return {
            "dot_mix": dot_mix.contiguous(),
            "sqrsum": sqrsum,
            "residual": residual.contiguous(),
            "scale": scale,
            "base": base,
        }

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        res = inputs["residual"].to(dt)
        T, _, H = res.shape
        y = inputs["dot_mix"].to(dt).sum(0)
        if geometry["prenorm"]:
            sq = res.pow(2).sum(dim=(1, 2))
        else:
            sq = inputs["sqrsum"].to(dt).sum(0)
        rstd = torch.rsqrt(sq / (HC * H) + EPS)[:, None]
        scale, base = inputs["scale"].to(dt), inputs["base"].to(dt)
        pre = torch.sigmoid(y[:, :HC] * rstd * scale[0] + base[:HC]) + EPS
        post = POST_MULT * torch.sigmoid(y[:, HC : 2 * HC] * rstd * scale[1] + base[HC : 2 * HC])
        c = (y[:, 2 * HC :] * rstd * scale[2] + base[2 * HC :]).view(T, HC, HC)
        c = torch.softmax(c, dim=-1) + EPS
        c = c / (c.sum(dim=-2, keepdim=True) + EPS)
        for _ in range(SINKHORN_REPEAT - 1):
            c = c / (c.sum(dim=-1, keepdim=True) + EPS)
            c = c / (c.sum(dim=-2, keepdim=True) + EPS)
        layer = (pre[:, :, None] * res).sum(dim=1)
        return {"post_mix": post, "comb_mix": c, "layer_input": layer}

    def error_bound(self, output: str) -> float:
        return 1e-2 if output == "layer_input" else 1e-4

    def pdl_safe(self, genome: Mapping[str, Any]) -> bool:
        # pdl_overlap: griddepcontrol.wait before the first access of any input or output (kernel.cu, EVO_PDL)
        return bool(genome.get("pdl_overlap"))

    # --- launching --------------------------------------------------------
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        return Launch((geometry["T"] * genome["h_split"], 1, 1), (genome["block"], 1, 1), 0)

    def arg_types(self) -> str:
        return "ppppppppii"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        return [
            inputs["dot_mix"],
            inputs["sqrsum"],
            inputs["residual"],
            inputs["scale"],
            inputs["base"],
            outputs["post_mix"],
            outputs["comb_mix"],
            outputs["layer_input"],
            geometry["T"],
            geometry["H"],
        ]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H, S = geometry["T"], geometry["H"], geometry["S"]
        read = T * (HC * H * 2 + S * MIX * 4 + (0 if geometry["prenorm"] else S * 4)) + 3 * 4 + MIX * 4
        written = T * (H * 2 + HC * 4 + HC * HC * 4)
        return read + written

    def flops(self, geometry: Geometry) -> int:
        return geometry["T"] * geometry["H"] * 8


FAMILY = MhcPreBigFuse(
    name="mhc_pre_big_fuse",
    description="mHC pre big-fuse (post-GEMM): pre/post/comb mixes with Sinkhorn, and layer_input = pre . residual",
    entry="mhc_pre_big_fuse",
    knobs=(
        Knob("block", (128, 256, 512), 256, doc="threads per block"),
        Knob(
            "meta",
            ("array", "slice"),
            "array",
            doc="metadata as a 24-float array indexed by lane (local memory) or a per-lane register slice",
        ),
        Knob(
            "barrier",
            ("late", "early"),
            "late",
            doc="barrier after the whole Sinkhorn (late) or right after pre is published (early, overlap)",
        ),
        Knob(
            "split_reduce",
            ("serial", "warp"),
            "serial",
            exact=False,
            doc="split partials summed serially by each of 4 lanes, or spread across warp 0 (other order)",
        ),
        Knob("vec", (8, 16), 16, doc="bytes per residual load/store"),
        Knob("unroll", (1, 2, 4), 1, doc="vector positions per thread per loop trip, all loads issued first"),
        Knob("warp0_stream", (False, True), False, doc="warp 0 joins the residual stream after its metadata work"),
        Knob("h_split", (1, 2, 4, 8), 1, doc="blocks per token along H (small T needs more blocks)"),
    ),
    faults={
        "wrong index: residual row read one vector off": (
            "v[u][j] = *reinterpret_cast<const vec_t*>(res + (size_t)j * H + h);",
            "v[u][j] = *reinterpret_cast<const vec_t*>(res + (size_t)j * H + (h ^ VEC_ELEMS));",
        ),
        "missing barrier: streaming warps do not wait for pre": (
            "  __syncthreads();  // the portable form waits for the whole metadata\n",
            "\n",
        ),
        "compile error: a missing semicolon": (
            "  const int hc = H / EVO_H_SPLIT;",
            "  const int hc = H / EVO_H_SPLIT",
            "error: compile",
        ),
        "heavy spills: a 1 KiB local array indexed at run time": (
            "  const int hc = H / EVO_H_SPLIT;",
            "  float junk[256];\n  for (int i = 0; i < 256; ++i) junk[i] = (float)(i * T);\n"
            "  if (T < 0) layer_input[0] = (u16)junk[threadIdx.x & 255];\n  const int hc = H / EVO_H_SPLIT;",
            "rejected: static",
        ),
        "illegal address: layer_input written 1 TiB away": (
            "stream_layer_input(res, layer_input + (size_t)token * H,",
            "stream_layer_input(res, layer_input + (size_t)token * H + (1ull << 39),",
            "error: crash",
        ),
        "infinite loop: the block never finishes": (
            "  const int hc = H / EVO_H_SPLIT;",
            '  while (T > 0) { asm volatile(""); }\n  const int hc = H / EVO_H_SPLIT;',
            "error: timeout",
        ),
        "partial write: the last vector of every row is skipped": (
            "for (int hb = h0 + tid * VEC_ELEMS; hb < h1; hb += stride * EVO_UNROLL)",
            "for (int hb = h0 + tid * VEC_ELEMS; hb < h1 - VEC_ELEMS; hb += stride * EVO_UNROLL)",
        ),
        "out of bounds: one element written past the end of layer_input": (
            "      *reinterpret_cast<vec_t*>(out + h) = o;",
            "      *reinterpret_cast<vec_t*>(out + h) = o;\n"
            "      if (blockIdx.x == gridDim.x - 1 && h + VEC_ELEMS >= h1) out[h + VEC_ELEMS] = 0x3f80;",
        ),
        "NaN output: post_mix of lane 0 is NaN": (
            "        __fmul_rn(POST_MULT, sigmoidf_(affine(y_post, rstd, scale[1], base[HC + lane])));",
            "        __fmul_rn(lane == 0 ? __int_as_float(0x7fc00000) : POST_MULT,"
            " sigmoidf_(affine(y_post, rstd, scale[1], base[HC + lane])));",
        ),
        "stale result: the kernel skips its work after the first call with this T": (
            (
                'extern "C" __global__ void __launch_bounds__(EVO_BLOCK)',
                "  const int token = blockIdx.x / EVO_H_SPLIT;",
            ),
            (
                '__device__ int evo_calls_seen;\nextern "C" __global__ void __launch_bounds__(EVO_BLOCK)',
                "  __shared__ int s_skip;\n  if (threadIdx.x == 0) s_skip = evo_calls_seen == T;\n  __syncthreads();\n"
                "  if (s_skip) return;\n  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) evo_calls_seen = T;\n"
                "  const int token = blockIdx.x / EVO_H_SPLIT;",
            ),
        ),
        # Timing inputs are random (never zeros), so a shortcut for zeros never fires and buys no false speed.
        "zero shortcut: the kernel skips its work when the residual row starts with zeros": (
            "  const u16* res = residual + (size_t)token * HC * H;",
            "  const u16* res = residual + (size_t)token * HC * H;\n"
            "  if (res[0] == 0 && res[1] == 0 && res[2] == 0 && res[3] == 0) return;",
            "rejected: perf",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="tokens"),
        GeometryParam("H", int, None, min=64, max=65536, doc="hidden size"),
        GeometryParam("S", int, 1, choices=(1, 2, 4, 8, 16, 32), doc="GEMM split partials"),
        GeometryParam("prenorm", bool, False, doc="compute the square sum from the residual"),
    ),
)


class MhcPreDecode(MhcPreBigFuse):
    """mhc_pre_big_fuse with the decode knobs; its folder is candidates/mhc_pre_decode/, its kernel this one's."""

    @property
    def kernel_path(self) -> Path:
        return Path(__file__).resolve().parent / "kernel.cu"


# The latency-bound metadata path at T = 1..128 (docs/families.md §1, "Decode knobs"). Each keeps the output bits
# except fast_math (checked in tolerance mode against float64).
DECODE_KNOBS = (
    Knob(
        "split_lanes",
        (False, True),
        False,
        doc="split partials summed in the serial order by one lane per mix (25 lanes), all loads in flight at once, "
        "then handed to lanes 0..3 by shuffles (split_reduce=warp at S > 1 takes precedence)",
    ),
    Knob(
        "sinkhorn",
        ("row4", "lane16", "full"),
        "row4",
        doc="Sinkhorn on 4 lanes (one row each), 16 lanes (one entry each, sums by shuffles), or the whole "
        "matrix in each thread's registers (no shuffles on the chain)",
    ),
    Knob(
        "fast_math",
        (False, True),
        False,
        exact=False,
        doc="__expf and approximate reciprocals in the sigmoids and the Sinkhorn (tolerance mode)",
    ),
    Knob(
        "early_loads",
        (False, True),
        False,
        doc="each streaming thread issues its first trip's residual loads before the metadata and the barrier",
    ),
    Knob(
        "pre_per_warp",
        (False, True),
        False,
        doc="every streaming warp computes pre itself (the same operations as warp 0): no block barrier",
    ),
    Knob(
        "pdl_overlap",
        (False, True),
        False,
        doc="under gates.perf.launch: pdl, launched with PDL: the next launch may start at once, this one waits "
        "for the one before before touching memory",
    ),
)


def _decode_knob(k: Knob) -> Knob:
    # T = 1 has one block per h-split: more, smaller blocks
    if k.name == "block":
        return dataclasses.replace(k, values=(64, *k.values))
    if k.name == "h_split":
        return dataclasses.replace(k, values=(*k.values, 16))
    return k


DECODE_FAMILY = MhcPreDecode(
    name="mhc_pre_decode",
    description="mhc_pre_big_fuse with the decode knobs (Sinkhorn layout, lane split sums, early loads, no barrier, "
    "fast math, PDL) for T = 1..128",
    entry=FAMILY.entry,
    knobs=tuple(_decode_knob(k) for k in FAMILY.knobs) + DECODE_KNOBS,
    faults=FAMILY.faults,
    geometry_params=FAMILY.geometry_params,
)
