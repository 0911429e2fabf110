"""Stop requests (SIGINT, SIGTERM) for the evo command: honoured at the next safe point, wherever they land.

The handler only records the request. Raising KeyboardInterrupt from it (what Python does for SIGINT) lands in
whatever Python code runs at that moment, e.g. a SQLAlchemy garbage-collection callback, where Python prints
"Exception ignored" and carries on: a campaign went on for 132 attempts after a SIGTERM. Instead the campaign loop,
its set-up and the command itself call :func:`check` where stopping loses nothing, and :func:`interruptible`
marks the few places that only wait on a child process (the sanitizer), where the handler may raise at once; so
does a family's hook while it runs (evo/core/hooks.py ``calling``: a launch() that loops honours the first request).
A second request stops at once, as a kill would (the ledger is crash safe at every moment).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_requested: int | None = None
_waiting = 0  # depth of interruptible() regions
_command = ""  # the evo subcommand running (set_command), for what the stop line advises
RESUMING = ("run", "worker")  # the commands that the same command line resumes


class StopRequested(KeyboardInterrupt):
    """Raised at a safe point after a stop request; a KeyboardInterrupt, so what handles Ctrl-C handles it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {name(signum)}")
        self.signum = signum


def name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def set_command(cmd: str | None) -> None:
    """The subcommand this process runs (called once its arguments are parsed): the stop lines advise for it."""
    global _command
    _command = cmd or ""


def resume_hint() -> str:
    """What a stopped command's line advises: only run and worker resume; the others start over."""
    if not _command or _command in RESUMING:
        return "the same command resumes a campaign"
    if _command in ("replay", "ablate", "sanitize", "selfcheck"):
        return f"evo {_command} starts over when run again"
    return f"nothing to resume: run evo {_command} again"


_exit = os._exit  # the real one, even while a family's import runs under evo.core.hooks.no_exit


def _handler(signum: int, frame: object) -> None:
    global _requested
    if _requested is not None:
        os.write(2, f"evo: stopped at once by a second {name(signum)} ({resume_hint()})\n".encode())
        _exit(128 + signum)
    _requested = signum
    if _waiting or _in_family_hook():
        raise StopRequested(signum)


def _in_family_hook() -> bool:
    """Whether a family's hook runs now (evo/core/hooks.py ``calling``): its code records nothing, so a stop request
    is raised in it at once (a hook that loops would otherwise hold the first request for ever). Looked up, not
    imported: stop.py imports nothing of evo."""
    hooks = sys.modules.get("evo.core.hooks")
    return hooks is not None and getattr(hooks, "_current", None) is not None


def install() -> None:
    """Take SIGINT and SIGTERM (main thread only; idempotent)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        if signal.getsignal(sig) is not _handler:
            signal.signal(sig, _handler)


def installed(sig: int) -> bool:
    """Whether evo's handler takes ``sig`` in this process (the evo command; not a library user's process)."""
    return signal.getsignal(sig) is _handler


def exit_now(code: int) -> None:
    """Ends the process at once (the real ``os._exit``), as a second request does: for evo/ledger/lock_watch.py."""
    _exit(code)


def requested() -> int | None:
    """The signal of the pending stop request, or None."""
    return _requested


def check() -> None:
    """A safe point: raise StopRequested if a stop was requested."""
    if _requested is not None:
        raise StopRequested(_requested)


def exit_code(signum: int) -> int:
    return 128 + signum  # what a shell reports for a process a signal ended: 130 (SIGINT), 143 (SIGTERM)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A region that only waits (on a child process): a stop request raises StopRequested in it at once."""
    global _waiting
    check()
    _waiting += 1
    try:
        yield
    finally:
        _waiting -= 1


def _evo_command() -> bool:
    """Whether this process is the evo command (``evo ...`` or ``python -m evo ...``), not a library user."""
    argv = list(getattr(sys, "orig_argv", []) or [])
    if "-m" in argv:
        i = argv.index("-m")
        return argv[i + 1 : i + 2] == ["evo"]
    return len(argv) > 1 and os.path.basename(argv[1]) in ("evo", "evo.exe")


def reset() -> None:
    """Forget a stop request and the command (tests)."""
    global _requested, _command
    _requested = None
    _command = ""
