"""Who is on a ledger, and are they alive: the trials a Ledger holds (Optuna's heartbeat) and the sessions that run
a campaign (one ``evo run``, or several ``evo worker``).

Called by the ledger (evo/ledger/ledger.py): ``ask(fixed)`` stamps each new trial with its owner
(:func:`owner_stamp`) and holds it (:meth:`Presence.hold`) until ``record()`` lets go of it; ``recover()`` asks
:func:`trial_alive` of each RUNNING trial; ``claim()`` / ``release()`` are :func:`claim` / :func:`release`.

Liveness (several processes on one ledger, ``evo worker``): ``ask(fixed)`` stamps the new trial, in its creating
transaction, with the owner's identity (system attr ``evo:worker``: host, pid, the process's start time, the
kernel's boot id and pid namespace, and a per-Ledger token) and with Optuna's first heartbeat row; a daemon thread
then records Optuna's heartbeat (``RDBStorage(heartbeat_interval=..., grace_period=...)``) for every trial the
Ledger holds until ``record()`` lets go of it. A RUNNING trial is dead when

* its Ledger lives in this process but no longer holds it (``record()`` failed) or is gone, or
* its owner ran on this kernel and pid namespace and that process has exited (a SIGKILLed ``evo run`` is
  recovered at once by the next one: evo/core/liveness.py), or
* otherwise (another host): it had no heartbeat for ``grace_period`` seconds.

A trial without the stamp (older versions, ``ask()`` without ``fixed``) has no heartbeat and is taken as dead.
Intervals: ``EVO_HEARTBEAT_S`` (default 10) and ``EVO_GRACE_S`` (default 60) or the Ledger's arguments
(evo/ledger/rdb.py ``heartbeat_settings``). A session is judged the same way, by the heartbeat its own thread
keeps in its study system attr (``evo:session:<token>``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

import optuna

from evo.core import liveness
from evo.ledger import optuna_private as op
from evo.ledger import rows

WORKER_ATTR = "evo:worker"  # trial system attr: who asked it (see "Liveness" above)
SESSION_ATTR = "evo:session:"  # study system attr prefix: one per live evo run / evo worker (Ledger.claim)


class SessionTaken(Exception):
    """Another live process runs this campaign (``holder``: its session record, see :func:`claim`)."""

    def __init__(self, holder: Mapping[str, Any]):
        self.holder = dict(holder)
        super().__init__(describe_session(holder))


class BudgetDiffers(Exception):
    """Shared mode: a live worker (``holder``) runs the campaign with another attempt budget than this one's."""

    def __init__(self, holder: Mapping[str, Any], limit: int | None):
        self.holder = dict(holder)
        self.limit = limit
        theirs = holder.get("attempts")
        super().__init__(
            f"{describe_session(holder)} runs it with "
            + (f"--attempts {theirs}" if theirs is not None else "no attempt budget")
            + (f", this worker with --attempts {limit}" if limit is not None else ", this worker with none")
        )


def describe_session(h: Mapping[str, Any]) -> str:
    kind = "evo worker" if h.get("mode") == "worker" else "evo run"
    return f"{kind} on {h.get('host', '?')} pid {h.get('pid', '?')} (since {h.get('since', '?')})"


def worker_name() -> str:
    """``"<host> pid <pid>"``: what ``record()`` stamps a shared campaign's attempt with."""
    p = liveness.identity()
    return f"{p['host']} pid {p['pid']}"


class Presence:
    """One Ledger on its storage, named by a token of its own: the trials it holds (asked, not yet recorded) and
    its session. Made with the Ledger; every live one of this process is known to :func:`trial_alive`."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.session_key: str | None = None  # claim(): this process's session row
        self.session_stop: threading.Event | None = None
        self._held: set[int] = set()  # trial ids asked and not recorded (heartbeat on)
        self._lock = threading.Lock()
        self._beat_thread: threading.Thread | None = None
        _LIVE.add(self)

    def hold(self, trial_id: int, rdb: optuna.storages.RDBStorage, interval: float) -> None:
        """Keep ``trial_id``'s heartbeat from now on (ask); the heartbeat thread starts with the first."""
        with self._lock:
            self._held.add(trial_id)
            if self._beat_thread is None or not self._beat_thread.is_alive():
                stop = threading.Event()
                self._beat_thread = threading.Thread(
                    target=_beat, args=(weakref.ref(self), rdb, interval, stop), name="evo-heartbeat", daemon=True
                )
                weakref.finalize(self, stop.set)
                self._beat_thread.start()

    def let_go(self, trial_id: int) -> None:
        """Stop ``trial_id``'s heartbeat (record, whether it wrote or failed): from now on it is not ours."""
        with self._lock:
            self._held.discard(trial_id)

    def holds(self, trial_id: int) -> bool:
        with self._lock:
            return trial_id in self._held

    def held(self) -> list[int]:
        with self._lock:
            return list(self._held)


_LIVE: weakref.WeakSet[Presence] = weakref.WeakSet()  # every Ledger's presence in this process


def _local(token: Any) -> Presence | None:
    """This process's live Ledger of that token, if any."""
    return next((p for p in list(_LIVE) if p.token == token), None)


def owner_stamp(presence: Presence) -> dict[str, Any]:
    """What a trial's ``evo:worker`` attr holds: this process and this Ledger."""
    return {**liveness.identity(), "ledger": presence.token}


