"""The attempt ledger: one Optuna study per campaign, one trial per attempt.

Optuna's RDB storage gives us persistence, resumption and (later) PostgreSQL
sharing for free; each trial carries its full :class:`Attempt` as a JSON user
attribute, so the ledger is readable without our own schema.

Crash safety (a SIGKILL at any moment, then ``evo run`` again): every write
that must not be seen half-done is one SQL transaction, so the database holds
either all of it or none of it (SQLite rolls a killed writer's journal back).

* ``ask(fixed)`` creates the trial RUNNING with all its params in one
  transaction (Optuna's enqueue-then-ask takes one for the WAITING trial and
  one per param, and a kill in between leaves a WAITING trial or a partial
  genome).
* ``record()`` writes the attempt JSON, the ``verdict`` and ``genome_key``
  attrs, the value, the final state and any study meta that belongs to the
  attempt (e.g. ``baseline_id``) in one transaction: that commit is the
  attempt. A trial is never COMPLETE/FAIL without its attempt, nor the other
  way round.
* ``set_meta_many()`` writes several study attrs in one transaction.
* ``recover()`` (at start, before anything else) turns what a killed process
  left behind into ``error: interrupted`` attempts, each in one transaction:
  RUNNING trials (asked, never recorded) and WAITING ones (enqueued by older
  versions). Their genomes are left out of ``seen_keys`` and may be proposed
  again; the campaign does not count them against the attempt budget.

So every trial ends up finished with exactly one complete attempt, ids are the
contiguous trial numbers, and nothing judged is lost or judged twice. Not
covered: ``ask()`` without ``fixed`` (the sampler's params are written one by
one; a kill between leaves an interrupted attempt with a partial genome), and
files outside the ledger (the markdown log is rewritten by the next run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial, TrialState

from evo.family import Knob
from evo.genome import Genome
from evo.records import ACCEPTED, BASELINE, Attempt, Verdict

optuna.logging.set_verbosity(optuna.logging.WARNING)

ATTEMPT_ATTR = "attempt"
INTERRUPTED_REASON = (
    "the campaign process stopped while this attempt was running; it will be proposed again"
)


def _storage(url: str) -> optuna.storages.RDBStorage:
    """RDB storage; for SQLite, create the folder and wait on locks instead of failing."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    return optuna.storages.RDBStorage(url)


def _final_state(attempt: Attempt) -> tuple[TrialState, float | None]:
    """COMPLETE with the score when there is a finite one; FAIL otherwise (the sampler skips it)."""
    if attempt.score is not None and math.isfinite(attempt.score):
        return TrialState.COMPLETE, float(attempt.score)
    return TrialState.FAIL, None


