"""The portfolio's TPE (evo/search/portfolio.py): the ``tpe`` proposer, except that a genome that failed counts as
measured at the worst speed measured so far (session 32).

Why: Optuna's TPE leaves failed trials out of both of its densities, so it keeps sampling a region where every
genome fails. On mhc_prenorm_gemm (tests/test_surrogate.py ``test_calibration_finds_a_sharp_optimum``, seed 103),
where ``math`` mma with ``split_k`` below 16 does not run, 33 of TPE's 47 turns failed, and the run needed 169
evaluations to reach the optimum instead of 54 (docs/search-efficiency.md, "Portfolio (session 31)"). Counted at the
worst speed, a failure falls into TPE's "bad" density, which is how TPE steers away from a region (and how Kernel
Tuner's strategies and the surrogate's ``fail_impute`` treat a configuration that does not run). A genome rejected
because its machine code was measured before is no failure (its speed is that genome's), nor is one rejected for an
inexact knob in exact mode (the config's rule): they stay failed trials, as the surrogate's own failure rate ignores
them. Made by ``Portfolio.tpe`` on the first turn (this module imports Optuna).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from evo.core.records import Attempt, Code
from evo.search.optuna_samplers import TPE


class FailAwareTPE(TPE):
    """TPE fed a failed attempt as one measured at the worst finite score of the attempts so far."""

    def _feed(self, attempts: Sequence[Attempt]) -> None:
        super()._feed(worst_for_failures(attempts))


def worst_for_failures(attempts: Sequence[Attempt]) -> list[Attempt]:
    """The attempts, each failed one (judged, no score, not an identical-machine-code rejection) as a copy scored at
    the worst finite score of all of them; unchanged while none has a score."""
    measured = [float(a.score) for a in attempts if a.score is not None and _measured(a)]
    if not measured:
        return list(attempts)
    worst = min(measured)
    return [dataclasses.replace(a, score=worst) if _failed(a) else a for a in attempts]


def _measured(a: Attempt) -> bool:
    return a.score is not None and math.isfinite(a.score) and a.score > 0


def _failed(a: Attempt) -> bool:
    """A judged attempt without a score that the surrogate counts as failed (evo/search/surrogate.py ``_data``): not
    one rejected for its machine code (measured before) or for an inexact knob in exact mode (the config's rule)."""
    if a.verdict.kind == "interrupted" or _measured(a):
        return False
    return a.verdict.code not in (Code.STATIC_IDENTICAL_SASS, Code.CORRECTNESS_INEXACT_KNOB)
