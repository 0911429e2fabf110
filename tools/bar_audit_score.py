"""The arithmetic of tools/bar_audit.py: issue 42's bar with each strategy in evo's place, against the best of the
others chosen on the selection seeds only.

Called by tools/bar_audit.py (``audit``) on runs in tools/bench_deployed.py's runs.json.gz layout
(``{landscape: {"sweep", "best", "best_peer", "runs": {"selection": {row: [run]}, "test": {row: [run]}}}}``, a
run being ``{"strategy", "seed", "to": {"0.02": evals or null}, "made", ...}``); pure functions of those dicts, so
tests/test_bar_audit.py hand-computes them.

Per landscape and candidate S (a peer of the selection part, or evo's committed test row):

* the **comparison peer** is the best of the peers *other than S* by ERT2% on the selection seeds (leave-one-out:
  S is never compared with itself; the test seeds never enter the choice); for evo's row that is the best of all
  the peers, as the held-out runs chose it;
* the **ratio** is ERT2%(S) / ERT2%(that peer) on the test seeds (tools/search_metrics.py ``ratio``: both infinite
  count as 1, S's alone infinite as infinity, the peer's alone infinite as 0);
* over the landscapes: the geometric mean (infinite if one ratio is), the landscapes worse than 1.25x, the
  infinite ones, and the two-level bootstrap upper 95% bound (landscapes, then seeds).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools import search_metrics as sm

TARGET = "0.02"  # ERT to within 2% of the best: the bar's
WORSE = 1.25  # "no landscape worse than 1.25x"
GEOMEAN_BAR = 0.5


class ScoreError(ValueError):
    """Runs that cannot be audited as asked (one line: what is missing or inconsistent)."""


@dataclass
class Cell:
    """One candidate on one landscape: the peer it is compared with, both ERT2%, the ratio."""

    landscape: str
    peer: str
    ert: float
    peer_ert: float
    ratio: float
    outcomes: list[sm.Outcome]
    peer_outcomes: list[sm.Outcome]


@dataclass
class Row:
    """One candidate over the landscapes: its cells and the bar's numbers."""

    candidate: str
    cells: list[Cell]
    geomean: float
    hi: float  # the two-level bootstrap's upper 95% bound of the geometric mean
    worse: int  # landscapes with a ratio > 1.25
    infinite: int  # landscapes where the candidate never reached 2% and the peer did

    @property
    def met(self) -> bool:
        """Issue 42's numeric clauses: geometric mean <= 0.5, its upper bound < 1, none worse than 1.25x."""
        return self.geomean <= GEOMEAN_BAR and self.hi < 1.0 and self.worse == 0


def asdict(r: Any) -> dict[str, Any]:
    """A bench_deployed RunRecord as runs.json.gz stores a test run (targets as text keys, curve rounded)."""
    d = dataclasses.asdict(r)
    d["to"] = {str(k): v for k, v in d["to"].items()}
    d["best_found"] = [round(x, 5) for x in r.best_found]
    return d


def expand(sources: Iterable[str]) -> list[Path]:
    """The files named: a folder stands for its ``*.json.gz`` (sorted)."""
    out: list[Path] = []
    for s in sources:
        p = Path(s)
        out += sorted(p.glob("*.json.gz")) if p.is_dir() else [p]
    return out


def load(path: Path) -> dict[str, Any]:
    """One runs.json.gz. Raises ScoreError when it cannot be read."""
    try:
        with gzip.open(path, "rt") as f:
            doc: dict[str, Any] = json.load(f)
    except (OSError, ValueError) as e:
        raise ScoreError(f"{path}: not a runs.json.gz ({type(e).__name__}: {e})") from None
    return doc


