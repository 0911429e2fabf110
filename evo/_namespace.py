"""The names ``harness`` and ``gates`` in an installed wheel, where they ship as ``evo.harness`` and ``evo.gates``.

The repository keeps harness/ and gates/ at its top level (and its code, the families' and the tests' import them
as ``harness.X`` and ``gates.X``), but a wheel that installed top-level packages of those names would collide with
other published projects that own them. So pyproject's package-dir ships them inside evo, and, when evo is imported
from such a wheel, :func:`install` puts an import hook first on ``sys.meta_path`` that answers ``harness[.X]`` and
``gates[.X]`` with the very module objects ``evo.harness[.X]`` and ``evo.gates[.X]``: one module under two names,
so classes, isinstance checks and pickles (the worker's spawn child imports evo first) agree.

Called by evo/__init__.py, before evo itself imports harness or gates. Where evo is a source checkout (harness/ and
gates/ beside evo/: a checkout on sys.path, or an editable install) :func:`use_checkout` answers ``harness`` and
``gates`` from that same checkout: an editable install's finder maps evo.harness to the folder it was installed
from, which is another tree when a second checkout or worktree runs with its own folder on PYTHONPATH (its evo
would then run the first tree's harness). A process that imported a top-level harness before evo keeps it.
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


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Top-level ``harness`` / ``gates`` from the checkout evo itself was imported from (their submodules follow
    the package's own __path__)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in ALIASED:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])


def checkout_root() -> str | None:
    """The folder holding evo/, harness/ and gates/ when evo runs from a source checkout (None in a wheel)."""
    from pathlib import Path

    root = Path(__file__).absolute().parent.parent  # not resolve(): a wheel laid out with links is still a wheel
    return str(root) if all((root / n / "__init__.py").is_file() for n in ALIASED) else None


def use_checkout(root: str) -> None:
    """Put the checkout hook first on sys.meta_path (once); called where :func:`checkout_root` is a folder."""
    if any(isinstance(f, (_AliasFinder, _CheckoutFinder)) for f in sys.meta_path) or any(
        n in sys.modules for n in ALIASED
    ):
        return
    sys.meta_path.insert(0, _CheckoutFinder(root))


def packaged() -> bool:
    """Whether harness and gates are importable as evo.harness and evo.gates (a wheel, or an editable install)."""
    return importlib.util.find_spec("evo.harness") is not None and importlib.util.find_spec("evo.gates") is not None


def install() -> None:
    """Put the alias hook first on sys.meta_path (once); called where :func:`packaged`."""
    if any(isinstance(f, _AliasFinder) for f in sys.meta_path) or any(n in sys.modules for n in ALIASED):
        return
    sys.meta_path.insert(0, _AliasFinder())
