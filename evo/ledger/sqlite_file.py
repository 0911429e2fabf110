"""The ledger's SQLite file, before Optuna opens it: whole, ours, unlocked, in the journal mode evo writes in.

Called by the ledger (evo/ledger/ledger.py) on every open of a ``sqlite:///`` storage, before SQLAlchemy connects:
:func:`check_sqlite_ledger` tells apart what a user must hear apart, each in one line (:class:`LedgerError`):

* not a ledger (empty, garbage, another program's database, tables missing, another Optuna schema): refused;
* damaged (SQLite's integrity check fails): refused, "restore it from a copy";
* locked by another process for longer than ``LOCK_WAIT_S``: refused as locked, never called damaged (a healthy
  ledger must not be replaced on that advice); the wait honours a stop request within ``_SLICE_S``;
* a killed writer's hot ``-journal``: rolled back, on a copy first (:func:`_after_killed_writer`);
* a ``-wal`` beside a ledger that is not in WAL mode, or one that applied to a copy leaves no whole ledger holding every
  trial of the file alone (another database's, an older copy's, a leftover): never applied (SQLite would
  apply any WAL it finds on a read-write open): read-only commands read the ledger without it, a writer moves it
  aside, kept, into ``<ledger>.stray-wal-<time>/``;
* a ledger another program switched to WAL mode: a writer sets it back to the rollback journal (checkpointing the
  WAL into the file), so that ``ledger.db`` alone, what users copy, holds every attempt; refused while another
  program holds it open in WAL mode.

New ledgers are made whole or not at all (:func:`create_sqlite`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sqlite3
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote

import optuna
from optuna.exceptions import ExperimentalWarning

from evo import stop
from evo.core.liveness import exited
from evo.ledger.errors import LedgerError
from evo.ledger.optuna_private import models
from evo.ledger.storage_url import engine_url, sqlite_url

# How long a check waits for another process's write lock before saying the ledger is locked (seconds). SQLite's
# busy timeout: a live evo writer holds the lock for one transaction (milliseconds).
LOCK_WAIT_S = 30.0
# ... waited in slices this long (SQLite's own busy wait, in C, where no stop request is seen), each followed by a
# check for a stop request (SIGINT, SIGTERM): a command waiting for a lock stops within a slice of the request.
_SLICE_S = 0.2
REPAIR = 'restore it from a copy (README, "A damaged ledger")'

P = ParamSpec("P")
T = TypeVar("T")
_OPTUNA_TABLES = frozenset(models.BaseModel.metadata.tables) | {"alembic_version"}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _waits_for_locks(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` (one short use of its own connection, opened with a ``_SLICE_S`` busy timeout) tried again while
    another process holds the ledger's lock, up to ``LOCK_WAIT_S`` in all, honouring a stop request between tries
    (StopRequested); then the lock error is raised as SQLite gave it."""

    @functools.wraps(fn)
    def patiently(*args: P.args, **kwargs: P.kwargs) -> T:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                return fn(*args, **kwargs)
            except sqlite3.Error as e:
                if not is_locked(e) or time.monotonic() >= deadline:
                    raise
            stop.check()
            time.sleep(0.02)

    return patiently


def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(Path(models.__file__).with_name("alembic"))).get_current_head()
    assert head is not None, "optuna ships its alembic migrations"
    return head


@_waits_for_locks
def _read_sqlite(path: Path) -> tuple[str, set[str], list[Any]]:
    """quick_check's verdict, the table names and the schema versions, read only (raises sqlite3.Error)."""
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=_SLICE_S)
    try:
        ok = "; ".join(str(r[0]) for r in con.execute("PRAGMA quick_check").fetchall())
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        versions: list[Any] = []
        if {"version_info", "alembic_version"} <= tables:
            versions = [
                con.execute("SELECT schema_version, library_version FROM version_info").fetchone(),
                con.execute("SELECT version_num FROM alembic_version").fetchone(),
            ]
    finally:
        con.close()
    return ok, tables, versions


