"""What the `evo` command's groups share: the parser class (one-line errors, exit 2), the failure line, the ledger
opened for a command, and the Command entry each group declares its subcommands with."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

# evo's exit codes (README "Exit codes"): a CI job tells "checked and clean" from "could not check"
EXIT_OK = 0  # done, and what was checked is clean
EXIT_PROBLEMS = 1  # done, and it found problems (a failed check, a sanitizer error, a wrong selfcheck verdict)
EXIT_USAGE = 2  # bad input: arguments, config, an unknown name (with a "did you mean"), a missing ledger
EXIT_UNCHECKED = 3  # could not check: the check did not run here (no GPU, no compute-sanitizer, faults unverified)
EXIT_CODES = """exit codes:
  0    done; what was checked is clean
  1    done; problems found (check failed, sanitizer errors, a wrong selfcheck verdict, a broken family)
  2    bad input: arguments, config, an unknown name (with a "did you mean"), no ledger yet
  3    could not check here: sanitize without a GPU or compute-sanitizer, selfcheck with faults unverified,
       check on a Kernel Tuner cache (no kernel)
  130  stopped by SIGINT, 143 by SIGTERM (what was recorded is kept; the same command resumes)"""


@dataclass(frozen=True)
class Command:
    """One `evo` subcommand, declared in its group's module (campaign.py, report.py, families.py) and named in
    evo/cli/__init__.py's ``COMMANDS``, the dispatch table, whose order is `evo --help`'s.

    ``add(sub)`` declares its parser on evo's subparsers (when the parser is assembled, before any argument is read).
    ``run`` is called with the parsed arguments: ``run(cfg, args)`` after the campaign config is loaded when
    ``campaign`` (the command takes a campaign YAML and its --backend and --storage overrides), else ``run(args)``.
    It returns evo's exit code; the errors every command shares (config, ledger, storage, files) are _main's."""

    add: Callable[[Any], Any]
    run: Callable[..., int]
    campaign: bool = True


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        sys.stderr.write(f"evo: {message}{self._suggestion(message)} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)

    def _suggestion(self, message: str) -> str:
        """A "did you mean" for a mistyped subcommand or choice (`evo stauts`) or option (`--attempt`)."""
        from evo.core.suggest import did_you_mean

        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            return did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m and m.group(1).startswith("-"):
            options = [o for a in self._actions for o in a.option_strings]
            return did_you_mean(m.group(1).split("=", 1)[0], options)
        return ""


# --backend's choices are read when used (argparse's metavar keeps building the parser from loading the backends'
# plug-ins; its %(choices)s, from reading them until --help asks)
BACKEND_HELP = "override the config's backend: %(choices)s"


def campaign_args(p: argparse.ArgumentParser, backend: bool = False) -> None:
    """The arguments every command on one campaign takes: its config, a storage override, and a backend one."""
    p.add_argument("config", help="campaign YAML")
    p.add_argument("--storage", help="override the config's storage URL")
    if backend:
        from evo.backends import BACKENDS

        p.add_argument("--backend", choices=BACKENDS, metavar="NAME", help=BACKEND_HELP)


@dataclass
class Result:
    """The command's result for --json, filled while it runs (:func:`result`, :func:`_fail`); printed by _main as
    one JSON document on stdout, with the exit code, once the command returns."""

    doc: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # the first failure line


RESULT = Result()


def result(**fields: Any) -> None:
    """Put fields in the command's JSON document (printed only under --json; a text run ignores them)."""
    RESULT.doc.update(fields)


def jsonable(obj: Any) -> Any:
    """``obj`` with NaN and infinities as null (JSON has neither), tuples as lists, keys as strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def json_arg(p: argparse.ArgumentParser) -> None:
    """--json on a command whose result a script reads."""
    p.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout (text and warnings go to stderr)"
    )


def _fail(msg: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"evo: {msg}\n")
    if RESULT.error is None:
        RESULT.error = msg
    return code


def _open_ledger(cfg, readonly: bool = False):
    """The campaign's ledger; ``readonly`` (status, log, export): opened so that nothing can be written to it."""
    from evo.ledger.storage import open_ledger

    if readonly:
        return open_ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True)
    return open_ledger(cfg.storage, cfg.campaign, cfg.family.knobs)


def _damaged(led) -> None:
    note = led.damaged_note()
    if note:
        sys.stderr.write(f"evo: warning: {note}\n")


def storage_file_problem(storage: str) -> str | None:
    """Why the SQLite ledger path cannot be opened without hanging or reading a stream (a FIFO blocks an open
    forever, a device is read without end): one line, or None. Called before any ledger is opened; a folder there
    is the ledger's own check to name."""
    import os
    import stat

    from evo.ledger.storage_url import StorageURLError, sqlite_path

    try:
        path = sqlite_path(storage)
    except StorageURLError:  # the config refused it already; opening it says so
        return None
    if path is None:
        return None
    for suffix in ("", "-journal", "-wal", "-shm"):
        where = f"{path}{suffix}"
        try:
            st = os.stat(where)
        except (OSError, ValueError):
            continue
        mode = st.st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            return f"{where} is {kind}, not a ledger file; give the storage a path to a file (or a new one)"
    return None


def _existing(cfg) -> bool:
    from evo.ledger.storage_url import sqlite_path

    path = sqlite_path(cfg.storage)  # a folder or a damaged file there is the ledger check's to name
    return path.exists() if path is not None else True
