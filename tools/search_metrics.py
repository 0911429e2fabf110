"""The search benchmark's metric (issue 42, item 4): ERT as COCO defines it, evaluations to a target, normalized
regret at fixed budgets, the best peer chosen on other seeds, and a two-level bootstrap of the geometric-mean ratio.

Called by tools/bench_deployed.py on the runs tools/search_bench.py makes; pure functions of run outcomes, so the
tests hand-compute them.

* An :class:`Outcome` is one run against one target: the evaluations it used (to the target, or all it made before
  it stopped: the cap, the space exhausted, its own end) and whether it got there. Every strategy is held to the
  same evaluation cap (:func:`outcome`): a run that needs more than ``cap`` evaluations is a failure that used
  ``cap``.
* **ERT** (expected running time; Hansen et al., COCO: "the number of function evaluations summed over all runs
  until the target was reached or the run stopped, divided by the number of successful runs"): infinite when no run
  succeeded. It is what a user restarting a failed run would pay on average to reach the target.
* **Normalized regret** after n evaluations: the share of the baseline-to-best gap still open,
  (best - best found in the first n) / (best - baseline); 1 at the baseline, 0 at the best of the landscape.
* **Geometric-mean ratio** over landscapes of ERT(evo) / ERT(best peer), with a two-level percentile bootstrap:
  landscapes resampled with replacement, then, inside each, the seeds (runs) of each strategy; both infinite counts
  as a ratio of 1 (neither reached the target: no evidence either way), evo's alone infinite as infinity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Outcome:
    """One run against one target: evaluations used (to the target, or all that were made) and whether it got there."""

    evals: int
    success: bool


def outcome(to_target: int | None, made: int, cap: int | None = None) -> Outcome:
    """The run's outcome under an evaluation ``cap`` shared by every strategy.

    ``to_target``: evaluations to the target (None: never reached); ``made``: evaluations the run made in all.
    A run that needed more than ``cap`` (or never got there) is a failure that used min(made, cap)."""
    if to_target is not None and (cap is None or to_target <= cap):
        return Outcome(to_target, True)
    return Outcome(made if cap is None else min(made, cap), False)


def ert(outcomes: Sequence[Outcome]) -> float:
    """COCO's ERT: evaluations summed over all runs (to the target or to their stop) / successful runs; inf for
    none."""
    wins = sum(o.success for o in outcomes)
    if not wins:
        return math.inf
    return sum(o.evals for o in outcomes) / wins


def regret(best_found: Sequence[float], n: int, best: float, baseline: float) -> float:
    """Normalized regret after ``n`` evaluations: (best - max(best_found[:n])) / (best - baseline).

    ``best_found``: the objective of each evaluation in order (0 for an invalid one); a run shorter than ``n``
    keeps its best (it stopped at the target). 1 where nothing better than the baseline was found."""
    if best <= baseline:
        return 0.0
    got = max([baseline, *best_found[:n]])
    return max(0.0, (best - got) / (best - baseline))


def ratio(evo: float, peer: float) -> float:
    """ERT(evo) / ERT(peer), both infinite counting as 1 (neither reached the target)."""
    if math.isinf(evo) and math.isinf(peer):
        return 1.0
    if math.isinf(peer):
        return 0.0
    return math.inf if math.isinf(evo) else evo / peer


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean; inf if any is inf, 0 if any is 0."""
    if any(math.isinf(x) for x in xs):
        return math.inf
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def best_peer(selection: Mapping[str, Sequence[Outcome]]) -> str:
    """The peer with the lowest ERT on the selection seeds (disjoint from the test seeds); ties: the first named."""
    return min(selection, key=lambda label: ert(selection[label]))


