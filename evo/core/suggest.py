""" "Did you mean": the closest known name to a mistyped one (a subcommand, a gate, a config key, a proposer).

Called where a name given by the user is refused (the CLI's parser, evo/config.py, `evo replay --gate`), so that
the one-line error names the likely intent: ``stauts`` -> ``status``, ``perff`` -> ``perf``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The known name closest to ``word`` (difflib's ratio, at least 0.6), None where nothing is close."""
    found = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'status'?)`` to append to an error line, or "" where nothing is close."""
    near = closest(word, choices)
    return f" (did you mean {near!r}?)" if near is not None else ""
