"""Writing an idea's patch file into a family's ``ideas/`` folder without ever losing one of the user's files.

Called by `evo idea add` once the idea applied and compiled. The folder is the user's: it holds their own drafts
(parseable or half-written), perhaps symlinks to patches kept elsewhere. So:

- a name that is taken (a file of any content, a symlink, even a dangling one, anything else) is refused without
  ``--force``: the new file is linked into place with ``link(2)``, which never replaces what is there;
- ``--force`` replaces only a regular file whose digest evo recorded when it wrote it (the manifest
  ``ideas/.evo-written.json``: file name -> sha256 of its bytes) and that still has that digest; never a symlink,
  never a file the user wrote or edited since.

The manifest is evo's own record; it is rewritten whole (temporary file + rename) after each write. A file written
but not yet recorded (a crash between the two) counts as the user's: the safe side.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

MANIFEST = ".evo-written.json"


class IdeaFileError(Exception):
    """The idea's file cannot be written without losing something of the user's (one line)."""


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def recorded(folder: Path) -> dict[str, str]:
    """The manifest: {file name: sha256} of the files evo wrote here; {} when absent or unreadable (nothing is
    evo's then, so nothing can be replaced)."""
    p = folder / MANIFEST
    try:
        if not stat.S_ISREG(os.lstat(p).st_mode):
            return {}
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(d, dict):
        return {}
    return {str(k): str(v) for k, v in d.items() if isinstance(v, str) and v}


def _kind(path: Path) -> str:
    """What is at ``path``, never following a link: free, file (a regular one), symlink or other (a FIFO...)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "free"
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    return "file" if stat.S_ISREG(st.st_mode) else "other"


def taken(path: Path) -> str | None:
    """Why ``path`` may not be written without ``--force`` (it exists: what it is), or None when the name is free."""
    kind = _kind(path)
    if kind == "free":
        return None
    if kind == "symlink":
        return f"{path} is a symlink"
    return f"{path} exists" + ("" if kind == "file" else " and is not a regular file")


def replaceable(path: Path) -> str | None:
    """Why ``--force`` may not replace ``path`` (None: it may: free, or a regular file evo wrote, unchanged)."""
    kind = _kind(path)
    if kind == "free":
        return None
    if kind != "file":
        return f"{taken(path)}; evo never replaces one, even with --force (move it away)"
    want = recorded(path.parent).get(path.name)
    if not want:
        return f"{path} was not written by evo; it is never replaced, even with --force (move it away or give --name)"
    try:
        have = _digest(path)
    except OSError as e:
        return f"{path}: cannot read it ({e.strerror or e})"
    if have != want:
        return f"{path} was changed since evo wrote it; it is never replaced, even with --force (move it away)"
    return None


def _write_tmp(folder: Path, stem: str, text: str) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, prefix=f".{stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def _record(folder: Path, name: str, digest: str) -> None:
    """Adds ``name``'s digest to the manifest (rewritten whole: temporary file + rename)."""
    d = recorded(folder)
    d[name] = digest
    tmp = _write_tmp(folder, "evo-written", json.dumps(d, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / MANIFEST)


def _place_new(tmp: Path, path: Path, text: str) -> None:
    """Puts the new file at ``path`` only if nothing is there (a hard link; where the file system has none, an
    exclusive create that does not follow a link)."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise IdeaFileError(f"{path} appeared while evo was writing it; it was left alone") from None
    except OSError:
        pass  # no hard links here (some network and FUSE file systems)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        raise IdeaFileError(f"{path} appeared while evo was writing it; it was left alone") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def write_file(folder: Path, name: str, text: str, force: bool = False) -> Path:
    """Writes ``folder/name`` (raises IdeaFileError, leaving everything there as it was, when the name is taken
    and not ``force``, or ``force`` and the file is not evo's unchanged one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    why = replaceable(path) if force else taken(path)
    if why is not None:
        if not force:
            why += " (give --name, or --force to replace a file evo wrote)"
        raise IdeaFileError(why)
    tmp = _write_tmp(folder, name, text)
    try:
        if force and taken(path) is not None:
            os.replace(tmp, path)  # checked just above: a regular file evo wrote, unchanged
        else:
            _place_new(tmp, path, text)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _record(folder, name, _digest(path))
    return path
