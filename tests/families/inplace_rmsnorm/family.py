"""inplace_rmsnorm: a test family around an in-place fused add + RMSNorm (kernel.cu, our own, engine style).

The kernel overwrites both its token rows (normalized) and its residual (the sum), as engines' kernels do. The
family declares them as in-out outputs: ``out`` starts as a copy of the input ``x``, ``residual_out`` as a copy of
``residual``, and kernel_args passes those output buffers where the kernel takes its ``input`` and ``residual``
pointers. ``block`` is chosen at launch only (blockDim.x), as the engines choose it; other values change the order
of the square sum (tolerance mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6


class InplaceRmsnorm(Family):
    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        T, H = geometry["T"], geometry["H"]
        return [
            OutputSpec("out", "bfloat16", (T, H), init_from="x"),
            OutputSpec("residual_out", "bfloat16", (T, H), init_from="residual"),
        ]

    def small_geometry(self) -> Geometry:
        return Geometry("T4_H256", {"T": 4, "H": 256})

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H = geometry["T"], geometry["H"]
        g = torch.Generator(device=device).manual_seed(7919 * seed + 3)

        def bf16_nonzero(t):
            t = t.to(torch.bfloat16)
            return torch.where(t == 0, torch.full_like(t, 0.5), t).contiguous()

        return {
            "x": bf16_nonzero(torch.randn((T, H), generator=g, device=device)),
            "residual": bf16_nonzero(2.0 * torch.randn((T, H), generator=g, device=device)),
            "weight": bf16_nonzero(1.0 + 0.1 * torch.randn(H, generator=g, device=device)),
        }

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        r = (inputs["x"].float() + inputs["residual"].float()).to(torch.bfloat16).to(dt)  # as the kernel rounds it
        inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return {"out": r * inv * inputs["weight"].to(dt), "residual_out": r}

    def error_bound(self, output: str) -> float:
        return 0.0 if output == "residual_out" else 1e-2

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        return Launch((geometry["T"], 1, 1), (genome["block"], 1, 1), 0)

    def arg_types(self) -> str:
        return "pppfii"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        # the in-out pointers get the output buffers (copies of x and residual); weight is only read
        return [outputs["out"], outputs["residual_out"], inputs["weight"], EPS, geometry["T"], geometry["H"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H = geometry["T"], geometry["H"]
        return 2 * (2 * T * H + H) + 2 * (2 * T * H)  # read x, residual, weight; write both back


FAMILY = InplaceRmsnorm(
    name="inplace_rmsnorm",
    description="in-place fused add + RMSNorm (bf16), block size chosen at launch (a test fixture)",
    entry="inplace::fused_add_rms_norm_kernel<__nv_bfloat16>",
    knobs=(Knob("block", (256, 128, 512, 1024), 256, exact=False, doc="threads per block, at launch"),),
    geometry_params=(GeometryParam("T", int, None, min=1), GeometryParam("H", int, None, min=32)),
    faults={
        "in place, half the rows: blocks past the middle write nothing": (
            "  const long row = (long)blockIdx.x * hidden_size;\n",
            "  const long row = (long)blockIdx.x * hidden_size;\n  if (blockIdx.x >= (gridDim.x + 1) / 2) return;\n",
        ),
        "in place, half the rows normalized: odd rows keep the input": (
            "    input[row + idx] = (scalar_t)(x * inv * (float)weight[idx]);\n",
            "    if (blockIdx.x % 2 == 0) input[row + idx] = (scalar_t)(x * inv * (float)weight[idx]);\n",
        ),
        "writes its input: the weight scaled in place": (
            "    input[row + idx] = (scalar_t)(x * inv * (float)weight[idx]);\n",
            "    input[row + idx] = (scalar_t)(x * inv * (float)weight[idx]);\n"
            "    if (blockIdx.x == 0) const_cast<scalar_t*>(weight)[idx] = (scalar_t)(2.0f * (float)weight[idx]);\n",
        ),
    },
)
