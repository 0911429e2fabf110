"""evo's recorded sweeps written as Kernel Tuner cache files (`evo kt-cache`), the other direction of
harness/ktcache.py.

One cache holds one problem size, so one geometry of the sweep is written (the first weighted one unless asked).
``tune_params`` are the family's knobs (values in the family's order; over the sweep's space where it swept a
sub-space), every configuration of their product is an entry (so Kernel Tuner's simulation mode never meets a
configuration it lacks), and each entry holds what Kernel Tuner itself records:

* a valid genome: ``time`` (ms, the median of its rounds as the recorded backend serves them: each round paired
  with the baseline sample measured beside it), ``times`` (those rounds, ms), ``compile_time``/``verification_time``
  (0: the sweep does not separate them), ``benchmark_time`` (the sum of the rounds), ``strategy_time``,
  ``framework_time``, ``timestamp`` (the sweep's), and ``GFLOP/s`` / ``GB/s`` where the family counts flops / bytes;
* an invalid one: the name of Kernel Tuner's error class in ``time`` and in ``__error__`` (Kernel Tuner 1.x reads
  either; KTdashboard needs the objective field and skips a string there): ``InvalidConfig`` where
  ``family.check`` rules it out, its launch() failed or the sweep did not measure it, ``CompilationFailedConfig``
  for a compile error, ``RuntimeFailedConfig`` for a crash or a correctness failure (Kernel Tuner has no entry for
  a wrong output: its verification stops the run).

The file is laid out as Kernel Tuner writes it (a header, one entry per line, closed by ``}\\n}``), which is what
KTdashboard's reader expects; ``.json.gz`` compresses it (Kernel Tuner 1.5 itself reads plain ``.json`` only).
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.core.family import Family, Geometry
from evo.core.genome import Genome
from gates.judge import recorded_outputs_pass
from harness.recorded import SAME, recorded_evidence
from harness.sweepfile import linked_entry

# a sweep entry's status -> Kernel Tuner's error (tools/sweep.py's statuses; a Kernel Tuner cache replayed as a
# sweep, harness/ktcache.py, keeps Kernel Tuner's own names); any other status: RuntimeFailedConfig
ERROR_OF_STATUS = {
    "compile_error": "CompilationFailedConfig",
    "launch_error": "InvalidConfig",
    **{e: e for e in ("InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig")},
}


class KTWriteError(ValueError):
    """The sweep cannot be written as asked (one line)."""


def kt_value(v: Any) -> Any:
    """A problem-size element as Kernel Tuner keeps one (ints; a bool as 0/1; anything else as text)."""
    if isinstance(v, bool):
        return int(v)
    return v if isinstance(v, int) else str(v)


def pick_geometry(data: Mapping[str, Any], name: str | None) -> dict[str, Any]:
    """The sweep geometry to write: ``name``, else the first weighted one."""
    geos = list(data["geometries"])
    if name is not None:
        for g in geos:
            if g["name"] == name:
                return dict(g)
        raise KTWriteError(f"the sweep has no geometry {name!r} (it has {', '.join(g['name'] for g in geos)})")
    return dict(next((g for g in geos if g.get("weight", 1) > 0), geos[0]))


def _rounds_ms(e: Mapping[str, Any], g: str, bmed: float) -> list[float]:
    """A genome's rounds at ``g`` in ms, each paired with its baseline sample (harness/recorded.py's normalization)."""
    return [ti * bmed / bi / 1000.0 for ti, bi in zip(e["t"][g], e["b"][g])]


def _error(
    e: Mapping[str, Any] | None, g: str, data: Mapping[str, Any], mode: str, tolerance_factor: float
) -> str | None:
    """The Kernel Tuner error a sweep entry stands for at geometry ``g``, or None where its time is usable."""
    if e is None:
        return "InvalidConfig"  # not measured
    status = e.get("status", "ok")
    if status != "ok":
        return ERROR_OF_STATUS.get(status, "RuntimeFailedConfig")
    if not e.get("t", {}).get(g) or e.get("recheck"):
        return "RuntimeFailedConfig"
    base = linked_entry(data["genomes"], data["baseline_key"]) or {}
    hashes = {f"{cg}/{seed}/{out}": SAME for cg, seed, out, *_ in base.get("checks", [])}
    hashes.update(data.get("baseline_hashes", {}))
    ev = recorded_evidence(e, hashes, 10**9, 10**9)
    if not ev.checks:
        return "RuntimeFailedConfig"
    ok = recorded_outputs_pass(ev, hashes, data.get("baseline_errors", {}), mode, tolerance_factor)
    return None if ok else "RuntimeFailedConfig"


def _rates(family: Family, geo: Geometry, time_ms: float) -> dict[str, float]:
    """GFLOP/s and GB/s where the family counts flops and bytes (the family's code: a failure leaves them out)."""
    out: dict[str, float] = {}
    try:
        flops, moved = int(family.flops(geo) or 0), int(family.bytes_moved(geo) or 0)
    except Exception:  # noqa: BLE001 - the family's own code; the rates are extras
        return out
    if flops > 0:
        out["GFLOP/s"] = flops / (time_ms * 1e6)
    if moved > 0:
        out["GB/s"] = moved / (time_ms * 1e6)
    return out


def _swept(family: Family, space: Mapping[str, Any] | None) -> Family:
    """``family`` with each knob keeping the values a sweep of a sub-space measured (tools/sweep.py --knobs), in
    the family's order (evo.config.narrow_family's rule)."""
    if not isinstance(space, Mapping):
        return family
    knobs = []
    for k in family.knobs:
        keep = tuple(v for v in k.values if k.name not in space or v in space[k.name]) or k.values
        knobs.append(dataclasses.replace(k, values=keep, default=k.default if k.default in keep else keep[0]))
    return dataclasses.replace(family, knobs=tuple(knobs))


def sweep_to_kt_cache(
    family: Family,
    data: Mapping[str, Any],
    geometry: str | None = None,
    mode: str = "tolerance",
    tolerance_factor: float = 2.0,
) -> dict[str, Any]:
    """The Kernel Tuner cache document of one geometry of a sweep (``data``: harness/sweepfile.py's format). The
    correctness ``mode`` (exact / tolerance, with ``tolerance_factor``) decides which genomes' times are usable."""
    fam = _swept(family, (data.get("space") or {}).get("knobs"))
    gd = pick_geometry(data, geometry)
    g = gd["name"]
    geo = Geometry(g, dict(gd["params"]), float(gd.get("weight", 1)))
    base = linked_entry(data["genomes"], data["baseline_key"])
    if base is None or not base.get("t", {}).get(g):
        raise KTWriteError(f"the sweep has no baseline times at {g}")
    bmed = statistics.median(base["t"][g])
    stamp = str(data.get("created") or "")
    names = [k.name for k in fam.knobs]
    cache: dict[str, Any] = {}
    for values in itertools.product(*(k.values for k in fam.knobs)):
        genome = Genome(dict(zip(names, values)))
        e = linked_entry(data["genomes"], genome.key)
        err = "InvalidConfig" if fam.check(genome, [geo]) is not None else _error(e, g, data, mode, tolerance_factor)
        entry: dict[str, Any] = dict(zip(names, values))
        timings = {"compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}
        if err is not None or e is None:
            entry.update(time=err, __error__=err, **timings)
        else:
            times = _rounds_ms(e, g, bmed)
            t = statistics.median(times)
            entry.update(time=t, times=times, **{**timings, "benchmark_time": sum(times)}, **_rates(family, geo, t))
        entry.update(strategy_time=0.0, framework_time=0.0, timestamp=stamp)
        cache[",".join(str(v) for v in values)] = entry
    return {
        "device_name": str((data.get("device") or {}).get("name") or "unknown device"),
        "kernel_name": family.entry,
        "problem_size": _problem_size(family, gd["params"]),
        "tune_params_keys": names,
        "tune_params": {k.name: list(k.values) for k in fam.knobs},
        "objective": "time",
        "cache": cache,
        "evo": {  # (Kernel Tuner and KTdashboard read the keys above only)
            "family": family.name,
            "geometry": {"name": g, "params": dict(gd["params"])},
            "problem_size_names": list(gd["params"]),
            "sweep_created": stamp,
            "correctness_mode": mode,
        },
    }


def _attempt_entry(a: Any, g: str, names: list[str]) -> dict[str, Any]:
    """One measured attempt as a cache entry at geometry ``g`` (its time: the median the campaign recorded)."""
    entry: dict[str, Any] = {n: a.genome[n] for n in names}
    timing = a.timings.get(g)
    v = a.verdict
    if timing is not None and v.status != "error" and v.gate != "correctness":
        t = timing.median_us / 1000.0
        entry.update(
            time=t, compile_time=1000.0 * a.compile_s, verification_time=0.0, benchmark_time=1000.0 * a.measure_s
        )
    else:
        err = "CompilationFailedConfig" if v.kind == "compile" else "RuntimeFailedConfig"
        entry.update(time=err, __error__=err, compile_time=1000.0 * a.compile_s, verification_time=0.0)
        entry["benchmark_time"] = 0.0
    entry.update(strategy_time=0.0, framework_time=0.0, timestamp=a.finished_at or a.started_at)
    return entry


def ledger_to_kt_cache(
    family: Family, geometry: Geometry, attempts: Sequence[Any], device: Mapping[str, Any]
) -> tuple[dict[str, Any], int]:
    """A campaign's attempts (evo.core.records.Attempt, in the order they ran) at one geometry as a Kernel Tuner
    cache, as Kernel Tuner leaves one after a tuning run: the configurations it measured, in that order (what
    KTdashboard plots against the index), nothing else. An attempt rejected before the GPU (identical SASS, the
    exact-mode rule, the static gate) was never measured and is left out, as is one with source-level ideas (no
    knob value says it); one that ran and failed is Kernel Tuner's error. Returns the document and how many attempts
    were left out. Kernel Tuner's simulation mode stops at a configuration the file lacks: replay a full sweep
    (:func:`sweep_to_kt_cache`) to simulate searches."""
    names = [k.name for k in family.knobs]
    cache: dict[str, Any] = {}
    left = 0
    for a in attempts:
        key = ",".join(str(a.genome.get(n)) for n in names)
        measured = geometry.name in a.timings or a.verdict.status == "error" or a.verdict.gate == "correctness"
        if set(a.genome) != set(names) or not measured or a.verdict.kind in ("interrupted", "not_recorded"):
            left += 1
            continue
        if key not in cache:  # (a remeasured genome: its first measurement, as Kernel Tuner keeps the first)
            cache[key] = _attempt_entry(a, geometry.name, names)
    doc = {
        "device_name": str(device.get("name") or "unknown device"),
        "kernel_name": family.entry,
        "problem_size": _problem_size(family, geometry.params),
        "tune_params_keys": names,
        "tune_params": {k.name: list(k.values) for k in family.knobs},
        "objective": "time",
        "cache": cache,
        "evo": {"family": family.name, "geometry": {"name": geometry.name, "params": dict(geometry.params)}},
    }
    return doc, left


def _problem_size(family: Family, params: Mapping[str, Any]) -> list[Any]:
    """The geometry's parameter values in order; a family read from a Kernel Tuner cache gives back its own."""
    own = getattr(getattr(family, "cache", None), "problem_size", None)
    return list(own) if isinstance(own, (list, tuple)) else [kt_value(v) for v in params.values()]


def kt_cache_text(doc: Mapping[str, Any]) -> str:
    """The document laid out as Kernel Tuner writes a cache (util.py process_cache, store_cache, close_cache): the
    header, one entry per line, closed by ``}\\n}``."""
    head = {k: v for k, v in doc.items() if k != "cache"}
    head["cache"] = {}
    text = json.dumps(head, indent="")[:-3]  # (as process_cache: all but the closing "}\n}")
    lines = ["\n" + json.dumps({k: v})[1:-1] for k, v in doc["cache"].items()]
    return text + ",".join(lines) + "}\n}"


def write_kt_cache(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write a cache document to ``path`` atomically (``.json``, or ``.json.gz`` compressed)."""
    p = Path(path)
    if not (p.name.endswith(".json") or p.name.endswith(".json.gz")):
        raise KTWriteError(f"{p}: a Kernel Tuner cache file ends in .json (or .json.gz)")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
    data = kt_cache_text(doc).encode()
    try:
        tmp.write_bytes(gzip.compress(data, mtime=0) if p.name.endswith(".gz") else data)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
    return p
