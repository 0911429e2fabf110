"""{name}: TODO(evo): one line saying what the kernel computes.

Made by `evo new --kernel {kernel}`. Fill in each marked TODO (each method's docstring says when evo calls it and
what it must return; docs/extending.md in evo's repository walks through it), then `evo check evo.yaml` until it
passes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evo.family import Family, Geometry, GeometryParam, Knob, Launch, OutputSpec


class {cls}(Family):
    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        """Called once per config geometry as the config loads: why this family cannot take it, or None."""
        return None

    def small_geometry(self) -> Geometry | None:
        """Where `evo check` runs make_inputs and reference on the CPU (small: seconds)."""
        raise NotImplementedError("TODO(evo): small_geometry: a Geometry('small', {{...}}) with every geometry param")

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        """Called before every launch series: the output buffers (name, torch dtype name, shape). The harness
        allocates them, poisons them before each run, and hashes what the kernel wrote."""
        raise NotImplementedError("TODO(evo): outputs: one OutputSpec(name, dtype, shape) per output buffer")

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        """Called on every genome the proposer makes, before it is built: why it is invalid, or None."""
        return None

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        """Called once per geometry and seed: random inputs (never zeros), the same for the same seed, as torch
        tensors on ``device`` (plus plain numbers the kernel takes)."""
        raise NotImplementedError("TODO(evo): make_inputs: seeded random torch tensors on device")

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        """Called once per geometry and seed: the math in ``dtype`` (float64 by default), keyed like outputs."""
        raise NotImplementedError("TODO(evo): reference: the float64 math, keyed like outputs")

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        """Called per genome and geometry: grid, block and dynamic shared memory bytes."""
{engine_launch}        raise NotImplementedError("TODO(evo): launch: Launch(grid, block, shared_bytes)")

    def arg_types(self) -> str:
        """One letter per kernel argument: p pointer, i int32, l int64, f float32, d float64, s a value passed by
        value (its bytes: a numpy scalar or array, bytes, a ctypes Structure). evo check holds them on the cubin."""
        return "{arg_types}"  # TODO(evo): check against the kernel's signature: {signature}

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        """Called per launch: the kernel's arguments in order (tensors are passed as pointers)."""
        raise NotImplementedError("TODO(evo): kernel_args: inputs, outputs and sizes in the kernel's order")

    def bytes_moved(self, geometry: Geometry) -> int:
        """The fewest bytes one call must move through device memory (every "% of the copy ceiling" uses it)."""
        raise NotImplementedError("TODO(evo): bytes_moved: bytes read + written by one call")


FAMILY = {cls}(
    name="{name}",
    description="TODO(evo): what the kernel computes",
    entry="{entry}",
{include_dirs}    knobs=(
{knobs}    ),
    geometry_params=(
        # TODO(evo): the shape parameters the config's geometries give, e.g. GeometryParam("T", int, None, min=1)
    ),
)