def _beat(ref: weakref.ref[Presence], rdb: optuna.storages.RDBStorage, interval: float, stop: threading.Event) -> None:
    """Optuna's heartbeat for every trial the Ledger holds, until the Ledger is gone."""
    while not stop.wait(interval):
        presence = ref()
        if presence is None:
            return
        held = presence.held()
        del presence
        for trial_id in held:
            try:
                rdb.record_heartbeat(trial_id)
            except Exception:  # a lost connection: the next beat tries again (the grace period covers it)
                pass


def trial_alive(owner: Any, trial_id: int, stale: set[int]) -> bool:
    """Whether the owner (its ``evo:worker`` stamp) of RUNNING trial ``trial_id`` may still record it; ``stale``:
    the study's RUNNING trials past Optuna's grace period. Called by ``recover()`` for each RUNNING trial."""
    if not isinstance(owner, dict):
        return False  # no owner stamp, no heartbeat: an older version's or an unfixed ask's
    local = _local(owner.get("ledger"))
    if local is not None:
        return local.holds(trial_id)
    if liveness.certainly_dead(owner):
        return False
    return trial_id not in stale


def session_alive(other: Mapping[str, Any], grace_s: int) -> bool:
    """Whether a session record names a live session (this process's Ledger with its claim, or a process not
    surely dead whose heartbeat is younger than ``grace_s``)."""
    local = _local(other.get("ledger"))
    if local is not None:
        return local.session_key is not None
    if liveness.certainly_dead(other):
        return False
    beat = other.get("beat")
    return isinstance(beat, (int, float)) and time.time() - beat <= grace_s


class Claimant(Protocol):
    """What :func:`claim` needs of a Ledger."""

    presence: Presence
    study: optuna.Study
    limit: int | None
    heartbeat_s: int
    grace_s: int
    elapsed_fn: Callable[[], float] | None

    def _session(self) -> AbstractContextManager[Any]: ...


def claim(led: Claimant, mode: str) -> None:
    """``Ledger.claim``: register this process as running the campaign, or raise :class:`SessionTaken`.

    ``mode`` "run" (``evo run``, replay, selfcheck) excludes every other live session; "worker" shares with other
    workers only (their asks are serialised by the study lock; an ``evo run`` does not take part in that). A
    session is live while its process is (same host and pid namespace), else while its heartbeat, renewed every
    ``heartbeat_s``, is younger than ``grace_s``: a killed run never blocks the next one for long. Idempotent.
    """
    presence = led.presence
    if presence.session_key is not None:
        return
    key = SESSION_ATTR + presence.token
    mine = {
        **owner_stamp(presence),
        "mode": mode,
        "attempts": led.limit,  # workers share one budget: a worker with another one is refused
        "beat": time.time(),
        "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    sa = op.models.StudySystemAttributeModel
    sid = op.study_id(led.study)
    with led._session() as session:
        rows.lock_study(session, sid)  # of two runs starting at once, the second sees the first's row
        for row in session.query(sa).filter(sa.study_id == sid, sa.key.like(SESSION_ATTR + "%")).all():
            try:
                other = json.loads(row.value_json)
                assert isinstance(other, dict)
            except (ValueError, AssertionError):
                session.delete(row)
                continue
            if not session_alive(other, led.grace_s):
                session.delete(row)
            elif mode != "worker" or other.get("mode") != "worker":
                raise SessionTaken(other)
            elif other.get("attempts", led.limit) != led.limit:  # (older sessions do not say: not held)
                raise BudgetDiffers(other, led.limit)
        session.add(sa(study_id=sid, key=key, value_json=json.dumps(mine)))
    presence.session_key = key
    stop = threading.Event()
    presence.session_stop = stop
    threading.Thread(
        target=_session_beat,
        args=(weakref.ref(led), key, mine, led.heartbeat_s, stop),
        name="evo-session",
        daemon=True,
    ).start()
    weakref.finalize(led, stop.set)


def release(led: Claimant) -> None:
    """``Ledger.release``: end this process's session (see :func:`claim`); a no-op without one."""
    presence = led.presence
    key, presence.session_key = presence.session_key, None
    if key is None:
        return
    if presence.session_stop is not None:
        presence.session_stop.set()
    sa = op.models.StudySystemAttributeModel
    with contextlib.suppress(Exception):  # a lost storage: the session goes stale by itself
        with led._session() as session:
            session.query(sa).filter(sa.study_id == op.study_id(led.study), sa.key == key).delete(
                synchronize_session=False
            )


def _session_beat(
    ref: weakref.ref[Claimant], key: str, mine: dict[str, Any], interval: float, stop: threading.Event
) -> None:
    """Renew a session's heartbeat until it is released or its Ledger is gone (re-added if taken for dead); raise
    the campaign's ``elapsed_s`` with it, so a killed run's time since its last attempt still counts."""
    sa = op.models.StudySystemAttributeModel
    while not stop.wait(interval):
        led = ref()
        if led is None or led.presence.session_key != key:
            return
        try:
            sid = op.study_id(led.study)
            with led._session() as session:
                value = json.dumps({**mine, "beat": time.time()})
                n = (
                    session.query(sa)
                    .filter(sa.study_id == sid, sa.key == key)
                    .update({sa.value_json: value}, synchronize_session=False)
                )
                if n == 0:
                    session.add(sa(study_id=sid, key=key, value_json=value))
                elapsed = led.elapsed_fn
                if elapsed is not None:
                    rows.raise_meta(session, sid, {"elapsed_s": float(elapsed())})
        except Exception:  # a lost connection: the next beat tries again
            pass
        del led
