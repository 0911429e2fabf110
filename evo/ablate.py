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

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evo.genome import Genome
from evo.ideas import GENE_PREFIX, is_gene
from evo.records import BASELINE, Attempt
from gates.stats import median, median_interval

META_KEY = "ablations"


class AblateError(Exception):
    """Nothing to ablate, or no ablation could be measured: a one-line reason for the user."""


def _value(genome: Mapping[str, Any], key: str) -> Any:
    return genome.get(key, False if is_gene(key) else None)


def changes(base: Mapping[str, Any], champ: Mapping[str, Any]) -> list[str]:
    """The genome keys (knobs, then idea genes) where the champion differs from the baseline."""
    keys = list(dict.fromkeys([*base, *champ]))
    return [k for k in sorted(keys, key=is_gene) if _value(base, k) != _value(champ, k)]


def describe_change(key: str, base: Mapping[str, Any], champ: Mapping[str, Any]) -> str:
    if is_gene(key):
        return f"idea {key[len(GENE_PREFIX) :]}"
    return f"{key} {_value(base, key)}->{_value(champ, key)}"


def without(champ: Mapping[str, Any], base: Mapping[str, Any], key: str) -> Genome:
    """The champion with ``key`` set back to the baseline's value (an idea gene: switched off)."""
    g = dict(champ)
    if is_gene(key) and key not in base:
        g.pop(key, None)
    else:
        g[key] = _value(base, key)
    return Genome(g)


def share(slowdown: float, total: float) -> float | None:
    """ln(slowdown) / ln(total): the part of the champion's gain (in log time) its ablation loses."""
    if total <= 0 or slowdown <= 0 or abs(math.log(total)) < 1e-12:
        return None
    return math.log(slowdown) / math.log(total)


def ablate(camp: Any, rounds: int | None = None, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure the champion of ``camp``'s ledger against each of its ablations and the baseline; append the record
    to the ledger meta and return it. ``camp`` is an :class:`evo.campaign.Campaign` that has not run (its
    builder, backend and ledger are used; no attempt is recorded)."""
    import datetime as dt

    from harness.errors import HarnessError

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
            f"the champion, the baseline and each ablation (the champion with one change set back) interleaved, "
            f"{rounds} rounds in rotating order per geometry, graphs of about {p.batch_ms:g} ms of each part's own "
            "launches, throttled rounds dropped; a change's gain: median of the per-round ratios ablation/champion "
            "with its 95% order-statistic interval; its share: ln(that) / ln(baseline/champion)"
        ),
        "changes": [{"key": k, "change": describe_change(k, base.genome, champ.genome)} for k in keys],
        "geometries": {},
    }

    def load(genome: Genome) -> Any:
        built = None if camp.simulated else camp.builder.build(genome)
        loaded = camp._load(built, genome)
        if camp.simulated:  # a genome the sweep did not record (or recorded as failing) cannot be timed
            camp.backend.correctness(loaded)
        return loaded

    champ_loaded, base_loaded = load(Genome(champ.genome)), load(Genome(base.genome))
    parts: list[tuple[str, Any]] = [("champion", champ_loaded), ("baseline", base_loaded)]
    part_keys = [champ.genome_key, base.genome_key]
    for entry in record["changes"]:
        g = without(champ.genome, base.genome, entry["key"])
        entry["genome"] = dict(g)
        problem = camp.family.check(g, camp.cfg.geometries)
        if problem:
            entry["error"] = f"not a valid genome: {problem}"
            continue
        if g.key == base.genome_key:  # a one-change champion: its ablation is the baseline
            entry["same_as"] = "baseline"
            continue
        try:
            parts.append((entry["key"], load(g)))
            part_keys.append(g.key)
        except HarnessError as e:
            entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            if getattr(e, "fatal", False):
                raise
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
        s = camp.backend.measure(parts, geo, rounds, camp.part_launches(parts, part_keys, geo))
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
            row["changes"][k] = {"us": median(v), "gain": _iv(gain), "share": share(gain.value, total.value)}
        shares = [r["share"] for r in row["changes"].values() if r["share"] is not None]
        row["share_sum"] = sum(shares) if len(shares) == len(row["changes"]) else None
        record["geometries"][geo.name] = row
    led.append_meta(META_KEY, record)
    return record


def _iv(iv: Any) -> dict[str, float]:
    return {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "n": iv.n}


def latest(meta: Mapping[str, Any], champion_id: int | None) -> dict[str, Any] | None:
    """The latest ablation of ``champion_id`` in the ledger meta (None: never ablated)."""
    recs = [r for r in (meta.get(META_KEY) or []) if r.get("champion") == champion_id]
    return recs[-1] if recs else None


def table(record: Mapping[str, Any]) -> list[str]:
    """Markdown lines: per geometry, each change's time without it, the gain it carries and its share."""
    lines: list[str] = []
    for name, row in record.get("geometries", {}).items():
        tot = row["total"]
        watched = " (watched)" if row.get("weight", 1) <= 0 else ""
        lines += [
            f"{name}{watched}: champion {row['champion_us']:.2f} µs, baseline {row['baseline_us']:.2f} µs, total "
            f"{_fmt(tot)} ({row['rounds']} rounds)",
            "",
            "| change set back alone | µs without it | champion's gain from it | share of the total gain |",
            "|---|---|---|---|",
        ]
        for e in record.get("changes", []):
            r = row["changes"].get(e["key"])
            if r is None:
                lines.append(f"| {e['change']} | – | not measured: {e.get('error', '')} | – |")
                continue
            sh = "–" if r["share"] is None else f"{100 * r['share']:.0f}%"
            same = " (= the baseline)" if e.get("same_as") == "baseline" else ""
            note = " (faster without it)" if r["gain"]["hi"] < 1 else ""
            lines.append(f"| {e['change']} | {r['us']:.2f}{same} | {_fmt(r['gain'])}{note} | {sh} |")
        if row.get("share_sum") is not None:
            lines.append(
                f"| sum of shares | | | {100 * row['share_sum']:.0f}%"
                + (" (the changes interact)" if abs(row["share_sum"] - 1) > 0.1 else "")
                + " |"
            )
        lines.append("")
    return lines


def _effect(iv: Mapping[str, float]) -> str:
    """What setting a change back alone does to the champion, in words a reviewer reads the right way round."""
    if iv["hi"] < 1:
        return f"set back alone, the champion gets faster ({_fmt(iv)}: it costs time here)"
    if iv["lo"] > 1:
        return f"set back alone, the champion is {_fmt(iv)} slower"
    return f"set back alone, no clear change ({_fmt(iv)})"


def _fmt(iv: Mapping[str, float]) -> str:
    return f"{iv['value']:.3f}x [{iv['lo']:.3f}, {iv['hi']:.3f}]"


def carried(record: Mapping[str, Any] | None, keys: Sequence[str]) -> list[str]:
    """For a commit message: what each of ``keys`` (a patch's changes) carries at the first weighted geometry."""
    if not record or not record.get("geometries"):
        return []
    name, row = next(
        ((n, r) for n, r in record["geometries"].items() if r.get("weight", 1) > 0),
        next(iter(record["geometries"].items())),
    )
    names = {e["key"]: e["change"] for e in record.get("changes", [])}
    out = []
    for k in keys:
        r = row["changes"].get(k)
        if r is None:
            continue
        sh = "" if r["share"] is None else f"; {100 * r['share']:.0f}% of the champion's gain"
        out.append(f"{names.get(k, k)}: {_effect(r['gain'])} at {name}{sh}")
    return out
