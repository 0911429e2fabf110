"""In-out arguments and inputs that must not change: the pure parts of the GPU backend's checks.

Engines' kernels often work in place (a fused add + RMSNorm writes the normalized row over its input and the sum
over the residual). A family declares such a buffer as an output with ``OutputSpec(..., init_from="residual")``
(evo/core/family.py): before every launch the harness checks, the output starts as a copy of that input, and the
kernel is handed the output buffer, so the cached inputs are never written. Everything here works on torch
tensors of any device: harness/gpu.py calls it on the GPU, the tests on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.family import OutputSpec


@dataclass
class InputWrite:
    """An input tensor that a launch changed (the kernel wrote memory evo gave it to read)."""

    geometry: str
    seed: int
    input: str
    changed: int  # elements whose bits differ from the input as make_inputs gave it
    numel: int


def initial_values(specs: Sequence[OutputSpec], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Output name -> the input it starts as, viewed in the output's shape (only the in-out outputs).

    Called before each correctness run, the recheck and timing; the declaration was held against the inputs
    already (evo.core.family.inout_problem)."""
    return {o.name: inputs[o.init_from].reshape(o.shape) for o in specs if o.init_from is not None}


def start_outputs(outs: Mapping[str, Any], initial: Mapping[str, Any], poison: int) -> None:
    """Set every output buffer as a launch must find it: an in-out output to a copy of its input, any other to
    the poison byte (so an element it never writes is seen)."""
    import torch

    for name, t in outs.items():
        if name in initial:
            t.copy_(initial[name])
        else:
            t.view(torch.uint8).fill_(poison)


def fresh_outputs(specs: Sequence[OutputSpec], inputs: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """Exact-size output buffers for timing and for the sanitizer's launch: in-out ones hold a copy of their
    input (the kernel runs in place on them, as in the engine), the others whatever the allocator left."""
    import torch

    initial = initial_values(specs, inputs)
    outs = {}
    for o in specs:
        t = torch.empty(o.shape, dtype=getattr(torch, o.dtype), device=device)
        if o.name in initial:
            t.copy_(initial[o.name])
        outs[o.name] = t
    return outs


def in_place(families: Sequence[Any], g: Any) -> Any:
    """Of the families timed together (a campaign's and its peer kernels': the same outputs), the first that works in
    place, else the first: the timing buffers start as that one's in-out outputs say, so an in-place peer timed
    beside an out-of-place champion never reads poison (harness/gpu.py ``measure``)."""
    return next((f for f in families if any(o.init_from for o in f.outputs(g))), families[0])


def _bits(t: Any) -> Any:
    import torch

    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def unwritten_inout(out: Any, initial: Any, ref: Any) -> int:
    """Elements of an in-out output that were never written: the reference says the value changes, and the
    output still holds its initial bits.

    "Changes" means the reference, rounded to the output's dtype, has other bits than the initial value, and (for
    a floating-point output) differs from it by more than the dtype's epsilon times the larger magnitude, about
    one unit in the last place: a kernel whose rounding lands one ulp from the float64 reference's, on the
    initial value, is never counted. An element the reference leaves (nearly) unchanged cannot be told apart from
    one the kernel skipped, and is not counted either; exact mode's hash still sees it.
    """
    import torch

    want = ref.to(out.dtype)
    kept = _bits(out) == _bits(initial)
    changes = _bits(want) != _bits(initial)
    if out.is_floating_point():
        a, r = initial.to(torch.float64), ref.to(torch.float64)
        margin = torch.finfo(out.dtype).eps * torch.maximum(a.abs(), r.abs())
        changes &= (r - a).abs() > margin
    return int((changes & kept).sum().item())


def snapshot(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of every input tensor, taken as the inputs are made: what they must still hold after any launch."""
    import torch

    return {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def written_inputs(inputs: Mapping[str, Any], pristine: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(input, changed elements) for each input whose bits differ from its snapshot; each is set back, so the next
    launch, candidate and reference see the inputs make_inputs gave. Called after every correctness launch."""
    out = []
    for name, want in pristine.items():
        got = inputs[name]
        if torch_equal_bits(got, want):
            continue
        out.append((name, int((_bits(got) != _bits(want)).sum().item()) if got.element_size() in (1, 2, 4, 8) else 1))
        got.copy_(want)
    return out


def torch_equal_bits(a: Any, b: Any) -> bool:
    """Byte equality (NaN == NaN, -0 != +0), for tensors of one dtype and shape."""
    import torch

    if a.element_size() not in (1, 2, 4, 8):
        return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))
    return bool(torch.equal(_bits(a), _bits(b)))
