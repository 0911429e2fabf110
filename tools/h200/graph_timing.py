"""Per-launch time of any launch as the harness times a genome (for the probes in tools/h200, on the GPU)."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def time_launch(be, launch: Callable[[], None], label: str, nbytes: int | None = None) -> float:
    """Median per-launch µs of ``launch`` in CUDA-graph batches of about 10 ms (7 of them) on the backend ``be``'s
    stream, printed with ``label`` and, given ``nbytes``, the rate."""
    torch = be.torch

    def on_stream() -> None:
        with be._cupy_stream(torch.cuda.current_stream().cuda_stream):
            launch()

    graph = be._graph(on_stream, 5)
    us1 = min(be._time_graph(graph) for _ in range(3)) / 5
    n = int(min(2000, max(3, round(10000.0 / max(us1, 0.5)))))
    graph = be._graph(on_stream, n)
    be._warm_up([graph])
    us = statistics.median(be._time_graph(graph) / n for _ in range(7))
    rate = f"  {nbytes / (us * 1e-6) / 1e12:.3f} TB/s" if nbytes else ""
    print(f"{label:58s} {us:9.2f} us a launch ({n} a graph){rate}", flush=True)
    return us
