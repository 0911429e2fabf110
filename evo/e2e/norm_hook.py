"""A fused add RMSNorm family plugged into a transformers Llama-family model, in place of every add + RMSNorm.

transformers' ``LlamaDecoderLayer.forward`` (5.x) reads::

    residual = h;  h = input_layernorm(h);  h = self_attn(h);  h = residual + h
    residual = h;  h = post_attention_layernorm(h);  h = mlp(h);  h = residual + h

and the model ends with ``norm(h)``. :func:`install` gives every layer a forward that does the same with the
adds fused into the norms, as engines do (vLLM's ``RMSNorm(x, residual)``): a layer returns its MLP output
*before* the residual add and leaves the residual in a :class:`Carry`; the next layer's input norm (or the
model's final norm) adds it. Each layer so makes two calls of the family, the final norm one (2 L + 1 a
forward); the first layer's input norm adds a zero residual (bf16(h + 0) = h, bit for bit), so every norm of
the model is the family's.

The family supplies the operation in one of two shapes (:func:`roles_of`): out of place (inputs ``x``,
``residual``, ``weight``; outputs ``out``, ``residual_out``: examples/fused_add_rmsnorm) or in place as
vLLM and FlashInfer write it (inputs ``input``, ``residual``, ``weight``; outputs ``input`` (the normed
values) and ``residual`` (the sum), each ``init_from`` its input).

Two ways to run it: :class:`KernelNorm` launches the genome's compiled kernel (CUDA; harness/gpu.py's
launcher on torch's current stream, so a CUDA graph capture records it) and :class:`ReferenceNorm` runs the
family's torch reference in float32, rounded to bf16 (CPU: there is no kernel to run; the reference is
the family's own statement of what its kernel computes, eps and roundings included: :data:`ENGINE_ROUNDS`).
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass
from typing import Any

LAYER_PARTS = ("input_layernorm", "post_attention_layernorm", "self_attn", "mlp")
# transformers' LlamaRMSNorm rounds the normalized value to bf16 before the weight multiplies it (two roundings);
# a family that offers the geometry parameter ``rounds`` is asked for that order, so that the decode with the
# family's kernel can keep the engine's own token stream (examples/fused_add_rmsnorm, docs/measurement.md)
ENGINE_ROUNDS = ("rounds", 2)


class HookError(Exception):
    """The family or the model cannot take the hook (one line, shown to the user)."""


@dataclass(frozen=True)
class Roles:
    """The family's names for the operation's tensors."""

    x: str
    residual: str
    weight: str
    out: str  # the normed values
    residual_out: str  # x + residual, rounded to bf16
    in_place: bool


OUT_OF_PLACE = Roles("x", "residual", "weight", "out", "residual_out", in_place=False)
IN_PLACE = Roles("input", "residual", "weight", "input", "residual", in_place=True)


def geometry(family: Any, T: int, H: int) -> Any:
    """The family's geometry for T token rows of width H (batch 1); HookError when the family refuses it."""
    from evo.core.family import Geometry

    params: dict[str, int] = {"T": T, "H": H}
    if ENGINE_ROUNDS[0] in {gp.name for gp in getattr(family, "geometry_params", ())}:
        params[ENGINE_ROUNDS[0]] = ENGINE_ROUNDS[1]
    g = Geometry(f"e2e_T{T}_H{H}", params, 1.0)
    try:
        why = family.check_geometry(g.params)
    except Exception as e:  # a family of other geometry parameters: not this operation
        raise HookError(
            f"family {family.name}: check_geometry(T={T}, H={H}) raised {type(e).__name__}: {e} "
            "(a fused add RMSNorm family's geometry is T, H)"
        ) from None
    if why:
        raise HookError(f"family {family.name} refuses T={T} H={H}: {why}")
    return g


def roles_of(family: Any, H: int) -> Roles:
    """Which shape of fused add RMSNorm the family is (its output names and dtypes decide); HookError if none."""
    g = geometry(family, 1, H)
    try:
        outs = {o.name: o for o in family.outputs(g)}
    except Exception as e:
        raise HookError(f"family {family.name}: outputs(T=1, H={H}) raised {type(e).__name__}: {e}") from None
    for roles in (OUT_OF_PLACE, IN_PLACE):
        if set(outs) == {roles.out, roles.residual_out}:
            bad = [n for n, o in outs.items() if o.dtype != "bfloat16"]
            if bad:
                raise HookError(f"family {family.name}: outputs {', '.join(bad)} are not bfloat16 (the model's dtype)")
            return roles
    raise HookError(
        f"family {family.name} is not a fused add RMSNorm: its outputs are {', '.join(sorted(outs))}, expected "
        "out and residual_out (inputs x, residual, weight) or in-place input and residual"
    )


class ReferenceNorm:
    """The family's torch reference at float32, its outputs rounded to bf16 (the CPU path)."""

    def __init__(self, family: Any, H: int):
        self.family, self.H, self.roles = family, H, roles_of(family, H)
        self.label = "reference"

    def __call__(self, x: Any, residual: Any, weight: Any) -> tuple[Any, Any]:
        import torch

        r = self.roles
        g = geometry(self.family, x.shape[0], self.H)
        ref = self.family.reference({r.x: x, r.residual: residual, r.weight: weight}, g, dtype=torch.float32)
        return ref[r.out].to(torch.bfloat16), ref[r.residual_out].to(torch.bfloat16)


