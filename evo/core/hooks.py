"""A family's own code, called by evo: what it raised or returned wrong as one line naming the family and the hook.

Called wherever evo asks a family's hook something it acts on (``check`` by every proposer, ``evo check`` and
ablation). A hook that raises, or returns what it may not (``check`` returning 42), is a :class:`FamilyHookError`
(a FamilyError: the command prints its one line and stops, what was recorded kept), never a traceback and never a
silent "search space exhausted".

:func:`trace` names the hook about to run for a parent process that watches (``evo check`` runs the family in a
child, evo/family_child.py; ``evo run`` its campaign, evo/run_child.py): a hook that ends the process (``os._exit``,
a segfault) is then named by the parent; :func:`in_flight` adds the attempt the campaign loop judges, whose
recorded verdict such a crash becomes (:func:`crash_reason`, read by the ledger's recovery in the next child).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

from evo.core.errors import FamilyError

TRACE_ENV = "EVO_HOOK_TRACE"  # a file the watching parent reads: "<family>\t<hook>", rewritten in place
CRASH_ENV = "EVO_RUN_CRASHED"  # "<pid>\t<trial number>\t<why>": what `evo run`'s parent saw its last child die of
DONE = "\x00done"
_RECORD = 512
_trace_fd: int | None = None
_last = ""
_current: tuple[str, str] | None = None  # (family, hook) while a hook runs inside calling()
_flight: int | None = None  # the loop's attempt being judged (its trial number), for `evo run`'s watching parent


class FamilyHookError(FamilyError):
    """A family's hook raised or returned something it may not (one line naming the family and the hook)."""


def _what(e: BaseException) -> str:
    msg = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def trace(family: str, hook: str) -> None:
    """Says which family's hook runs now, for the parent that watches (a no-op unless ``EVO_HOOK_TRACE`` is set).
    Called before the hook; written only when it changes (a search calls check() a million times)."""
    global _last
    family = family or _last.partition("\t")[0]  # "" the family named before
    text = f"{family}\t{hook}"
    if text != _last and os.environ.get(TRACE_ENV):
        _last = text
        _write()


def in_flight(number: int | None) -> None:
    """The campaign loop's attempt being judged now (its trial number; None once it is recorded), for `evo run`'s
    watching parent (evo/run_child.py): a crash while it is set is that attempt's recorded verdict. Called by the
    loop when it asks the attempt's trial and when it records it."""
    global _flight
    if number != _flight and os.environ.get(TRACE_ENV):
        _flight = number
        _write()


def _write() -> None:
    """The trace record, rewritten in place: "<family>\t<hook>\t<attempt in flight or empty>"."""
    global _trace_fd
    if _trace_fd is None:
        _trace_fd = os.open(os.environ[TRACE_ENV], os.O_WRONLY)
    text = f"{_last}\t{'' if _flight is None else _flight}"
    os.pwrite(_trace_fd, text.encode("utf-8", "replace")[:_RECORD].ljust(_RECORD, b" "), 0)


@contextlib.contextmanager
def no_exit(family: str, hook: str) -> Iterator[None]:
    """While inside, ``os._exit()`` (which skips every ``except`` and ``finally``) raises FamilyHookError instead:
    a family's module that calls it at import is one line, not a silent exit 0. Called around the import of
    family.py; evo's own exits (stop.py's second signal) hold the real one."""
    real = os._exit

    def refuse(status: int) -> NoReturn:
        raise FamilyHookError(f"family {family}: {hook} called os._exit({status})")

    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


@contextlib.contextmanager
def calling(family: str, hook: str) -> Iterator[None]:
    """Around a call of a family's hook (``launch()``, ``make_inputs()``, ``reference()``, ``check()`` ...): the
    watching parent is told which hook runs (:func:`trace`), a ``sys.exit()`` in it is a FamilyHookError naming the
    family and the hook (not the end of the command with that status and no word), and so is an ``os._exit()``
    where :func:`exits_refused` holds. Called by evo's call sites of the hooks, around the call alone."""
    try:
        with running(family, hook):
            yield
    except SystemExit as e:
        raise FamilyHookError(f"family {family}: {hook} called sys.exit({e.code!r})") from None


