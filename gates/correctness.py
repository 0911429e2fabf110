"""Correctness gate: output hashes against the frozen baseline, or tolerance against float64.

Evidence comes from a backend that poisoned every output before each launch,
ran each seeded input set ``runs`` times, and hashed the output bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.core.records import PASS, Code, Verdict


@dataclass
class OutputCheck:
    """One output of one launch series at one (geometry, seed)."""

    geometry: str
    seed: int
    output: str
    hashes: list[str]  # one per run, each after a fresh poison
    nonfinite: int = 0  # NaN/Inf elements the baseline does not have
    unwritten: int = 0  # elements still holding the poison pattern
    rel_err: float | None = None  # ||out - ref|| / ||ref|| against float64
    max_abs: float | None = None
    mismatch: str = ""  # readable first difference vs the baseline output, if any
    oob_bytes: int = 0  # guard-band bytes around the buffer that the kernel overwrote (out-of-bounds writes)


@dataclass
class CorrectnessEvidence:
    checks: list[OutputCheck] = field(default_factory=list)
    # inputs a launch changed (harness.inout.InputWrite: geometry, seed, input, changed, numel); evo gives a kernel
    # its inputs to read, and an in-out buffer is an output with init_from (evo/core/family.py OutputSpec)
    written_inputs: list[Any] = field(default_factory=list)


def correctness_gate(
    evidence: CorrectnessEvidence,
    baseline_hashes: Mapping[str, str],
    mode: str = "exact",
    inexact: Mapping[str, Sequence[str]] | None = None,
    baseline_errors: Mapping[str, float] | None = None,
    tolerance_factor: float = 2.0,
) -> Verdict:
    """Decide from the evidence; the reason names geometry, seed and output.

    ``baseline_hashes`` and ``baseline_errors`` are keyed "geometry/seed/output".
    ``inexact`` maps geometry -> knobs of this genome that may change output bits.
    """
    inexact = inexact or {}
    if mode == "exact":
        for g, knobs in inexact.items():
            if knobs:
                return Verdict.rejected(
                    "correctness",
                    f"{', '.join(knobs)} changes the summation order at {g}; "
                    "the campaign runs in exact mode (use gates.correctness.mode: tolerance)",
                    Code.CORRECTNESS_INEXACT_KNOB,
                    {"knobs": list(knobs), "geometry": g},
                )
    for w in evidence.written_inputs:  # first: a changed input explains whatever else went wrong after it
        return Verdict.rejected(
            "correctness",
            f"the kernel wrote its input {w.input} at {w.geometry} seed {w.seed} ({w.changed} of {w.numel} "
            "elements changed); an in-out argument is an output with init_from (OutputSpec)",
            Code.CORRECTNESS_INPUT_WRITTEN,
            {"input": w.input, "geometry": w.geometry},
        )
    for c in evidence.checks:
        where = f"{c.output} at {c.geometry} seed {c.seed}"
        if c.oob_bytes:
            return Verdict.rejected(
                "correctness",
                f"wrote past the bounds of {c.output} at {c.geometry} seed {c.seed}: "
                f"{c.oob_bytes} guard-band bytes overwritten",
                Code.CORRECTNESS_OOB,
            )
        if c.nonfinite:
            return Verdict.rejected(
                "correctness", f"{c.nonfinite} NaN/Inf values in {where}", Code.CORRECTNESS_NONFINITE
            )
        if c.unwritten:
            return Verdict.rejected(
                "correctness",
                f"{c.unwritten} elements of {where} never written (poison left)",
                Code.CORRECTNESS_UNWRITTEN,
            )
        if len(set(c.hashes)) > 1:
            return Verdict.rejected(
                "correctness",
                f"race: the hash of {where} moved between {len(c.hashes)} runs on the same input",
                Code.CORRECTNESS_RACE,
            )
    for c in evidence.checks:
        key = f"{c.geometry}/{c.seed}/{c.output}"
        where = f"{c.output} at {c.geometry} seed {c.seed}"
        want = baseline_hashes.get(key)
        if want is None:
            return Verdict.error("not_recorded", f"no frozen baseline hash for {key}", gate="correctness")
        if c.hashes[0] == want:
            continue
        if mode == "exact":
            detail = f": {c.mismatch}" if c.mismatch else ""
            return Verdict.rejected(
                "correctness", f"hash of {where} differs from the baseline{detail}", Code.CORRECTNESS_HASH
            )
        base_err = (baseline_errors or {}).get(key)
        if c.rel_err is None or base_err is None:
            return Verdict.rejected(
                "correctness", f"hash of {where} differs and no float64 error is known", Code.CORRECTNESS_NO_FLOAT64
            )
        limit = tolerance_factor * max(base_err, 1e-12)
        if c.rel_err > limit:
            return Verdict.rejected(
                "correctness",
                f"error vs float64 of {where} is {c.rel_err:.3e}, over {tolerance_factor:g}x the "
                f"baseline's {base_err:.3e}",
                Code.CORRECTNESS_TOLERANCE,
            )
    return PASS


def baseline_problem(evidence: CorrectnessEvidence, error_bound: Callable[[str], float]) -> str | None:
    """Why the baseline cannot be the campaign's reference, or None: every output within the family's
    ``error_bound(output)`` of float64, finite, fully written, and the same bits on every run, and no input
    changed by a launch."""
    for w in evidence.written_inputs:
        return (
            f"the baseline writes its input {w.input} at {w.geometry} seed {w.seed} ({w.changed} of {w.numel} "
            f"elements changed): declare the buffer it writes as an output with init_from={w.input!r} "
            "(OutputSpec) and pass that output in kernel_args"
        )
    for c in evidence.checks:
        bound = error_bound(c.output)
        if c.rel_err is None or not c.rel_err <= bound or c.nonfinite or c.unwritten:
            return (
                f"the baseline is wrong: {c.output} at {c.geometry} seed {c.seed} has relative error "
                f"{c.rel_err} vs float64 (bound {bound}), {c.nonfinite} NaN/Inf, {c.unwritten} unwritten"
            )
        if len(set(c.hashes)) > 1:
            return f"the baseline races: {c.output} at {c.geometry} seed {c.seed} hash moved"
    return None
