"""`evo check` runs the family's code in a child process, so that whatever that code does ends in one line.

A family's Python (family.py's import, check(), reference(), make_inputs(), ...) may do what no ``except`` can
catch: ``os._exit(0)`` (evo check would exit 0 with no output: a false pass in CI), a segfault in an extension,
an endless loop that a stop request never interrupts. So the command re-runs itself as a child (``EVO_CHECK_CHILD``
set) that does the checks and says which hook runs (evo/core/hooks.py's trace file); the parent relays its output,
and when the child ends without finishing (any exit status, any signal) prints one FAIL line naming the family,
the hook and what happened, with exit status 1. A stop request (SIGINT, SIGTERM) ends the child at once: a check
records nothing, so nothing is lost; the command then exits as every stopped command does (130 / 143).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import IO

from evo.core.hooks import DONE, TRACE_ENV, read_trace

CHILD_ENV = "EVO_CHECK_CHILD"


def in_child() -> bool:
    """Whether this process is the child that runs the checks (called by the check command first)."""
    return bool(os.environ.get(CHILD_ENV))


def _relay(src: IO[bytes], dst: IO[str]) -> None:
    """Copies the child's output line by line to ours (sys.stdout as it is now: a test's capture included)."""
    for raw in iter(src.readline, b""):
        dst.write(raw.decode("utf-8", "replace"))
        dst.flush()


def ended_how(rc: int) -> str:
    """What a child's exit status says happened, for the FAIL line."""
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        return (
            f"crashed ({sig})"
            if -rc in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
            else (f"was ended by {sig}")
        )
    return f"ended the process with exit status {rc} (sys.exit or os._exit in the family's code)"


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """The child's exit status; a stop request of ours kills it at once and is raised (StopRequested)."""
    from evo import stop

    while True:
        try:
            return proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
        if stop.requested() is not None:
            proc.kill()
            proc.wait()
            stop.check()


def run_in_child(argv: Sequence[str]) -> int:
    """Runs ``evo <argv>`` (a check) as a child; its exit status, or 1 after one FAIL line when the family's code
    ended it. Called by the check command in the parent."""
    fd, trace_path = tempfile.mkstemp(prefix="evo-check-trace-")
    os.close(fd)
    env = {**os.environ, CHILD_ENV: "1", TRACE_ENV: trace_path, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evo", *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C reaches us; we end the child (it may ignore signals)
        )
        assert proc.stdout is not None and proc.stderr is not None
        relays = [
            threading.Thread(target=_relay, args=(proc.stdout, sys.stdout), daemon=True),
            threading.Thread(target=_relay, args=(proc.stderr, sys.stderr), daemon=True),
        ]
        for t in relays:
            t.start()
        try:
            rc = _wait(proc)
        finally:
            for t in relays:
                t.join(timeout=5)
        family, hook = read_trace(trace_path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(trace_path)
    if hook == DONE:
        return rc
    who = f"family {family}" if family else "the family"
    print(f"evo check: FAIL: {who}: {hook or 'its code'} {ended_how(rc)}")
    return 1
