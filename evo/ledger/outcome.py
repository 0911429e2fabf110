"""What Optuna's state and value say about an attempt: how a judged attempt is stored as a trial.

Called by the ledger when it records an attempt (evo/ledger/ledger.py ``record``, ``recover``) and by the table
(evo/report/table.py) that shows each attempt's state.

States and values (:func:`trial_outcome`; ledgers recorded before keep what they were given: COMPLETE with
the score for every attempt that had one). Optuna's ``best_trial`` is the champion:

=============================================  =========  ====================================================
attempt                                        state      value
=============================================  =========  ====================================================
baseline, accepted step                        COMPLETE   its score (weighted geometric-mean speedup against
                                                          the baseline), above every earlier champion's
rejected by perf for speed (not faster,        COMPLETE   its score, or just under the champion's where it
slower), every geometry measured                          reaches it
stopped by the early-out                       PRUNED     none
any other rejection (watched geometry,         FAIL       none
physics, correctness, static, e2e), any error
=============================================  =========  ====================================================

Every attempt timed anywhere carries its speedup against the baseline at each geometry it reached as an
intermediate value; step i is the i-th geometry of the campaign's config (meta ``config.geometries``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from optuna.trial import TrialState

from evo.core.records import ACCEPTED, BASELINE, Attempt, Code

CHAMPION = "champion"  # the baseline or an accepted step: COMPLETE, valued by its score
MEASURED = "measured"  # turned down for speed after every geometry was measured: COMPLETE, below the champion
STOPPED = "stopped"  # the early-out stopped it: PRUNED, no value
FAILED = "failed"  # every other verdict (a gate failed for another reason, or it could not be judged): FAIL
_SPEED = frozenset({Code.PERF_NOT_FASTER, Code.PERF_SLOWER})


def trial_outcome(attempt: Attempt) -> str:
    """How an attempt is stored as an Optuna trial: CHAMPION, MEASURED, STOPPED or FAILED (see ``TRIAL_STATES``).

    Optuna's ``best_trial`` (and optuna-dashboard's) must be the campaign's champion, so a value is given only for
    what was fully measured and compared as a win is: a step the perf gate turned down for speed alone (not faster,
    slower). Its score may still read above the champion's (a 1.005x step that misses a 1% bar) and is then stored
    just under the champion's value. Every other rejection carries no value, even when it was timed in full: a
    watched geometry's regression, a correctness recheck after timing, a changed token stream or a physics
    violation leave a weighted score that may beat the champion's, so it cannot be COMPLETE.
    """
    v = attempt.verdict
    finite = attempt.score is not None and math.isfinite(attempt.score)
    if v.status in (ACCEPTED, BASELINE) and finite:
        return CHAMPION
    if v.code in _SPEED and finite:
        return MEASURED
    if v.code is Code.PERF_EARLY_STOP:
        return STOPPED
    return FAILED


TRIAL_STATES = {
    CHAMPION: TrialState.COMPLETE,
    MEASURED: TrialState.COMPLETE,
    STOPPED: TrialState.PRUNED,
    FAILED: TrialState.FAIL,
}


def trial_value(outcome: str, score: float | None, best: float | None) -> float | None:
    """The Optuna value of an attempt of this outcome, given ``best``: the highest value of a champion so far.

    A champion's is its score, above every earlier champion's: a step is accepted only where it beat the champion in
    the same rounds, so its score is higher, save where drift between sessions made the baseline read differently;
    then it is stored just above ``best`` (its true score stays in its attempt record). A measured attempt's is its
    score, or just under ``best`` where its score reaches it. Ties are never stored: Optuna's best_trial is an
    ORDER BY on the value, and the order of equal values is the database's to pick.
    """
    if outcome not in (CHAMPION, MEASURED) or score is None:
        return None
    if best is None:
        return float(score)
    if outcome == CHAMPION:
        return float(score) if score > best else math.nextafter(best, math.inf)
    return float(score) if score < best else math.nextafter(best, -math.inf)


def intermediate_values(attempt: Attempt, geometries: Sequence[str]) -> dict[int, float]:
    """Step -> the attempt's speedup against the baseline at the campaign's ``geometries[step]``, where measured
    (the baseline: 1.0 where it was timed). What an early-stopped attempt reached, the others' per-geometry results."""
    out = {}
    for i, g in enumerate(geometries):
        iv = attempt.speedup_vs_baseline.get(g)
        if iv is not None and math.isfinite(iv.value):
            out[i] = float(iv.value)
        elif attempt.verdict.status == BASELINE and g in attempt.timings:
            out[i] = 1.0
    return out
