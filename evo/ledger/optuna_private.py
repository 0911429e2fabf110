"""Every use of Optuna's private API, in one module: an Optuna upgrade that moves one of them changes this file only.

The ledger (evo/ledger/ledger.py) writes trials in its own transactions on Optuna's RDB tables, and the Optuna proposers
(evo/search/optuna_samplers.py) run their samplers on an indexed in-memory study with a memoizing TPE. Both
need names Optuna does not export; they get them from here, by public names of this module.
``PRIVATE_NAMES`` lists every private name this module touches and where Optuna defines it:
tests/test_optuna_private.py checks each against the installed optuna, and that no other module of evo, harness,
gates or tools uses one of them (pyproject pins optuna to the major version these tests pass on).
"""

from __future__ import annotations

import contextlib
import copy
import operator
from collections.abc import Container, Iterable, Iterator, Sequence
from typing import Any, cast

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import InMemoryStorage
from optuna.storages._rdb import models as _models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

# Optuna's SQLAlchemy models declare untyped Columns: typed as Any here, so callers read row values as values
models: Any = _models

__all__ = [
    "PRIVATE_NAMES",
    "FailIndexedStorage",
    "IndexedStudy",
    "MemoTPESampler",
    "TRIAL_COMPLETE_UTC",
    "asked_trial",
    "create_study",
    "forget_cached_trials",
    "models",
    "rdb_storage",
    "scoped_session",
    "set_trial_intermediate_value",
    "set_trial_param",
    "set_trial_value",
    "stale_trial_ids",
    "study_id",
    "suggest",
    "trial_id",
]

# (where Optuna defines it, the private name): modules by dotted path, classes by qualified name, "instance" for
# attributes set in __init__ (checked on a live object by the contract test).
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("optuna.storages", "_rdb"),
    ("optuna.storages._rdb.storage", "_create_scoped_session"),
    ("optuna.storages.RDBStorage", "_set_trial_param_without_commit"),
    ("optuna.storages.RDBStorage", "_set_trial_value_without_commit"),
    ("optuna.storages.RDBStorage", "_set_trial_intermediate_value_without_commit"),
    ("optuna.storages.RDBStorage", "_get_stale_trial_ids"),
    ("optuna.storages._rdb.models.TrialModel", "_datetime_complete_utc"),
    ("optuna.storages._CachedStorage instance", "_backend"),
    ("optuna.Study instance", "_study_id"),
    ("optuna.Study instance", "_storage"),
    ("optuna.Study instance", "_thread_local"),
    ("optuna.Study", "_get_trials"),
    ("optuna.trial.Trial", "_suggest"),
    ("optuna.trial.Trial instance", "_trial_id"),
    ("optuna.trial.Trial instance", "_cached_frozen_trial"),
    ("optuna.trial.FrozenTrial instance", "_trial_id"),
    ("optuna.storages.InMemoryStorage instance", "_lock"),
    ("optuna.storages.InMemoryStorage instance", "_studies"),
    ("optuna.storages.InMemoryStorage instance", "_trial_id_to_study_id_and_number"),
    ("optuna.storages.InMemoryStorage", "_get_trial"),
    ("optuna.storages.InMemoryStorage", "_check_study_id"),
    ("optuna.samplers.TPESampler", "_sample"),
    ("optuna.samplers.TPESampler", "_build_parzen_estimator"),
    ("optuna.samplers.TPESampler", "_compute_acquisition_func"),
    ("optuna.samplers.TPESampler", "_compare"),
    ("optuna.samplers.TPESampler instance", "_rng"),
    ("optuna.samplers.TPESampler instance", "_n_ei_candidates"),
    ("optuna.samplers.TPESampler instance", "_constant_liar"),
)


# ---------------------------------------------------------------------------
# The ledger's: trials written in its own transactions on the RDB tables


def study_id(study: optuna.Study) -> int:
    """The study's row id in the storage."""
    return study._study_id


def rdb_storage(study: optuna.Study) -> optuna.storages.RDBStorage:
    """The RDBStorage under the study (Optuna wraps it in a cache)."""
    st = study._storage
    return cast(optuna.storages.RDBStorage, getattr(st, "_backend", st))


