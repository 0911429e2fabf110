"""The gates by name, and their order: the judge's one list (gates/judge.py runs them).

A gate is one module that registers a function of the step under a name and an order::

    from gates.registry import register_gate

    @register_gate("policy", order=25)  # after "static" (20), before "identical_sass" (30)
    def policy(step):
        ...

The built-in gates (gates/pipeline/) register when ``gate_order()`` is first called; so do the modules that
installed packages name under the ``evo.gates`` entry-point group (docs/gates.md), each imported once. A name
registered again replaces its gate only with ``replace=True`` (so a typo cannot silently shadow a built-in).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from evo.core.records import Verdict

ENTRY_POINT_GROUP = "evo.gates"
BUILTIN = "gates.pipeline"  # the package whose modules are the built-in gates


class GateError(Exception):
    """A gate registered twice under one name, or asked for by a name nobody registered."""


@dataclass(frozen=True)
class RegisteredGate:
    """A gate of the registry: its name, where it runs (lower first) and the function of the step that it runs.
    Called by the judge once per attempt, while the attempt passes the gates before it."""

    name: str
    check: Callable[[Any], Verdict | None]
    order: float = 0.0

    def __call__(self, step: Any) -> Verdict | None:
        return self.check(step)


_REGISTRY: dict[str, RegisteredGate] = {}
_loaded: set[str] = set()  # entry points imported so far (each once per process)


def register_gate(
    name: str, order: float, *, replace: bool = False
) -> Callable[[Callable[[Any], Verdict | None]], Callable[[Any], Verdict | None]]:
    """Decorator: register ``fn(step) -> Verdict | None`` as gate ``name`` at ``order``; called when its module is
    imported. Returns the function unchanged."""

    def deco(fn: Callable[[Any], Verdict | None]) -> Callable[[Any], Verdict | None]:
        if name in _REGISTRY and not replace and _REGISTRY[name].check is not fn:
            raise GateError(f"gate {name!r} is registered already; pass replace=True to replace it")
        _REGISTRY[name] = RegisteredGate(name, fn, order)
        return fn

    return deco


def unregister_gate(name: str) -> None:
    """Remove gate ``name`` (a test's clean-up, or a package withdrawing a built-in)."""
    _REGISTRY.pop(name, None)


def load_gates() -> None:
    """Import the built-in gates and every ``evo.gates`` entry point not imported yet. Called by ``gate_order()``."""
    importlib.import_module(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{ep.name}={ep.value}"
        if key in _loaded:
            continue
        _loaded.add(key)
        try:
            ep.load()
        except Exception as e:  # a broken plug-in is named, not a traceback from deep inside the loop
            why = f"{type(e).__name__}: {e}"
            raise GateError(f"gate plug-in {ep.name!r} ({ep.value}) could not be loaded: {why}") from None


def gate_order() -> list[RegisteredGate]:
    """The registered gates, cheapest first (by order, then name): the list the judge runs. Called once per
    campaign (``Campaign`` takes it when no ``gates=`` are given)."""
    load_gates()
    return sorted(_REGISTRY.values(), key=lambda g: (g.order, g.name))


def builtin_gates() -> list[RegisteredGate]:
    """The built-in gates alone, in order (those gates/pipeline/ registers)."""
    load_gates()
    return [g for g in gate_order() if g.check.__module__.removeprefix("evo.").startswith(BUILTIN + ".")]


def get_gate(name: str) -> RegisteredGate:
    """The gate registered as ``name``."""
    load_gates()
    if name not in _REGISTRY:
        raise GateError(f"no gate named {name!r}; registered: {', '.join(g.name for g in gate_order())}")
    return _REGISTRY[name]


def markdown_table() -> str:
    """The registered gates as docs/gates.md lists them (name, order, module, what it decides: its docstring's first
    sentence); docs/gates.md holds the built-ins' table, checked by tests/test_gate_registry.py."""
    rows = ["| gate | order | module | what it decides |", "|---|---|---|---|"]
    for g in gate_order():
        doc = " ".join((g.check.__doc__ or "").split())
        first = doc.split(". ")[0].rstrip(".") + "." if doc else ""
        module = g.check.__module__.removeprefix("evo.")  # the wheel names it evo.gates.*: one name in the docs
        rows.append(f"| `{g.name}` | {g.order:g} | {module} | {first.replace('|', '/')} |")
    return "\n".join(rows) + "\n"
