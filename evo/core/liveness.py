"""Process liveness, written once: is the process that left a record behind still running?

Three places ask it after a kill -9: the ledger (evo/ledger/sessions.py: a RUNNING trial or a session whose owner
died is recovered at once, not after the heartbeat's grace period), the SQLite file's creation (evo/ledger/
sqlite_file.py: a killed creator's temporary file is removed) and the SM clock lock (harness/device.py: a marker
left by a killed process is undone on the next start). A process is named by its pid and its start time
(clock ticks since boot, from /proc), so a pid reused by another process reads as the old one gone. Every answer
leans towards "alive" where /proc cannot tell: a live process taken for dead would have its work undone.

Here, in the core, because harness may import the core and nothing else of evo (pyproject's import contracts).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_GONE = ("Z", "X")  # zombie, dead: exited, only not yet reaped
_ME: dict[str, Any] = {}  # identity(): this process's, recomputed after a fork


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a process from /proc/<pid>/stat, or None where /proc can't
    tell (no such process, no /proc)."""
    text = _read(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    rest = text[text.rindex(")") + 1 :].split()  # after the command name, which may hold spaces and parentheses
    return (rest[0], rest[19]) if len(rest) > 19 else None


def process_start(pid: int) -> str | None:
    """The start time that names process ``pid`` with its pid (None where /proc can't tell); written down by a
    process that may be killed, for :func:`exited` to be asked about later."""
    st = proc_stat(pid)
    return st[1] if st else None


def exited(pid: int, start: str | None) -> bool:
    """True only when process ``pid`` (started at ``start``, where known) surely exited: no such pid, a zombie, or
    the pid now names a process started at another time. Called on this host's pids only (another host's or
    container's pid says nothing here: see :func:`certainly_dead`)."""
    if not 0 < pid < 2**31:  # no process has it (0 and below would name process groups)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, another user's
    st = proc_stat(pid)
    if st is None:
        return False
    state, started = st
    return state in _GONE or (start is not None and started != start)


def identity() -> dict[str, Any]:
    """This process as a record may name it: host, pid, start time, the kernel's boot id and the pid namespace (a
    pid means this process only on the same kernel, in the same namespace). A copy; recomputed after a fork."""
    pid = os.getpid()
    if _ME.get("pid") != pid:
        try:
            ns: str | None = os.readlink("/proc/self/ns/pid")
        except OSError:
            ns = None
        _ME.clear()
        _ME.update(
            host=socket.gethostname(),
            pid=pid,
            start=process_start(pid),
            boot=_read("/proc/sys/kernel/random/boot_id"),
            pidns=ns,
        )
    return dict(_ME)


def certainly_dead(owner: Mapping[str, Any]) -> bool:
    """True only when the process an :func:`identity` record names surely exited: same kernel and pid namespace as
    this process, and its pid gone or reused.

    Whatever cannot be told from here (another host or container, no /proc, no start time) is False: the caller's
    heartbeat decides. Owned by this very process: True only for this process's record (the caller checked that
    none of its own holders still holds what the record claims, so it was abandoned).
    """
    me = identity()
    pid = owner.get("pid")
    if not me["boot"] or not me["pidns"] or owner.get("boot") != me["boot"] or owner.get("pidns") != me["pidns"]:
        return False
    if not isinstance(pid, int) or pid <= 0 or not owner.get("start"):
        return False
    if pid == me["pid"]:
        return bool(owner.get("start") == me["start"])
    return exited(pid, owner["start"])


def lock_holders(inodes: set[int]) -> list[tuple[int, int]]:
    """(pid, inode) of each POSIX lock (SQLite's) held on a file of ``inodes`` now, from Linux's /proc/locks (pid 0:
    a process of another pid namespace); empty where /proc can't tell. Waiters are not holders."""
    text = _read("/proc/locks") or ""
    out: list[tuple[int, int]] = []
    for row in text.splitlines():
        fields = row.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        where = fields[5].rsplit(":", 1)
        if len(where) == 2 and where[1].isdigit() and int(where[1]) in inodes and fields[4].lstrip("-").isdigit():
            out.append((max(int(fields[4]), 0), int(where[1])))
    return out


def can_see_locks() -> bool:
    """Whether this system shows its file locks (Linux's /proc/locks)."""
    return os.path.exists("/proc/locks")


def command_of(pid: int) -> str:
    """The start of process ``pid``'s command line ("sqlite3 ledger.db"), "" where it can't be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        raw = ""
    argv = [a for a in raw.split("\0") if a]
    return " ".join(" ".join([os.path.basename(argv[0]), *argv[1:]]).split())[:80] if argv else ""


_PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent(parent: int = 0) -> None:
    """This process gets SIGKILL when its parent dies (Linux; elsewhere nothing). Called in a child as it starts:
    `evo run`'s campaign process (its watching parent's preexec_fn, a `kill -9` of evo run) and the compile-ahead
    processes (evo/loop/prefetch.py: a pool process never sees its parent die, and after a segfault of the
    campaign process one lived on holding `evo run`'s stdout). ``parent``: its pid, when the child may start after
    the parent died (then it ends at once)."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:  # it died before the request was made
        os._exit(0)
