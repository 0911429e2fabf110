"""Gate "perf": the candidate timed against the champion (and the baseline), pairs interleaved (gates/perf.py)."""

from __future__ import annotations

import time
from typing import Any

from evo.core.records import Attempt, Code, Verdict, simulated_label
from gates.judge import Evidence, JudgeContext
from gates.perf import EarlyStop, PairSamples, perf_gate
from gates.registry import register_gate


@register_gate("perf", order=70)
def perf(s: Evidence) -> Verdict | None:
    """Faster than the champion beyond the noise floor, in paired interleaved timings (gates/perf.py). Fills the
    attempt's timings, speedups and device facts."""
    v = measure_and_judge(s.context, s.attempt, s.loaded)
    s.attempt.measure_s = round(time.perf_counter() - s.t0, 3)
    return v


def _stopping(p: Any, stop: EarlyStop | None) -> str:
    """The timing method's words on when the rounds stop."""
    stopping = stop.describe(p.rounds) if stop else f"fixed {p.rounds} rounds"
    if stop is not None and p.rule != "every":
        stopping += (
            "; rule weighted: only at the last weighted geometry, on the weighted mean of each round's ratios "
            "over every weighted geometry"
        )
    return stopping


def _merge_clocks(devinfo: dict[str, Any], clocks: dict[str, Any]) -> None:
    """One geometry's clock facts into the attempt's: SM clocks' extremes, throttled samples summed."""
    for k, v in clocks.items():
        if isinstance(v, (int, float)) and k.startswith("sm_mhz"):
            f = min if k.endswith("min") else max
            devinfo[k] = f(devinfo.get(k, v), v)
        elif k == "throttled_samples":
            devinfo[k] = devinfo.get(k, 0) + v
        else:
            devinfo[k] = v


def _early_verdict(p: Any, stop: EarlyStop, early_at: str, res: Any) -> Verdict:
    """The rejection of a candidate the early-out stopped at geometry ``early_at``."""
    iv = res.vs_parent[early_at]
    where = (
        f"at {early_at} in all of the first {stop.after} pairs ({iv.fmt()})"
        if p.rule == "every"
        else f"in the weighted mean of each of the first {stop.after} rounds of {early_at} and the weighted "
        f"geometries before it ({early_at} {iv.fmt()})"
    )
    return Verdict.rejected(
        "perf",
        f"slower than the champion {where}; stopped early, geometries after it not measured",
        Code.PERF_EARLY_STOP,
        {"geometry": early_at, "after": stop.after},
    )


def measure_and_judge(ctx: JudgeContext, a: Attempt, loaded: Any) -> Verdict:
    """Candidate, champion (and baseline, once there is a champion) measured in rotating order at every geometry,
    weighted ones first; judged by ``perf_gate``. Fills the attempt's timings, speedups, score and device."""
    p = ctx.config.gates.perf
    champ = ctx.champion or ctx.baseline
    assert champ is not None and ctx.baseline is not None
    parts = [("cand", loaded), ("champ", ctx.load_genome(champ.genome))]
    keys = [a.genome_key, champ.genome_key]
    if champ.id != ctx.baseline.id:
        parts.append(("base", ctx.load_genome(ctx.baseline.genome)))
        keys.append(ctx.baseline.genome_key)
    samples = []
    devinfo: dict[str, Any] = {}
    stop = EarlyStop(p.early_rounds) if p.early_rounds else None
    stopping = _stopping(p, stop)
    early_at = None
    # Weighted geometries first: a clear loser there ends the attempt before the watched ones cost time.
    order = sorted(ctx.config.geometries, key=lambda g: g.weight <= 0)
    last_weighted = [g for g in order if g.weight > 0][-1:]
    prior: list[tuple[list[float], float]] = []  # rule weighted: the weighted geometries measured so far
    for g in order:
        # watched geometries only must not regress beyond noise, which "slower in every pair" does not show;
        # under rule weighted a geometry slower alone may still win the mean, so the early-out waits for the
        # last weighted geometry and judges the mean of each round there
        gstop = None
        if stop is not None and g.weight > 0:
            if p.rule == "every":
                gstop = stop
            elif g in last_weighted:
                gstop = stop.with_prior(prior, g.weight)
        s = ctx.backend.measure(parts, g, p.rounds, ctx.part_launches(parts, keys, g), stop=gstop)
        if g.weight > 0:
            prior.append(([ch / c for ch, c in zip(s.times_us["champ"], s.times_us["cand"])], g.weight))
        method = (
            f"batch: {s.batch_text()}; pairs: {len(s.times_us['cand'])} interleaved "
            f"({'cand/champ/base' if len(parts) == 3 else 'cand/champ'}, rotating order); "
            f"noise floor: {ctx.floors.get(g.name, 0):.3%}; stopping: {stopping}"
            f"{' (stopped early)' if s.stopped_early else ''}; throttled rounds dropped: {s.discarded}"
            + ctx.launches_note(parts, g)
        )
        if ctx.simulated:
            method += f"; {simulated_label(ctx.backend)}"
        samples.append(
            PairSamples(
                g.name,
                g.weight,
                s.times_us["cand"],
                s.times_us["champ"],
                s.times_us.get("base"),
                s.discarded,
                ctx.family.bytes_moved(g),
                method,
            )
        )
        _merge_clocks(devinfo, s.clocks)
        if s.stopped_early:
            early_at = g.name
            break
    res = perf_gate(
        samples,
        ctx.floor,
        p.min_gain,
        p.confidence,
        p.rule,
        ctx.ceiling.get("ceiling_tbps"),
        p.watched_slack,
        p.watched,  # issue 31: watched geometries against the baseline by default
    )
    if early_at is not None and res.verdict.code is not Code.PERF_PHYSICS:  # physics says more: keep it
        assert stop is not None  # only an early stop sets early_at
        res.verdict = _early_verdict(p, stop, early_at, res)
    a.timings, a.roofline_pct, a.score = res.timings, res.roofline_pct, res.score
    a.speedup_vs_parent = res.vs_parent
    a.speedup_vs_baseline = res.vs_baseline
    a.parent_id = champ.id
    a.device = devinfo
    return res.verdict
