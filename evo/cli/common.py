"""What the `evo` command's groups share: the parser class (one-line errors, exit 2), the failure line, the ledger
opened for a command, and the Command entry each group declares its subcommands with."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

EXIT_USAGE = 2


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
        sys.stderr.write(f"evo: {message} (see evo --help)\n")
        sys.exit(EXIT_USAGE)


def campaign_args(p: argparse.ArgumentParser, backend: bool = False) -> None:
    """The arguments every command on one campaign takes: its config, a storage override, and a backend one."""
    p.add_argument("config", help="campaign YAML")
    p.add_argument("--storage", help="override the config's storage URL")
    if backend:
        from evo.backends import BACKENDS

        p.add_argument("--backend", choices=BACKENDS, help="override the config's backend")


def _fail(msg: str) -> int:
    sys.stderr.write(f"evo: {msg}\n")
    return EXIT_USAGE


def _open_ledger(cfg, readonly: bool = False):
    """The campaign's ledger; ``readonly`` (status, log, export): opened so that nothing can be written to it."""
    from evo.ledger.ledger import Ledger

    return Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=readonly)


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
    from urllib.parse import unquote

    if not storage.startswith("sqlite:///"):
        return None
    raw = storage[len("sqlite:///") :].split("?", 1)[0]
    for path in (raw, unquote(raw)):
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                st = os.stat(path + suffix)
            except (OSError, ValueError):
                continue
            if (
                stat.S_ISFIFO(st.st_mode)
                or stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode)
                or (stat.S_ISSOCK(st.st_mode))
            ):
                kind = (
                    "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
                )
                return f"{path + suffix} is {kind}, not a ledger file; give the storage a path to a file (or a new one)"
    return None


def _existing(cfg) -> bool:
    if cfg.storage.startswith("sqlite:///"):  # a folder or a damaged file there is the ledger check's to name
        return Path(cfg.storage[len("sqlite:///") :]).exists()
    return True