def bootstrap_geomean(
    landscapes: Sequence[tuple[Sequence[Outcome], Sequence[Outcome]]],
    n: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The geometric mean over landscapes of ERT(evo) / ERT(best peer) and its two-level percentile bootstrap 95%
    interval. ``landscapes``: (evo's outcomes, the peer's outcomes) per landscape. Each of ``n`` draws resamples the
    landscapes with replacement, then each drawn landscape's runs of each strategy with replacement (a seeded
    generator: the same numbers every time)."""
    point = geomean([ratio(ert(a), ert(b)) for a, b in landscapes])
    rng = np.random.default_rng(seed)
    draws = np.empty(n)
    for i in range(n):
        rs = []
        for j in rng.integers(0, len(landscapes), len(landscapes)):
            a, b = landscapes[j]
            ra = [a[k] for k in rng.integers(0, len(a), len(a))]
            rb = [b[k] for k in rng.integers(0, len(b), len(b))]
            rs.append(ratio(ert(ra), ert(rb)))
        draws[i] = geomean(rs)
    # (the order statistics themselves, not interpolated between them: a draw may be infinite, and inf - inf is nan)
    return point, float(np.quantile(draws, 0.025, method="lower")), float(np.quantile(draws, 0.975, method="higher"))


def bootstrap_one(a: Sequence[Outcome], b: Sequence[Outcome], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """One landscape's ERT ratio 95% interval: the seeds of each strategy resampled (a seeded generator)."""
    _, lo, hi = bootstrap_geomean([(a, b)], n, seed)
    return lo, hi


def distinct_rows(runs: Mapping[str, Sequence[Sequence[str]]]) -> tuple[list[str], dict[str, str]]:
    """Peer rows with a run list of their own: a row whose runs (the genomes of each seed, in order) equal an
    earlier row's on every seed is a duplicate of it (issue 42: two ordered TPE rows gave identical runs).
    Returns the kept labels and duplicate -> the label it repeats."""
    kept: list[str] = []
    dup: dict[str, str] = {}
    seen: dict[tuple[tuple[str, ...], ...], str] = {}
    for label, rs in runs.items():
        sig = tuple(tuple(r) for r in rs)
        if sig in seen:
            dup[label] = seen[sig]
        else:
            seen[sig] = label
            kept.append(label)
    return kept, dup


def bar_lines(
    rows: Sequence[tuple[str, Sequence[Outcome], Sequence[Outcome], bool]], n: int = 2000, seed: int = 0
) -> list[str]:
    """Issue 42's bar, clause by clause, on the numbers: ``rows`` is (landscape, evo's outcomes, the best peer's
    outcomes, easy) per landscape, easy where random search expects < 30 evaluations. Whether the landscapes are
    held out (no selection, development run or generator design used them) is the caller's to state: no number
    tells it."""
    pairs = [(a, b) for _, a, b, _ in rows]
    g, lo, hi = bootstrap_geomean(pairs, n, seed)
    ratios = {label: ratio(ert(a), ert(b)) for label, a, b, _ in rows}
    worse = [f"{k} {v:.2f}" for k, v in ratios.items() if v > 1.25]
    easy = {label: (ert(a), ert(b)) for label, a, b, e in rows if e}
    missed = [f"{k} {x:.1f} > {y:.1f} + 2" for k, (x, y) in easy.items() if not x <= y + 2]
    clauses = [
        (len(rows) >= 8, f">= 8 landscapes: {len(rows)}"),
        (g <= 0.5, f"geometric mean <= 0.5: {g:.2f}"),
        (hi < 1.0, f"its bootstrap upper 95% bound < 1.0: {hi:.2f}"),
        (not worse, "no landscape worse than 1.25x: " + (", ".join(worse) or "none")),
        (
            not missed,
            "parity on easy landscapes (ERT2% <= the best peer's + 2): "
            + (", ".join(missed) or "held")
            + f" ({len(easy)} easy)",
        ),
    ]
    out = [f"- {'met' if ok else 'NOT met'}: {text}" for ok, text in clauses]
    out.append(f"- on the numbers: {'met' if all(ok for ok, _ in clauses) else 'not met'} (held out: see the text)")
    return out
