"""The backends a campaign can measure on, by name, and the factories an isolated worker process runs.

``auto`` picks ``gpu`` where a CUDA GPU is visible, else ``recorded`` (the family's recorded sweep). The factories
take a config path because they run in a fresh process (harness/worker.py starts them by name, "module:function"),
where the campaign's objects do not exist.
"""

from __future__ import annotations

from typing import Any

BACKENDS = ("auto", "gpu", "recorded")  # what configs and the CLI's --backend accept
WORKER_FACTORIES = {"gpu": "evo.backends:gpu_backend", "recorded": "evo.backends:recorded_backend"}


def gpu_backend(config: str, backend: str | None = None, storage: str | None = None) -> Any:
    """Factory run inside the worker: the GPU backend of a campaign config."""
    from evo.config import load_config
    from harness.build import Builder
    from harness.gpu import GpuBackend

    cfg = load_config(config, backend_override=backend, storage_override=storage)
    return GpuBackend.for_config(cfg, Builder.for_config(cfg))


def recorded_backend(config: str, backend: str | None = None, storage: str | None = None) -> Any:
    """Factory run inside the worker: the recorded backend (used to test the worker path without a GPU)."""
    from evo.config import load_config
    from harness.recorded import RecordedBackend

    cfg = load_config(config, backend_override=backend, storage_override=storage)
    c = cfg.gates.correctness
    return RecordedBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs)
