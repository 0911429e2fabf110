"""A campaign's attempts in the formats of the tools kernel engineers already use (`evo table --as ...`).

* a **Kernel Tuner cache**: written by harness/ktcache_write.py's ``ledger_to_kt_cache``, the one writer that
  ``evo kt-cache --ledger`` also uses (the table command calls it; nothing of it is here).
* **nvbench-style JSON** (the document ``--json`` of an nvbench binary writes): one benchmark whose axes are the
  knobs and the geometry, one state per measured attempt and geometry, with nvbench's summary tags for the GPU
  time, its noise and the sample count; evo records medians, so the time is given under both the mean's tag (what
  nvbench's compare scripts read) and a median tag, the description saying which it is.

Called by the table command (evo/cli/report.py); reads attempts, writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo.core.family import Family, Geometry
from evo.core.records import Attempt

FORMATS = ("nvbench", "kernel-tuner")  # kernel-tuner: harness/ktcache_write.py


@dataclass
class Converted:
    """A document for another tool, and how many attempts it could not hold (and why)."""

    doc: dict[str, Any]
    left_out: int = 0
    why: str = ""


def _plain(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)


def _axis_type(values: Sequence[Any]) -> str:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "float64"
    return "string"


def _summary(tag: str, name: str, hint: str, kind: str, value: Any, description: str) -> dict[str, Any]:
    return {
        "tag": tag,
        "name": name,
        "hint": hint,
        "description": description,
        "data": [{"name": "value", "type": kind, "value": str(value)}],
    }


def nvbench_json(
    attempts: Sequence[Attempt], family: Family, geometries: Sequence[Geometry], device: str = ""
) -> Converted:
    """The campaign's measured attempts as one nvbench-style benchmark: axes knobs + geometry, a state per
    attempt and geometry it was timed at."""
    axes = [
        {
            "name": k.name,
            "type": _axis_type(k.values),
            "flags": "",
            "values": [{"input_string": str(v), "description": "", "value": _plain(v)} for v in k.values],
        }
        for k in family.knobs
    ]
    axes.append(
        {
            "name": "geometry",
            "type": "string",
            "flags": "",
            "values": [{"input_string": g.name, "description": _params(g.params), "value": g.name} for g in geometries],
        }
    )
    types = {a["name"]: a["type"] for a in axes}
    states = []
    unmeasured = 0
    for a in sorted(attempts, key=lambda x: x.id):
        timed = [g for g in geometries if g.name in a.timings]
        if not timed:
            unmeasured += 1
            continue
        for g in timed:
            t = a.timings[g.name]
            values = {**{k.name: a.genome.get(k.name) for k in family.knobs}, "geometry": g.name}
            secs = t.median_us * 1e-6
            states.append(
                {
                    "name": "Device=0 " + " ".join(f"{k}={v}" for k, v in values.items()) + f" evo_attempt={a.id}",
                    "device": 0,
                    "type_config_index": 0,
                    "axis_values": [{"name": k, "type": types[k], "value": str(v)} for k, v in values.items()],
                    "summaries": [
                        _summary(
                            "nv/cold/time/gpu/mean",
                            "GPU Time",
                            "duration",
                            "float64",
                            secs,
                            "evo's median of the timed runs (evo records medians, not means)",
                        ),
                        _summary("evo/time/gpu/median", "GPU Time (median)", "duration", "float64", secs, "median"),
                        _summary(
                            "nv/cold/time/gpu/stdev/relative",
                            "Noise",
                            "percentage",
                            "float64",
                            t.spread_pct / 100.0,
                            "evo's spread: (p90 - p10) / median of the timed runs",
                        ),
                        _summary("nv/cold/sample_size", "Samples", "sample_size", "int64", t.samples, "timed runs"),
                        _summary("evo/verdict", "Verdict", "", "string", a.verdict.label(), a.verdict.reason[:200]),
                    ],
                    "is_skipped": False,
                    "skip_reason": "",
                }
            )
    doc = {
        "meta": {"version": {"json": {"major": 1, "minor": 0, "patch": 0, "string": "1.0.0"}}, "producer": "evo"},
        "devices": [{"id": 0, "name": device or "unknown"}],
        "benchmarks": [
            {
                "name": family.entry or family.name,
                "index": 0,
                "min_samples": min((s for a in attempts for s in (t.samples for t in a.timings.values())), default=0),
                "devices": [0],
                "axes": axes,
                "states": states,
            }
        ],
    }
    return Converted(doc, unmeasured, "attempts never timed (rejected or failed before timing)" if unmeasured else "")


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
