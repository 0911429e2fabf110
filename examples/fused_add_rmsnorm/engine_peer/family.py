"""engine_peer: an engine's in-place fused add + RMSNorm (kernel.cu), made a family to be a peer of ``..``.

The tutorial family one folder up (``fused_add_rmsnorm``) computes the same thing out of place; this is the kernel
an engine ships today for it, in place, its block size chosen at launch by the engine's heuristic. It solves the
same problem, so a campaign of ``..`` can name it under ``peer.kernels`` (``../peer.yaml``): the same geometry
parameters (T, H), the same inputs (x, residual, weight: bf16), the same outputs (``out`` and ``residual_out``,
here in-out buffers that start as copies of x and residual) and the same float64 reference; only the kernel, its
arguments and its launch differ (docs/measurement.md, "Peers"). It is also a family of its own: ``evo check`` and
``evo run`` take it through a config of its own like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec

EPS = 1e-6
MAX_H = 65536


def engine_block(hidden_size: int) -> int:
    """The engine's launcher: a thread per element up to 1024, whole warps."""
    return min(1024, -(-hidden_size // 32) * 32)


class EnginePeer(Family):
    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        T, H = geometry["T"], geometry["H"]
        return [  # in place, as the engine works: each buffer starts as a copy of its input
            OutputSpec("out", "bfloat16", (T, H), init_from="x"),
            OutputSpec("residual_out", "bfloat16", (T, H), init_from="residual"),
        ]

    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        if params["H"] % 8 or params["H"] > MAX_H:
            return f"H={params['H']} must be a multiple of 8, at most {MAX_H}"
        return None

    def small_geometry(self) -> Geometry:
        return Geometry("T4_H256", {"T": 4, "H": 256})

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, H = geometry["T"], geometry["H"]
        g = torch.Generator(device=device).manual_seed(6700417 * seed + 29)

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
        b = genome["block"]
        return Launch((geometry["T"], 1, 1), (engine_block(geometry["H"]) if b == "engine" else int(b), 1, 1), 0)

    def arg_types(self) -> str:
        return "pppfii"

    def kernel_args(self, inputs, outputs, geometry: Geometry) -> list[Any]:
        # the in-out pointers get the output buffers (copies of x and residual); weight is only read
        return [outputs["out"], outputs["residual_out"], inputs["weight"], EPS, geometry["T"], geometry["H"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        T, H = geometry["T"], geometry["H"]
        return 2 * (2 * T * H + H) + 2 * (2 * T * H)  # read x, residual, weight; write both back

    def flops(self, geometry: Geometry) -> int:
        return 5 * geometry["T"] * geometry["H"]


FAMILY = EnginePeer(
    name="engine_fused_add_rmsnorm",
    description="an engine's in-place fused add + RMSNorm, block chosen at launch (a peer of fused_add_rmsnorm)",
    entry="engine::fused_add_rms_norm_kernel<__nv_bfloat16>",
    knobs=(
        Knob(
            "block",
            ("engine", 128, 256, 512, 1024),
            "engine",
            exact=False,
            launch_only=True,
            doc="blockDim.x (launch only); engine: the engine's launcher, min(1024, H rounded up to warps)",
        ),
    ),
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="tokens (rows)"),
        GeometryParam("H", int, None, min=8, max=MAX_H, doc="hidden size, a multiple of 8"),
    ),
)
