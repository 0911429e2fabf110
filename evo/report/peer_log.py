"""The log's Peer section, kernel peers' part: the champion beside each peer kernel (``peer.kernels``), from the
latest record evo/loop/peers.py appended to the meta ``peer_kernels``. Called by evo/report/logmd.py after the
torch.compile table; reads the meta only and tolerates anything missing, as the rest of the log does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.measure.ceiling import FLOOR_META, floor_us

DASH = "–"
META_KEY = "peer_kernels"  # (evo/loop/peers.py writes it)


def _cell(x: Any) -> str:
    s = "" if x is None else str(x)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or DASH


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]


def _pct(x: Any) -> str:
    return f"{x:.1f}%" if isinstance(x, (int, float)) else DASH


def _floor(us: Any, floor: float | None) -> str:
    return f"{us / floor:.1f}x" if isinstance(us, (int, float)) and floor else DASH


def _ratio(r: Mapping[str, Any] | None) -> str:
    if not r:
        return DASH
    return f"{r['value']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}] (n={r.get('n', DASH)})"


def latest(meta: Mapping[str, Any], champion: int | None) -> tuple[dict[str, Any] | None, str]:
    """The record to show: the latest of ``champion``, else the latest of any (with a note saying whose)."""
    records = [r for r in meta.get(META_KEY) or [] if isinstance(r, dict)]
    mine = [r for r in records if r.get("champion") == champion]
    if mine:
        return mine[-1], ""
    if records:
        r = records[-1]
        return r, f"timed beside champion #{r.get('champion')}, not the current champion #{champion}"
    return None, ""


def peer_kernel_lines(meta: Mapping[str, Any], geoms: Sequence[tuple[str, float]], champion: int | None) -> list[str]:
    """The kernel peers' table and the peers left untimed with why; nothing where the campaign has no kernel peer."""
    rec, note = latest(meta, champion)
    if rec is None:
        return []
    sim = " (simulated)" if rec.get("simulated") else ""
    L = [
        "",
        f"Peer kernels beside champion #{rec.get('champion')}, {rec.get('at', DASH)}, {rec.get('backend', DASH)} "
        f"backend{sim}{'; ' + note if note else ''}. Method: {rec.get('method', DASH)}.",
        "",
    ]
    peers: Mapping[str, Any] = rec.get("peers") or {}
    for name, p in peers.items():
        knobs = ", ".join(f"{k}={v}" for k, v in (p.get("genome") or {}).items())
        if p.get("error"):
            state = f"not timed: {p['error']}"
        elif p.get("reference"):  # torch.compile of the reference (evo/loop/peers.py _torch_part)
            state = "the reference itself, compiled: its outputs are not checked"
        else:
            state = "passes the campaign's correctness check" if p.get("correct") else "not checked"
        L.append(f"- {name}: family {p.get('family', DASH)} ({p.get('source', DASH)}; {knobs or 'defaults'}): {state}")
    if rec.get("not_timed") or rec.get("error"):
        return [*L, "", f"No peer kernel timed: {rec.get('not_timed') or rec.get('error')}.", ""]
    rows = _rows(rec, meta, geoms)
    if not rows:
        return [*L, ""]
    head = ["Geometry", "Kernel", "µs", "% of copy ceiling", "x latency floor", "Peer / champion [95% interval]"]
    return [*L, "", *_table(head, rows), ""]


def _rows(rec: Mapping[str, Any], meta: Mapping[str, Any], geoms: Sequence[tuple[str, float]]) -> list[list[str]]:
    """A row for the champion and one for each timed peer, at each geometry the record holds."""
    floor_meta = meta.get(FLOOR_META)
    timed: Mapping[str, Any] = rec.get("geometries") or {}
    order = [g for g, _ in geoms if g in timed] + [g for g in timed if g not in dict(geoms)]
    rows = []
    for g in order:
        row = timed[g]
        fl = floor_us(floor_meta, g)
        gname = f"{g} (watched)" if row.get("weight") == 0 else g
        cu = row.get("champion_us")
        rows.append(
            [gname, f"champion #{rec.get('champion')}", _us(cu), _pct(row.get("champion_pct_ceiling")), _floor(cu, fl)]
            + ["1 (itself)"]
        )
        for name, p in (row.get("peers") or {}).items():
            us = p.get("us")
            rows.append(["″", name, _us(us), _pct(p.get("pct_ceiling")), _floor(us, fl), _ratio(p.get("ratio"))])
    return rows


def _us(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else DASH