def _ledger_problem(where: str, ok: str, tables: set[str], versions: list[Any]) -> str | None:
    """Why what :func:`_read_sqlite` read is not a whole evo ledger of this Optuna's schema, or None."""
    if ok != "ok":
        ok = " ".join(ok.split())[:200]  # one line: a quick_check row may hold several
        return f"{where} is damaged (SQLite integrity check: {ok}); restore it from a copy, or give another storage"
    ours = tables & _OPTUNA_TABLES
    if not ours:
        other = ", ".join(sorted(t for t in tables if not t.startswith("sqlite_"))[:3]) or "none"
        return (
            f"{where} is a SQLite database of something else (tables: {other}), not an evo ledger; give another storage"
        )
    missing = sorted(_OPTUNA_TABLES - tables)
    if missing:
        return (
            f"{where} is not a whole evo ledger: table {missing[0]} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "; restore it from a copy, or give another storage"
        )
    if versions and (versions[0] is None or versions[1] is None):
        return f"{where} has no schema version (a damaged or unfinished ledger); restore it from a copy"
    if versions:
        (schema, lib), (rev,) = versions
        current = _head_revision()
        if rev != current:
            return (
                f"{where} has Optuna table schema {rev} (written by optuna {lib}) and optuna "
                f"{optuna.__version__} reads schema {current}: install optuna {lib}, or run `optuna storage "
                f"upgrade --storage {sqlite_url(where)}` on a copy"
            )
    return None


@_waits_for_locks
def _roll_back(path: Path) -> None:
    """Open ``path`` read-write once: SQLite replays a hot journal beside it (raises sqlite3.Error)."""
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, timeout=_SLICE_S)
    try:
        con.execute("PRAGMA schema_version").fetchone()
    finally:
        con.close()


def _after_killed_writer(path: Path, readonly: bool) -> Path:
    """The ledger to read when a killed writer left its unfinished transaction in ``<ledger>-journal``.

    A process killed inside a commit (``kill -9``, a lost host) leaves a "hot" journal: the pages that restore the
    last committed state. A read-only connection cannot replay it (SQLITE_READONLY_ROLLBACK). SQLite cannot tell
    whether the journal belongs to the file beside it: replayed onto a ledger restored from a copy since, it would
    corrupt that file. So the journal is first replayed on a copy of both, and the result checked; a ledger that
    reads damaged that way is refused with nothing written. Read-only commands read that rolled-back copy (the
    user's files are never written); a writer lets SQLite roll back the real one, keeping the two files as they
    were in ``<ledger>.before-rollback-<time>/``. A live writer holds its lock, so its journal is never hot."""
    import atexit
    import tempfile

    journal = path.with_name(path.name + "-journal")
    snap_dir = Path(tempfile.mkdtemp(prefix="evo-ledger-"))
    atexit.register(shutil.rmtree, snap_dir, True)
    # one folder per process: two workers recovering at once never share (or delete) each other's copy
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    keep = None if readonly else path.with_name(f"{path.name}.before-rollback-{stamp}")
    first = snap_dir if keep is None else keep
    try:
        first.mkdir(exist_ok=keep is None)
        for f in (path, journal):
            shutil.copyfile(f, first / f.name)
    except FileNotFoundError:  # another process rolled it back meanwhile
        shutil.rmtree(first, True)
        return check_sqlite_ledger(path, readonly)
    if keep is not None:
        for f in (path, journal):
            shutil.copyfile(keep / f.name, snap_dir / f.name)
    snap = snap_dir / path.name
    try:
        _roll_back(snap)
        problem = _ledger_problem(str(path), *_read_sqlite(snap))
    except sqlite3.Error as e:
        problem = f"{path} is damaged (SQLite: {' '.join(str(e).split())})"
    if problem:
        if keep is not None:
            shutil.rmtree(keep, True)
        raise LedgerError(
            f"{problem} -- read after rolling back {journal.name} beside it (a killed writer's unfinished "
            f"transaction) on a copy: if {path.name} was restored or copied in after that writer died, the journal is "
            "stale: move it away and try again (nothing was written)"
        )
    if keep is None:
        sys.stderr.write(
            f"evo: note: {journal.name} holds a killed writer's unfinished transaction: read as last committed "
            "(on a copy); the next evo run rolls it back\n"
        )
        return snap
    try:
        _roll_back(path)
        problem = _ledger_problem(str(path), *_read_sqlite(path))
    except sqlite3.Error as e:
        problem = f"cannot roll back {journal.name} beside {path} ({e}): open the campaign where its folder is writable"
    if problem:
        raise LedgerError(f"{problem} (the ledger and its journal as they were: {keep})")
    sys.stderr.write(
        f"evo: note: rolled back a killed writer's unfinished transaction ({journal.name}); every committed "
        f"attempt is kept. The two files as they were: {keep} (delete it once the campaign reads right)\n"
    )
    return path