class KernelNorm:
    """The genome's compiled kernel, launched on torch's current CUDA stream (built once, for each T in ``rows``)."""

    def __init__(self, family: Any, genome: Any, H: int, rows: list[int]):
        from harness.build import Builder
        from harness.gpu import GpuBackend

        self.family, self.H, self.roles = family, H, roles_of(family, H)
        self.geos = {T: geometry(family, T, H) for T in sorted(set(rows))}
        builder = Builder(family, list(self.geos.values()))
        self.backend = GpuBackend(family, list(self.geos.values()), builder, seeds=1, runs=1)
        self.loaded = self.backend.load(builder.build(genome), genome)
        self.label = "kernel"

    def __call__(self, x: Any, residual: Any, weight: Any) -> tuple[Any, Any]:
        import torch

        r, T = self.roles, x.shape[0]
        g = self.geos.get(T)
        if g is None:
            raise HookError(f"no build of {self.family.name} for T={T} (built for T in {sorted(self.geos)})")
        if r.in_place:  # the engine's form updates its inputs: give it copies, the model's tensors stay as they are
            x, residual = x.clone(), residual.clone()
            outs = {r.out: x, r.residual_out: residual}
        else:
            outs = {r.out: torch.empty_like(x), r.residual_out: torch.empty_like(x)}
        self.backend._launcher(self.loaded, g, {r.x: x, r.residual: residual, r.weight: weight}, outs)()
        return outs[r.out], outs[r.residual_out]


@dataclass
class Carry:
    """The residual one layer leaves for the next norm to add (set during a forward, read within it)."""

    residual: Any = None
    profiling: bool = False
    impl: Any = None  # the ReferenceNorm or KernelNorm installed (the profile reads its kernel's name)


class Fused:
    """Calls the family's operation on [..., H] tensors, as [rows, H] (named ``name`` under torch.profiler)."""

    def __init__(self, impl: Any, name: str, carry: Carry):
        self.impl, self.name, self.carry = impl, name, carry

    def __call__(self, x: Any, residual: Any, weight: Any) -> tuple[Any, Any]:
        import torch

        shape = x.shape
        ctx = torch.profiler.record_function(self.name) if self.carry.profiling else contextlib.nullcontext()
        with ctx:
            out, res = self.impl(
                x.reshape(-1, shape[-1]).contiguous(), residual.reshape(-1, shape[-1]).contiguous(), weight
            )
        return out.view(shape), res.view(shape)


def _layer_forward(layer: Any, index: int, fused: Fused) -> Any:
    """A forward for one decoder layer with both adds fused into the norms (the model's other arguments, given by
    name as LlamaModel gives them, go to the attention untouched, as the layer's own forward passes them)."""

    def forward(self: Any, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
        import torch

        if args:
            raise HookError("the decoder layer was called with positional arguments beyond hidden_states")
        carry = fused.carry
        residual = torch.zeros_like(hidden_states) if index == 0 else carry.residual
        h, residual = fused(hidden_states, residual, self.input_layernorm.weight)
        h = self.self_attn(hidden_states=h, **kwargs)[0]
        h, residual = fused(h, residual, self.post_attention_layernorm.weight)
        carry.residual = residual
        return self.mlp(h)  # the residual add waits for the next norm

    return types.MethodType(forward, layer)


class FinalNorm:
    """The model's last norm with the last layer's residual add fused into it (replaces ``model.norm``)."""

    def __init__(self, norm: Any, fused: Fused):
        self.weight, self.fused = norm.weight, fused

    def __call__(self, hidden_states: Any) -> Any:
        return self.fused(hidden_states, self.fused.carry.residual, self.weight)[0]


def install(model: Any, impl: Any, name: str) -> Carry:
    """Plug ``impl`` (a ReferenceNorm or KernelNorm) into every layer of a transformers Llama-family causal LM;
    returns the Carry (its ``profiling`` flag names the calls under torch.profiler). HookError when the model
    is not shaped as this hook expects."""
    import torch

    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    norm = getattr(inner, "norm", None)
    if inner is None or layers is None or norm is None or not len(layers):
        raise HookError(f"{type(model).__name__}: expected .model.layers and .model.norm (a Llama-family model)")
    for i, layer in enumerate(layers):
        missing = [p for p in LAYER_PARTS if not hasattr(layer, p)]
        if missing:
            raise HookError(f"{type(layer).__name__} (layer {i}) has no {', '.join(missing)}: not a Llama-style layer")
    carry = Carry(impl=impl)
    fused = Fused(impl, name, carry)
    for i, layer in enumerate(layers):
        layer.forward = _layer_forward(layer, i, fused)

    class _Norm(torch.nn.Module):
        def __init__(self, final: FinalNorm):
            super().__init__()
            self.final = final

        def forward(self, hidden_states: Any) -> Any:
            return self.final(hidden_states)

    inner.norm = _Norm(FinalNorm(norm, fused))
    return carry
