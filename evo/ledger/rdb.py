"""Optuna's RDB storage opened for a campaign: a SQLite file checked (or made whole) first, every way it can fail to
open one line for the user (:class:`LedgerError`), and the heartbeat intervals of its trials.

Called by the ledger (evo/ledger/ledger.py) once per open, and by the messages that name a storage error.
"""

from __future__ import annotations

import os
import random
import time
import warnings
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.exceptions import ExperimentalWarning

from evo.ledger import dashboard, lock_watch, sqlite_file
from evo.ledger.errors import LedgerError
from evo.ledger.sqlite_file import check_sqlite_ledger, create_sqlite
from evo.ledger.storage_url import StorageURLError, engine_url, safe_url, sqlite_path, where, with_installed_driver

HEARTBEAT_S = 10
GRACE_S = 60


def heartbeat_settings() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds: EVO_HEARTBEAT_S / EVO_GRACE_S, else 10 / 60."""

    def seconds(name: str, default: int) -> int:
        raw = os.environ.get(name)
        if not raw:
            return default
        try:
            v = int(raw)
        except ValueError:
            v = 0
        if not 1 <= v <= 86400:
            raise LedgerError(f"{name}={raw[:40]!r}: expected whole seconds from 1 to 86400")
        return v

    hb = seconds("EVO_HEARTBEAT_S", HEARTBEAT_S)
    grace = seconds("EVO_GRACE_S", max(GRACE_S, 3 * hb))
    return hb, grace


def open_rdb(url: str, heartbeat_s: int, grace_s: int, readonly: bool = False) -> optuna.storages.RDBStorage:
    """RDB storage with Optuna's heartbeat; for SQLite, checked to be a whole ledger first (or made whole).

    ``readonly``: the SQLite file is opened read-only and no table is created anywhere. Several workers may open
    a fresh database at once (table creation races): retried a few times.
    """
    kw: dict[str, Any] = {"heartbeat_interval": heartbeat_s, "grace_period": grace_s}
    try:
        path = sqlite_path(url)
    except StorageURLError as e:
        raise LedgerError(str(e)) from None
    if path is not None:
        if path.exists() or readonly:
            if not path.exists():
                raise LedgerError(f"no ledger at {path} (start the campaign with evo run)")
            path = check_sqlite_ledger(path, readonly)
        else:
            create_sqlite(path)
        if not readonly:  # a stop while another program holds its lock: honoured, the holder named
            lock_watch.watch(path)
        # Connected through a SQLite URI built from the file (evo/ledger/storage_url.py): a name with ``?``, ``#``,
        # ``%`` or braces opens that file. The rollback journal, not write-ahead logging (check_sqlite_ledger sets it
        # back): with WAL a copy of ledger.db alone (what users copy and commit) can miss the newest attempts.
        url = engine_url(path, readonly)
        if readonly:
            kw = {}
        kw["engine_kwargs"] = {"connect_args": {"timeout": sqlite_file.LOCK_WAIT_S}}
        kw["skip_table_creation"] = True
    elif readonly:
        kw = {"skip_table_creation": True}
    url = with_installed_driver(url)
    for n in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExperimentalWarning)
                return optuna.storages.RDBStorage(url, **kw)
        # a lock, a busy server, or another worker creating the schema at the same moment (PostgreSQL: a
        # UniqueViolation on Optuna's enum types): the next try finds what the other made
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError, optuna.exceptions.StorageInternalError):
            if n == 4:
                raise
            time.sleep(0.2 + random.random())
    raise AssertionError("unreachable")


def open_study(url: str, campaign: str, sampler: Any, heartbeat_s: int, grace_s: int, readonly: bool) -> optuna.Study:
    """The campaign's study; every way the storage can fail to open is a LedgerError (one line). ``readonly``:
    loaded, never created (a mistyped campaign name must not add an empty study)."""
    try:
        storage = open_rdb(url, heartbeat_s, grace_s, readonly)
        if not readonly:
            study = optuna.create_study(
                storage=storage, study_name=campaign, direction="maximize", sampler=sampler, load_if_exists=True
            )
            dashboard.name_metric(study)  # the objective named for optuna-dashboard (evo/ledger/dashboard.py)
            return study
        try:
            return optuna.load_study(study_name=campaign, storage=storage, sampler=sampler)
        except KeyError:
            names = optuna.get_all_study_names(storage)
            raise LedgerError(
                f"storage {safe_url(url)} holds no campaign {campaign!r} (it holds: "
                f"{', '.join(names[:5]) or 'none'}); check the config's campaign: name"
            ) from None
    except LedgerError:
        raise
    except ImportError as e:  # no driver for this URL
        raise LedgerError(
            f"cannot open the storage {safe_url(url)}: no database driver for it "
            f"({first_line(e.__cause__ or e)}); for PostgreSQL: pip install psycopg2-binary"
        ) from None
    except (
        sqlalchemy.exc.SQLAlchemyError,
        optuna.exceptions.StorageInternalError,
        RuntimeError,
        OSError,
        ValueError,
    ) as e:
        if sqlite_file.is_locked(root_cause(e)):
            raise LedgerError(sqlite_file.locked_message(where(url))) from None
        raise LedgerError(f"cannot open the storage {safe_url(url)}: {first_line(e)}") from None


def campaign_names(url: str) -> list[str]:
    """The names of the studies a storage holds (campaigns and their side studies), read without writing: a SQLite
    file opened read-only, no table created. Called by ``evo ideas`` to find a family's campaigns."""
    path = sqlite_path(url)
    return list(optuna.get_all_study_names(storage=url if path is None else engine_url(path, readonly=True)))


# What Optuna raises reading a damaged row: JSON that does not parse (ValueError), a param index out of its choices
# (IndexError) or a state outside its enum (LookupError, from SQLAlchemy), a distribution of the wrong shape.
ROW_DAMAGE = (ValueError, LookupError, TypeError, AttributeError)


def root_cause(e: BaseException) -> BaseException:
    """The driver's own error under the wrappers: SQLAlchemy's ``orig``, Optuna's StorageInternalError (raised
    from the SQLAlchemy error), so a full disk reads "database or disk is full", not Optuna's guess at the cause."""
    seen = {id(e)}
    while True:
        nxt = getattr(e, "orig", None) or e.__cause__ or (None if e.__suppress_context__ else e.__context__)
        if not isinstance(nxt, BaseException) or id(nxt) in seen:
            return e
        seen.add(id(nxt))
        e = nxt


def first_line(e: BaseException) -> str:
    cause = root_cause(e)
    text = " ".join(str(cause).split())
    if sqlite_file.is_locked(cause):  # never read as damage: another process holds the lock
        text += f" by another process (it held the lock for over {sqlite_file.LOCK_WAIT_S:g} s; wait for it or stop it)"
    return f"{type(cause).__name__}: {text[:300]}" if text else type(cause).__name__
