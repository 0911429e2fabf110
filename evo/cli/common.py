"""What the `evo` command's groups share: the parser class (one-line errors, exit 2), the failure line, the ledger
opened for a command, and the Command entry each group declares its subcommands with."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
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


def _existing(cfg) -> bool:
    from evo.ledger.storage_url import sqlite_path

    path = sqlite_path(cfg.storage)  # a folder or a damaged file there is the ledger check's to name
    return path.exists() if path is not None else True
