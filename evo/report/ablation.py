"""What `evo ablate` recorded (evo/loop/ablate.py measures it), read for people: the changes of a champion
against the baseline, each change's share of the gain, the log's tables and the commit messages' lines.

A change's gain is the champion's speedup over its ablation (the champion with that change set back alone); its
share is ln(gain) / ln(baseline/champion), the part of the total gain lost when only that change is undone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.genome import Genome
from evo.search.ideas import GENE_PREFIX, is_gene

META_KEY = "ablations"


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
        unmeasured = [e for e in record.get("changes", []) if e["key"] not in row["changes"]]
        if unmeasured:
            lines.append(f"| sum of shares | | | – ({len(unmeasured)} change(s) not measured) |")
        elif row.get("share_sum") is not None:
            lines.append(
                f"| sum of shares | | | {100 * row['share_sum']:.0f}%"
                + (" (the changes interact)" if abs(row["share_sum"] - 1) > 0.1 else "")
                + " |"
            )
        lines.append("")
    return lines


def _fmt(iv: Mapping[str, float]) -> str:
    return f"{iv['value']:.3f}x [{iv['lo']:.3f}, {iv['hi']:.3f}]"


def carried(record: Mapping[str, Any] | None, keys: Sequence[str]) -> list[str]:
    """For a commit message: what each of ``keys`` (a patch's changes) carries at every weighted geometry, and at a
    watched one where the champion is faster without it (the change costs time there)."""
    if not record or not record.get("geometries"):
        return []
    names = {e["key"]: e["change"] for e in record.get("changes", [])}
    errors = {e["key"]: e["error"] for e in record.get("changes", []) if e.get("error")}
    geos = record["geometries"]
    out = []
    for k in keys:
        if k in errors:
            out.append(f"{names.get(k, k)}: not measured ({errors[k]})")
            continue
        parts = []
        for name, row in geos.items():
            r = row["changes"].get(k)
            if r is None:
                continue
            sh = "" if r["share"] is None else f", {100 * r['share']:.0f}% of the champion's gain there"
            if row.get("weight", 1) > 0:
                parts.append(f"at {name} {_fmt(r['gain'])}{sh}")
            elif r["gain"]["hi"] < 1:
                parts.append(f"at watched {name} the champion is faster without it ({_fmt(r['gain'])})")
        if parts:
            out.append(f"{names.get(k, k)}, set back alone (champion's speed over it): " + "; ".join(parts))
    return out
