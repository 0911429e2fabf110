"""The backends a campaign can measure on, registered by name: the config's ``backend`` and the CLI's ``--backend``
take these names (``BACKENDS``), and ``evo.loop.seams.make_backend`` makes one from its entry (``REGISTRY``).
``auto`` picks ``gpu`` where a CUDA GPU is visible, else ``recorded`` (the family's recorded sweep).

Each entry names two factories as "module:function" (imported only when used): ``make(cfg, builder)`` builds the
backend in this process, ``worker(config, backend, storage)`` in an isolated worker process (harness/worker.py
starts it in a fresh interpreter, so it takes a config path, not objects). A backend implements
``evo.core.protocols.Backend``. The built-ins register below (their factories in evo/backend_factories.py); a new
one is one module of its own, outside evo, that calls ``register(BackendEntry(...))`` when imported, named under the
``evo.backends`` entry-point group of its package (docs/extending.md §6, tests/test_plugins.py)::

    [project.entry-points."evo.backends"]
    mine = "my_site.backend"

Such modules are imported once, when the registry is first read (evo/core/plugins.py); one that fails to import is
a one-line ``PluginError`` naming it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evo.core.plugins import Names, PluginError, Registry

ENTRY_POINT_GROUP = "evo.backends"


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


REGISTRY: Registry[BackendEntry] = Registry(ENTRY_POINT_GROUP, "backend", reserved=("auto",))


def register(entry: BackendEntry) -> BackendEntry:
    """Add a backend by its entry's name; called here for the built-ins and by a plug-in's module when imported.
    Raises PluginError for a name taken (or ``auto``)."""
    return REGISTRY.register(entry.name, entry)


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


BACKENDS = Names(REGISTRY, first=("auto",))  # what configs and the CLI's --backend accept (read when used)

__all__ = ["BACKENDS", "ENTRY_POINT_GROUP", "REGISTRY", "BackendEntry", "PluginError", "register", "resolve"]