def merge(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The runs of several files as one: per landscape the selection part of the file that has one (the committed
    run: its chosen peer too), the test runs of every file by row and seed. A seed run twice must give the same
    evaluations (the runs are seeded): raises ScoreError naming the first that does not."""
    out: dict[str, Any] = {}
    for doc in docs:
        for label, d in doc.items():
            m = out.setdefault(label, {"sweep": d["sweep"], "best": d["best"], "runs": {"selection": {}, "test": {}}})
            if d["runs"].get("selection"):
                if m["runs"]["selection"]:
                    raise ScoreError(f"{label}: two selection parts")
                m["runs"]["selection"] = d["runs"]["selection"]
                m["best_peer"] = d["best_peer"]
            for row, rs in d["runs"]["test"].items():
                have = {r["seed"]: r for r in m["runs"]["test"].setdefault(row, [])}
                for r in rs:
                    old = have.get(r["seed"])
                    if old is None:
                        m["runs"]["test"][row].append(r)
                        have[r["seed"]] = r
                    elif (old["to"].get(TARGET), old["made"]) != (r["to"].get(TARGET), r["made"]):
                        raise ScoreError(f"{label}: {row} seed {r['seed']} ran twice with different evaluations")
    return out


def outcomes(runs: Sequence[dict[str, Any]], cap: int, seeds: Sequence[int] | None = None) -> list[sm.Outcome]:
    """The runs' outcomes at 2% under ``cap`` (only the ``seeds`` given, in their order; ScoreError if one is
    missing)."""
    if seeds is None:
        return [sm.outcome(r["to"].get(TARGET), r["made"], cap) for r in runs]
    by_seed = {r["seed"]: r for r in runs}
    missing = [s for s in seeds if s not in by_seed]
    if missing:
        raise ScoreError(f"{runs[0]['strategy'] if runs else 'a row'}: no run on seeds {missing}")
    return [sm.outcome(by_seed[s]["to"].get(TARGET), by_seed[s]["made"], cap) for s in seeds]


def chosen_peer(selection: dict[str, list[dict[str, Any]]], cap: int, leave_out: str | None) -> str:
    """The best peer by ERT2% on the selection runs, ``leave_out`` excluded (ties: the first named, as
    bench_deployed chose)."""
    others = {k: outcomes(v, cap) for k, v in selection.items() if k != leave_out}
    if not others:
        raise ScoreError("no other peer to compare with")
    return sm.best_peer(others)


def cell(label: str, d: dict[str, Any], candidate: str, seeds: Sequence[int], cap: int) -> Cell:
    """One candidate on one landscape (see the module docstring)."""
    sel = d["runs"]["selection"]
    test = d["runs"]["test"]
    if not sel:
        raise ScoreError(f"{label}: no selection runs")
    used = {r["seed"] for rs in sel.values() for r in rs} & set(seeds)
    if used:
        raise ScoreError(f"{label}: the selection runs used test seeds {sorted(used)}")
    peer = chosen_peer(sel, cap, candidate if candidate in sel else None)
    for row in (candidate, peer):
        if row not in test:
            raise ScoreError(f"{label}: no test runs of {row}")
    a = outcomes(test[candidate], cap, seeds)
    b = outcomes(test[peer], cap, seeds)
    return Cell(label, peer, sm.ert(a), sm.ert(b), sm.ratio(sm.ert(a), sm.ert(b)), a, b)


def row(candidate: str, cells: list[Cell]) -> Row:
    """A candidate's numbers over its cells."""
    _, _, hi = sm.bootstrap_geomean([(c.outcomes, c.peer_outcomes) for c in cells])
    return Row(
        candidate,
        cells,
        sm.geomean([c.ratio for c in cells]),
        hi,
        sum(c.ratio > WORSE for c in cells),
        sum(math.isinf(c.ratio) for c in cells),
    )


def candidates(doc: dict[str, Any], evo_row: str | None) -> list[str]:
    """Every peer of the selection parts (in the first landscape's order), then evo's row where given."""
    first = next(iter(doc.values()))["runs"]["selection"]
    out = list(first)
    for label, d in doc.items():
        if list(d["runs"]["selection"]) != out:
            raise ScoreError(f"{label}: its peers are not the first landscape's")
    return [*out, evo_row] if evo_row else out


def audit(doc: dict[str, Any], seeds: Sequence[int], cap: int, evo_row: str | None = "evo lag 1") -> list[Row]:
    """Every candidate's row over every landscape of ``doc``, test seeds ``seeds``. Raises ScoreError when a
    landscape lacks a run the audit needs, or when evo's comparison peer is not the one the committed run chose."""
    rows = []
    for cand in candidates(doc, evo_row):
        cells = [cell(label, d, cand, seeds, cap) for label, d in doc.items()]
        if cand == evo_row:
            for c in cells:
                if c.peer != doc[c.landscape].get("best_peer", c.peer):
                    raise ScoreError(f"{c.landscape}: best peer {c.peer} is not the committed run's")
        rows.append(row(cand, cells))
    return rows


def self_split(
    doc: dict[str, Any], row: str | None, cap: int, first: Sequence[int], second: Sequence[int]
) -> list[float]:
    """What seed noise alone does to the ratio: per landscape, ERT2% of one strategy on the ``first`` test seeds
    over its own on the ``second`` (``row`` None: each landscape's committed best peer, whose test runs cover 20
    seeds). A strategy compared with itself is worse than 1.25x wherever this is above 1.25."""
    out = []
    for d in doc.values():
        runs = d["runs"]["test"][row or d["best_peer"]]
        out.append(sm.ratio(sm.ert(outcomes(runs, cap, first)), sm.ert(outcomes(runs, cap, second))))
    return out


