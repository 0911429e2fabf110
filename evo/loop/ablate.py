"""`evo ablate`: which of the champion's changes carry its gain.

The champion is measured beside the baseline and beside each *ablation*: the champion with one of its changes
against the baseline (a knob, or an idea switched on) set back alone, every part interleaved in one measurement
per geometry (the perf gate's rounds, rotating order, graphs of about ``batch_ms`` of each part's own launches,
throttled rounds dropped). What a change carries is the champion's speedup over its ablation (median of the
per-round ratios, with the order-statistic interval); its *share* is that speedup's log over the log of the
champion's speedup over the baseline: the part of the total gain lost when only that change is undone. Shares
need not add to 100%: changes that pay only together show a sum above it, changes that do the same work one below.

The result goes into the ledger meta ``ablations`` (appended, never an attempt of the campaign); the attempt log
and ``evo export``'s commit messages read the latest one made of the champion they show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evo import stop
from evo.core.genome import Genome
from evo.core.hooks import check_genome
from evo.core.records import BASELINE, Attempt
from evo.report.ablation import META_KEY, changes, describe_change, share, without
from evo.search import Proposal
from gates.judge import OUTPUTS, judge
from gates.stats import median, median_interval
from harness.errors import HarnessError


class AblateError(Exception):
    """Nothing to ablate, or no ablation could be measured: a one-line reason for the user."""


def ablate(camp: Any, rounds: int | None = None, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure the champion of ``camp``'s ledger against each of its ablations and the baseline; append the record
    to the ledger meta and return it. ``camp`` is an :class:`evo.campaign.Campaign` that has not run (its
    builder, backend and ledger are used; no attempt is recorded)."""
    import datetime as dt

    led = camp.ledger
    attempts: list[Attempt] = led.attempts()
    base = next((a for a in attempts if a.verdict.status == BASELINE), None)
    champ = led.champion()
    if base is None:
        raise AblateError(f"campaign {camp.cfg.campaign} has no baseline attempt yet (start it with evo run)")
    if champ is None or champ.id == base.id:
        raise AblateError(f"campaign {camp.cfg.campaign}'s champion is the baseline: no accepted step to ablate")
    keys = changes(base.genome, champ.genome)
    p = camp.cfg.gates.perf
    rounds = rounds or p.rounds
    record: dict[str, Any] = {
        "champion": champ.id,
        "genome_key": champ.genome_key,
        "baseline": base.id,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "backend": camp.backend.name,
        "simulated": camp.simulated,
        "device": camp.backend.facts(),
        "rounds": rounds,
        "method": (
            "the champion, the baseline and each ablation (the champion with one change set back) interleaved, "
            f"up to {rounds} rounds in rotating order per geometry (each row gives the rounds kept), graphs of about "
            f"{p.batch_ms:g} ms of each part's own launches, throttled rounds dropped; each ablation timed only if "
            "it passes the correctness gate; a change's gain: median of the per-round ratios ablation/champion "
            "with its 95% order-statistic interval; its share: ln(that) / ln(baseline/champion), none where the "
            "champion's own gain there is within its interval of 1"
        ),
        "changes": [{"key": k, "change": describe_change(k, base.genome, champ.genome)} for k in keys],
        "geometries": {},
    }

    def load(genome: Genome) -> Any:
        built = None if camp.simulated else camp.builder.build(genome)
        return camp._load(built, genome)

    def wrong(genome: Genome, loaded: Any) -> str | None:
        """An ablation is timed only if its outputs pass the campaign's correctness gates (the judge's, as `evo run`
        holds them: the exact-mode rule and the correctness gate): the speed of a wrong kernel says nothing of what
        a change carries."""
        v, _ = judge(Proposal(genome, "ablation"), camp.judge_context(), only=OUTPUTS, loaded=loaded)
        return None if v.ok else f"incorrect without it: {' '.join((v.reason or '').split())[:240]}"

    try:
        champ_loaded, base_loaded = load(Genome(champ.genome)), load(Genome(base.genome))
        camp.backend.correctness(base_loaded, freeze=True)  # the reference hashes (the recorded sweep has its own)
    except HarnessError as e:
        raise AblateError(f"the champion or the baseline cannot be loaded: {type(e).__name__}: {e}") from None
    parts: list[tuple[str, Any]] = [("champion", champ_loaded), ("baseline", base_loaded)]
    part_keys = [champ.genome_key, base.genome_key]
    for entry in record["changes"]:
        stop.check()  # nothing is recorded before the measurement: a stop loses only this ablation
        g = without(champ.genome, base.genome, entry["key"])
        entry["genome"] = dict(g)
        problem = check_genome(camp.family, g, camp.cfg.geometries)
        if problem:
            entry["error"] = f"not a valid genome: {problem}"
            continue
        if g.key == base.genome_key:  # a one-change champion: its ablation is the baseline
            entry["same_as"] = "baseline"
            continue
        try:
            loaded = load(g)
            why = wrong(g, loaded)
        except HarnessError as e:
            entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            if getattr(e, "fatal", False):  # the CUDA context is gone: nothing more can be timed in this process
                raise AblateError(f"ablation {entry['change']} crashed the GPU context: {e}") from None
            continue
        if why:
            entry["error"] = why
            continue
        parts.append((entry["key"], loaded))
        part_keys.append(g.key)
    measured = [c for c in record["changes"] if "error" not in c]
    if not measured:
        raise AblateError(
            "no ablation of the champion could be built or timed: "
            + "; ".join(f"{c['change']}: {c['error']}" for c in record["changes"])
        )
    out(
        f"evo: ablating champion #{champ.id} ({len(keys)} change(s) against baseline #{base.id}) on the "
        f"{camp.backend.name} backend: {len(parts)} parts interleaved, {rounds} rounds a geometry"
    )
    for geo in sorted(camp.cfg.geometries, key=lambda g: g.weight <= 0):
        stop.check()
        try:
            s = camp.backend.measure(parts, geo, rounds, camp.part_launches(parts, part_keys, geo))
        except HarnessError as e:
            raise AblateError(f"timing at {geo.name} failed: {type(e).__name__}: {e}") from None
        t = s.times_us
        c = t["champion"]
        total = median_interval([b / x for b, x in zip(t["baseline"], c)])
        row: dict[str, Any] = {
            "weight": geo.weight,
            "champion_us": median(c),
            "baseline_us": median(t["baseline"]),
            "total": _iv(total),
            "rounds": len(c),
            "discarded": s.discarded,
            "launches": s.launches,
            "changes": {},
        }
        for m in measured:
            k = m["key"]
            v = t["baseline"] if m.get("same_as") == "baseline" else t[k]
            gain = median_interval([a / x for a, x in zip(v, c)])
            # no share where the champion's own gain here is within noise: the ratio of two logs near 0 is noise
            sh = share(gain.value, total.value) if total.lo > 1.0 or total.hi < 1.0 else None
            row["changes"][k] = {"us": median(v), "gain": _iv(gain), "share": sh}
        shares = [r["share"] for r in row["changes"].values() if r["share"] is not None]
        complete = len(shares) == len(record["changes"])  # every change measured, each with a share
        row["share_sum"] = sum(shares) if complete else None
        record["geometries"][geo.name] = row
    led.append_meta(META_KEY, record)
    return record


def _iv(iv: Any) -> dict[str, float]:
    return {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "n": iv.n}
