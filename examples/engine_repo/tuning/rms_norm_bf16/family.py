"""rms_norm_bf16: out[t] = bf16(x[t] * rsqrt(mean(x[t]^2) + eps) * w), bf16 [tokens, hidden]."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6


class RmsNormBf16(Family):
    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["H"] % 8:
            return f"H={params['H']} must be a multiple of 8"
        return None

    def small_geometry(self) -> Geometry | None:
        return Geometry("small", {"T": 4, "H": 512})

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec("out", "bfloat16", (geometry["T"], geometry["H"]))]

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        for g in geometries:
            if g["H"] % genome["vec"]:
                return f"H={g['H']} at {g.name} is not a multiple of vec={genome['vec']}"
        return None

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H = geometry["T"], geometry["H"]
        g = torch.Generator(device=device).manual_seed(7919 * seed + 3)

        def nz(t):
            t = t.to(torch.bfloat16)
            return torch.where(t == 0, torch.full_like(t, 0.25), t).contiguous()

        return {
            "x": nz(torch.randn((T, H), generator=g, device=device)),
            "w": nz(1.0 + 0.1 * torch.randn(H, generator=g, device=device)),
        }

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        x = inputs["x"].to(dt)
        inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return {"out": x * inv * inputs["w"].to(dt)}

    def error_bound(self, output: str) -> float:
        return 1e-2

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        smem = 2 * geometry["H"] if genome["cache_in_smem"] else 0
        return Launch((geometry["T"], 1, 1), (genome["block"], 1, 1), smem)

    def arg_types(self) -> str:
        return "ppplif"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        return [outputs["out"], inputs["x"], inputs["w"], geometry["T"], geometry["H"], EPS]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H = geometry["T"], geometry["H"]
        return 2 * T * H + 2 * H + 2 * T * H


FAMILY = RmsNormBf16(
    name="rms_norm_bf16",
    description="bf16 RMSNorm over [tokens, hidden], one row per block",
    include_dirs=("../../csrc/include",),
    entry="myengine::rms_norm_bf16<{block}, {vec}, {cache_in_smem}>",
    knobs=(
        Knob("block", (128, 256, 512, 1024), 256, exact=False, doc="threads per block (BLOCK)"),
        Knob("vec", (1, 2, 4, 8), 1, exact=False, doc="bf16 per load (VEC)"),
        Knob("cache_in_smem", (False, True), False, doc="keep the row in shared memory between passes"),
    ),
    geometry_params=(
        GeometryParam("T", int, None, min=1, doc="tokens"),
        GeometryParam("H", int, None, min=8, doc="hidden"),
    ),
)
