"""Registries by name that installed packages extend: the backends (evo/backends.py, entry-point group
``evo.backends``) and the proposers (evo/search/__init__.py, ``evo.proposers``). The gates' registry
(gates/registry.py, ``evo.gates``) works the same way, in its own layer.

A plug-in is one module of an installed package, named under the group in its metadata::

    [project.entry-points."evo.backends"]
    mine = "my_site.backend"

Importing that module registers what it adds (``evo.backends.register(BackendEntry(...))``,
``@register_proposer("name")``). Each module is imported once per process, when its registry is first read (a
config's ``backend:`` or ``proposer.name`` checked, ``--backend`` parsed, a campaign's seams made), never when evo
itself is imported; a module that fails to import is a one-line :class:`PluginError` naming it, raised again on
every later read.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class PluginError(Exception):
    """A plug-in that could not be loaded, or a name registered twice (one line, shown to the user)."""


class PluginGroup:
    """The modules one entry-point group names, each imported once. ``load`` is called on every read of the
    registry it fills; it looks at the installed packages again only when ``sys.path`` changed since."""

    def __init__(self, group: str, what: str):
        self.group, self.what = group, what  # "evo.backends", "backend": the group, and its things as people say it
        self.done: dict[str, str] = {}  # "name=module" -> "" (imported) or the one line a broken one raises
        self.path: tuple[str, ...] | None = None  # sys.path at the last look at the installed packages

    def load(self) -> None:
        """Import each module of the group not imported yet; raise a broken one's line (again on each call)."""
        if self.path != tuple(sys.path):
            self.path = tuple(sys.path)
            for ep in entry_points(group=self.group):
                key = f"{ep.name}={ep.value}"
                if key not in self.done:
                    self.done[key] = ""  # marked first: a plug-in reading its registry as it loads is not re-entered
                    self.done[key] = self._import(ep)
        broken = [line for line in self.done.values() if line]
        if broken:
            raise PluginError(broken[0])

    def _import(self, ep: EntryPoint) -> str:
        """The empty string once the entry point's module is imported, else the one line naming it and why."""
        try:
            ep.load()
        except Exception as e:  # a broken plug-in is named, not a traceback from deep inside the loop
            why = " ".join(f"{type(e).__name__}: {e}".split())
            return f"{self.what} plug-in {ep.name!r} ({ep.value}) could not be loaded: {why}"
        return ""


class Registry(Mapping[str, T], Generic[T]):
    """Things by name (read as a mapping), the built-ins registered by evo and the plug-ins by their modules, which
    load when the registry is first read. ``reserved``: names nobody may register (``auto``)."""

    def __init__(self, group: str, what: str, reserved: Sequence[str] = ()):
        self.plugins = PluginGroup(group, what)
        self.what, self.reserved = what, tuple(reserved)
        self.entries: dict[str, T] = {}

    def register(self, name: str, value: T) -> T:
        """Add ``value`` as ``name``; called by evo for its built-ins and by a plug-in's module when imported."""
        if name in self.reserved or name in self.entries:
            raise PluginError(f"{self.what} {name!r} is registered already")
        self.entries[name] = value
        return value

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's clean-up)."""
        self.entries.pop(name, None)

    def __getitem__(self, name: str) -> T:
        self.plugins.load()
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        self.plugins.load()
        return iter(list(self.entries))

    def __len__(self) -> int:
        self.plugins.load()
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        self.plugins.load()
        return name in self.entries


class Names(Sequence[str]):
    """A registry's names after ``first`` (``auto``), read when used: argparse's ``choices`` and a config key's take
    it, so that building the CLI's parser or importing the config loads no plug-in (give argparse a ``metavar``)."""

    def __init__(self, registry: Registry[T], first: Sequence[str] = ()):
        self.registry, self.first = registry, tuple(first)

    def names(self) -> tuple[str, ...]:
        return (*self.first, *self.registry)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self.names()[i]

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.first or name in self.registry

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return repr(self.names())
