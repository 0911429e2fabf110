"""A stop request while another program holds a SQLite ledger's lock: honoured within about a second, with one line
naming who holds it.

SQLite waits for a lock inside C (the busy timeout, ``LOCK_WAIT_S`` = 30 s a statement), where Python's signal
handlers do not run: before, a SIGTERM or Ctrl-C that came while an sqlite3 shell, a backup tool or another
program held the ledger's lock mid-run (or while the stopping run wrote its last meta) waited up to 30 s, and so did
a second request. The open of a ledger already waits in slices (evo/ledger/sqlite_file.py); the statements of a
running campaign go through SQLAlchemy and Optuna, where no slice can be cut.

So this module watches from a thread. Python writes the number of every signal it takes to a wakeup fd
(``signal.set_wakeup_fd``) at once, in C, whatever the main thread is doing. After a stop request (SIGINT,
SIGTERM), while the process is still alive, the thread looks every ``_POLL_S`` for locks another process holds on
the ledgers this process writes (Linux's list of file locks, read in evo/core/liveness.py). Seen twice in a row,
``_GRACE_S`` or more after the request, it prints one line naming the holder (its pid and command) and ends the
process with the stop's exit status (130 / 143), as a second request would: the ledger is crash safe at every
moment; the attempt in flight, not yet recorded, is recorded as interrupted by the next run (its genome may be
proposed again); nothing recorded is lost.
A stop with no foreign lock held changes nothing: the command stops at its next safe point, as before.

Installed by the ledger's open of a SQLite file for writing (evo/ledger/rdb.py), in the evo command's main thread
only, and only where evo's stop handlers are in (evo/stop.py ``install``): a library user's process is left alone.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path

from evo import stop
from evo.core import liveness

_GRACE_S = 1.0  # a responsive main thread stops well within this; a lock wait does not
_POLL_S = 0.25
_files: dict[int, str] = {}  # inode -> path of the SQLite ledgers this process writes
_started = False


def watch(path: Path) -> None:
    """Watches ``path`` (a SQLite ledger this process opened for writing) for foreign locks after a stop request.
    Called by the ledger's open; idempotent."""
    with contextlib.suppress(OSError):
        _files[os.stat(path).st_ino] = str(path)
    _start()


def _start() -> None:
    """The wakeup fd and the thread, once, in the main thread, where evo's stop handlers are installed."""
    global _started
    if _started or threading.current_thread() is not threading.main_thread() or not liveness.can_see_locks():
        return
    if not all(stop.installed(s) for s in stop.SIGNALS):
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:
        old = -2
    if old != -1:  # another's wakeup fd (an event loop): left as it was
        if old >= 0:
            signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _started = True
    threading.Thread(target=_watch, args=(r,), daemon=True, name="evo-lock-watch").start()


def _watch(r: int) -> None:
    """The thread: waits for a stop request, then for a foreign lock on a ledger while the process lives on."""
    first: tuple[int, float] | None = None
    streak = 0
    while True:
        ready, _, _ = select.select([r], [], [], None if first is None else _POLL_S)
        if ready:
            for b in os.read(r, 256):
                if b in stop.SIGNALS and first is None:
                    first = (b, time.monotonic())
        if first is None:
            continue
        held = foreign_holders()
        streak = streak + 1 if held else 0
        if streak >= 2 and time.monotonic() - first[1] >= _GRACE_S:
            _stop_now(first[0], held)


def _stop_now(signum: int, held: list[str]) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    line = (
        f"evo: stopped by {stop.name(signum)} while {held[0]} holds the ledger's lock; the attempt in flight, not "
        f"yet recorded, is recorded as interrupted by the next run; what was recorded is kept ({stop.resume_hint()})\n"
    )
    os.write(2, line.encode("utf-8", "replace"))
    stop.exit_now(stop.exit_code(signum))


def foreign_holders() -> list[str]:
    """Who else holds a lock on a watched ledger now: "pid 123 (sqlite3 ledger.db) on ledger.db", one a holder
    (evo/core/liveness.py reads Linux's file locks; an empty list elsewhere)."""
    me = os.getpid()
    out: list[str] = []
    for pid, inode in liveness.lock_holders(set(_files)):
        if pid == me:
            continue
        who = describe(pid) if pid else "a process of another container"
        text = f"{who} on {Path(_files[inode]).name}"
        if text not in out:
            out.append(text)
    return out


def describe(pid: int) -> str:
    """``pid 123 (sqlite3 ledger.db)``: a process named by its pid and the start of its command line."""
    cmd = liveness.command_of(pid)
    return f"pid {pid} ({cmd})" if cmd else f"pid {pid}"