class Ledger:
    """All attempts of one campaign, stored as trials of the Optuna study named after it."""

    def __init__(self, storage_url: str, campaign: str, knobs: Sequence[Knob],
                 sampler: optuna.samplers.BaseSampler | None = None):
        self.storage_url = storage_url
        self.campaign = campaign
        self.study: optuna.Study = optuna.create_study(
            storage=_storage(storage_url), study_name=campaign, direction="maximize",
            sampler=sampler, load_if_exists=True,
        )
        self.distributions: dict[str, CategoricalDistribution] = {
            k.name: CategoricalDistribution(list(k.values)) for k in knobs
        }

    # --- campaign metadata (study user attrs) ---------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        return self.study.user_attrs.get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self.study.set_user_attr(key, value)

    def all_meta(self) -> dict[str, Any]:
        """Every meta key at once (what the log renderer takes)."""
        return dict(self.study.user_attrs)

    def set_meta_many(self, items: Mapping[str, Any]) -> None:
        """Several meta keys in one transaction: after a kill, all of them or none."""
        with self._session() as session:
            self._set_meta_in(session, items)

    # --- asking and recording -------------------------------------------
    def ask(self, fixed: Mapping[str, Any] | None = None) -> optuna.trial.Trial:
        """A new trial: exactly ``fixed`` when given, else whatever the sampler proposes.

        A fixed trial is created RUNNING with all its params in one transaction.
        """
        if fixed is None:
            return self.study.ask(self.distributions)
        params = {k: fixed[k] for k in self.distributions if k in fixed}
        template = FrozenTrial(
            number=-1, state=TrialState.RUNNING, value=None, datetime_start=dt.datetime.now(),
            datetime_complete=None, params=params, distributions={k: self.distributions[k] for k in params},
            user_attrs={}, system_attrs={}, intermediate_values={}, trial_id=-1,
        )
        trial_id = self.study._storage.create_new_trial(self.study._study_id, template_trial=template)
        self.study._thread_local.cached_all_trials = None
        trial = optuna.trial.Trial(self.study, trial_id)
        for name, dist in self.distributions.items():  # knobs ``fixed`` left out: the sampler's
            if name not in params:
                trial._suggest(name, dist)
        return trial

    def record(self, trial: optuna.trial.Trial, attempt: Attempt, meta: Mapping[str, Any] | None = None) -> None:
        """Store the attempt and finish its trial (COMPLETE with score, else FAIL) in one transaction.

        ``meta``: study meta that belongs to this attempt, written in the same transaction.
        """
        if attempt.id != trial.number:
            attempt.id = trial.number
        state, value = _final_state(attempt)
        try:  # what study.tell does: the sampler hears of the result, then the trial is finished regardless
            self.study.sampler.after_trial(self.study, self.study._storage.get_trial(trial._trial_id), state,
                                           None if value is None else [value])
        finally:
            self._commit(trial._trial_id, attempt, state, value, meta)

    def _rdb(self) -> optuna.storages.RDBStorage:
        st = self.study._storage
        return getattr(st, "_backend", st)

    @contextlib.contextmanager
    def _session(self) -> Iterator[Any]:
        """One transaction on the RDB storage (committed on exit, rolled back on an exception)."""
        with _create_scoped_session(self._rdb().scoped_session) as session:
            yield session
        self.study._thread_local.cached_all_trials = None

    def _set_meta_in(self, session: Any, items: Mapping[str, Any]) -> None:
        study = models.StudyModel.find_or_raise_by_id(self.study._study_id, session)
        for key, value in items.items():
            attr = models.StudyUserAttributeModel.find_by_study_and_key(study, key, session)
            if attr is None:
                session.add(models.StudyUserAttributeModel(study_id=study.study_id, key=key,
                                                           value_json=json.dumps(value)))
            else:
                attr.value_json = json.dumps(value)

    def _attr_items(self, attempt: Attempt) -> list[tuple[str, Any]]:
        return [("verdict", attempt.verdict.label()), ("genome_key", attempt.genome_key),
                (ATTEMPT_ATTR, attempt.to_json())]

    def _commit(self, trial_id: int, attempt: Attempt, state: TrialState | None, value: float | None,
                meta: Mapping[str, Any] | None = None) -> None:
        """One transaction: the attempt attrs, then (unless ``state`` is None) value and final state, then meta."""
        rdb = self._rdb()
        with self._session() as session:
            row = models.TrialModel.find_or_raise_by_id(trial_id, session, for_update=True)
            rdb.check_trial_is_updatable(trial_id, row.state)
            for key, v in self._attr_items(attempt):
                rdb._set_trial_attr_without_commit(session, models.TrialUserAttributeModel, trial_id, key, v)
            if state is not None:
                if value is not None:
                    rdb._set_trial_value_without_commit(session, row, 0, value)
                row.state = state
                row.datetime_complete = dt.datetime.now()
            if meta:
                self._set_meta_in(session, meta)

    def _write_attrs(self, trial_id: int, attempt: Attempt) -> None:
        """The attempt attrs alone, in one transaction, leaving the trial's state as it is."""
        self._commit(trial_id, attempt, None, None)

    # --- reading -----------------------------------------------------------
    def _trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=tuple(states) if states else None)

    def attempts(self) -> list[Attempt]:
        """Every recorded attempt, ordered by id (= trial number)."""
        out = [Attempt.from_json(t.user_attrs[ATTEMPT_ATTR]) for t in self._trials()
               if ATTEMPT_ATTR in t.user_attrs]
        return sorted(out, key=lambda a: a.id)

    def seen_keys(self) -> set[str]:
        """Genomes already judged; interrupted ones are left out so they get proposed again."""
        return {
            t.user_attrs["genome_key"] for t in self._trials()
            if ATTEMPT_ATTR in t.user_attrs and "genome_key" in t.user_attrs
            and t.user_attrs.get("verdict") != "error: interrupted"
        }

    def champion(self) -> Attempt | None:
        """The newest accepted attempt, else the baseline, else None."""
        atts = self.attempts()
        for a in reversed(atts):
            if a.verdict.status == ACCEPTED:
                return a
        return next((a for a in atts if a.verdict.status == BASELINE), None)

    # --- crash recovery ----------------------------------------------------
    def recover(self) -> list[int]:
        """Finish trials a killed process left RUNNING; return their numbers.

        Only call this while no other process works on the campaign: a RUNNING
        trial of a live worker would be closed too. A RUNNING trial without an
        attempt becomes ``error: interrupted`` (FAIL); one whose attempt was
        stored but whose state was not (ledgers written before record() was one
        transaction) is finished with that attempt. Trials enqueued but never
        asked (WAITING, left by older versions between enqueue and ask) become
        interrupted attempts too, but are not counted in the returned list.
        Each trial is finished in one transaction, so a kill during recovery
        is recovered by the next run.
        """
        handled: list[int] = []
        for t in self._trials([TrialState.RUNNING]):
            if ATTEMPT_ATTR in t.user_attrs:
                attempt = Attempt.from_json(t.user_attrs[ATTEMPT_ATTR])
            else:
                attempt = self._interrupted(t)
            self._commit(t._trial_id, attempt, *_final_state(attempt))
            handled.append(t.number)
        for t in self._trials([TrialState.WAITING]):
            attempt = self._interrupted(t)
            self._commit(t._trial_id, attempt, *_final_state(attempt))
        return handled

    def _interrupted(self, t: FrozenTrial) -> Attempt:
        config = self.meta("config") or {}
        # An enqueued trial holds its genome as fixed_params until asked; an older ask may have set only some params.
        genome = Genome({**(t.system_attrs.get("fixed_params") or {}), **t.params})
        return Attempt(
            id=t.number,
            campaign=config.get("campaign", self.campaign),
            family=config.get("family", ""),
            genome=dict(genome),
            genome_key=genome.key,
            backend=self.meta("backend") or config.get("backend") or "gpu",
            verdict=Verdict.error("interrupted", INTERRUPTED_REASON),
            started_at=t.datetime_start.isoformat() if t.datetime_start else "",
        )
