"""`evo run` runs its campaign in a watched child process, so that a family's code that crashes the process is a
recorded verdict and the campaign goes on.

A family's Python (launch(), check(), make_inputs(), an extension it loads) runs inside the campaign's process, and
a segfault there is beyond any ``except``: before, ``evo run`` died by SIGSEGV with no word and the attempt was
left for the next run to record as interrupted (and to propose again, to crash again). So the command, started as a
process (``evo run ...``, ``python -m evo run ...``), runs the campaign as a child (``EVO_RUN_CHILD`` set) and
watches it. The child names the family's hook it calls and the attempt it judges (evo/core/hooks.py's trace file).
When the child is ended by a crash signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) while judging an attempt, this
parent says so in one line and starts the campaign again with ``EVO_RUN_CRASHED`` set: the resumed child records
that attempt as ``error: crash`` with the reason (the signal and the hook), never as interrupted, and goes on; what
was recorded is never touched. A crash outside an attempt (family.py's import, the baseline, the proposer's
check()) would only crash again: one line naming the family and the hook, exit 2. So would the same attempt twice.

Stops: this parent takes SIGINT and SIGTERM and passes each on to the child once (the child is in its own process
group, so a Ctrl-C reaches it once, through here); the child stops as every `evo run` does and its exit status is
ours. Should this parent be killed (SIGKILL), the kernel kills the child too (PR_SET_PDEATHSIG): the ledger is crash
safe, the next run records what was left running. ``EVO_RUN_WATCHED=0`` runs the campaign in the one process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from evo.core.hooks import CRASH_ENV, TRACE_ENV, read_flight, read_trace
from evo.core.liveness import die_with_parent

CHILD_ENV = "EVO_RUN_CHILD"
WATCH_ENV = "EVO_RUN_WATCHED"  # "0": no watched child
CRASHES = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)


class _Watch:
    """The child being watched and the stop requests this parent took (SIGINT / SIGTERM), in order."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.stops: list[int] = []

    def take(self, signum: int, frame: object) -> None:
        """Our SIGINT / SIGTERM handler: remembered, and passed on to the child once."""
        self.stops.append(signum)
        self.forward(signum)

    def forward(self, signum: int) -> None:
        if self.child is not None and self.child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child.pid, signum)


def wanted(argv: Sequence[str]) -> bool:
    """Whether this process (the command as started by the user, argv without the program) is `evo run`, to be run
    in a watched child. Called first by ``evo.cli.main`` when evo is the process (not a library call)."""
    if os.environ.get(CHILD_ENV) or os.environ.get(WATCH_ENV) == "0" or sys.platform != "linux":
        return False
    command = next((a for a in argv if not a.startswith("-")), None)  # -q / -v / --version take no value
    return command == "run" and "-h" not in argv and "--help" not in argv


def _start(argv: Sequence[str], env: dict[str, str], watch: _Watch) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evo", *argv],
        env=env,
        process_group=0,  # a Ctrl-C reaches this parent only; it is passed on once
        preexec_fn=die_with_parent,
    )
    watch.child = proc
    for signum in watch.stops[-1:]:  # one taken while the child was being started
        watch.forward(signum)
    return proc


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def supervise(argv: Sequence[str]) -> int:
    """Runs ``evo <argv>`` (an `evo run`) as a watched child until it ends other than by a crash in an attempt; its
    exit status (or 2 after one line when the family's code crashed it outside an attempt). Called by
    ``evo.cli.main`` in place of the command."""
    from evo import stop

    stop.set_command("run")
    watch = _Watch()
    for sig in stop.SIGNALS:
        signal.signal(sig, watch.take)
    early = stop.requested()  # taken by evo's own handler (evo/__init__.py installs it at import) before ours
    if early is not None:
        watch.stops.append(early)
    fd, trace = tempfile.mkstemp(prefix="evo-run-trace-")
    os.close(fd)
    env = {**os.environ, CHILD_ENV: "1", TRACE_ENV: trace}
    env.pop(CRASH_ENV, None)
    last: int | None = None
    try:
        while True:
            if watch.stops:
                return _stopped(watch.stops[0])
            proc = _start(argv, env, watch)
            rc = proc.wait()
            if watch.stops:  # the child said it stopped (130 / 143), or it ended before it could take the signal
                return rc if rc in _stop_codes() else _stopped(watch.stops[0])
            if rc >= 0 or -rc not in CRASHES:
                return rc if rc >= 0 else _ended(-rc)
            family, hook = read_trace(trace)
            number = read_flight(trace)
            what = _crash_what(family, hook, -rc)
            if number is None or number == last:
                where = "outside an attempt" if number is None else f"again on attempt #{number}"
                print(f"evo: {what} {where}; what was recorded is kept", file=sys.stderr, flush=True)
                return 2
            print(
                f"evo: {what} on attempt #{number}: recorded as error: crash; the campaign goes on",
                file=sys.stderr,
                flush=True,
            )
            env[CRASH_ENV] = f"{proc.pid}\t{number}\t{what}"
            last = number
            with open(trace, "wb"):  # the next child starts with a blank trace
                pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(trace)


def _crash_what(family: str, hook: str, signum: int) -> str:
    """ "family X: launch() crashed (SIGSEGV)": the family and the last of its hooks the child named."""
    who = f"family {family}" if family else "the campaign's process"
    return f"{who}: {hook or 'its code'} crashed ({_name(signum)})" if family else f"{who} crashed ({_name(signum)})"


def _stop_codes() -> tuple[int, ...]:
    from evo import stop

    return tuple(stop.exit_code(s) for s in stop.SIGNALS)


def _stopped(signum: int) -> int:
    """A stop request the child never reported (it ended, or had not started, before it took the signal)."""
    from evo import stop

    sys.stderr.write(f"evo: stopped by {stop.name(signum)}; what was recorded is kept ({stop.resume_hint()})\n")
    return stop.exit_code(signum)


def _ended(signum: int) -> int:
    """The child ended by another program's signal (SIGKILL by the OOM killer, ...): said, and its status."""
    sys.stderr.write(f"evo: the campaign's process was ended by {_name(signum)}; what was recorded is kept\n")
    return 128 + signum
