"""What Optuna's own tools (optuna-dashboard, ``study.trials_dataframe()``) read from a ledger beside the attempt.

Each attempt's record is one JSON user attribute (``attempt``), which those tools show as one long string. So the
ledger also writes, with the attempt and in the same transaction (Ledger._commit), short attributes they show as
columns: the verdict's code and reason, the attempt's score as measured (never the value Optuna ranks by, which is
kept below the champion's for a rejected attempt: see "States and values" in evo/ledger/ledger.py), and its speedup
against the baseline at each geometry by name (Optuna's intermediate values are numbered steps). The study's one
objective is named (:func:`name_metric`), not "Objective 0".
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning

from evo.core.records import Attempt

METRIC = "speedup vs baseline (weighted geomean)"
REASON_CHARS = 200  # a column, not the whole story: the attempt record holds it all
_WHITESPACE = re.compile(r"\s+")
GEOMETRY_PREFIX = "speedup."  # user attr speedup.<geometry>


def attrs(attempt: Attempt) -> list[tuple[str, Any]]:
    """The short user attributes of one attempt (written by every record of it, so a later record corrects them)."""
    v = attempt.verdict
    out: list[tuple[str, Any]] = [
        ("verdict_code", v.code.value),
        ("reason", _WHITESPACE.sub(" ", v.reason).strip()[:REASON_CHARS]),  # one line, for a table cell
    ]
    if attempt.score is not None and math.isfinite(attempt.score):
        out.append(("score", float(attempt.score)))
    for g, iv in sorted(attempt.speedup_vs_baseline.items()):
        if math.isfinite(iv.value):
            out.append((f"{GEOMETRY_PREFIX}{g}", float(iv.value)))
    return out


def name_metric(study: optuna.Study) -> None:
    """Names the study's objective for the dashboard, once (a writer's open of a ledger that has no name yet)."""
    if study.metric_names == [METRIC]:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        study.set_metric_names([METRIC])
