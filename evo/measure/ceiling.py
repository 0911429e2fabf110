"""The champion against the copy ceiling, side by side.

Every attempt's "% of the copy ceiling" divides its time by the ceiling measured once when the campaign started,
minutes earlier and on a cooler card. At the end of a run the champion's time and the copy ceiling are measured
alternately (``gates.perf.ceiling_check`` times, the order swapped every other time so that a drift weighs on both),
and each alternation gives its own ratio: the figure a roofline claim should quote. The champion's batches are
sized for the champion itself (about batch_ms each, as the campaign sizes every part): right after the ceiling's
copies of 4 GiB the card ran the fp4 champion's 54-launch (1 ms) batches 11% slower in every round, its 414-launch
ones not (benchmarks/results/2026-12-01-fp4-matvec-pdl-campaign-watched-slack, 2026-12-01-batch-sizing-probe); the
log gives the two orders' medians apart, and the NVML reasons of throttled rounds. The result is kept in the ledger's
``ceiling_checks`` (one entry a run) and shown in the log.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from harness.device import reason_text


def pct(bytes_moved: int, us: float | None, tbps: float | None) -> float | None:
    """Percent of ``tbps`` that ``bytes_moved`` bytes in ``us`` microseconds reach."""
    if not us or not tbps or not bytes_moved:
        return None
    return 100.0 * bytes_moved / (us * 1e-6) / (tbps * 1e12)


def summarize(trials: Sequence[Mapping[str, Any]], bytes_moved: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Per geometry: the median of the alternations' own ratios, their range, and the median time and ceiling.

    ``trials``: [{"ceiling_tbps": float, "us": {geometry: µs or None (every round throttled)}}, ...]."""
    out: dict[str, dict[str, Any]] = {}
    for g, nbytes in bytes_moved.items():
        pairs = [(t["us"].get(g), t["ceiling_tbps"]) for t in trials]
        ratios = [p for p in (pct(nbytes, us, c) for us, c in pairs) if p is not None]
        times = [us for us, _ in pairs if us]
        ceils = [c for us, c in pairs if us and c]
        by_first = {
            f: [t["us"].get(g) for t in trials if t.get("first") == f and t["us"].get(g)]
            for f in ("ceiling", "champion")
        }
        out[g] = {
            "pct_median": statistics.median(ratios) if ratios else None,
            "pct_min": min(ratios) if ratios else None,
            "pct_max": max(ratios) if ratios else None,
            "us_median": statistics.median(times) if times else None,
            "ceiling_median_tbps": statistics.median(ceils) if ceils else None,
            "ceiling_min_tbps": min(ceils) if ceils else None,
            "ceiling_max_tbps": max(ceils) if ceils else None,
            "alternations": len(ratios),
            "unmeasured": len(pairs) - len(ratios),
            # why rounds were dropped: the NVML reasons of the throttled rounds, over all alternations
            "throttle": sorted({r for t in trials for r in (t.get("throttle") or {}).get(g, "").split(",") if r}),
            # the champion's median time where the ceiling's copies came just before it, and where they did not
            "us_median_ceiling_first": statistics.median(by_first["ceiling"]) if by_first["ceiling"] else None,
            "us_median_champion_first": (statistics.median(by_first["champion"]) if by_first["champion"] else None),
        }
    return out


def describe(check: Mapping[str, Any]) -> list[str]:
    """One line per geometry, for the console and the log."""
    if check.get("error"):
        return [f"not measured: {check['error']}"]
    lines = []
    for g, s in (check.get("geometries") or {}).items():
        why = f": {', '.join(s['throttle'])}" if s.get("throttle") else ""
        if s.get("pct_median") is None:
            lines.append(f"{g}: no alternation measured (every round throttled{why})")
            continue
        lines.append(
            f"{g}: {s['us_median']:.2f} µs, {s['pct_median']:.1f}% of the copy ceiling "
            f"(alternations {s['pct_min']:.1f}-{s['pct_max']:.1f}%; ceiling {s['ceiling_min_tbps']:.3f}-"
            f"{s['ceiling_max_tbps']:.3f} TB/s; {s['alternations']} of {s['alternations'] + s['unmeasured']}"
            " measured" + (f", the others' every round throttled{why}" if s["unmeasured"] else "") + _order(s) + ")"
        )
    return lines


def _order(s: Mapping[str, Any]) -> str:
    a, b = s.get("us_median_ceiling_first"), s.get("us_median_champion_first")
    return f"; right after the copies {a:.2f} µs, before them {b:.2f} µs" if a and b else ""


