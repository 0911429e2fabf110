"""Who `evo export` signs its patches as: the user's git identity, as `git commit` would take it.

Called once per export (by evo/report/export.py's git calls, which run in a scratch repository where the user's
repository config is not seen): ``GIT_AUTHOR_NAME``/``GIT_AUTHOR_EMAIL`` where set, else ``git config user.name`` /
``user.email`` read in the folder evo runs from (its repository's config, then the global one), else the old
default ``evo <evo@localhost>`` (a machine with no git identity). The committer is the same person.
"""

from __future__ import annotations

import functools
import os
import subprocess

DEFAULT = ("evo", "evo@localhost")


def _git_config(key: str) -> str | None:
    try:
        r = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    value = r.stdout.strip()
    return value if r.returncode == 0 and value else None


@functools.lru_cache(maxsize=4)
def _author_in(cwd: str) -> tuple[str, str]:
    name = os.environ.get("GIT_AUTHOR_NAME") or _git_config("user.name") or DEFAULT[0]
    email = os.environ.get("GIT_AUTHOR_EMAIL") or _git_config("user.email") or DEFAULT[1]
    return name, email


def patch_author() -> tuple[str, str]:
    """(name, email) for the exported patches' From: line."""
    return _author_in(os.getcwd())


def author_env() -> dict[str, str]:
    """The git environment that signs a commit as :func:`patch_author`."""
    name, email = patch_author()
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
