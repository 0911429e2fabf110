"""The registered backends' factories (evo/backends.py): in this process from a loaded config, or inside an isolated
worker process (harness/worker.py) from a config path."""

from __future__ import annotations

from typing import Any


def gpu_for_config(cfg: Any, builder: Any) -> Any:
    """The GPU backend of a campaign, in this process."""
    from harness.gpu import GpuBackend

    return GpuBackend.for_config(cfg, builder)


def recorded_for_config(cfg: Any, builder: Any = None) -> Any:
    """The recorded backend of a campaign (the family's sweep that covers its geometries); raises NotRecorded."""
    from harness.recorded import RecordedBackend

    c = cfg.gates.correctness
    if getattr(cfg.family, "recorded_only", False):  # a Kernel Tuner cache (harness/ktcache.py) replays itself
        from harness.ktcache import KTCacheBackend

        return KTCacheBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs)
    return RecordedBackend(cfg.family, cfg.geometries, seeds=c.seeds, runs=c.runs, launch=cfg.gates.perf.launch)


def gpu_backend(config: str, backend: str | None = None, storage: str | None = None) -> Any:
    """Factory run inside the worker: the GPU backend of a campaign config."""
    from evo.config import load_config
    from harness.build import Builder

    cfg = load_config(config, backend_override=backend, storage_override=storage)
    return gpu_for_config(cfg, Builder.for_config(cfg))


def recorded_backend(config: str, backend: str | None = None, storage: str | None = None) -> Any:
    """Factory run inside the worker: the recorded backend (used to test the worker path without a GPU)."""
    from evo.config import load_config

    cfg = load_config(config, backend_override=backend, storage_override=storage)
    return recorded_for_config(cfg)
