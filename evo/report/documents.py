"""The machine-readable forms of what evo's commands print (`--json`): plain dicts of JSON types, one per command.

Called by the CLI (evo/cli/*.py) when a command is given --json; the text forms stay in logmd.py and the CLI.
Keys are snake_case; speedups are ``{value, lo, hi, confidence}``; ``simulated`` says a recorded-backend result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.records import Attempt, Interval
from evo.report.converged import convergence
from evo.report.logmd import _baseline, _verdict_counts, champion_chain


def interval(iv: Interval) -> dict[str, float]:
    """A speedup with its interval."""
    return {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "confidence": iv.confidence}


def attempt_brief(a: Attempt) -> dict[str, Any]:
    """What a script needs of one attempt: its id, genome, verdict (label, code, reason) and speedups."""
    return {
        "id": a.id,
        "genome": dict(a.genome),
        "verdict": a.verdict.label(),
        "status": a.verdict.status,
        "gate": a.verdict.gate,
        "code": a.verdict.code.value,
        "reason": a.verdict.reason,
        "score": a.score,
        "backend": a.backend,
        "speedup_vs_baseline": {g: interval(iv) for g, iv in a.speedup_vs_baseline.items()},
    }


def status_document(attempts: Sequence[Attempt], meta: Mapping[str, Any]) -> dict[str, Any]:
    """`evo status --json`: the campaign, its verdict counts, its champion and the best speedup per geometry."""
    meta = meta or {}
    cfg = meta.get("config") or {}
    attempts = sorted(attempts, key=lambda a: a.id)
    chain = champion_chain(attempts, meta)
    base = _baseline(attempts, meta)
    conv = convergence(attempts)
    best: dict[str, Any] = {}
    for a in chain:
        for g, iv in a.speedup_vs_baseline.items():
            if g not in best or iv.value > best[g]["value"]:
                best[g] = {**interval(iv), "attempt": a.id}
    return {
        "campaign": cfg.get("campaign") or (attempts[0].campaign if attempts else None),
        "family": cfg.get("family") or (attempts[0].family if attempts else None),
        "backend": meta.get("backend") or cfg.get("backend"),
        "simulated": bool(meta.get("simulated")),
        "attempts": len(attempts),
        "verdicts": dict(_verdict_counts(attempts)),
        "baseline": base.id if base else None,
        "champion": attempt_brief(chain[-1]) if chain else None,
        "best_speedup_vs_baseline": best,
        "elapsed_s": meta.get("elapsed_s"),
        "attempts_since_champion": conv.since if conv is not None else None,
        "converged": bool(conv is not None and conv.converged),
    }