def noise_lines(doc: dict[str, Any], cap: int, evo_row: str | None) -> list[str]:
    """The self-comparison lines of the report (test seeds 0..9 over 10..19, both ways round)."""
    first, second = range(10), range(10, 20)
    out = []
    for row in (None, evo_row):
        try:
            r = self_split(doc, row, cap, first, second)
        except (ScoreError, KeyError):
            continue  # (a row without 20 test seeds: no split to show)
        up = sum(x > WORSE for x in r)
        down = sum(x < 1 / WORSE for x in r)
        out.append(
            f"- {row or 'the best peer'} against itself, ERT2% on test seeds 0..9 over 10..19: worse than {WORSE}x "
            f"on {up}/{len(r)} landscapes (the other way round: {down}/{len(r)}): " + ", ".join(fmt(x) for x in r)
        )
    return out


def fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def report(
    rows: Sequence[Row], doc: dict[str, Any], seeds: Sequence[int], cap: int, evo_row: str | None = "evo lag 1"
) -> list[str]:
    """The summary table (one line per candidate) and the per-landscape ratios."""
    n = len(doc)
    out = [
        f"Test seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}); selection: the committed runs' seeds; cap {cap}; "
        f"{n} landscapes; ratio = ERT2% of the candidate / ERT2% of the best of the other peers (chosen on the "
        "selection seeds)",
        "",
        "| candidate | geometric mean | upper 95% | landscapes > 1.25x | infinite | worst | median | "
        "geomean where both reached 2% | bar |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.worse, r.geomean)):
        # (a ratio of 0 or inf says only that one side never reached 2% on these seeds: left out of this column)
        fin = [c.ratio for c in r.cells if math.isfinite(c.ert) and math.isfinite(c.peer_ert)]
        out.append(
            f"| {r.candidate} | {fmt(r.geomean)} | {fmt(r.hi)} | {r.worse}/{n} | {r.infinite} | "
            f"{fmt(max(c.ratio for c in r.cells))} | {fmt(float(np.median([c.ratio for c in r.cells])))} | "
            f"{fmt(sm.geomean(fin)) if fin else '-'} ({len(fin)}) | {'met' if r.met else 'not met'} |"
        )
    none_worse = [r.candidate for r in rows if r.worse == 0]
    half = [
        r.candidate + (" (a ratio of 0: its peer never reached 2% somewhere)" if r.geomean == 0 else "")
        for r in rows
        if r.geomean <= GEOMEAN_BAR
    ]
    met = [r.candidate for r in rows if r.met]
    out += [
        "",
        f"- no landscape worse than {WORSE}x: {', '.join(none_worse) or 'no candidate'}",
        f"- geometric mean <= {GEOMEAN_BAR}: {', '.join(half) or 'no candidate'}",
        f"- the whole numeric bar (and its upper bound < 1.0): {', '.join(met) or 'no candidate'}",
        "",
        "Seed noise alone (a strategy compared with itself on other seeds):",
        "",
        *noise_lines(doc, cap, evo_row),
    ]
    out += [
        "",
        "Per landscape: the ratio (* where the comparison peer is the second best: the candidate is the best):",
        "",
    ]
    labels = list(doc)
    out.append("| candidate | " + " | ".join(labels) + " |")
    out.append("|---|" + "---:|" * len(labels))
    for r in rows:
        cells = [
            fmt(c.ratio) + ("*" if c.peer != chosen_peer(doc[c.landscape]["runs"]["selection"], cap, None) else "")
            for c in r.cells
        ]
        out.append(f"| {r.candidate} | " + " | ".join(cells) + " |")
    out += ["", "Best peer of all (chosen on the selection seeds) and its test ERT2%:", ""]
    for label, d in doc.items():
        best = chosen_peer(d["runs"]["selection"], cap, None)
        e = sm.ert(outcomes(d["runs"]["test"][best], cap, seeds)) if best in d["runs"]["test"] else math.nan
        out.append(f"- {label}: {best} {fmt(e)}")
    return out


def write(out: Path, rows: Sequence[Row], text: Sequence[str]) -> None:
    """table.md and audit.json (every cell) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text("\n".join(text) + "\n")
    doc = [
        {
            "candidate": r.candidate,
            "geomean": r.geomean,
            "hi": r.hi,
            "worse": r.worse,
            "infinite": r.infinite,
            "cells": [
                {"landscape": c.landscape, "peer": c.peer, "ert": c.ert, "peer_ert": c.peer_ert, "ratio": c.ratio}
                for c in r.cells
            ],
        }
        for r in rows
    ]
    (out / "audit.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