@contextlib.contextmanager
def scoped_session(rdb: optuna.storages.RDBStorage) -> Iterator[Any]:
    """One transaction on ``rdb``: committed on exit, rolled back on an exception (as Optuna's own writes)."""
    with _create_scoped_session(rdb.scoped_session) as session:
        yield session


def forget_cached_trials(study: optuna.Study) -> None:
    """Drop the study's cached trial list: a write outside Optuna's API is otherwise not seen by its next read."""
    study._thread_local.cached_all_trials = None


def suggest(trial: optuna.trial.Trial, name: str, dist: BaseDistribution) -> Any:
    """What ``trial.suggest_*`` does, for any distribution: the sampler's value, stored in the trial."""
    return trial._suggest(name, dist)


def set_trial_param(
    rdb: optuna.storages.RDBStorage,
    session: Any,
    trial_id: int,
    name: str,
    internal: float,
    dist: BaseDistribution,
    previous: BaseDistribution | None,
) -> None:
    """One param row of a trial, in ``session`` (not committed)."""
    rdb._set_trial_param_without_commit(session, trial_id, name, internal, dist, previous)


def set_trial_value(rdb: optuna.storages.RDBStorage, session: Any, row: Any, objective: int, value: float) -> None:
    """One objective value of trial row ``row``, in ``session`` (not committed)."""
    rdb._set_trial_value_without_commit(session, row, objective, value)


def set_trial_intermediate_value(
    rdb: optuna.storages.RDBStorage, session: Any, trial_id: int, step: int, value: float
) -> None:
    """One intermediate value (``step``) of a trial, in ``session`` (not committed)."""
    rdb._set_trial_intermediate_value_without_commit(session, trial_id, step, value)


def stale_trial_ids(rdb: optuna.storages.RDBStorage, sid: int) -> list[int]:
    """RUNNING trials of study ``sid`` whose heartbeat is older than the storage's grace period."""
    return list(rdb._get_stale_trial_ids(sid))


def trial_id(trial: optuna.trial.Trial | FrozenTrial) -> int:
    """The storage's id of a trial (Optuna's number is per study; this id is per storage)."""
    return trial._trial_id


def asked_trial(study: optuna.Study, trial: optuna.trial.Trial) -> FrozenTrial:
    """The trial as asked (Optuna's Trial keeps it current), else one read of it."""
    return getattr(trial, "_cached_frozen_trial", None) or study._storage.get_trial(trial._trial_id)


# the column a trial's completion time is stored in (naive UTC; the model's datetime_complete converts)
TRIAL_COMPLETE_UTC: Any = models.TrialModel._datetime_complete_utc


# ---------------------------------------------------------------------------
# The Optuna proposers': an in-memory study indexed by state, and a TPE that reuses its estimators


def _excludes_fail(states: Container[TrialState] | None) -> bool:
    # (WAITING,) alone has its own fast path in InMemoryStorage: leave it to that.
    if states is None or TrialState.FAIL in states:
        return False
    return not (isinstance(states, Iterable) and tuple(states) == (TrialState.WAITING,))


