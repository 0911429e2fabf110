"""The backends a campaign can measure on, registered by name: the config's ``backend`` and the CLI's ``--backend``
take these names (``BACKENDS``), and ``evo.loop.seams.make_backend`` makes one from its entry. ``auto`` picks ``gpu``
where a CUDA GPU is visible, else ``recorded`` (the family's recorded sweep).

Each entry names two factories as "module:function" (imported only when used): ``make(cfg, builder)`` builds the
backend in this process, ``worker(config, backend, storage)`` in an isolated worker process (harness/worker.py
starts it in a fresh interpreter, so it takes a config path, not objects). A backend implements
``evo.core.protocols.Backend``. A new one is one ``register`` call here (its factories in evo/backend_factories.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackendEntry:
    name: str
    make: str  # "module:function" (cfg, builder) -> Backend, in this process
    worker: str  # "module:function" (config, backend, storage) -> Backend, in an isolated worker process
    needs_gpu: bool = False  # refused, with the reason, where no CUDA GPU is visible
    pdl: bool = False  # can time programmatic dependent launches (gates.perf.launch: pdl)
    isolate_by_default: bool = False  # worker.isolation: auto runs it in a worker process
    unavailable: str = ""  # what the one-line error says before the backend's own reason when it cannot start

    def factory(self, which: str = "make") -> Callable[..., Any]:
        mod, fn = getattr(self, which).split(":")
        return getattr(importlib.import_module(mod), fn)


REGISTRY: dict[str, BackendEntry] = {}


def register(entry: BackendEntry) -> BackendEntry:
    if entry.name == "auto" or entry.name in REGISTRY:
        raise ValueError(f"backend {entry.name!r} is registered already")
    REGISTRY[entry.name] = entry
    return entry


register(
    BackendEntry(
        "gpu",
        "evo.backend_factories:gpu_for_config",
        "evo.backend_factories:gpu_backend",
        needs_gpu=True,
        pdl=True,
        isolate_by_default=True,
    )
)
register(
    BackendEntry(
        "recorded",
        "evo.backend_factories:recorded_for_config",
        "evo.backend_factories:recorded_backend",
        unavailable="no GPU here and ",
        pdl=True,  # from a sweep timed with PDL launches (tools/sweep.py on a launch: pdl config), where one exists
    )
)


def resolve(name: str, family: Any = None) -> str:
    """The backend a config's name stands for here: ``auto`` is gpu where a CUDA GPU is visible and the family has
    a kernel to run (a Kernel Tuner cache has none: ``recorded_only``), else recorded (the one place that rule
    lives); any other name as given."""
    if name != "auto":
        return name
    from harness.gpu import gpu_available, gpu_problem

    cache = getattr(family, "recorded_only", False)
    kind = "gpu" if gpu_available() and not cache else "recorded"
    problem = None if kind == "gpu" or cache else gpu_problem()
    if problem is not None and problem != "no CUDA GPU is visible":  # a GPU evo cannot use: said, never hidden
        sys.stderr.write(f"evo: warning: backend auto took the recorded measurements: {problem}\n")
    return kind


BACKENDS = ("auto", *REGISTRY)  # what configs and the CLI's --backend accept
WORKER_FACTORIES = {name: e.worker for name, e in REGISTRY.items()}
