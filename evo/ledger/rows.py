"""The ledger's own writes on Optuna's RDB tables, each inside a transaction its caller holds (a ``session``).

Called by the ledger (evo/ledger/ledger.py) where one transaction must hold more than one of Optuna's public calls
would (``ask(fixed)``, ``record()``, the meta writes), and by the session heartbeat (evo/ledger/sessions.py). Rows
are reached through the Optuna adapter's models (evo/ledger/optuna_private.py): nothing here names a private
attribute of Optuna's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy
from optuna.distributions import check_distribution_compatibility, json_to_distribution
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from evo.core.genome import Genome
from evo.core.hooks import crash_reason
from evo.core.records import ACCEPTED, BASELINE, Attempt, Verdict
from evo.ledger import optuna_private as op

ATTEMPT_ATTR = "attempt"  # trial user attr: the attempt's JSON
GENOME_KEY_ATTR = "evo:genome_key"  # trial system attr: the genome a RUNNING trial holds (written at ask)
INTERRUPTED = "error: interrupted"
INTERRUPTED_REASON = "the campaign process stopped while this attempt was running; it will be proposed again"

models = op.models


def lock_study(session: Any, sid: int) -> None:
    """A no-op UPDATE of the study row: a row lock on PostgreSQL, the database write lock on SQLite. Taken first by
    every write that must see the others' (trial creation, meta creation, claims), always in that order."""
    s = models.StudyModel
    session.query(s).filter(s.study_id == sid).update({s.study_name: s.study_name}, synchronize_session=False)


def write_meta(session: Any, sid: int, items: Mapping[str, Any], replace: Callable[[Any, Any], bool]) -> None:
    """Each study meta item inserted, or written over the stored value where ``replace(stored, new)``."""
    study = models.StudyModel.find_or_raise_by_id(sid, session)
    for key, value in items.items():
        attr = models.StudyUserAttributeModel.find_by_study_and_key(study, key, session)
        if attr is None:
            session.add(models.StudyUserAttributeModel(study_id=study.study_id, key=key, value_json=json.dumps(value)))
        elif replace(json.loads(attr.value_json), value):
            attr.value_json = json.dumps(value)


def raise_meta(session: Any, sid: int, items: Mapping[str, float]) -> None:
    """Numeric meta to at least ``items``' values; a stored larger value stays (several workers' ``elapsed_s``)."""
    write_meta(session, sid, items, lambda old, new: not isinstance(old, (int, float)) or old < new)


def put_attrs(session: Any, trial_id: int, items: Sequence[tuple[str, Any]]) -> None:
    """User attrs of one trial, inserted or updated, with one read of those it has (not one per attr)."""
    u = models.TrialUserAttributeModel
    have = {row.key: row for row in session.query(u).filter(u.trial_id == trial_id, u.key.in_([k for k, _ in items]))}
    for key, value in items:
        if key in have:
            have[key].value_json = json.dumps(value)
        else:
            session.add(u(trial_id=trial_id, key=key, value_json=json.dumps(value)))


def best_champion_value(session: Any, sid: int) -> float | None:
    """The highest stored value of a COMPLETE baseline or accepted trial (None before the baseline)."""
    t, v, u = models.TrialModel, models.TrialValueModel, models.TrialUserAttributeModel
    best = (
        session.query(sqlalchemy.func.max(v.value))
        .join(t, t.trial_id == v.trial_id)
        .join(u, u.trial_id == t.trial_id)
        .filter(
            t.study_id == sid,
            t.state == TrialState.COMPLETE,
            v.objective == 0,
            v.value_type == models.TrialValueModel.TrialValueType.FINITE,
            u.key == "verdict",
            u.value_json.in_([json.dumps(ACCEPTED), json.dumps(BASELINE)]),
        )
        .scalar()
    )
    return None if best is None else float(best)


def new_trial(session: Any, rdb: RDBStorage, sid: int, template: FrozenTrial, checked: set[str]) -> int:
    """What Optuna's ``_get_prepared_new_trial`` writes for a RUNNING template, in ``session``; the trial id.

    Cheaper, as ``ask()`` runs it under the study lock: each param's distribution is held against the study's
    stored one once per Ledger (``checked``: the knobs held so far, updated here), not at every ask (Optuna's check
    reads the params table per param), and the rows are flushed together rather than one INSERT before each
    param's read of the trial.
    """
    row = models.TrialModel(study_id=sid, number=None, state=TrialState.RUNNING, datetime_start=template.datetime_start)
    session.add(row)
    session.flush()
    p = models.TrialParamModel
    with session.no_autoflush:
        for name, value in template.params.items():
            dist = template.distributions[name]
            prev = dist if name in checked else None
            if prev is None:
                old = (
                    session.query(p.distribution_json)
                    .join(models.TrialModel)
                    .filter(models.TrialModel.study_id == sid, p.param_name == name)
                    .first()
                )
                if old is not None:
                    prev = json_to_distribution(old[0])
                    check_distribution_compatibility(prev, dist)
            op.set_trial_param(rdb, session, row.trial_id, name, dist.to_internal_repr(value), dist, prev)
    for key, value in template.system_attrs.items():  # a new trial has none: no upsert needed
        session.add(models.TrialSystemAttributeModel(trial_id=row.trial_id, key=key, value_json=json.dumps(value)))
    row.number = row.count_past_trials(session)
    checked.update(template.params)  # a stored distribution never changes: once per knob is enough
    return int(row.trial_id)


def interrupted_attempt(t: FrozenTrial, campaign: str, family: str, backend: str) -> Attempt:
    """The ``error: interrupted`` attempt that ``recover()`` records for a trial a dead process left unrecorded."""
    # An enqueued trial holds its genome as fixed_params until asked; an older ask may have set only some params.
    genome = Genome({**(t.system_attrs.get("fixed_params") or {}), **t.params})
    owner = t.system_attrs.get("evo:worker")  # (sessions.WORKER_ATTR) a watched `evo run` child's crash: its verdict
    crashed = crash_reason(owner.get("pid") if isinstance(owner, dict) else None, t.number)
    return Attempt(
        id=t.number,
        campaign=campaign,
        family=family,
        genome=dict(genome),
        genome_key=genome.key,
        backend=backend,
        verdict=Verdict.error("crash", crashed) if crashed else Verdict.error("interrupted", INTERRUPTED_REASON),
        started_at=t.datetime_start.isoformat() if t.datetime_start else "",
    )
