"""When the campaign's budget is spent, and what the proposer need not propose again (the exact-mode tabu): read
by the loop at every step from the attempts that step read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.records import Attempt, Code


def budget_spent(budget: Any, attempts: list[Attempt], elapsed: float) -> tuple[list[Attempt], str | None]:
    """The attempts that count against ``budget`` (the config's), and why it is spent (None while it is not)."""
    counted = [x for x in attempts if x.verdict.kind != "interrupted"]
    if budget.attempts is not None and len(counted) >= budget.attempts:
        return counted, f"attempt budget reached ({len(counted)}/{budget.attempts})"
    if budget.minutes is not None and elapsed >= budget.minutes * 60:
        return counted, f"time budget reached ({elapsed / 60:.1f}/{budget.minutes:g} min)"
    return counted, None


def exact_mode_tabu(attempts: Sequence[Attempt], baseline: Mapping[str, Any], mode: str) -> dict[str, list[Any]]:
    """Knob -> values the exact-mode correctness gate ruled out in ``attempts`` (read from each rejection's code and
    the knobs its detail names); empty in any other mode."""
    out: dict[str, list[Any]] = {}
    if mode != "exact":
        return out
    for a in attempts:
        if a.verdict.code is Code.CORRECTNESS_INEXACT_KNOB:
            for k in a.verdict.detail.get("knobs", ()):
                if k in baseline and a.genome[k] != baseline[k]:
                    out.setdefault(k, []).append(a.genome[k])
    return out


def spent_at_resume(ledger: Any, budget: Any, elapsed: float) -> str | None:
    """Why the budget of the campaign in ``ledger`` was spent before this run (a resume, `evo run` again), or None:
    nothing to resume (a new campaign, no baseline yet), budget left, or a shared storage (workers). Such a resume
    measures nothing (no A/A floor, baseline or ceiling check again: they would change nothing judged)."""
    if ledger.shared or ledger.meta("config") is None:
        return None
    attempts = ledger.attempts()
    if not any(a.verdict.status == "baseline" for a in attempts):
        return None
    return budget_spent(budget, attempts, elapsed)[1]
