"""Factories an isolated worker process (harness/worker.py) runs to make its backend from a config path."""

from __future__ import annotations

from typing import Any


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