@contextlib.contextmanager
def running(family: str, hook: str) -> Iterator[None]:
    """While inside, the family's code runs: the watching parent is told (:func:`trace`), a stop request is raised
    in it at once (evo/stop.py: a hook, or family.py's import, that loops would otherwise hold the first request
    for ever) and :func:`exits_refused` holds ``os._exit``. Called by :func:`calling` and around family.py's
    import."""
    global _current
    trace(family, hook)
    outer = _current
    _current = (family, hook)
    try:
        yield
    finally:
        _current = outer


@contextlib.contextmanager
def exits_refused() -> Iterator[None]:
    """While inside (a command's whole run: cli's _main), ``os._exit()`` called inside a family's hook (within
    :func:`calling`) raises FamilyHookError instead of ending the process with no word (``evo run`` exited 0
    after a launch() called ``os._exit(0)``: a false pass in CI). Anywhere else it is the real one."""
    real = os._exit

    def refuse(status: int) -> NoReturn:
        if _current is None:
            real(status)
        fam, hook = _current
        raise FamilyHookError(f"family {fam}: {hook} called os._exit({status})")

    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


def _read_record(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            text = f.read(_RECORD).decode("utf-8", "replace").rstrip()
    except OSError:
        return []
    return text.split("\t") if text else []


def crash_reason(owner_pid: object, number: int) -> str | None:
    """Why the attempt (trial ``number``, asked by process ``owner_pid``) ended with its process, when `evo run`'s
    watching parent saw that process crash while judging it (evo/run_child.py sets ``EVO_RUN_CRASHED`` for the
    child it starts next); None for any other attempt. Called by the ledger's recovery of attempts left running."""
    pid, _, rest = os.environ.get(CRASH_ENV, "").partition("\t")
    trial, _, why = rest.partition("\t")
    return why if why and pid == str(owner_pid) and trial == str(number) else None


def crashed_trial() -> int | None:
    """The attempt whose crash `evo run`'s watching parent saw before it started this process (``EVO_RUN_CRASHED``)."""
    trial = os.environ.get(CRASH_ENV, "").split("\t")[1:2]
    return int(trial[0]) if trial and trial[0].isdigit() else None


def read_trace(path: str) -> tuple[str, str]:
    """(family, hook) the child last named; ("", "") when it named none."""
    fields = _read_record(path) + ["", ""]
    return fields[0], fields[1]


def read_flight(path: str) -> int | None:
    """The attempt the child's campaign loop was judging when it last wrote the trace (:func:`in_flight`), or None."""
    fields = _read_record(path)
    return int(fields[2]) if len(fields) > 2 and fields[2].strip().isdigit() else None


def check_genome(family: Any, genome: Mapping[str, Any], geometries: Sequence[Any]) -> str | None:
    """``family.check(genome, geometries)``: why the genome is invalid, or None; FamilyHookError when check()
    raises or returns anything but a reason (a str) or None."""
    try:
        with calling(family.name, "check()"):
            why = family.check(genome, geometries)
    except (KeyboardInterrupt, FamilyError):
        raise
    except Exception as e:  # noqa: BLE001 - the family's code: one line, whatever it raised
        raise FamilyHookError(f"family {family.name}: check() raised {_what(e)}") from None
    return reason(family, "check()", why)


def reason(family: Any, hook: str, why: Any) -> str | None:
    """``why`` as a hook that answers "what is wrong, or None" must give it; FamilyHookError naming the family and
    the hook for anything else (42, False, a list)."""
    if why is not None and not isinstance(why, str):
        raise FamilyHookError(
            f"family {family.name}: {hook} returned {type(why).__name__} {str(why)[:60]!r}: it must return a reason "
            "(a str) when something is wrong, or None"
        )
    return why


def check_geometry(family: Any, params: Mapping[str, Any]) -> str | None:
    """``family.check_geometry(params)`` held to the same rules as :func:`check_genome`."""
    try:
        with calling(family.name, "check_geometry()"):
            why = family.check_geometry(params)
    except (KeyboardInterrupt, FamilyError):
        raise
    except Exception as e:  # noqa: BLE001 - the family's code
        raise FamilyHookError(f"family {family.name}: check_geometry() raised {_what(e)}") from None
    return reason(family, "check_geometry()", why)
