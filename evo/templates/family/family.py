"""{name}: {description}

Made by `evo new`. Each method's docstring says when evo calls it and what it must return; docs/extending.md in
evo's repository walks through writing a family. Check it with `evo check evo.yaml` (no GPU needed).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec


class {cls}(Family):
    # --- shapes ---------------------------------------------------------------------------------------
    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        """Called once per config geometry as the config loads: why this family cannot take it, or None."""
        if params["n"] % 8:
            return f"n={{params['n']}} must be a multiple of 8 (the widest load)"
        return None

    def small_geometry(self) -> Geometry | None:
        """Where `evo check` runs make_inputs and reference on the CPU (small: seconds)."""
        return Geometry("small", {{"n": 4096}})

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        """Called before every launch series: the output buffers (name, torch dtype name, shape). The harness
        allocates them, poisons them before each run, and hashes what the kernel wrote."""
        return [OutputSpec("out", "bfloat16", (geometry["n"],))]

    # --- genomes --------------------------------------------------------------------------------------
    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        """Called on every genome the proposer makes, before it is built: why it is invalid, or None."""
        for g in geometries:
            if g["n"] % genome["vec"]:
                return f"vec={{genome['vec']}} does not divide n={{g['n']}} at {{g.name}}"
        return None

    # --- inputs and the float64 reference -------------------------------------------------------------
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        """Called once per geometry and seed: random inputs (never zeros), the same for the same seed, as torch
        tensors on ``device`` (plus plain numbers the kernel takes)."""
        import torch

        n = geometry["n"]
        g = torch.Generator(device="cpu").manual_seed(1000003 * seed + 7)
        x = torch.randn(n, generator=g).to(torch.bfloat16)
        y = torch.randn(n, generator=g).to(torch.bfloat16)
        scale = float(torch.rand(1, generator=g)) + 0.5
        return {{"x": x.to(device), "y": y.to(device), "scale": scale}}

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        """Called once per geometry and seed: the math in ``dtype`` (float64 by default), keyed like outputs.
        Tolerance mode compares each genome's error against it with the baseline's."""
        import torch

        dt = dtype or torch.float64
        return {{"out": inputs["x"].to(dt) * inputs["scale"] + inputs["y"].to(dt)}}

    def error_bound(self, output: str) -> float:
        """The largest relative error vs float64 the baseline may show (bf16 rounding: 2^-8)."""
        return 1e-2

    # --- launching (GPU) ------------------------------------------------------------------------------
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        """Called per genome and geometry: grid, block and dynamic shared memory bytes."""
        per_block = genome["block"] * genome["vec"]
        return Launch(((geometry["n"] + per_block - 1) // per_block, 1, 1), (genome["block"], 1, 1), 0)

    def arg_types(self) -> str:
        """One letter per kernel argument: p pointer, i int32, l int64, f float32, d float64, s a value passed by
        value (its bytes: a numpy scalar or array, bytes, a ctypes Structure). evo check holds them on the cubin."""
        return "pppfi"

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        """Called per launch: the kernel's arguments in order (tensors are passed as pointers)."""
        return [inputs["x"], inputs["y"], outputs["out"], inputs["scale"], geometry["n"]]

    def bytes_moved(self, geometry: Geometry) -> int:
        """The fewest bytes one call must move through device memory: every "% of the copy ceiling" divides by
        it. Here: read x and y, write out (bf16)."""
        return 3 * 2 * geometry["n"]


FAMILY = {cls}(
    name="{name}",
    description="{description}",
    entry="{name}<{{block}}, {{vec}}>",  # template parameters, filled from the genome's knobs
    knobs=(
        Knob("block", (64, 128, 256, 512, 1024), 256, doc="threads per block"),
        Knob("vec", (1, 2, 4, 8), 1, doc="bf16 elements per load and store (2 to 16 bytes)"),
    ),
    geometry_params=(GeometryParam("n", int, None, min=8, max=1 << 30, doc="elements"),),
    faults={{  # deliberate bugs for `evo selfcheck`: the harness must catch each one
        "wrong index: y read one element off": ("fmaf(__bfloat162float(a.v[j]), scale, __bfloat162float(b.v[j]))",
                                                "fmaf(__bfloat162float(a.v[j]), scale, __bfloat162float(b.v[(j + 1) % VEC]) + 1.0f)"),
        "compile error: a missing semicolon": ("  Pack<VEC> o;", "  Pack<VEC> o", "error: compile"),
    }},
)
