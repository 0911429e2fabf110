"""Sanitizer gate: compute-sanitizer's parsed reports of one step + the family's suppressions -> a verdict.

A step becomes the champion only if no tool reported a finding the family does not declare known
(evo.core.family.SanitizerSuppression: tool, kernel, pattern, and the argument a reviewer must read). A tool that could
not check the step (unavailable, timeout, failed) is no finding: the step stands, and is "not sanitizer-checked"
by that tool in the log and its commit message. Running the tool is evo/measure/sanitize.py's; the records it
hands over (ToolReport, SanitizerRun) are core types (evo/core/sanitizer_record.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evo.core.records import PASS, Code, Verdict

# the records the tools' run is handed over in, and their one-line description (core types: the runner in
# evo/measure builds them without importing the judge); re-exported, as before they moved
from evo.core.sanitizer_record import CLEAN, ERRORS, SanitizerRun, ToolReport, describe, unchecked

__all__ = [
    "CLEAN",
    "ERRORS",
    "SanitizerResult",
    "SanitizerRun",
    "Suppression",
    "ToolReport",
    "describe",
    "judged",
    "sanitizer_gate",
    "unchecked",
]

SHOWN = 3  # finding lines a rejection's reason quotes


class Suppression(Protocol):
    """What the gate reads of a family's declared suppression (evo.core.family.SanitizerSuppression)."""

    name: str
    tool: str
    argument: str

    def applies(self, genome: Mapping[str, Any]) -> bool: ...

    def matches(self, tool: str, line: str) -> bool: ...


def judged(run: SanitizerRun, suppressions: Sequence[Suppression], genome: Mapping[str, Any]) -> SanitizerResult:
    """The tools' run over one step judged: ``sanitizer_gate`` over its reports (their ``extra`` added to the
    record), PASS unchecked when none ran; by the sanitizer gate (gates/pipeline/sanitizer.py)."""
    if run.skipped is not None:
        return SanitizerResult(PASS, unchecked(run.skipped))
    res = sanitizer_gate(run.reports, suppressions, genome)
    res.record.update(run.extra)
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
