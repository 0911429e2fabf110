"""A ledger held in memory: the campaign loop's storage (evo/core/protocols.py ``Storage``) where nothing is kept.

The search benchmark (tools/search_bench.py) runs thousands of short campaigns on a recorded sweep; an Optuna
study per run would cost a database write per attempt for results nobody reads back. Attempts get the trial
numbers a fresh ledger would give them (0, 1, ...), in the order they are asked for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evo.core.records import Attempt
from evo.ledger.view import View


@dataclass
class MemoryTrial:
    number: int
    genome_key: str


class MemoryLedger:
    """One process's campaign: ``ask`` / ``record`` / ``view`` as evo.ledger.ledger.Ledger has them, in a list."""

    shared = False
    claimed = False  # claim() holds nothing: no other process can see this campaign
    limit: int | None = None
    heartbeat_s = 10**9  # no other process: nothing to recover
    grace_s = 2 * 10**9
    elapsed_fn: Callable[[], float] | None = None  # no session heartbeat: set by the loop, read by nothing

    def __init__(self) -> None:
        self._meta: dict[str, Any] = {}
        self._attempts: list[Attempt] = []
        self._running: dict[int, MemoryTrial] = {}
        self._next = 0

    def claim(self, mode: str = "run") -> None:
        return None

    def release(self) -> None:
        return None

    def meta(self, key: str, default: Any = None) -> Any:
        return self._meta.get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self._meta[key] = copy.deepcopy(value)

    def set_meta_many(self, items: Mapping[str, Any]) -> None:
        for k, v in items.items():
            self.set_meta(k, v)

    def all_meta(self) -> dict[str, Any]:
        return copy.deepcopy(self._meta)

    def create_meta(self, items: Mapping[str, Any]) -> bool:
        if any(k in self._meta for k in items):
            return False
        self.set_meta_many(items)
        return True

    def append_meta(self, key: str, item: Any) -> None:
        self._meta[key] = [*self._meta.get(key, []), copy.deepcopy(item)]

    def ask(self, fixed: Mapping[str, Any] | None = None) -> MemoryTrial:
        from evo.core.genome import Genome

        if fixed is None:
            raise ValueError("a memory ledger holds fixed genomes only")
        t = MemoryTrial(self._next, Genome(fixed).key)
        self._next += 1
        self._running[t.number] = t
        return t

    def record(
        self,
        trial: MemoryTrial,
        attempt: Attempt,
        meta: Mapping[str, Any] | None = None,
        *,
        meta_max: Mapping[str, float] | None = None,
    ) -> None:
        attempt.id = trial.number
        self._running.pop(trial.number, None)
        self._attempts.append(attempt)
        if len(self._attempts) > 1 and self._attempts[-2].id > attempt.id:  # recorded after a later trial
            self._attempts.sort(key=lambda a: a.id)
        self.set_meta_many(meta or {})
        for k, v in (meta_max or {}).items():
            old = self._meta.get(k)
            if not isinstance(old, (int, float)) or old < v:
                self._meta[k] = v

    def attempts(self) -> list[Attempt]:
        return list(self._attempts)

    def seen_keys(self) -> set[str]:
        return self.view().seen

    def running(self) -> list[MemoryTrial]:
        return list(self._running.values())

    def champion(self) -> Attempt | None:
        return self.view().champion()

    def view(self) -> View:
        seen = {a.genome_key for a in self._attempts if a.verdict.kind != "interrupted"}
        seen.update(t.genome_key for t in self._running.values())
        return View(list(self._attempts), seen, list(self._running.values()))

    def recover(self) -> list[int]:
        return []

    def damaged_note(self) -> str | None:
        return None
