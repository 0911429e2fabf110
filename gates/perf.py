"""Perf gate: interleaved, paired timings -> speedup intervals -> a verdict.

A win needs the lower confidence bound of the per-pair speedup over the
champion to clear ``1 + max(min_gain, 3 x noise floor)`` on every weighted
geometry (rule "every"), or on their weighted geometric mean (rule "weighted": the
mean is the objective, so a weighted geometry may give back against the champion
what the others gain, never below the baseline). Watched geometries (weight 0) only
must not be slower than the baseline beyond noise (``watched="baseline"``, the
default: what the user ships is the reference, so a step that once sped up a
watched shape does not lock that gain in against the weighted ones); with
``watched="champion"`` they must not be slower than the champion beyond noise,
or, with ``watched_slack``, by more than that fraction, and never below the
baseline. A time that implies more bandwidth than the measured copy ceiling is
a measurement error or skipped work, never a win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evo.core.records import Code, Interval, Timing, Verdict
from gates.stats import geomean, median, median_interval, spread_pct

PHYSICS_SLACK = 1.05  # a few percent over the copy ceiling is still plausible (caches, clock)


@dataclass
class PairSamples:
    """Per-round batch times (µs per launch) of one geometry, candidate and references interleaved."""

    geometry: str
    weight: float
    cand_us: list[float]
    parent_us: list[float]
    base_us: list[float] | None = None  # None when the champion is the baseline itself
    discarded: int = 0
    bytes_moved: int = 0
    method: str = ""


@dataclass
class PerfResult:
    verdict: Verdict
    vs_parent: dict[str, Interval] = field(default_factory=dict)
    vs_baseline: dict[str, Interval] = field(default_factory=dict)
    roofline_pct: dict[str, float] = field(default_factory=dict)
    timings: dict[str, Timing] = field(default_factory=dict)
    score: float | None = None


@dataclass(frozen=True)
class EarlyStop:
    """nvbench-style stopping criterion, checked once, after ``after`` unthrottled rounds.

    Stop when the candidate was slower than the reference in every one of
    those pairs. A candidate whose true median ratio is >= 1 does that with
    probability 2**-after (1/64 at 6), and a win needs a ratio well above 1,
    so the rounds saved on clear losers cost at most that chance of a win.
    """

    after: int
    cand: str = "cand"
    ref: str = "champ"
    # rule weighted: the weighted geometries measured before this one, as (per-round speed ratios champion/candidate,
    # weight), and this one's weight; a pair is "slower" when the weighted mean of that round's ratios is below 1,
    # so a candidate slower here but faster where it was measured before is not stopped for this geometry alone
    prior: tuple[tuple[tuple[float, ...], float], ...] = ()
    weight: float = 1.0

    def hit(self, times_us: dict[str, list[float]]) -> bool:
        c, r = times_us.get(self.cand, []), times_us.get(self.ref, [])
        n = min(len(c), len(r))
        if n != self.after:
            return False
        if not self.prior:
            return all(r[i] < c[i] for i in range(n))
        for i in range(n):
            values = [rs[i % len(rs)] for rs, _ in self.prior if rs] + [r[i] / c[i]]
            weights = [w for rs, w in self.prior if rs] + [self.weight]
            if geomean(values, weights) >= 1.0:
                return False
        return True

    def with_prior(self, prior: Sequence[tuple[Sequence[float], float]], weight: float) -> EarlyStop:
        return EarlyStop(self.after, self.cand, self.ref, tuple((tuple(rs), w) for rs, w in prior), weight)

    def describe(self, rounds: int) -> str:
        return (
            f"early-out after {self.after} rounds when every pair is slower (p <= 1/{2**self.after} "
            f"for a candidate as fast as the champion), else {rounds} rounds"
        )


def threshold(min_gain: float, floor: float) -> float:
    return 1.0 + max(min_gain, 3.0 * floor)


def ratios(ref: Sequence[float], cand: Sequence[float]) -> list[float]:
    n = min(len(ref), len(cand))
    return [ref[i] / cand[i] for i in range(n)]


def perf_gate(
    samples: Sequence[PairSamples],
    floor: float,
    min_gain: float = 0.01,
    confidence: float = 0.95,
    rule: str = "every",
    ceiling_tbps: float | None = None,
    watched_slack: float = 0.0,
    watched: str = "baseline",
) -> PerfResult:
    res = PerfResult(Verdict.rejected("perf", "no samples", Code.PERF_NO_SAMPLES))
    need = threshold(min_gain, floor)
    regress = 1.0 - 3.0 * floor
    for s in samples:
        if len(s.cand_us) < 3:
            res.verdict = Verdict.rejected(
                "perf",
                f"only {len(s.cand_us)} unthrottled pairs at {s.geometry} ({s.discarded} discarded)",
                Code.PERF_TOO_FEW_PAIRS,
                {"geometry": s.geometry},
            )
            return res
        r = ratios(s.parent_us, s.cand_us)
        res.vs_parent[s.geometry] = median_interval(r, confidence)
        res.vs_baseline[s.geometry] = (
            median_interval(ratios(s.base_us, s.cand_us), confidence)
            if s.base_us is not None
            else res.vs_parent[s.geometry]
        )
        med = median(s.cand_us)
        res.timings[s.geometry] = Timing(med, spread_pct(s.cand_us), len(s.cand_us), s.discarded, s.method)
        if ceiling_tbps and s.bytes_moved:
            res.roofline_pct[s.geometry] = 100.0 * s.bytes_moved / (med * 1e-6) / (ceiling_tbps * 1e12)
    weighted = [s for s in samples if s.weight > 0]
    res.score = geomean([res.vs_baseline[s.geometry].value for s in weighted], [s.weight for s in weighted])

    for s in samples:
        pct = res.roofline_pct.get(s.geometry)
        if pct is not None and pct > 100.0 * PHYSICS_SLACK:
            res.verdict = Verdict.rejected(
                "perf",
                f"physics: {res.timings[s.geometry].median_us:.2f} µs at {s.geometry} implies {pct:.0f}% of "
                "the measured copy ceiling (measurement error or skipped work)",
                Code.PERF_PHYSICS,
                {"geometry": s.geometry},
            )
            res.score = None
            return res
    for s in samples:
        iv = res.vs_parent[s.geometry]
        champion_guard = watched == "champion"
        if s.weight > 0 and rule != "every":
            # rule weighted: the weighted mean is the objective, so a weighted geometry may give back against the
            # champion what the others gain (else the first step that happened to win there locks the campaign
            # out of the mean's optimum: the H200 campaign of 2026-12-02, benchmarks/results/
            # 2026-12-02-sanitizer-cost); never below the baseline, as a watched one
            ivb = res.vs_baseline[s.geometry]
            if ivb.hi < regress:
                res.verdict = Verdict.rejected(
                    "perf",
                    f"slower than the baseline at {s.geometry}: {ivb.fmt()} (beyond the {3 * floor:.2%} noise band)",
                    Code.PERF_SLOWER,
                    {"geometry": s.geometry, "against": "baseline"},
                )
                return res
            continue
        if s.weight > 0 or (champion_guard and not watched_slack):
            if iv.hi < regress:
                res.verdict = Verdict.rejected(
                    "perf",
                    f"slower at {s.geometry}: {iv.fmt()} vs champion (beyond the {3 * floor:.2%} noise band)",
                    Code.PERF_SLOWER,
                    {"geometry": s.geometry},
                )
                return res
            continue
        # a watched geometry may give a little back for a win where the weights are, never more than the slack
        # a step and never below the baseline (so steps cannot add up to a loss against the user's kernel)
        if champion_guard and iv.hi < 1.0 - max(watched_slack, 3.0 * floor):
            res.verdict = Verdict.rejected(
                "perf",
                f"slower at {s.geometry}: {iv.fmt()} vs champion (beyond the watched slack of "
                f"{max(watched_slack, 3.0 * floor):.2%})",
                Code.PERF_WATCHED,
                {"geometry": s.geometry},
            )
            return res
        ivb = res.vs_baseline[s.geometry]
        if ivb.hi < regress:
            why = (
                "a watched geometry's slack is against the champion only"
                if champion_guard
                else "watched geometries are guarded against the baseline, gates.perf.watched"
            )
            res.verdict = Verdict.rejected(
                "perf",
                f"slower than the baseline at {s.geometry}: {ivb.fmt()} (beyond the {3 * floor:.2%} noise band; {why})",
                Code.PERF_WATCHED_BASELINE,
                {"geometry": s.geometry},
            )
            return res
    if rule == "every":
        for s in weighted:
            iv = res.vs_parent[s.geometry]
            if iv.lo < need:
                res.verdict = Verdict.rejected(
                    "perf",
                    f"not faster at {s.geometry}: {iv.fmt()} vs champion, lower bound under {need:.4f}",
                    Code.PERF_NOT_FASTER,
                    {"rule": rule, "geometry": s.geometry},
                )
                return res
        summary = ", ".join(f"{s.geometry} {res.vs_parent[s.geometry].fmt()}" for s in weighted)
    else:
        n = min(len(s.cand_us) for s in weighted)
        per_round = [
            geomean([ratios(s.parent_us, s.cand_us)[i] for s in weighted], [s.weight for s in weighted])
            for i in range(n)
        ]
        iv = median_interval(per_round, confidence)
        if iv.lo < need:
            res.verdict = Verdict.rejected(
                "perf",
                f"weighted speedup {iv.fmt()} vs champion, lower bound under {need:.4f}",
                Code.PERF_NOT_FASTER,
                {"rule": rule},
            )
            return res
        summary = f"weighted {iv.fmt()}"
    res.verdict = Verdict.accepted(f"faster than the champion: {summary} (needs > {need:.4f})")
    return res


def noise_floor(aa_ratios: Sequence[float], confidence: float = 0.95) -> float:
    """A/A floor: how far the interval of an identical pair reaches from 1."""
    iv = median_interval(aa_ratios, confidence)
    return max(abs(iv.hi - 1.0), abs(1.0 - iv.lo), abs(iv.value - 1.0))
