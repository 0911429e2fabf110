"""The names ``harness`` and ``gates`` in an installed wheel, where they ship as ``evo.harness`` and ``evo.gates``.

The repository keeps harness/ and gates/ at its top level (and its code, the families' and the tests' import them
as ``harness.X`` and ``gates.X``), but a wheel that installed top-level packages of those names would collide with
other published projects that own them. So pyproject's package-dir ships them inside evo, and, when evo is imported
from such a wheel, :func:`install` puts an import hook first on ``sys.meta_path`` that answers ``harness[.X]`` and
``gates[.X]`` with the very module objects ``evo.harness[.X]`` and ``evo.gates[.X]``: one module under two names,
so classes, isinstance checks and pickles (the worker's spawn child imports evo first) agree.

Called by evo/__init__.py, before evo itself imports harness or gates. Where evo.harness does not exist (a source
checkout on sys.path: no evo/harness folder) it does nothing and the top-level folders are imported as they are;
an editable install maps evo.harness to the repository's harness/ (pyproject's package-dir), so the hook serves
there too. A process that imported a top-level harness before evo keeps it (no hook: one module a name).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

ALIASED = ("harness", "gates")  # top-level names in the repository, evo.<name> in the wheel


class _SameModule(importlib.abc.Loader):
    """Loads an alias: the module already imported under its evo name, executed no second time."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass  # it ran when imported as evo.<name>


class _AliasFinder(importlib.abc.MetaPathFinder):
    """``harness`` / ``harness.build`` / ``gates.perf`` ... answered with ``evo.harness`` / ``evo.harness.build`` ..."""

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] not in ALIASED:
            return None
        module = importlib.import_module(f"evo.{fullname}")
        return importlib.machinery.ModuleSpec(fullname, _SameModule(module), is_package=hasattr(module, "__path__"))


def packaged() -> bool:
    """Whether harness and gates are importable as evo.harness and evo.gates (a wheel, or an editable install)."""
    return importlib.util.find_spec("evo.harness") is not None and importlib.util.find_spec("evo.gates") is not None


def install() -> None:
    """Put the alias hook first on sys.meta_path (once); called where :func:`packaged`."""
    if any(isinstance(f, _AliasFinder) for f in sys.meta_path) or any(n in sys.modules for n in ALIASED):
        return
    sys.meta_path.insert(0, _AliasFinder())
