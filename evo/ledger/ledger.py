"""The attempt ledger: one Optuna study per campaign, one trial per attempt.

Optuna's RDB storage gives us persistence, resumption and sharing between
workers on PostgreSQL (``evo worker``, evo/loop/workers.py); each trial carries its
full :class:`Attempt` as a JSON user attribute, so the ledger is readable
without our own schema.

Crash safety (a SIGKILL at any moment, then ``evo run`` again): every write
that must not be seen half-done is one SQL transaction, so the database holds
either all of it or none of it (SQLite rolls a killed writer's journal back).

* ``ask(fixed)`` creates the trial RUNNING with all its params in one
  transaction (Optuna's enqueue-then-ask takes one for the WAITING trial and
  one per param, and a kill in between leaves a WAITING trial or a partial
  genome).
* ``record()`` writes the attempt JSON, the ``verdict`` and ``genome_key``
  attrs, the intermediate values, the value, the final state (see "States
  and values" below) and any study meta that belongs to the
  attempt (e.g. ``baseline_id``; ``evo worker``'s ``elapsed_s``, only ever
  raised) in one transaction: that commit is the attempt. A trial is never
  COMPLETE/FAIL without its attempt, nor the other way round.
* ``set_meta_many()`` writes several study attrs in one transaction;
  ``create_meta()`` does so only if none of them exists yet (under the study
  lock: of several workers creating a campaign, exactly one writes its meta),
  and ``append_meta()`` appends to a list attr under that lock.
* ``recover()`` (at start, and periodically in ``evo worker``) turns what a
  dead process left behind into ``error: interrupted`` attempts, each in one
  transaction: RUNNING trials (asked, never recorded) and WAITING ones
  (enqueued by older versions). Their genomes are left out of ``seen_keys``
  and may be proposed again; the campaign does not count them against the
  attempt budget. Only trials whose owner is gone are touched (see below), so
  it is safe while other workers are running.

States and values: each attempt's trial state and value say what it was (evo/ledger/outcome.py), so that Optuna's
``best_trial`` is the champion.

Side studies (:meth:`Ledger.side`): ``evo replay`` and ``evo selfcheck`` record their attempts into a study of
their own beside the campaign's (``<campaign>:replay``, ``<campaign>:selfcheck``), reading the campaign's
attempts and meta through it, so the campaign's attempts, its log and its Optuna views stay as the campaign
made them. A replayed attempt names its original in ``derived_from`` and its origin ("replay of #N").

Liveness (several processes on one ledger, ``evo worker``): each trial asked with ``fixed`` carries its owner
and Optuna's heartbeat until recorded, and ``recover()`` touches only those whose owner is dead
(evo/ledger/sessions.py, which also holds ``claim()``: one live ``evo run`` per campaign).

Shared mode (``Ledger.shared = True``, what ``evo worker`` sets): ``ask(fixed)`` refuses, having written nothing,
a genome another trial holds and an ask beyond the attempt budget (evo/ledger/reserve.py); ``record()`` also
stamps the attempt's ``device["worker"]`` with ``"<host> pid <pid>"``.

So every trial ends up finished with exactly one complete attempt, ids are the
contiguous trial numbers, and nothing judged is lost or judged twice. A trial
finished by ``record()`` is finished only if it is still unfinished in the
same transaction (another worker may have recovered it as stale meanwhile:
then ``record()`` raises optuna's ``UpdateFinishedTrialError`` and writes
nothing). Not covered: ``ask()`` without ``fixed`` (the sampler's params are
written one by one; a kill between leaves an interrupted attempt with a
partial genome), and files outside the ledger (the markdown log is rewritten
by the next run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import optuna
import sqlalchemy
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from evo.core.family import Knob
from evo.core.genome import Genome
from evo.core.records import Attempt
from evo.ledger import dashboard, rows, sessions
from evo.ledger import optuna_private as op
from evo.ledger.audit import Audit, audit
from evo.ledger.errors import LedgerError
from evo.ledger.optuna_private import models
from evo.ledger.outcome import TRIAL_STATES, intermediate_values, trial_outcome, trial_value
from evo.ledger.rdb import ROW_DAMAGE, heartbeat_settings, open_study
from evo.ledger.reserve import BudgetTaken, GenomeTaken, reserve
from evo.ledger.rows import ATTEMPT_ATTR, GENOME_KEY_ATTR, INTERRUPTED, interrupted_attempt
from evo.ledger.sessions import SESSION_ATTR, WORKER_ATTR, BudgetDiffers, Presence, SessionTaken, worker_name
from evo.ledger.storage_url import where
from evo.ledger.view import View, champion_of, seen_of

# Importers of the ledger's names from this module (the loop, the CLI, the tests) keep them.
__all__ = [
    "ATTEMPT_ATTR",
    "GENOME_KEY_ATTR",
    "INTERRUPTED",
    "SESSION_ATTR",
    "WORKER_ATTR",
    "BudgetDiffers",
    "BudgetTaken",
    "GenomeTaken",
    "Ledger",
    "LedgerError",
    "SessionTaken",
    "SideLedger",
    "View",
]

optuna.logging.set_verbosity(optuna.logging.WARNING)


class Ledger:
    """All attempts of one campaign, stored as trials of the Optuna study named after it."""

    def __init__(
        self,
        storage_url: str,
        campaign: str,
        knobs: Sequence[Knob],
        sampler: optuna.samplers.BaseSampler | None = None,
        *,
        shared: bool = False,
        heartbeat_s: int | None = None,
        grace_s: int | None = None,
        readonly: bool = False,
    ):
        self.storage_url = storage_url
        self.campaign = campaign
        hb, grace = heartbeat_settings()
        self.heartbeat_s = int(heartbeat_s or hb)
        self.grace_s = int(grace_s or max(grace, 2 * self.heartbeat_s))
        if self.grace_s <= self.heartbeat_s:
            raise LedgerError(
                f"grace period {self.grace_s}s (EVO_GRACE_S) must exceed the heartbeat interval "
                f"{self.heartbeat_s}s (EVO_HEARTBEAT_S)"
            )
        self.readonly = readonly
        self.study: optuna.Study = open_study(storage_url, campaign, sampler, self.heartbeat_s, self.grace_s, readonly)
        self.found: Audit = self._audit()  # the key records verified (else LedgerError); what readers skip
        self.distributions: dict[str, BaseDistribution] = {
            k.name: CategoricalDistribution(list(k.values)) for k in knobs
        }
        self.shared = shared  # several workers on this campaign: see "Shared mode" above
        self.limit: int | None = None  # shared mode: the attempt budget ask() enforces
        self.presence = Presence()  # its trials held and its session (evo/ledger/sessions.py)
        # trial id -> its parsed Attempt, for finished trials (never rewritten): the loop reads every attempt
        # several times per step, and parsing each one's JSON every time made a step O(attempts)
        self._parsed: dict[int, Attempt] = {}
        self._checked: set[str] = set()  # knobs whose distribution ask() held against the study's stored one
        self.damaged: dict[int, str] = {}  # trial number -> why its attempt record could not be read (skipped)
        self._damaged_keys: set[str] = set()  # the genomes of trials Optuna cannot read (skipped, still taken)
        self.knobs = list(knobs)
        self._geometries: list[str] | None = None  # _geometry_order(), read once from the config meta
        # The campaign's elapsed seconds now, while its loop runs: each session heartbeat raises elapsed_s to it, so a
        # killed run's time since its last attempt (or in its set-up) still counts against budget.minutes.
        self.elapsed_fn: Callable[[], float] | None = None

    def _audit(self) -> Audit:
        """Verify the campaign's key records before anything reads or writes it (evo/ledger/audit.py)."""
        with self._session() as session:
            sid = op.study_id(self.study)
            return audit(session, sid, where(self.storage_url), self.readonly, self._rdb().get_trial)

    def side(self, kind: str) -> SideLedger:
        """The side study ``<campaign>:<kind>`` of this campaign (made on first use), for replay and selfcheck."""
        return SideLedger(self, kind)

    # --- campaign metadata (study user attrs) ---------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        return self._user_attrs().get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self.study.set_user_attr(key, value)

    def all_meta(self) -> dict[str, Any]:
        """Every meta key at once (what the log renderer takes)."""
        return dict(self._user_attrs())

    def _user_attrs(self) -> dict[str, Any]:
        """The study's meta; records that are not JSON (found at open, or since) skipped and counted."""
        if not self.found.damaged_meta:
            try:
                return self.study.user_attrs
            except ValueError:  # damaged since the open: read record by record below
                pass
        a = models.StudyUserAttributeModel
        with self._session() as session:
            records = session.query(a.key, a.value_json).filter(a.study_id == op.study_id(self.study)).all()
        out = {}
        for key, text in records:
            try:
                out[key] = json.loads(text)
            except ValueError as e:
                self.found.damaged_meta[key] = f"{type(e).__name__}: {' '.join(str(e).split())[:80]}"
        return out

    def set_meta_many(self, items: Mapping[str, Any]) -> None:
        """Several meta keys in one transaction: after a kill, all of them or none."""
        with self._session() as session:
            self._set_meta_in(session, items)

    def create_meta(self, items: Mapping[str, Any]) -> bool:
        """Write ``items`` in one transaction unless one of their keys exists already (then write nothing).

        Under the study lock, so of several workers creating a campaign's meta exactly one does; True if this one did.
        """
        with self._session() as session:
            self._lock_study(session)
            study = models.StudyModel.find_or_raise_by_id(op.study_id(self.study), session)
            if any(models.StudyUserAttributeModel.find_by_study_and_key(study, k, session) is not None for k in items):
                return False
            self._set_meta_in(session, items)
        return True

    def append_meta(self, key: str, item: Any) -> None:
        """Append ``item`` to the list meta ``key`` under the study lock (no append from another worker is lost)."""
        with self._session() as session:
            self._lock_study(session)
            study = models.StudyModel.find_or_raise_by_id(op.study_id(self.study), session)
            attr = models.StudyUserAttributeModel.find_by_study_and_key(study, key, session)
            items = json.loads(attr.value_json) if attr is not None else []
            self._set_meta_in(session, {key: [*(items or []), item]})

    # --- asking and recording -------------------------------------------
    def ask(self, fixed: Mapping[str, Any] | None = None) -> optuna.trial.Trial:
        """A new trial: exactly ``fixed`` when given, else whatever the sampler proposes.

        A fixed trial is created RUNNING with all its params, its genome key, its owner and its first
        heartbeat in one transaction; from then on this Ledger keeps its heartbeat until ``record()``.
        Shared mode: raises :class:`GenomeTaken` or :class:`BudgetTaken` instead, having written nothing.
        """
        if fixed is None:  # not stamped, no heartbeat: recover() takes it as dead if it is left RUNNING
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Heartbeat of storage")
                return self.study.ask(self.distributions)
        params = {k: fixed[k] for k in self.distributions if k in fixed}
        key = Genome(fixed).key
        template = FrozenTrial(
            number=-1,
            state=TrialState.RUNNING,
            value=None,
            datetime_start=dt.datetime.now(),
            datetime_complete=None,
            params=params,
            distributions={k: self.distributions[k] for k in params},
            user_attrs={},
            system_attrs={GENOME_KEY_ATTR: key, WORKER_ATTR: sessions.owner_stamp(self.presence)},
            intermediate_values={},
            trial_id=-1,
        )
        rdb = self._rdb()
        with self._session() as session:
            self._lock_study(session)  # serialises trial creation with every other worker's
            if self.shared:
                reserve(session, op.study_id(self.study), key, self.limit)
            trial_id = rows.new_trial(session, rdb, op.study_id(self.study), template, self._checked)
            session.add(models.TrialHeartbeatModel(trial_id=trial_id))
        self.presence.hold(trial_id, rdb, self.heartbeat_s)
        trial = optuna.trial.Trial(self.study, trial_id)
        for name, dist in self.distributions.items():  # knobs ``fixed`` left out: the sampler's
            if name not in params:
                op.suggest(trial, name, dist)
        return trial

    def record(
        self,
        trial: optuna.trial.Trial,
        attempt: Attempt,
        meta: Mapping[str, Any] | None = None,
        *,
        meta_max: Mapping[str, float] | None = None,
    ) -> None:
        """Store the attempt and finish its trial (state and value: :func:`trial_outcome`) in one transaction.

        ``meta``: study meta that belongs to this attempt, written in the same transaction. ``meta_max``:
        numeric study meta raised to at least these values (never lowered) in that transaction too: several
        workers each keep the campaign's ``elapsed_s`` current without a transaction of their own.
        """
        if attempt.id != trial.number:
            attempt.id = trial.number
        if self.shared:
            attempt.device.setdefault("worker", worker_name())
        state = TRIAL_STATES[trial_outcome(attempt)]
        score = [float(attempt.score)] if state == TrialState.COMPLETE and attempt.score is not None else None
        try:
            try:  # what study.tell does: the sampler hears of the result, then the trial is finished regardless
                # the trial as asked (Optuna's Trial keeps it current) rather than one more read of it
                frozen = op.asked_trial(self.study, trial)
                self.study.sampler.after_trial(self.study, frozen, state, score)
            finally:
                self._commit(op.trial_id(trial), attempt, True, meta, meta_max)
        finally:  # recorded, or failed to be: either way no longer ours (left RUNNING, recover() closes it)
            self.presence.let_go(op.trial_id(trial))

    # --- one live evo run per campaign (evo/ledger/sessions.py) ---------------
    def claim(self, mode: str = "run") -> None:
        """Register this process as running the campaign (``mode`` "run" or "worker"), or raise
        :class:`SessionTaken` / :class:`BudgetDiffers`; idempotent, :meth:`release` ends it."""
        sessions.claim(self, mode)

    def release(self) -> None:
        """End this process's session (see :meth:`claim`); a no-op without one."""
        sessions.release(self)

    @property
    def claimed(self) -> bool:
        """Whether this Ledger holds the campaign's session (:meth:`claim` ran, :meth:`release` did not)."""
        return self.presence.session_key is not None

    @property
    def _token(self) -> str:
        return self.presence.token

    def _release(self, trial_id: int) -> None:
        """Let go of a trial asked here: its heartbeat stops, and recover() may take it as dead."""
        self.presence.let_go(trial_id)

    def _lock_study(self, session: Any) -> None:
        rows.lock_study(session, op.study_id(self.study))

    def _rdb(self) -> optuna.storages.RDBStorage:
        return op.rdb_storage(self.study)

    @contextlib.contextmanager
    def _session(self) -> Iterator[Any]:
        """One transaction on the RDB storage (committed on exit, rolled back on an exception)."""
        with op.scoped_session(self._rdb()) as session:
            yield session
        op.forget_cached_trials(self.study)

    def _set_meta_in(self, session: Any, items: Mapping[str, Any]) -> None:
        rows.write_meta(session, op.study_id(self.study), items, lambda old, new: True)

    def _put_attrs(self, session: Any, trial_id: int, items: Sequence[tuple[str, Any]]) -> None:
        rows.put_attrs(session, trial_id, items)

    def _attr_items(self, attempt: Attempt) -> list[tuple[str, Any]]:
        return [
            ("verdict", attempt.verdict.label()),
            ("genome_key", attempt.genome_key),
            (ATTEMPT_ATTR, attempt.to_json()),
        ]

    def _commit(
        self,
        trial_id: int,
        attempt: Attempt,
        finish: bool,
        meta: Mapping[str, Any] | None = None,
        meta_max: Mapping[str, float] | None = None,
    ) -> None:
        """One transaction: the attempt attrs, then (with ``finish``) intermediate values, value and final state
        (:func:`trial_outcome`), then meta.

        The final state is set only where the trial is still unfinished in this transaction (the trial row is
        written first, so the transaction holds it, or on SQLite the database, from its start), else nothing is
        written and ``UpdateFinishedTrialError`` is raised: of two workers finishing one trial, one wins.
        """
        rdb, sid = self._rdb(), op.study_id(self.study)
        t = models.TrialModel
        outcome = trial_outcome(attempt) if finish else None
        state = TRIAL_STATES[outcome] if outcome is not None else None
        # read before the transaction: a meta read inside it would take the same scoped session and end it
        steps = intermediate_values(attempt, self._geometry_order(attempt)) if finish else {}
        with self._session() as session:
            if meta or meta_max or state == TrialState.COMPLETE:
                # study meta: two workers' first writes of a key must not both insert it (on PostgreSQL a
                # UniqueViolation of elapsed_s seen in CI); a value: read against the champions' under the lock, so
                # that two workers' steps cannot both be valued above the same champion. The study lock first, then
                # the trial's row, the order ask() and append_meta() take them in.
                self._lock_study(session)
            # A no-op UPDATE first: on SQLite it takes the database write lock before anything is read (the FOR
            # UPDATE below is no lock there), so of two workers recovering one dead trial the second reads it
            # finished, instead of inserting its attrs after the first's commit (UNIQUE constraint failed).
            session.query(t).filter(t.trial_id == trial_id).update({t.state: t.state}, synchronize_session=False)
            row = t.find_or_raise_by_id(trial_id, session, for_update=True)
            rdb.check_trial_is_updatable(trial_id, row.state)
            self._put_attrs(session, trial_id, self._attr_items(attempt) + dashboard.attrs(attempt))
            if outcome is not None and state is not None:
                for step, v in steps.items():
                    op.set_trial_intermediate_value(rdb, session, trial_id, step, v)
                best = rows.best_champion_value(session, sid) if state == TrialState.COMPLETE else None
                value = trial_value(outcome, attempt.score, best)
                if value is not None:
                    op.set_trial_value(rdb, session, row, 0, value)
                n = (
                    session.query(t)
                    .filter(t.trial_id == trial_id, t.state.in_([TrialState.RUNNING, TrialState.WAITING]))
                    .update(
                        {
                            t.state: state,  # Optuna stores naive UTC (the model's datetime_complete converts)
                            op.TRIAL_COMPLETE_UTC: dt.datetime.now(dt.UTC).replace(tzinfo=None),
                        },
                        synchronize_session=False,
                    )
                )
                if n != 1:
                    raise UpdateFinishedTrialError(f"trial {trial_id} was finished by another process meanwhile")
            if meta:
                self._set_meta_in(session, meta)
            if meta_max:
                rows.raise_meta(session, sid, meta_max)

    def _write_attrs(self, trial_id: int, attempt: Attempt) -> None:
        """The attempt attrs alone, in one transaction, leaving the trial's state as it is."""
        self._commit(trial_id, attempt, False)

    def _geometry_order(self, attempt: Attempt) -> list[str]:
        """The campaign's geometries in its config's order (an intermediate value's step indexes them); without a
        config (tests), the attempt's own, sorted."""
        if self._geometries is None:
            cfg = self.meta("config") or {}
            names = [g.get("name") for g in cfg.get("geometries") or [] if isinstance(g, Mapping)]
            if names and all(isinstance(n, str) for n in names):
                self._geometries = [str(n) for n in names]  # fixed for a campaign: resuming checks it
        return self._geometries if self._geometries is not None else sorted(attempt.speedup_vs_baseline)

    # --- reading -----------------------------------------------------------
    def _trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        try:
            return self.study.get_trials(deepcopy=False, states=tuple(states) if states else None)
        # a row Optuna cannot parse (not JSON, a param index out of range, a state outside the enum): read trial by
        # trial, skipping the damaged ones
        except ROW_DAMAGE:
            return self._trials_one_by_one(states)

    def _trials_one_by_one(self, states: Sequence[TrialState] | None) -> list[FrozenTrial]:
        u = models.TrialUserAttributeModel
        sid = op.study_id(self.study)
        with self._session() as session:
            # the raw state: a value outside Optuna's enum cannot be read through the model
            q = "SELECT trial_id, number, state FROM trials WHERE study_id = :s ORDER BY number, trial_id"
            listing = session.execute(sqlalchemy.text(q), {"s": sid}).all()
        wanted = {s.name for s in states} if states else None
        out = []
        for trial_id, number, state in listing:
            if wanted is not None and str(state) not in wanted:
                continue
            try:
                out.append(self._rdb().get_trial(trial_id))
            except ROW_DAMAGE as e:
                self.damaged[number] = f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
                with self._session() as session:  # its genome stays taken: a damaged row is not measured again
                    key = session.query(u.value_json).filter(u.trial_id == trial_id, u.key == "genome_key").scalar()
                with contextlib.suppress(TypeError, ValueError):
                    self._damaged_keys.add(str(json.loads(key)))
        return out

    def damaged_note(self) -> str | None:
        """One line on the attempt and meta records that could not be read, and on numbers given twice, or None."""
        parts = []
        if self.damaged:
            first = min(self.damaged)
            parts.append(
                f"{len(self.damaged)} damaged attempt record(s) skipped (#{first}: {self.damaged[first]}); "
                "the other attempts are read as recorded"
            )
        bad = self.found.damaged_meta
        if bad:
            key = min(bad)
            parts.append(f"{len(bad)} damaged campaign meta record(s) skipped ({key}: {bad[key]})")
        dup = self.found.note()
        if dup:
            parts.append(dup)
        return "; ".join(parts) or None

    def attempts(self) -> list[Attempt]:
        """Every recorded attempt, ordered by id (= trial number). Treat them as read-only: finished ones are cached."""
        return self._attempts(self._trials())

    def _attempts(self, trials: Sequence[FrozenTrial]) -> list[Attempt]:
        out = []
        for t in trials:
            a = self._parsed.get(op.trial_id(t))
            if a is None:
                if ATTEMPT_ATTR not in t.user_attrs:
                    continue
                try:
                    a = Attempt.from_json(t.user_attrs[ATTEMPT_ATTR])
                    if a.id != t.number:
                        raise ValueError(f"it names attempt #{a.id}")
                except Exception as e:  # one damaged record: reported (``damaged``), the rest stays readable
                    self.damaged[t.number] = f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
                    continue
                if t.state.is_finished():
                    self._parsed[op.trial_id(t)] = a
            out.append(a)
        return sorted(out, key=lambda a: a.id)

    def seen_keys(self) -> set[str]:
        """Genomes judged or being judged (any worker's RUNNING trials); interrupted ones may be proposed again."""
        return seen_of(self._trials()) | self._damaged_keys

    def running(self) -> list[FrozenTrial]:
        """Trials asked and not yet recorded (this worker's, other workers', or a dead one's not yet recovered)."""
        return self._trials([TrialState.RUNNING])

    def champion(self) -> Attempt | None:
        """The newest accepted attempt, else the baseline, else None."""
        return champion_of(self.attempts())

    def view(self) -> View:
        """Attempts, seen genomes and running trials from one read (each is one read of its own otherwise).

        Called once per step of the worker loop: with several processes on one database every read is also
        a chance to wait on another's write.
        """
        trials = self._trials()
        seen = seen_of(trials) | self._damaged_keys
        return View(self._attempts(trials), seen, [t for t in trials if t.state == TrialState.RUNNING])

    # --- crash recovery ----------------------------------------------------
    def recover(self) -> list[int]:
        """Finish trials a dead process left RUNNING; return their numbers.

        Safe while other workers run: a RUNNING trial whose owner is alive (see
        "Liveness" in the module docstring) is left alone; one finished by
        someone else meanwhile is skipped. A RUNNING trial without an
        attempt becomes ``error: interrupted`` (FAIL); one whose attempt was
        stored but whose state was not (ledgers written before record() was one
        transaction) is finished with that attempt. Trials enqueued but never
        asked (WAITING, left by older versions between enqueue and ask) become
        interrupted attempts too, but are not counted in the returned list.
        Each trial is finished in one transaction, so a kill during recovery
        is recovered by the next run.
        """
        handled: list[int] = []
        running = self._trials([TrialState.RUNNING])
        stale = set(op.stale_trial_ids(self._rdb(), op.study_id(self.study))) if running else set()
        for t in running:
            if sessions.trial_alive(t.system_attrs.get(WORKER_ATTR), op.trial_id(t), stale):
                continue
            if ATTEMPT_ATTR in t.user_attrs:
                attempt = Attempt.from_json(t.user_attrs[ATTEMPT_ATTR])
            else:
                attempt = self._interrupted(t)
            try:
                self._commit(op.trial_id(t), attempt, True)
            except UpdateFinishedTrialError:
                continue  # recorded by its owner, or recovered by another worker, meanwhile
            handled.append(t.number)
        for t in self._trials([TrialState.WAITING]):
            attempt = self._interrupted(t)
            with contextlib.suppress(UpdateFinishedTrialError):
                self._commit(op.trial_id(t), attempt, True)
        return handled

    def _interrupted(self, t: FrozenTrial) -> Attempt:
        config = self.meta("config") or {}
        backend = self.meta("backend") or config.get("backend") or "gpu"
        return interrupted_attempt(t, config.get("campaign", self.campaign), config.get("family", ""), backend)


