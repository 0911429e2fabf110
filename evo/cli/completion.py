"""`evo completion bash|zsh|tcsh`: a shell completion script for evo, written from its own argparse parser.

shtab writes the script once, statically: a Tab press runs no Python (argcomplete would start evo, and import
Optuna, on every press). Installed with, e.g., ``evo completion bash > ~/.local/share/bash-completion/completions/evo``
or ``evo completion zsh > "${fpath[1]}/_evo"``.
"""

from __future__ import annotations

import sys

from evo.cli.common import Command, _fail

SHELLS = ("bash", "zsh", "tcsh")


def _completion_parser(sub) -> None:
    c = sub.add_parser(
        "completion",
        help="print a shell completion script (evo completion bash > ~/.local/share/bash-completion/completions/evo)",
    )
    c.add_argument("shell", choices=SHELLS, help="the shell the script is for")


def completion(shell: str) -> int:
    """Print the completion script of evo's whole parser (every command, every option) for ``shell``."""
    from evo.cli import _parser

    try:
        import shtab
    except ImportError:
        return _fail("completion needs shtab (pip install shtab), a dependency of evo-kernels")
    sys.stdout.write(shtab.complete(_parser(), shell=shell))
    return 0


COMPLETION = Command(_completion_parser, lambda args: completion(args.shell), campaign=False)
