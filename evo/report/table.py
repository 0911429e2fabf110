"""`evo table`: every attempt at every geometry as one flat table (CSV, or parquet through pyarrow).

One row per attempt and geometry of the campaign's config, whether or not the attempt was timed there (an
early-stopped or rejected one has empty time columns where it was not): the genome one column per knob, the
verdict (label, code, reason) and the Optuna state it is stored with (evo/ledger/outcome.py ``trial_outcome``), the time
and its spread, the speedups against the champion then and the baseline with their 95% intervals (the baseline's
own: 1.0), % of the copy ceiling, the resources of the module that geometry runs, the worker, device and backend;
``is_champion`` marks the campaign's champion now, the geometry's parameters are columns of their own, and the
timestamps are typed (UTC). Read from the ledger only.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.core.family import Family, Geometry
from evo.core.records import Attempt, Interval, Resources
from evo.ledger.outcome import TRIAL_STATES, trial_outcome
from evo.search.ideas import idea_slugs, is_gene
from harness.build import spec_key

FORMATS = (".csv", ".parquet")
PARQUET_EXTRA = "pip install 'evo-kernels[table]'"  # pyproject.toml's optional extra that brings pyarrow


class TableError(ValueError):
    """A table that cannot be written as asked (one line for the user; nothing was written)."""


def table_format(path: Path) -> str:
    """``csv`` or ``parquet`` from the file name, or TableError; parquet without pyarrow is a TableError too."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise TableError(f"{path}: give a file name ending in .csv or .parquet")
    if suffix == ".parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise TableError(
                f"{path}: writing parquet needs pyarrow, which is not installed ({PARQUET_EXTRA}); or write .csv"
            )
    return suffix[1:]


def _resources(a: Attempt, family: Family, g: Geometry) -> Resources | None:
    """The resources of the module built for ``g``'s specialization (the only one, where there is one)."""
    r = a.resources.get(spec_key(family.specialization(g)))
    if r is None and len(a.resources) == 1:
        r = next(iter(a.resources.values()))
    return r


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


_FIXED = frozenset(
    "attempt origin champion_then is_champion ideas verdict code reason optuna_state score geometry weight us "
    "spread_pct samples discarded vs_champion vs_champion_lo vs_champion_hi vs_baseline vs_baseline_lo vs_baseline_hi "
    "pct_of_ceiling registers stack_frame spills method worker device backend compile_s measure_s started_at "
    "finished_at".split()
)
TIMESTAMPS = ("started_at", "finished_at")  # ISO 8601 in the ledger; typed (UTC datetimes) in the written table


def _knob_column(name: str) -> str:
    """A knob's column: its name, or ``knob_<name>`` where that is one of the table's own columns."""
    return f"knob_{name}" if name in _FIXED else name


def _geometry_column(name: str, knobs: Sequence[str]) -> str:
    """A geometry parameter's column (T, H, ...): its name, or ``geometry_<name>`` where a column has that name."""
    return f"geometry_{name}" if name in _FIXED or name in knobs else name


def champion_id(attempts: Sequence[Attempt]) -> int | None:
    """The campaign's champion now: its last accepted attempt, else its baseline (what `evo status` names)."""
    accepted = [a.id for a in attempts if a.verdict.status == "accepted"]
    if accepted:
        return max(accepted)
    return next((a.id for a in attempts if a.verdict.status == "baseline"), None)


def _vs_baseline(a: Attempt, g: Geometry, timed: bool) -> Interval | None:
    """The speedup against the baseline at ``g``; the baseline itself, where it was timed, is exactly 1.0."""
    if a.verdict.status == "baseline" and timed and g.name not in a.speedup_vs_baseline:
        return Interval(1.0, 1.0, 1.0)
    return a.speedup_vs_baseline.get(g.name)


