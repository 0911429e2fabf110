"""The `evo` command: run, status, log, table, families.

Every user error is one line on stderr and exit code 2; nothing recorded in a
campaign is touched by a failing command.

The commands live by group, each module declaring its subcommands' parsers and the functions that run them
(``Command`` entries, evo/cli/common.py): campaign.py (run, worker, replay, sanitize, ablate, selfcheck: the ones
that drive the loop), report.py (status, log, table, export: read a ledger), families.py (families, config, check,
new, idea, ideas), ktcache.py (kt-cache: a sweep as a Kernel Tuner cache), peers.py (peers: the champion beside its
peer kernels again).
Here: ``COMMANDS``, the dispatch table (its order is `evo --help`'s), the parser assembled from
it, and ``main``. A new command is a ``Command`` in its group's module and one line in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys

from evo.cli import campaign, families, ktcache, peers, report
from evo.cli.common import EXIT_CODES, EXIT_USAGE, RESULT, Command, _fail, _Parser, jsonable, storage_file_problem
from evo.cli.completion import COMPLETION
from evo.core.plugins import PluginError

__all__ = ["COMMANDS", "EXIT_USAGE", "Command", "main"]

COMMANDS: dict[str, Command] = {
    "run": campaign.RUN,
    "worker": campaign.WORKER,
    "status": report.STATUS,
    "log": report.LOG,
    "table": report.TABLE,
    "export": report.EXPORT,
    "replay": campaign.REPLAY,
    "sanitize": campaign.SANITIZE,
    "ablate": campaign.ABLATE,
    "peers": peers.PEERS,
    "selfcheck": campaign.SELFCHECK,
    "families": families.FAMILIES,
    "config": families.CONFIG,
    "check": families.CHECK,
    "new": families.NEW,
    "idea": families.IDEA,
    "ideas": families.IDEAS,
    "kt-cache": ktcache.KT_CACHE,
    "completion": COMPLETION,
}


def _parser() -> argparse.ArgumentParser:
    from evo import __version__

    p = _Parser(prog="evo", description="Evolutionary, gated search over CUDA kernel variants.", epilog=EXIT_CODES)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--version", action="version", version=f"evo {__version__}")
    _verbosity(p, argparse.SUPPRESS)
    p.set_defaults(quiet=0, verbose=0)
    sub = p.add_subparsers(dest="cmd", metavar="command", parser_class=_Parser)
    for command in COMMANDS.values():
        command.add(sub)
    for sp in sub.choices.values():  # -q / -v before or after the command's name
        _verbosity(sp, argparse.SUPPRESS)
    return p


def _verbosity(p: argparse.ArgumentParser, default: object) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "-q", "--quiet", action="count", default=default, help="print nothing but errors, warnings and --json"
    )
    g.add_argument("-v", "--verbose", action="count", default=default, help="more detail (Optuna's log; -vv: debug)")


def _cap_blas_threads() -> None:
    """One OpenBLAS thread per evo process unless the user set a number.

    evo's own linear algebra is small (the surrogate's model conditions on at most 256 genomes), and OpenBLAS's
    default of one busy-waiting thread per core makes the workers sharing a host, and the process timing the
    kernels, fight over the cores: on the 2-GPU H200 host two workers spent ~0.4 s per attempt more than one.
    It must be set before numpy is first imported, so it is the first thing the command does."""
    import os

    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    from evo import run_child, stop

    if argv is None and run_child.wanted(sys.argv[1:]):  # the campaign in a watched child (evo/run_child.py)
        return run_child.supervise(sys.argv[1:])
    if argv is None:
        # SIGINT and SIGTERM (a `timeout` around evo, a batch system) are stop requests, honoured at the next
        # safe point (evo/stop.py); the exit code says which: 130 or 143
        stop.install()
    try:
        code = _main(argv)
        stop.check()  # a request during the command's last steps still says it was stopped
        return code
    except PluginError as e:  # a backend or proposer plug-in that cannot load, met as --backend was parsed
        return _fail(str(e))
    except BrokenPipeError:  # `evo status | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt as e:  # a stop request at a safe point (or a Ctrl-C before evo took SIGINT)
        signum = getattr(e, "signum", signal.SIGINT)
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        sys.stderr.write(f"evo: stopped by {stop.name(signum)}; what was recorded is kept ({stop.resume_hint()})\n")
        return stop.exit_code(signum)


def _main(argv: list[str] | None = None) -> int:
    from evo import stop
    from evo.core.hooks import exits_refused

    _cap_blas_threads()
    args = _parser().parse_args(argv)
    stop.set_command(args.cmd)
    stop.check()
    if args.cmd is None:
        _parser().print_help()
        return EXIT_USAGE
    _set_verbosity(args.verbose)
    RESULT.doc, RESULT.error = {}, None
    as_json = bool(getattr(args, "json", False))
    # --json: everything the command prints goes to stderr, the one document to stdout; -q: text output dropped
    with contextlib.ExitStack() as stack:
        stack.enter_context(exits_refused())  # os._exit in a family's hook: one line (evo/core/hooks.py)
        if args.quiet:
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
        elif as_json:
            stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        code = _dispatch(args)
    if as_json:
        doc = {"command": args.cmd, "exit_code": code, **RESULT.doc}
        if RESULT.error is not None:
            doc["error"] = RESULT.error
        sys.stdout.write(json.dumps(jsonable(doc), indent=2, allow_nan=False) + "\n")
    return code


def _set_verbosity(verbose: int) -> None:
    """-v: Optuna's own log at INFO and evo's loggers at INFO; -vv: DEBUG. Default: warnings only."""
    if not verbose:
        return
    import logging

    import optuna

    import evo.ledger.ledger  # noqa: F401  (it sets Optuna's verbosity when imported: first, then -v's)
    import evo.search.optuna_samplers  # noqa: F401  (likewise)

    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, format="evo: %(name)s: %(message)s")
    optuna.logging.set_verbosity(level)


def _dispatch(args: argparse.Namespace) -> int:
    """The command, with the errors every command shares turned into one line and exit 2."""
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    from evo import stop
    from evo.config import ConfigError, load_config
    from evo.core.family import FamilyError
    from evo.ledger.ledger import LedgerError

    cfg = None
    try:
        command = COMMANDS[args.cmd]
        if not command.campaign:
            return command.run(args)
        cfg = load_config(
            args.config,
            backend_override=getattr(args, "backend", None),
            storage_override=getattr(args, "storage", None),
        )
        stop.check()
        problem = storage_file_problem(cfg.storage)
        if problem:  # refused before anything opens it: a FIFO would block the open forever
            return _fail(problem)
        return command.run(cfg, args)
    except ConfigError as e:
        return _fail(f"config error: {e}")
    except FamilyError as e:  # a family's hook raised or returned what it may not (evo/core/hooks.py)
        return _fail(str(e))
    except PluginError as e:  # a backend or proposer plug-in that cannot load (evo/core/plugins.py)
        return _fail(str(e))
    except LedgerError as e:
        return _fail(str(e))
    except (SQLAlchemyError, StorageInternalError) as e:  # the storage failed under a command (disk full, gone)
        from evo.ledger.rdb import first_line as _first_line
        from evo.ledger.storage_url import safe_url

        where = safe_url(cfg.storage) if cfg is not None else "the storage"
        return _fail(f"{where}: {_first_line(e)}; what was committed before is kept")
    except BrokenPipeError:  # `evo status | head`: main() says nothing more
        raise
    except OSError as e:  # a file the command writes or reads (disk full, read-only, no such folder)
        what = f"{e.filename}: " if e.filename else ""
        return _fail(f"{what}{e.strerror or type(e).__name__} ({type(e).__name__}); nothing recorded was lost")


if __name__ == "__main__":
    sys.exit(main())