class SideLedger(Ledger):
    """A study beside a campaign's (``<campaign>:<kind>``) that ``evo replay`` / ``evo selfcheck`` record into.

    It reads the campaign's attempts, champion and seen genomes (what a re-judged attempt is held against), and
    meta from its own study first, then the campaign's; it writes attempts and meta into its own study only, so
    nothing of the campaign changes. Its own attempts: :meth:`own_attempts`.
    """

    def __init__(self, base: Ledger, kind: str):
        super().__init__(
            base.storage_url,
            side_study_name(base.campaign, kind),
            base.knobs,
            heartbeat_s=base.heartbeat_s,
            grace_s=base.grace_s,
        )
        self.base = base
        self.kind = kind
        self.create_meta({"side_of": base.campaign, "kind": kind})

    def own_attempts(self) -> list[Attempt]:
        """The attempts recorded into this side study (ids are its own trial numbers)."""
        return super().attempts()

    def attempts(self) -> list[Attempt]:
        return self.base.attempts()

    def seen_keys(self) -> set[str]:
        return self.base.seen_keys()

    def champion(self) -> Attempt | None:
        return self.base.champion()

    def view(self) -> View:
        return self.base.view()

    def meta(self, key: str, default: Any = None) -> Any:
        mine = self._user_attrs()
        return mine[key] if key in mine else self.base.meta(key, default)

    def all_meta(self) -> dict[str, Any]:
        return {**self.base.all_meta(), **self._user_attrs()}


def side_study_name(campaign: str, kind: str) -> str:
    """``<campaign>:<kind>``: a campaign's name has no colon (evo/config.py), so no campaign can be named so."""
    return f"{campaign}:{kind}"
