"""mk_rms_norm_mul: one kernel of a multi-kernel header, chosen by its entry name, taking a struct by value.

``kernel.cu`` is a link to ``../src/mkcuda/act_norm.cuh``, the backend's header as it is: two gated activations
(``silu_and_mul_kernel``, ``gelu_tanh_and_mul_kernel``) and ``rms_norm_mul_f32<block_size>``, which this family
tunes. Its last parameter is ``fastdiv_consts`` (three uint32: multiplier, shift, divisor), passed by value as the
backend passes its fast-division constants: arg_types letter ``s``, the value packed with numpy to the struct's
layout. The header is device code only, so NVRTC builds it (``compiler = "auto"``).

For each row of T rows of H float32 (one row per block of block_size threads):

    dst[row] = x[row] * rsqrt(mean(x[row]^2) + eps) * mul[row % M]

``mul`` holds M rows: M = 1 is one weight vector for every row, M > 1 a per-group scale (the kernel finds its row
with the fast modulo).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6
# struct fastdiv_consts { uint32_t mp; uint32_t L; uint32_t d; } of common.cuh: 12 bytes, 4-byte aligned
FASTDIV_DTYPE = np.dtype([("mp", "<u4"), ("L", "<u4"), ("d", "<u4")])


def fastdiv_consts(d: int) -> np.void:
    """make_fastdiv_consts(d) of common.cuh, as the struct's bytes: L = ceil(log2 d), mp = 2^32 (2^L - d) / d + 1."""
    L = (d - 1).bit_length()
    mp = ((1 << 32) * ((1 << L) - d)) // d + 1
    return np.array((mp, L, d), dtype=FASTDIV_DTYPE)[()]


def fastdiv(n: int, c: np.void) -> int:
    """The kernel's fastdiv, on the host: (umulhi(n, mp) + n) >> L (checks the packed constants)."""
    return (((n * int(c["mp"])) >> 32) + n) >> int(c["L"])


class MkRmsNormMul(Family):
    include_dirs = ("../src/mkcuda",)  # common.cuh (kernel.cu is a link: its quoted includes look beside the link)
    compiler = "auto"

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["M"] > params["T"]:
            return f"M={params['M']} rows of mul for T={params['T']} rows of x: some would never be used"
        return None

    def small_geometry(self) -> Geometry | None:
        return Geometry("small", {"T": 6, "H": 512, "M": 3})

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec("dst", "float32", (geometry["T"], geometry["H"]))]

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H, M = geometry["T"], geometry["H"], geometry["M"]
        g = torch.Generator(device=device).manual_seed(32452843 * seed + 7)
        x = torch.randn((T, H), generator=g, device=device)
        mul = 1.0 + 0.1 * torch.randn((M, H), generator=g, device=device)
        return {"x": x.contiguous(), "mul": mul.contiguous()}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        T, M = geometry["T"], geometry["M"]
        x = inputs["x"].to(dt)
        rows = torch.arange(T, device=x.device) % M
        scale = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return {"dst": x * scale * inputs["mul"].to(dt)[rows]}

    def error_bound(self, output: str) -> float:
        return 1e-5  # float32 arithmetic against float64

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        return Launch((geometry["T"], 1, 1), (genome["block_size"], 1, 1), 0)  # block_size is also the template's

    def arg_types(self) -> str:
        return "ppilfpls"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        H = geometry["H"]
        # x, dst, ncols, stride_row, eps, mul, mul_stride_row, mul_nrows (the struct, by value)
        return [inputs["x"], outputs["dst"], H, H, EPS, inputs["mul"], H, fastdiv_consts(geometry["M"])]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H, M = geometry["T"], geometry["H"], geometry["M"]
        return 4 * (2 * T * H + M * H)


FAMILY = MkRmsNormMul(
    name="mk_rms_norm_mul",
    description="rms_norm_mul_f32 of a multi-kernel header (a fast-division struct passed by value)",
    entry="rms_norm_mul_f32<{block_size}>",
    knobs=(
        Knob(
            "block_size",
            (32, 64, 128, 256, 512, 1024),
            1024,
            exact=False,
            doc="threads a row, a template parameter (the backend launches 1024 for rows of 1024 and more)",
        ),
    ),
    faults={
        "half the rows: blocks of the second half return before writing": (
            "  const int tid = threadIdx.x;\n",
            "  const int tid = threadIdx.x;\n  if (2 * row >= int(gridDim.x)) return;\n",
        ),
        "struct ignored: every row takes mul's first row": (
            "  mul += fastmodulo(row, mul_nrows) * mul_stride_row;\n",
            "  mul += 0 * fastmodulo(row, mul_nrows) * mul_stride_row;\n",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="rows of x"),
        GeometryParam("H", int, None, min=1, max=1 << 16, doc="columns"),
        GeometryParam("M", int, 1, min=1, doc="rows of mul (row r of x takes row r % M)"),
    ),
)
