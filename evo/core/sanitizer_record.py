"""What compute-sanitizer found, as plain records: the vocabulary shared by the three that handle it.

evo/measure/sanitize.py runs the tools and hands a :class:`SanitizerRun` to the sanitizer gate
(gates/sanitizer.py, through ``JudgeContext.sanitize``), which judges it against the family's suppressions and
leaves a record dict on the step; the report (evo/report/logmd.py, export.py) and ``evo sanitize`` describe that
record in one line (:func:`describe`). Core types: the runner imports no gate to build its evidence, and the gate
imports nothing of the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A tool's result on one step: the first two are checks that ran; the others could not check it (no finding).
CLEAN, ERRORS, UNAVAILABLE, TIMEOUT, FAILED = "clean", "errors", "unavailable", "timeout", "failed"
STATUSES = (CLEAN, ERRORS, UNAVAILABLE, TIMEOUT, FAILED)


@dataclass
class ToolReport:
    """One tool's result as evo/measure/sanitize.py parsed it."""

    tool: str
    status: str  # one of STATUSES
    count: int | None = None  # errors in the summary
    findings: list[str] = field(default_factory=list)  # every top-level report line
    reason: str = ""

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> ToolReport:
        return cls(
            str(d.get("tool", "")),
            str(d.get("status", "")),
            d.get("count"),
            list(d.get("findings") or d.get("errors") or []),
            str(d.get("reason") or ""),
        )


@dataclass
class SanitizerRun:
    """What running the tools over one step gave (evo/measure/sanitize.py ``run_step``), for the sanitizer gate to
    judge (gates/sanitizer.py ``judged``): the tools' reports, or why none could run; ``extra`` rides along in the
    step's record (version, times)."""

    reports: list[ToolReport] = field(default_factory=list)
    skipped: str | None = None  # why no tool ran: the step stands, "not sanitizer-checked"
    extra: dict[str, Any] = field(default_factory=dict)


def unchecked(reason: str) -> dict[str, Any]:
    """The record of a step no sanitizer checked (no tool, the recorded backend, enabled: off)."""
    return {"checked": False, "tools": {}, "suppressed": [], "unchecked": {"": reason}}


def describe(record: Mapping[str, Any] | None) -> str:
    """One line for a step's sanitizer result: clean, suppressed findings (named), or not sanitizer-checked."""
    if not record:
        return "not sanitizer-checked (no sanitizer result recorded for this step)"
    tools = record.get("tools") or {}
    ran = [t for t, st in tools.items() if st in (CLEAN, ERRORS)]
    not_ = record.get("unchecked") or {}
    parts = []
    if ran:
        sup = record.get("suppressed") or []
        known = "; ".join(f"{s['name']} ({s['tool']}): {s['finding']}" for s in sup)
        parts.append(
            f"{', '.join(ran)} clean" + (f" except findings the family declares known: {known}" if sup else "")
        )
    if not_:
        why = "; ".join(f"{t}: {w}" if t else w for t, w in not_.items())
        parts.append(f"not sanitizer-checked ({why})")
    return "; ".join(parts) or "not sanitizer-checked"
