"""The log's "Finish" section: each finish the campaign ran (evo/loop/finish.py), why, under which bar, what it
tried and what became of it. Reads the campaign's meta (``finishes``) and the attempts' ``finish`` tags only, and
tolerates anything missing, as the rest of the log does (evo/report/logmd.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.finish_record import FinishRun, finish_runs
from evo.core.records import ACCEPTED, Attempt
from evo.search.ideas import describe_change
from gates.stats import geomean

DASH = "–"


def _cell(x: Any) -> str:
    s = "" if x is None else str(x)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or DASH


def _weighted(a: Attempt, weights: Mapping[str, float]) -> str:
    """The attempt's measured step speedup in the weighted mean of the weighted geometries it reached."""
    gs = [g for g, w in weights.items() if w > 0 and g in a.speedup_vs_parent]
    if not gs:
        return DASH
    v = geomean([a.speedup_vs_parent[g].value for g in gs], [weights[g] for g in gs])
    return f"{v:.4f}x" if len(gs) > 1 else a.speedup_vs_parent[gs[0]].fmt()


def _run_lines(
    run: FinishRun, mine: Sequence[Attempt], by_id: Mapping[int, Attempt], weights: Mapping[str, float]
) -> list[str]:
    """One finish: why and from which champion, its bar, how it ended, and a row per attempt it measured."""
    champ = by_id.get(run.champion)
    state = run.ended or "stopped before it ended (a resumed run continues it)"
    accepted = f"; accepted {', '.join(f'#{i}' for i in run.accepted)}" if run.accepted else "; no step accepted"
    if not run.planned and run.ended == "nothing to try":
        return [
            f"### Finish {run.index + 1}: {run.reason}",
            "",
            f"From champion #{run.champion}, {run.started_at or DASH}: nothing to try (no near miss it had not "
            "measured, no untried pair of single-knob gains).",
            "",
        ]
    L = [
        f"### Finish {run.index + 1}: {run.reason}",
        "",
        f"From champion #{run.champion}, {run.started_at or DASH}: {len(run.planned)} candidate(s) planned, "
        f"{len(mine)} measured with {run.rounds} rounds each; a step needed its lower bound over the champion to "
        f"clear {run.threshold:.4f} (1 + max({run.min_gain:g}, 3 x the A/A floor {run.floor:.3%})); {state}{accepted}.",
        "",
    ]
    if not mine:
        return L
    rows = []
    for a in mine:
        tag = a.finish or {}
        ref = champ.genome if champ is not None else None
        rows.append(
            [
                f"#{a.id}",
                tag.get("kind", DASH),
                describe_change(a.genome, ref) if ref is not None else DASH,
                ", ".join(f"#{i}" for i in tag.get("of") or []) or DASH,
                f"{tag['estimate']:.4f}x" if isinstance(tag.get("estimate"), (int, float)) else DASH,
                f"#{a.parent_id}" if a.parent_id is not None else DASH,
                _weighted(a, weights),
                f"{'accepted' if a.verdict.status == ACCEPTED else a.verdict.label()}: {a.verdict.reason}",
            ]
        )
    head = ["Attempt", "Kind", f"Change vs #{run.champion}", "From", "Before", "Against", "Weighted", "Verdict"]
    L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    L += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return L + [""]


def finish_section(attempts: Sequence[Attempt], meta: Mapping[str, Any], weights: Mapping[str, float]) -> list[str]:
    """The "Finish" section of the log (empty where no finish ran)."""
    runs = finish_runs(meta)
    if not runs:
        return []
    by_id = {a.id: a for a in attempts}
    L = [
        "## Finish",
        "",
        "As the search stalled or its budget neared its end, the champion's near misses (attempts turned down for "
        "too small a gain) and pairs of its unmerged single-knob gains were measured head to head with more rounds "
        "(evo/loop/finish.py, search.finish). A finish step needs the lower bound of its speedup to clear "
        "1 + max(search.finish.min_gain, 3 x the A/A floor); a search step needs 1 + max(gates.perf.min_gain, "
        '3 x floor) (docs/measurement.md). "Before": the candidate\'s weighted-mean speed against the champion as '
        'measured before the finish; "Weighted": its weighted-mean speed as the finish measured it, against the '
        'champion of the moment ("Against").',
        "",
    ]
    for run in runs:
        mine = sorted(
            (a for a in attempts if a.finish and a.finish.get("run") == run.index),
            key=lambda a: a.id,
        )
        L += _run_lines(run, mine, by_id, weights)
    return L
