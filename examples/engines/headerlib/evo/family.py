"""minilib_fused_add_rmsnorm: minilib's in-place residual add + RMSNorm, tuned from outside the library.

The kernel is the library's own, used as it is: ``kernel.cu`` is one line, ``#include <minilib/norm.cuh>``, and
the entry is the header's template ``minilib::norm::FusedAddRMSNormKernel<VEC_SIZE, T>``. The header holds host C++
(``<iostream>``, ``<vector>``, ``<sstream>``, exceptions, a ``cudaLaunchKernelEx`` launcher), so NVRTC cannot compile
it: ``compiler = "auto"`` finds that and builds with nvcc, with the library's own flag ``--expt-relaxed-constexpr``
(its kernels call host ``constexpr`` helpers).

For each row of ``batch`` rows of ``d`` bf16 (one row per block, block = (32, num_warps)), in place:

    r            = bf16(float(input) + float(residual))
    residual    <- r
    input       <- bf16(float(r) * rsqrt(mean(float(r)^2) + eps) * (weight_bias + float(weight)))

Knobs: ``vec`` (the template's VEC_SIZE: elements per load) and ``num_warps`` (blockDim.y, which the kernel reads at
run time: the same machine code, another launch). ``num_warps = "engine"`` is the library's own launcher heuristic
(``NormNumWarps`` in norm.cuh) restated in :meth:`launch`, so every campaign also measures what the library does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6
WEIGHT_BIAS = 0.0  # FusedAddRMSNorm passes 0 (a Gemma-style caller passes 1)
WARP = 32
MAX_THREADS = 1024
INCLUDE_LINE = "#include <minilib/norm.cuh>\n"
HEADER = Path(__file__).resolve().parent.parent / "include" / "minilib" / "norm.cuh"


def engine_num_warps(d: int, vec: int) -> int:
    """NormNumWarps(d, vec_size) of norm.cuh: one vector a thread across the row, whole warps, at most 1024 threads."""
    threads = max(1, min(MAX_THREADS, d // vec))
    return -(-threads // WARP)


def header_fault(old: str, new: str, expect: str = "rejected: correctness") -> tuple[str, ...]:
    """A fault in the library's header. Faults edit kernel.cu, which only includes the header: this one replaces
    that include by the header's text with ``old`` changed to ``new``. Where the header no longer holds ``old``, the
    fault's edit is ``old`` itself, which kernel.cu lacks, so `evo check` says the fault no longer applies."""
    text = HEADER.read_text() if HEADER.is_file() else ""
    if old not in text:
        return (old, new, expect)
    return (INCLUDE_LINE, text.replace(old, new, 1), expect)


class MinilibFusedAddRmsnorm(Family):
    include_dirs = ("../include",)
    compiler = "auto"  # NVRTC cannot take the header's host C++: evo falls back to nvcc and says so once
    compile_options = ("--expt-relaxed-constexpr",)  # the library's build flag

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["d"] % 8:
            return f"d={params['d']} must be a multiple of 8 (rows 16-byte aligned for every vec)"
        return None

    def small_geometry(self) -> Geometry | None:
        return Geometry("small", {"batch": 4, "d": 1024})

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        for g in geometries:
            if g["d"] % genome["vec"]:
                return f"d={g['d']} at {g.name} is not a multiple of vec={genome['vec']}"
        return None

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        shape = (geometry["batch"], geometry["d"])
        # in place, as the library works: each output buffer starts as a copy of the input of its name
        return [
            OutputSpec("input", "bfloat16", shape, init_from="input"),
            OutputSpec("residual", "bfloat16", shape, init_from="residual"),
        ]

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        B, d = geometry["batch"], geometry["d"]
        g = torch.Generator(device=device).manual_seed(104729 * seed + 11)

        def bf16_nonzero(t):
            t = t.to(torch.bfloat16)
            return torch.where(t == 0, torch.full_like(t, 0.5), t).contiguous()

        return {
            "input": bf16_nonzero(torch.randn((B, d), generator=g, device=device)),
            "residual": bf16_nonzero(2.0 * torch.randn((B, d), generator=g, device=device)),
            "weight": bf16_nonzero(1.0 + 0.1 * torch.randn(d, generator=g, device=device)),
        }

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        # r as the kernel makes it: added in float32, rounded to bf16 (nearest even), and stored so
        r = (inputs["input"].float() + inputs["residual"].float()).to(torch.bfloat16).to(dt)
        inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return {"input": r * inv * (WEIGHT_BIAS + inputs["weight"].to(dt)), "residual": r}

    def error_bound(self, output: str) -> float:
        return 0.0 if output == "residual" else 1e-2  # residual is rounded by the reference as by the kernel

    def num_warps(self, genome: Mapping[str, Any], geometry: Geometry) -> int:
        n = genome["num_warps"]
        return engine_num_warps(geometry["d"], genome["vec"]) if n == "engine" else int(n)

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        warps = self.num_warps(genome, geometry)
        # as FusedAddRMSNorm launches it: a row per block, (32, num_warps) threads, a float per warp of dynamic smem
        return Launch((geometry["batch"], 1, 1), (WARP, warps, 1), 4 * warps)

    def arg_types(self) -> str:
        return "pppiiiff"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        d = geometry["d"]
        # the in-out pointers are the output buffers (copies of input and residual); weight is only read
        return [outputs["input"], outputs["residual"], inputs["weight"], d, d, d, WEIGHT_BIAS, EPS]

    def bytes_moved(self, geometry: Geometry) -> int:
        B, d = geometry["batch"], geometry["d"]
        return 2 * (2 * B * d + d) + 2 * (2 * B * d)  # read input, residual, weight; write input, residual

    def flops(self, geometry: Geometry) -> int:
        return 5 * geometry["batch"] * geometry["d"]


FAMILY = MinilibFusedAddRmsnorm(
    name="minilib_fused_add_rmsnorm",
    description="minilib's FusedAddRMSNormKernel (header-only library, in place, block shape chosen at launch)",
    entry="minilib::norm::FusedAddRMSNormKernel<{vec}, __nv_bfloat16>",
    knobs=(
        Knob("vec", (1, 2, 4, 8), 8, exact=False, doc="VEC_SIZE: bf16 per load and store (the square sum's order)"),
        Knob(
            "num_warps",
            ("engine", 1, 2, 4, 8, 16, 32),
            "engine",
            exact=False,
            launch_only=True,
            doc="blockDim.y, read by the kernel at run time (launch only); engine: NormNumWarps(d, vec), the "
            "library's own launcher",
        ),
    ),
    faults={
        "half the rows: blocks of the second half return before writing": header_fault(
            "  T* r_row = residual + row * stride_residual;\n",
            "  T* r_row = residual + row * stride_residual;\n  if (2 * row >= gridDim.x) return;\n",
        ),
        "in-place residual never stored": header_fault("      rv.store(r_row + col);\n", "\n"),
    },
    geometry_params=(
        GeometryParam("batch", int, None, min=1, max=1 << 20, doc="rows (tokens)"),
        GeometryParam("d", int, None, min=8, max=1 << 16, doc="hidden size, a multiple of 8"),
    ),
)