def attempt_rows(
    attempts: Sequence[Attempt], family: Family, geometries: Sequence[Geometry], device: str | None = None
) -> list[dict[str, Any]]:
    """The table's rows: for each attempt (by id), one per geometry, in the config's order. ``device``: the
    campaign's GPU (its ledger meta), for attempts that do not name their own."""
    knobs = [k.name for k in family.knobs]
    extra = sorted({k for a in attempts for k in a.genome if k not in knobs and not is_gene(k)})
    champ = champion_id(attempts)
    rows = []
    for a in sorted(attempts, key=lambda x: x.id):
        genome = {_knob_column(k): a.genome.get(k) for k in (*knobs, *extra)}
        head = {
            "attempt": a.id,
            "origin": a.origin,
            "champion_then": a.parent_id,
            "is_champion": a.id == champ,
            **genome,
            "ideas": ",".join(idea_slugs(a.genome)),
            "verdict": a.verdict.label(),
            "code": a.verdict.code.value,
            "reason": a.verdict.reason,
            "optuna_state": TRIAL_STATES[trial_outcome(a)].name,
            "score": _num(a.score),
        }
        for g in geometries:
            t = a.timings.get(g.name)
            vp, vb = a.speedup_vs_parent.get(g.name), _vs_baseline(a, g, t is not None)
            r = _resources(a, family, g)
            rows.append(
                {
                    **head,
                    "geometry": g.name,
                    **{_geometry_column(p, knobs): v for p, v in g.params.items()},
                    "weight": g.weight,
                    "us": _num(t.median_us) if t else None,
                    "spread_pct": _num(t.spread_pct) if t else None,
                    "samples": t.samples if t else None,
                    "discarded": t.discarded if t else None,
                    "vs_champion": _num(vp.value) if vp else None,
                    "vs_champion_lo": _num(vp.lo) if vp else None,
                    "vs_champion_hi": _num(vp.hi) if vp else None,
                    "vs_baseline": _num(vb.value) if vb else None,
                    "vs_baseline_lo": _num(vb.lo) if vb else None,
                    "vs_baseline_hi": _num(vb.hi) if vb else None,
                    "pct_of_ceiling": _num(a.roofline_pct.get(g.name)),
                    "registers": r.registers if r else None,
                    "stack_frame": r.stack_frame if r else None,
                    "spills": r.spills if r else None,
                    "method": t.method if t else None,
                    "worker": a.device.get("worker"),
                    "device": a.device.get("name") or device,
                    "backend": a.backend,
                    "compile_s": _num(a.compile_s),
                    "measure_s": _num(a.measure_s),
                    "started_at": a.started_at,
                    "finished_at": a.finished_at,
                }
            )
    return rows


def write_table(rows: Sequence[Mapping[str, Any]], path: Path, fmt: str) -> Path:
    """Write ``rows`` as CSV or parquet, whole or not at all (a temporary file beside it, then renamed)."""
    import pandas as pd  # type: ignore[import-untyped]  # (no pandas-stubs among the dependencies)

    path = Path(path)
    df = pd.DataFrame(list(rows))
    for col in df.columns:  # a knob of mixed value types (1, "auto"): text, as parquet wants
        kinds = {type(v) for v in df[col] if v is not None} if pd.api.types.is_object_dtype(df[col]) else set()
        if len(kinds) > 1:
            df[col] = [None if v is None else str(v) for v in df[col]]
    for col in ("champion_then", "samples", "discarded", "registers", "stack_frame", "spills"):
        if col in df:  # integers with gaps (an attempt not timed there): pandas' nullable integer, not float
            df[col] = df[col].astype("Int64")
    for col in TIMESTAMPS:  # typed, so that pandas and parquet readers sort and subtract them (a CSV keeps ISO text)
        if col in df:
            df[col] = pd.to_datetime(df[col].replace("", None), utc=True, format="ISO8601")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if fmt == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
        tmp.replace(path)
    except BaseException:  # a full disk or a stop: no half-written temporary file is left beside it
        tmp.unlink(missing_ok=True)
        raise
    return path
