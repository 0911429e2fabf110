"""Shared mode (``Ledger.shared = True``, what ``evo worker`` sets): a genome and a share of the budget reserved at
``ask(fixed)``, under the study lock.

``ask(fixed)`` first locks the study row (a no-op UPDATE: a row lock on PostgreSQL, the write lock on SQLite) and,
in that same transaction, refuses with :class:`GenomeTaken` when a non-interrupted trial (RUNNING or recorded)
already holds the genome (:func:`holder`), and with :class:`BudgetTaken` when RUNNING plus recorded non-interrupted
trials already fill ``Ledger.limit`` (:func:`taken`). Trial creation is serialised by that lock, so two workers
can never both hold one genome and the budget is never overshot; a refused ask writes nothing (no trial, no
"withdrawn" marker: numbers stay contiguous). Called by the ledger's ``ask`` only.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy
import sqlalchemy.orm
from optuna.trial import TrialState

from evo.ledger.rows import GENOME_KEY_ATTR, INTERRUPTED, models


class GenomeTaken(Exception):
    """Shared mode: another trial (``holder``, RUNNING or recorded) already holds this genome."""

    def __init__(self, holder: int, genome_key: str):
        super().__init__(f"genome already held by attempt #{holder}")
        self.holder = holder
        self.genome_key = genome_key


class BudgetTaken(Exception):
    """Shared mode: running plus recorded attempts already fill ``Ledger.limit``."""

    def __init__(self, taken: int, limit: int):
        super().__init__(f"{taken} attempt(s) recorded or running fill the budget of {limit}")
        self.taken = taken
        self.limit = limit


def reserve(session: Any, sid: int, key: str, limit: int | None) -> None:
    """Raise :class:`GenomeTaken` or :class:`BudgetTaken` where genome ``key`` may not be asked now; the caller holds
    the study lock in ``session``, and creates the trial in it when this returns."""
    held = holder(session, sid, key)
    if held is not None:
        raise GenomeTaken(held, key)
    if limit is not None:
        n = taken(session, sid)
        if n >= limit:
            raise BudgetTaken(n, limit)


def holder(session: Any, sid: int, key: str) -> int | None:
    """The lowest-numbered trial holding genome ``key``: RUNNING, or recorded and not interrupted."""
    t, u, sa = models.TrialModel, models.TrialUserAttributeModel, models.TrialSystemAttributeModel
    v = sqlalchemy.orm.aliased(u)
    kj = json.dumps(key)
    running = (
        session.query(t.number)
        .join(sa, sa.trial_id == t.trial_id)
        .filter(t.study_id == sid, t.state == TrialState.RUNNING, sa.key == GENOME_KEY_ATTR, sa.value_json == kj)
    )
    recorded = (
        session.query(t.number)
        .join(u, u.trial_id == t.trial_id)
        .join(v, v.trial_id == t.trial_id)
        .filter(
            t.study_id == sid,
            u.key == "genome_key",
            u.value_json == kj,
            v.key == "verdict",
            v.value_json != json.dumps(INTERRUPTED),
        )
    )
    numbers = [n for (n,) in running.all()] + [n for (n,) in recorded.all()]
    return min(numbers) if numbers else None


def taken(session: Any, sid: int) -> int:
    """RUNNING trials plus finished trials with a non-interrupted attempt."""
    t, u = models.TrialModel, models.TrialUserAttributeModel
    count = sqlalchemy.func.count(t.trial_id)
    running = session.query(count).filter(t.study_id == sid, t.state == TrialState.RUNNING).scalar()
    recorded = (
        session.query(count)
        .join(u, u.trial_id == t.trial_id)
        .filter(
            t.study_id == sid,
            t.state != TrialState.RUNNING,
            u.key == "verdict",
            u.value_json != json.dumps(INTERRUPTED),
        )
        .scalar()
    )
    return int(running or 0) + int(recorded or 0)
