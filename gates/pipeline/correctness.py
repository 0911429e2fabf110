"""Gate "correctness": the outputs against the frozen reference (gates/correctness.py)."""

from __future__ import annotations

import time
from typing import Any

from evo.core.records import Verdict
from gates.correctness import correctness_gate
from gates.judge import Evidence
from gates.registry import register_gate


@register_gate("correctness", order=60)
def correctness(s: Evidence) -> Verdict | None:
    """The outputs against the baseline's hashes (exact mode) or float64 errors (tolerance mode). Loads the build (the
    module it leaves in ``s.loaded`` is the one perf times) and starts the attempt's measure_s clock. A caller that
    loaded the module (``judge(loaded=)``) or holds the outputs already (``judge(outputs=)``) hands them in."""
    ctx, a, genome = s.context, s.attempt, s.proposal.genome
    c = ctx.config.gates.correctness
    s.t0 = time.perf_counter()
    if s.outputs is None:
        if s.loaded is None:  # a source-level variant shares its genome with a plain one: never a cached module
            s.loaded = ctx.load(s.built, genome) if s.source is None else ctx.backend.load(s.built, genome)
        s.outputs = ctx.backend.correctness(s.loaded)
    ev, ref = s.outputs, ctx.reference
    a.output_hashes = hashes_by_geometry(ev)
    a.error_vs_ref = errors_by_geometry(ev)
    v = correctness_gate(ev, ref.baseline_hashes, c.mode, s.inexact, ref.baseline_errors, c.tolerance_factor)
    if v.ok:
        return None
    a.measure_s = round(time.perf_counter() - s.t0, 3)
    return v


def hashes_by_geometry(ev: Any) -> dict[str, dict[str, str]]:
    """The evidence's output hashes as an attempt records them: geometry -> "seed/output" -> hash."""
    out: dict[str, dict[str, str]] = {}
    for c in ev.checks:
        out.setdefault(c.geometry, {})[f"{c.seed}/{c.output}"] = c.hashes[0] if c.hashes else ""
    return out


def errors_by_geometry(ev: Any) -> dict[str, dict[str, float]]:
    """The evidence's largest errors against the float64 reference: geometry -> "output.rel_err"/".max_abs"."""
    out: dict[str, dict[str, float]] = {}
    for c in ev.checks:
        d = out.setdefault(c.geometry, {})
        if c.rel_err is not None:
            d[f"{c.output}.rel_err"] = max(d.get(f"{c.output}.rel_err", 0.0), c.rel_err)
        if c.max_abs is not None:
            d[f"{c.output}.max_abs"] = max(d.get(f"{c.output}.max_abs", 0.0), c.max_abs)
    return out
