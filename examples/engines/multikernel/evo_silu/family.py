"""mk_silu_and_mul: another kernel of the same multi-kernel header, chosen by its entry name.

``kernel.cu`` links to ``../src/mkcuda/act_norm.cuh`` as ``../evo/kernel.cu`` does; this family's entry is
``silu_and_mul_kernel<{vec}>``, the gated SiLU of the MLP block (bf16):

    out[row, j] = bf16(silu(float(input[row, j])) * float(input[row, d + j]))

Every output element is computed alone, in the same order whatever the knobs: the campaign runs in exact mode.
``block`` is launch-only; ``"engine"`` is the launch the backend gives such kernels (a thread per VEC elements of
a row, whole warps, at most 1024), restated in :meth:`launch`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec


def engine_block(d: int, vec: int) -> int:
    return min(1024, -(-(d // vec) // 32) * 32)


class MkSiluAndMul(Family):
    include_dirs = ("../src/mkcuda",)
    compiler = "auto"

    def small_geometry(self) -> Geometry | None:
        return Geometry("small", {"T": 4, "d": 512})

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        for g in geometries:
            if g["d"] % genome["vec"]:
                return f"d={g['d']} at {g.name} is not a multiple of vec={genome['vec']}"
        return None

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec("out", "bfloat16", (geometry["T"], geometry["d"]))]

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        import torch

        T, d = geometry["T"], geometry["d"]
        g = torch.Generator(device=device).manual_seed(49979687 * seed + 3)
        x = (2.0 * torch.randn((T, 2 * d), generator=g, device=device)).to(torch.bfloat16)
        return {"input": torch.where(x == 0, torch.full_like(x, 0.5), x).contiguous()}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        import torch

        dt = dtype or torch.float64
        d = geometry["d"]
        x = inputs["input"].to(dt)
        gate, up = x[:, :d], x[:, d:]
        return {"out": gate * torch.sigmoid(gate) * up}

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        b = genome["block"]
        threads = engine_block(geometry["d"], genome["vec"]) if b == "engine" else int(b)
        return Launch((geometry["T"], 1, 1), (threads, 1, 1), 0)

    def arg_types(self) -> str:
        return "ppi"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        return [outputs["out"], inputs["input"], geometry["d"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        return 2 * 3 * geometry["T"] * geometry["d"]  # read gate and up, write out


FAMILY = MkSiluAndMul(
    name="mk_silu_and_mul",
    description="silu_and_mul_kernel of a multi-kernel header (bf16 gated SiLU)",
    entry="silu_and_mul_kernel<{vec}>",
    knobs=(
        Knob("vec", (1, 2, 4, 8), 8, doc="elements a thread handles per step (a template parameter)"),
        Knob("block", ("engine", 64, 128, 256, 512, 1024), "engine", launch_only=True, doc="threads a row"),
    ),
    faults={
        "half the rows: the second half never written": (
            "  const int64_t row = blockIdx.x;\n",
            "  const int64_t row = blockIdx.x;\n  if (2 * row >= gridDim.x) return;\n",
        ),
    },
    geometry_params=(
        GeometryParam("T", int, None, min=1, max=1 << 20, doc="tokens (rows)"),
        GeometryParam("d", int, None, min=8, max=1 << 16, doc="intermediate size (input rows hold 2 d)"),
    ),
)
