"""Sanitizer gate: compute-sanitizer's parsed reports of one step + the family's suppressions -> a verdict.

A step becomes the champion only if no tool reported a finding the family does not declare known
(evo.core.family.SanitizerSuppression: tool, kernel, pattern, and the argument a reviewer must read). A tool that could
not check the step (unavailable, timeout, failed) is no finding: the step stands, and is "not sanitizer-checked"
by that tool in the log and its commit message. Running the tool is evo/measure/sanitize.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evo.core.records import PASS, Code, Verdict

CLEAN, ERRORS = "clean", "errors"
SHOWN = 3  # finding lines a rejection's reason quotes


class Suppression(Protocol):
    """What the gate reads of a family's declared suppression (evo.core.family.SanitizerSuppression)."""

    name: str
    tool: str
    argument: str

    def applies(self, genome: Mapping[str, Any]) -> bool: ...

    def matches(self, tool: str, line: str) -> bool: ...


@dataclass
class ToolReport:
    """One tool's result as evo/measure/sanitize.py parsed it."""

    tool: str
    status: str  # clean | errors | unavailable | timeout | failed
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
    judge: the tools' reports, or why none could run; ``extra`` rides along in the step's record (version, times)."""

    reports: list[ToolReport] = field(default_factory=list)
    skipped: str | None = None  # why no tool ran: the step stands, "not sanitizer-checked"
    extra: dict[str, Any] = field(default_factory=dict)

    def judged(self, suppressions: Sequence[Suppression], genome: Mapping[str, Any]) -> SanitizerResult:
        """The run's verdict and record: ``sanitizer_gate`` over the reports, PASS unchecked when none ran."""
        if self.skipped is not None:
            return SanitizerResult(PASS, unchecked(self.skipped))
        res = sanitizer_gate(self.reports, suppressions, genome)
        res.record.update(self.extra)
        return res


@dataclass
class SanitizerResult:
    verdict: Verdict
    record: dict[str, Any]  # what the step carries: checked, tools, suppressed, unchecked (evo/report/: logmd, export)


def _errors(r: ToolReport) -> list[str]:
    # warnings ("Warning: Race reported ...", "Warning: Maximum number of hazards reached") are not counted as errors
    return [ln for ln in r.findings if not ln.lstrip().lower().startswith("warning")]


def sanitizer_gate(
    reports: Sequence[ToolReport], suppressions: Sequence[Suppression], genome: Mapping[str, Any]
) -> SanitizerResult:
    """PASS unless an error finding is not matched by a suppression that applies to ``genome``; a tool that
    counts more errors than it printed lines has findings nobody could match, so it cannot pass as suppressed."""
    known = [s for s in suppressions if s.applies(genome)]
    record: dict[str, Any] = {
        "checked": bool(reports) and all(r.status in (CLEAN, ERRORS) for r in reports),
        "tools": {r.tool: r.status for r in reports},
        "suppressed": [],
        "unchecked": {r.tool: r.reason or r.status for r in reports if r.status not in (CLEAN, ERRORS)},
    }
    if not reports:
        record["unchecked"] = {"": "no sanitizer tool ran"}
    for r in reports:
        if r.status != ERRORS:
            continue
        lines = _errors(r)
        open_: list[str] = []
        for ln in lines:
            hit = next((s for s in known if s.matches(r.tool, ln)), None)
            if hit is None:
                open_.append(ln)
            else:
                record["suppressed"].append(
                    {"name": hit.name, "tool": r.tool, "finding": ln[:300], "argument": hit.argument}
                )
        unseen = max(0, (r.count or 0) - len(lines))
        if open_ or unseen or not lines:
            shown = open_[:SHOWN] or lines[:SHOWN]
            more = f"; {unseen} more error(s) not printed in the report" if unseen else ""
            record["suppressed"] = [x for x in record["suppressed"] if x["tool"] != r.tool]
            reason = (
                f"{r.tool} reported {r.count or len(lines)} error(s), {len(open_) + unseen} not declared known by the "
                f"family{more}: " + " | ".join(shown)
            )
            return SanitizerResult(
                Verdict.rejected(
                    "sanitizer",
                    reason[:600],
                    Code.SANITIZER_FINDING,
                    {"tool": r.tool, "findings": shown, "sanitizer": record},
                ),
                record,
            )
    return SanitizerResult(PASS, record)


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