def run_check(
    backend: Any, loaded: Any, geometries: Sequence[Any], launches: Mapping[str, int], rounds: int, times: int
) -> list[dict[str, Any]]:
    """``times`` alternations of one copy-ceiling trial (harness copy_ceiling, trials=1) and the champion's
    ``rounds`` timed batches at each geometry; even alternations take the ceiling first, odd ones after."""
    trials = []
    for i in range(times):
        row: dict[str, Any] = {"us": {}, "discarded": {}, "first": "ceiling" if i % 2 == 0 else "champion"}
        if i % 2 == 0:
            row["ceiling_tbps"] = backend.copy_ceiling(trials=1)["ceiling_tbps"]
        for g in geometries:
            s = backend.measure([("champ", loaded)], g, rounds, launches[g.name])
            ts = s.times_us.get("champ") or []
            row["us"][g.name] = statistics.median(ts) if ts else None
            row["discarded"][g.name] = s.discarded
            if s.discarded and s.clocks.get("throttle_reasons"):
                row.setdefault("throttle", {})[g.name] = reason_text(int(s.clocks["throttle_reasons"]))
        if i % 2 == 1:
            row["ceiling_tbps"] = backend.copy_ceiling(trials=1)["ceiling_tbps"]
        trials.append(row)
    return trials


# --- the latency floor ------------------------------------------------------------------------------------------
# Beside the copy ceiling (what bandwidth allows), the latency floor: the time of an empty kernel launched as the
# candidates are (the baseline's grid and block at each geometry, in CUDA graphs of about batch_ms, plain or PDL as
# gates.perf.launch says; harness/gpu.py ``latency_floor``). At a decode shape that moves a few KiB, "% of the copy
# ceiling" says little; the time as a multiple of this floor says how far from an empty launch a kernel is.
FLOOR_META = "latency_floor"
LATENCY_BOUND = 0.5  # a geometry whose floor is more than this fraction of its baseline time is latency-bound


def measure_floor(backend: Any, family: Any, geometries: Sequence[Any], launch: str, rounds: int) -> dict[str, Any]:
    """The latency floor at each geometry, as kept in the ledger meta; a backend that cannot measure it (the
    recorded one) gives a record saying so, never a figure."""
    unmeasured = {"backend": getattr(backend, "name", "?"), "unmeasured": f"not measured ({backend.name} backend)"}
    if getattr(backend, "simulated", False):  # the recorded backend serves the floor its sweep measured, if any
        rec = getattr(backend, "recorded_floor", lambda: None)()
        return dict(rec) if rec else unmeasured
    fn = getattr(backend, "latency_floor", None)
    if fn is None:
        return unmeasured
    grids = {}
    for g in geometries:
        lc = family.launch(family.baseline(), g)
        grids[g.name] = {"grid": list(lc.grid), "block": list(lc.block)}
    pdl = launch == "pdl"
    per = fn(grids, rounds, pdl)
    return {
        "backend": backend.name,
        "launch": "pdl" if pdl else "plain",
        "geometries": per,
        "method": (
            f"an empty kernel ({'PDL: launch_dependents then griddepcontrol.wait' if pdl else 'plain launches'}) with "
            f"the baseline's grid and block at each geometry, graphs of about batch_ms of its own launches, median "
            f"of {rounds} replays"
        ),
    }


def floor_us(meta: Mapping[str, Any] | None, geometry: str) -> float | None:
    g = ((meta or {}).get("geometries") or {}).get(geometry) or {}
    us = g.get("us")
    return float(us) if isinstance(us, (int, float)) and us > 0 else None


def floor_multiple(us: float | None, floor: float | None) -> str:
    """'17.3x launch floor' (empty when either is unknown)."""
    if not us or not floor:
        return ""
    return f"{us / floor:.1f}x latency floor"


def latency_bound(floor: float | None, baseline_us: float | None) -> bool:
    return bool(floor and baseline_us and floor > LATENCY_BOUND * baseline_us)


def describe_floor(meta: Mapping[str, Any] | None, backend: str | None = None) -> str:
    """One line: each geometry's floor and how it was taken, or why there is none."""
    if not meta:
        if backend == "recorded":
            return "latency floor: not measured (recorded backend)"
        return "latency floor: not measured (not recorded by this campaign)"
    if meta.get("unmeasured"):
        return f"latency floor: {meta['unmeasured']}"
    if meta.get("error"):
        return f"latency floor: not measured ({meta['error']})"
    per = ", ".join(
        f"{g} {v['us']:.2f} µs" for g, v in (meta.get("geometries") or {}).items() if isinstance(v.get("us"), float)
    )
    return f"latency floor: {per or 'none'} ({meta.get('method', '')})"
