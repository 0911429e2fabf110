"""The convergence plot's legend (evo/report/logmd.py convergence_plot): what each mark is, counted as `evo status`
counts it.

Called once per plot. Every attempt is in exactly one entry: the baseline and the accepted steps apart (status says
"accepted 3, baseline 1", so the legend does not say "accepted (4)"); attempts rejected after a full measurement,
with the reason such a point may sit above the champion line (its weighted mean beat the champion's, but it lost the
paired rounds against it, or a watched geometry regressed); attempts stopped early; and one entry for those never
timed, which have no point, by verdict (a static rejection is no longer silently missing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from evo.core.records import ACCEPTED, BASELINE, Attempt, Code

MEASURED_IN_FULL = "measured"
STOPPED_EARLY = "stopped"
LABELS = {
    BASELINE: "baseline",
    ACCEPTED: "accepted",
    MEASURED_IN_FULL: "rejected, measured in full (above the line: lost the paired rounds, or a watched geometry)",
    STOPPED_EARLY: "stopped early (geometries reached only)",
}
ORDER = (BASELINE, ACCEPTED, MEASURED_IN_FULL, STOPPED_EARLY)


def plot_kind(a: Attempt) -> str | None:
    """How the plot marks an attempt: baseline, accepted, rejected after a full measurement, stopped early by the
    early-out; None for one never timed (static, correctness, errors): no point, counted in :func:`legend`."""
    if a.verdict.status in (ACCEPTED, BASELINE):
        return a.verdict.status
    if a.verdict.code is Code.PERF_EARLY_STOP:
        return STOPPED_EARLY
    return MEASURED_IN_FULL if a.score is not None else None


def unplotted(attempts: Sequence[Attempt]) -> str | None:
    """The legend entry for the attempts with no point ("not timed (5): rejected: static 3, error: compile 2"), or
    None when every attempt has one."""
    counts = Counter(a.verdict.label() for a in attempts if plot_kind(a) is None or a.score is None)
    if not counts:
        return None
    return f"not timed, no point ({sum(counts.values())}): " + ", ".join(f"{k} {n}" for k, n in counts.most_common())


def legend(attempts: Sequence[Attempt]) -> list[tuple[str, str, int]]:
    """(kind, label with its count, count) of each plotted kind present, in :data:`ORDER`."""
    counts = Counter(plot_kind(a) for a in attempts if a.score is not None)
    return [(k, f"{LABELS[k]} ({counts[k]})", counts[k]) for k in ORDER if counts.get(k)]
