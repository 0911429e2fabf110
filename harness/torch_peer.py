"""torch.compile of the family's float32 reference as a peer (``peer.torch_compile``), for the GPU backend.

Two uses, both through harness/gpu.py: timed apart once in set-up (``time_apart``: a graph of 20 calls, the median
of 9 replays; the ledger meta ``peer_torch_compile``), and as a part of the interleaved measurement of the champion
and its peer kernels as a run ends (evo/loop/peers.py): ``GpuBackend.load(None, {"mode": m}, peer=TORCH_COMPILE)``
gives a :class:`TorchPart`, ``prepare`` compiles it at each geometry (a slow call, apart from the timing), and the
backend's launcher then calls the compiled function on the campaign's inputs, captured in CUDA graphs as a kernel
is. Its outputs are the reference's own (float32, cast to the outputs' dtypes): they are not checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

TORCH_COMPILE = "torch.compile"  # the peer name that loads this part (evo/measure/peer_kernels.py reserves it)


@dataclass
class TorchPart:
    """torch.compile of the reference, loaded as a part: its compiled function and compile time per geometry."""

    mode: str
    genome: dict[str, Any]
    family: Any = None  # (harness/gpu.py: no family of its own; the campaign's outputs)
    fns: dict[str, Callable[[], Any]] = field(default_factory=dict)
    compile_s: dict[str, float] = field(default_factory=dict)


def compiled_reference(backend: Any, mode: str, g: Any) -> tuple[Callable[[], Any], float]:
    """The family's float32 reference on the campaign's inputs at ``g``, compiled and called 4 times (the first
    compiles), and the seconds the first call took."""
    torch, fam = backend.torch, backend.family
    inputs = backend.inputs(g, 0)

    def fn() -> dict[str, Any]:
        r = fam.reference(inputs, g, dtype=torch.float32)
        return {k: v.to(getattr(torch, o.dtype)) for (k, v), o in zip(r.items(), fam.outputs(g))}

    cf = torch.compile(fn, **({} if mode == "default" else {"mode": mode}))
    t0 = time.perf_counter()
    cf()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    for _ in range(3):
        cf()
    torch.cuda.synchronize()
    return cf, compile_s


def prepare(backend: Any, part: TorchPart, geometries: Sequence[Any]) -> dict[str, Any]:
    """Compile ``part`` at each geometry before it is timed; per geometry its compile seconds or the error."""
    out: dict[str, Any] = {}
    for g in geometries:
        try:
            if g.name not in part.fns:
                part.fns[g.name], part.compile_s[g.name] = compiled_reference(backend, part.mode, g)
            out[g.name] = {"compile_s": round(part.compile_s[g.name], 1)}
        except Exception as e:  # noqa: BLE001 - torch.compile's own failures: the peer's record, never the run's
            out[g.name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    return out


def launcher(backend: Any, part: TorchPart, g: Any) -> Callable[[], Any]:
    """The zero-argument call the backend captures in its graphs (compiled here if ``prepare`` was not asked)."""
    if g.name not in part.fns:
        part.fns[g.name], part.compile_s[g.name] = compiled_reference(backend, part.mode, g)
    return part.fns[g.name]


def time_apart(backend: Any, mode: str, geometries: Sequence[Any]) -> dict[str, Any]:
    """torch.compile of the float32 reference, timed by graph replay at each geometry, once in set-up: the peer a
    user would otherwise pick (GpuBackend.peer_torch_compile)."""
    torch = backend.torch
    out: dict[str, Any] = {}
    for g in geometries:
        try:
            cf, compile_s = compiled_reference(backend, mode, g)
            n = 20
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
                for _ in range(n):
                    cf()
            ts = sorted(backend._time_graph(graph) / n for _ in range(9))
            out[g.name] = {
                "median_us": round(ts[len(ts) // 2], 3),
                "mode": mode,
                "compile_s": round(compile_s, 1),
                "method": f"batch: graph x {n}, 9 replays, median",
            }
        except Exception as e:  # noqa: BLE001 - the peer is context, never a reason to stop a campaign
            out[g.name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", "mode": mode}
    return out