def check_sqlite_ledger(path: Path, readonly: bool = False, shown: str | None = None) -> Path:
    """Raise LedgerError unless ``path`` is a whole Optuna storage of this Optuna's schema; returns the file to open.

    That is ``path`` itself, except when a killed writer left its unfinished transaction beside it: see
    :func:`_after_killed_writer` (a read-only caller then reads a rolled-back copy; only a writer rolls back the
    ledger itself). Otherwise nothing is written. A zero-length file, a folder, garbage, a truncated or damaged
    database, one of something else's tables, or one missing some of Optuna's tables would otherwise be taken
    (and written) as a new campaign. ``shown``: the ledger as messages name it (``path`` may be a copy of it)."""
    where = shown or str(path)
    if path.is_dir():
        raise LedgerError(
            f"{where} is a folder, not a ledger file; give the ledger's file (storage: sqlite:///.../ledger.db)"
        )
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise LedgerError(f"cannot read the ledger {where}: {e.strerror or e}") from None
    if not head:
        raise LedgerError(
            f"{where} is an empty file (0 bytes), not an evo ledger; move it away or give another storage"
        )
    if not head.startswith(_SQLITE_MAGIC):
        raise LedgerError(f"{where} is not a SQLite database (not an evo ledger); move it away or give another storage")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and not (_in_wal_mode(head) and _wal_is_the_ledgers(path, wal)):
        if readonly:
            return check_sqlite_ledger(_without_stray_wal(path, wal), readonly=True, shown=where)
        _move_stray_wal(path, wal)
    try:
        facts = _read_sqlite(path)
    except sqlite3.Error as e:
        if getattr(e, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
            return _after_killed_writer(path, readonly)
        if is_locked(e):
            raise LedgerError(locked_message(where)) from None
        raise LedgerError(f"{where} is damaged (SQLite: {e}); {REPAIR}, or give another storage") from None
    problem = _ledger_problem(where, *facts)
    if problem:
        raise LedgerError(problem)
    if not readonly:
        _rollback_journal_mode(path)
    return path


def is_locked(e: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock past the busy timeout."""
    return getattr(e, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or "database is locked" in str(e)


def locked_message(where: str) -> str:
    """The one line for a ledger another process keeps locked: it is not damaged; never advise replacing it."""
    return (
        f"{where} is locked by another process (it held the ledger's lock for over {LOCK_WAIT_S:g} s; another "
        "evo, an sqlite3 shell, a backup tool): wait for it or stop it, then try again; nothing is wrong with the "
        "ledger itself (nothing was written)"
    )


def _in_wal_mode(head: bytes) -> bool:
    """The database header's file format versions (bytes 18 and 19): 2 in WAL mode, 1 with a rollback journal."""
    return len(head) >= 20 and head[18] == 2 and head[19] == 2


def _snapshot(path: Path, *files: Path) -> Path:
    """Copies of ``files`` in a new temporary folder (removed at exit); the copy of ``path`` there is returned."""
    import atexit
    import tempfile

    snap_dir = Path(tempfile.mkdtemp(prefix="evo-ledger-"))
    atexit.register(shutil.rmtree, snap_dir, True)
    for f in files:
        if f.exists():
            shutil.copyfile(f, snap_dir / f.name)
    return snap_dir / path.name


@_waits_for_locks
def _trial_ids(path: Path) -> set[tuple[int, int]]:
    """(trial_id, number) of every trial in the ledger at ``path`` (read only; raises sqlite3.Error)."""
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=_SLICE_S)
    try:
        return {(int(i), int(n)) for i, n in con.execute("SELECT trial_id, number FROM trials")}
    finally:
        con.close()


def _wal_is_the_ledgers(path: Path, wal: Path) -> bool:
    """Whether the ``-wal`` beside a ledger in WAL mode is its own: applied on a copy, it must leave a whole evo
    ledger holding every trial the file alone holds. Called before anything opens the ledger itself.

    A WAL names no database: SQLite applies any ``-wal`` it finds beside a WAL-mode file, so another database's put
    there (or one of an older copy) would replace the ledger's pages. Frames a live writer is adding are not
    committed and SQLite's recovery of the copy stops before them, so a live WAL reads as the ledger's."""
    with_wal = _snapshot(path, path, wal)
    alone = _snapshot(path, path)
    try:
        if _ledger_problem(str(path), *_read_sqlite(with_wal)) is not None:
            return False
        return _trial_ids(alone) <= _trial_ids(with_wal)
    except sqlite3.Error:
        return False
    finally:
        shutil.rmtree(with_wal.parent, True)
        shutil.rmtree(alone.parent, True)


def _stamp() -> str:
    # one per process: two workers at once never share (or delete) each other's folder
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def _without_stray_wal(path: Path, wal: Path) -> Path:
    """A copy of ``path`` alone (with its rollback journal, if any) for a read-only command: a ``-wal`` beside a
    ledger not in WAL mode (or one that does not fit the ledger) is no part of it, and SQLite would read it as if it
    were."""
    snap = _snapshot(path, path, path.with_name(path.name + "-journal"))
    sys.stderr.write(
        f"evo: note: {wal.name} beside {path.name} is not the ledger's ({_why_stray(path)}: another database's, or a "
        "leftover): not applied, the ledger is read without it; the next evo run moves it aside\n"
    )
    return snap


def _why_stray(path: Path) -> str:
    """Why a ``-wal`` beside ``path`` was found not to be the ledger's (for the note)."""
    with open(path, "rb") as f:
        in_wal = _in_wal_mode(f.read(20))
    return "applied to a copy it leaves no whole ledger" if in_wal else f"{path.name} is not in WAL mode"


def _move_stray_wal(path: Path, wal: Path) -> None:
    """Move a stray ``-wal`` (and its ``-shm``) into ``<ledger>.stray-wal-<time>/``, kept as they were, before a
    read-write open would apply it."""
    why = _why_stray(path)
    keep = path.with_name(f"{path.name}.stray-wal-{_stamp()}")
    keep.mkdir()
    for f in (wal, path.with_name(path.name + "-shm")):
        try:
            os.replace(f, keep / f.name)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise LedgerError(
                f"{wal} is not the ledger's ({why}) and cannot be moved aside ({e.strerror}); "
                "move it away yourself, keeping it (nothing was written)"
            ) from None
    sys.stderr.write(
        f"evo: note: {wal.name} beside {path.name} was not the ledger's ({why}: another "
        f"database's, or a leftover): not applied, moved aside as it was into {keep}\n"
    )


def _rollback_journal_mode(path: Path) -> None:
    """Set the ledger back to the rollback journal (``DELETE``) where another program switched it to WAL, and check it.

    With WAL a copy of ledger.db alone (what users copy and commit) can miss the newest attempts. Setting it
    checkpoints the WAL into the file first; SQLite refuses while another connection has it open in WAL mode."""
    try:
        mode = _set_delete_mode(path)
    except sqlite3.Error as e:
        if not is_locked(e):
            raise LedgerError(f"{path} is damaged (SQLite: {e}); {REPAIR}, or give another storage") from None
        mode = "wal"
    if mode != "delete":
        raise LedgerError(
            f"{path} is in {mode.upper()} journal mode, set by another program that still has it open; evo writes a "
            "ledger with the rollback journal (so that the file alone holds every attempt) and sets it back when "
            "no other program has it open: close that one and try again (nothing was written)"
        )


@_waits_for_locks
def _set_delete_mode(path: Path) -> str:
    """The ledger's journal mode after asking SQLite for ``DELETE`` (raises sqlite3.Error). Reading the mode waits
    for a lock; the switch, refused while another program has the ledger open in WAL mode, is not waited for."""
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, timeout=_SLICE_S)
    try:
        mode = str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode != "delete":
            try:
                mode = str(con.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower()
            except sqlite3.Error as e:
                if not is_locked(e):
                    raise
        return mode
    finally:
        con.close()


def _remove_dead_creations(path: Path) -> None:
    """Remove the temporary files (and their SQLite journals) that a killed creation of ``path`` left.

    The creator's pid is read from the whole name, never guessed from its parts: a live creator's ``-journal``
    must survive (deleting it under the writer is SQLite's "disk I/O error")."""
    made = re.compile(rf"\.{re.escape(path.name)}\.new-(\d+)-[0-9a-f]{{8}}(-journal)?")
    for old in path.parent.glob(f".{path.name}.new-*"):
        m = made.fullmatch(old.name)
        if m and exited(int(m.group(1)), None):
            old.unlink(missing_ok=True)


def create_sqlite(path: Path) -> None:
    """A new SQLite ledger appears whole or not at all: its tables are made in a temporary file, linked into place.

    A kill while Optuna creates its tables would otherwise leave an empty or part-made file, which no later run
    could tell from a damaged one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_creations(path)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            optuna.storages.RDBStorage(engine_url(tmp, create=True)).engine.dispose()
        try:
            os.link(tmp, path)  # never replaces: of several workers creating it at once, one file wins
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.rename(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