class FailIndexedStorage(InMemoryStorage):
    """InMemoryStorage that also keeps, per study, the numbers of the trials not in state FAIL (in order), so
    that ``get_all_trials(states=...)`` without FAIL costs O(trials that did not fail) instead of O(all)."""

    def __init__(self) -> None:
        super().__init__()
        self._unfailed: dict[int, list[int]] = {}

    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        with self._lock:
            study_id = super().create_new_study(directions, study_name)
            self._unfailed[study_id] = []
            return study_id

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        with self._lock:
            trial_id = super().create_new_trial(study_id, template_trial)
            trial = self._get_trial(trial_id)
            if trial.state != TrialState.FAIL:  # add_trial() can create a finished FAIL trial directly
                self._unfailed[study_id].append(trial.number)
            return trial_id

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        with self._lock:
            done = super().set_trial_state_values(trial_id, state, values)
            if done and state == TrialState.FAIL:
                study_id, number = self._trial_id_to_study_id_and_number[trial_id]
                numbers = self._unfailed[study_id]
                for i in range(len(numbers) - 1, -1, -1):  # the trial failing is nearly always the newest
                    if numbers[i] == number:
                        del numbers[i]
                        break
            return done

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        if not _excludes_fail(states):
            return super().get_all_trials(study_id, deepcopy, states)
        assert states is not None
        with self._lock:
            self._check_study_id(study_id)
            every = self._studies[study_id].trials
            trials = [t for t in (every[n] for n in self._unfailed[study_id]) if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials


class IndexedStudy(optuna.Study):
    """A Study whose state-filtered trial reads go through the storage's index.

    ``Study._get_trials(use_cache=True)`` reads every trial once per ask and filters that list in Python on each
    call; with states that exclude FAIL the indexed read gives the same trials (within one ask only the trial
    being asked, which is RUNNING, changes, and a call that includes RUNNING is not cached by Optuna either)."""

    def _get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        if _excludes_fail(states) and isinstance(self._storage, FailIndexedStorage):
            return self._storage.get_all_trials(self._study_id, deepcopy=deepcopy, states=states)
        return super()._get_trials(deepcopy, states, use_cache)


def create_study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """What ``optuna.create_study(direction="maximize", sampler=sampler)`` makes, on the indexed storage."""
    storage = FailIndexedStorage()
    sid = storage.create_new_study([StudyDirection.MAXIMIZE])
    return IndexedStudy(study_name=storage.get_study_name_from_id(sid), storage=storage, sampler=sampler)


class MemoTPESampler(optuna.samplers.TPESampler):
    """TPESampler that reuses its Parzen estimators while their input trials are unchanged.

    ``_sample`` builds both estimators from the finished (and, with constant_liar, running) trials, splits and
    encodes them in Python, then draws ``n_ei_candidates`` from the one below and keeps the best acquisition. The
    estimators are a deterministic function of those trials and the search space; InMemoryStorage replaces a
    trial's object whenever it changes, so the same objects in the same order (kept alive by the memo) mean the
    same estimators. On a miss the parent's ``_sample`` runs unchanged and its two estimators are kept; on a hit
    the draw is the parent's last four steps with the same generator."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._memo: tuple[list[FrozenTrial], dict[str, Any], Any, Any] | None = None
        self.memo_hits = 0  # asks served from the kept estimators

    def _model_trials(self, study: optuna.Study, trial: FrozenTrial) -> list[FrozenTrial]:
        # the trials TPESampler._sample reads (same states, same exclusion of the trial being asked)
        states: tuple[TrialState, ...]
        if self._constant_liar:
            states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        else:
            states = (TrialState.COMPLETE, TrialState.PRUNED)
        trials = study._get_trials(deepcopy=False, states=states, use_cache=not self._constant_liar)
        return [t for t in trials if t.number != trial.number] if self._constant_liar else trials

    def _sample(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        trials = self._model_trials(study, trial)
        memo = self._memo
        if (
            memo is not None
            and len(memo[0]) == len(trials)
            and all(map(operator.is_, memo[0], trials))
            and memo[1] == search_space
        ):
            _, _, below, above = memo
            self.memo_hits += 1
            samples = below.sample(self._rng.rng, self._n_ei_candidates)
            ret = optuna.samplers.TPESampler._compare(samples, self._compute_acquisition_func(samples, below, above))
            return {name: dist.to_external_repr(ret[name]) for name, dist in search_space.items()}
        built: list[Any] = []
        build = self._build_parzen_estimator

        def keep(*args: Any, **kwargs: Any) -> Any:
            built.append(build(*args, **kwargs))
            return built[-1]

        self._build_parzen_estimator = keep  # type: ignore[method-assign]
        try:
            ret = super()._sample(study, trial, search_space)
        finally:
            del self._build_parzen_estimator
        self._memo = (trials, dict(search_space), built[0], built[1]) if len(built) == 2 else None
        return ret
