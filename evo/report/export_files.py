"""The files of an export folder: the manifest of what evo wrote there, and writes that lose nothing of the user's.

Called by :func:`evo.report.export.export` before it writes (:func:`check_target`) and while it writes
(:func:`write_manifest`, :func:`copy_in`). A folder is evo's to write only where its manifest (``.evo-export.json``)
names every file with the digest evo recorded; a symlink is never written through, an entry without a digest
protects its file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

MANIFEST = ".evo-export.json"  # the files an export wrote: the only ones a later export may replace
PART = MANIFEST + ".part"  # the file being copied in, renamed into place when whole
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class ExportError(ValueError):
    """An export that would lose or replace something (one line for the user)."""


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(out_dir: Path) -> dict[str, list[str]] | None:
    """{file name: the digests it may have} of the earlier export in ``out_dir``, or None when it holds none.

    An entry is one sha256, or a list of them while an export was replacing the file (the old digest and the new:
    the copy is a rename, so the file is one or the other). A digest that is not 64 hex digits (an empty one) is
    dropped: a file it names cannot be told from one of the user's, so nothing may replace or delete it."""
    import json

    m = out_dir / MANIFEST
    if not m.exists():
        return None
    try:
        files = json.loads(m.read_text(encoding="utf-8")).get("files")
        if not isinstance(files, dict) or not all(isinstance(k, str) and safe_name(k) for k in files):
            raise ValueError("no file list")
        out: dict[str, list[str]] = {}
        for k, v in files.items():
            vs = [v] if isinstance(v, str) else v
            if not isinstance(vs, list) or not all(isinstance(x, str) for x in vs):
                raise ValueError(f"the entry of {k!r} is not a digest")
            out[k] = [x for x in vs if _DIGEST.match(x)]
    except (OSError, ValueError, AttributeError) as e:
        raise ExportError(f"{m} is not an evo export manifest ({e}); move it away or export elsewhere") from None
    return out


def safe_name(name: str) -> bool:
    """A file name a manifest may hold: a plain name, or one below a subfolder (``tree/0001-x.patch``), never
    absolute, ``..`` or empty parts."""
    parts = name.split("/")
    return all(p and p not in (".", "..") and "\\" not in p for p in parts) and len(parts) <= 2


def files_under(folder: Path) -> list[str]:
    """Every file below ``folder`` (one subfolder deep at most, as an export writes), as a manifest names it; a
    deeper folder is named as itself, so it counts as someone else's."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.is_dir() and not p.is_symlink():
            out += [f"{p.name}/{q.name}" for q in sorted(p.iterdir())] or [f"{p.name}/"]
        else:
            out.append(p.name)
    return out


def write_manifest(out_dir: Path, campaign: str, files: Mapping[str, str | list[str]]) -> None:
    import json
    import os

    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(
        json.dumps({"evo_export": 1, "campaign": campaign, "files": dict(sorted(files.items()))}, indent=1) + "\n",
        encoding="utf-8",
    )
    os.replace(tmp, out_dir / MANIFEST)


def check_target(out_dir: Path, force: bool) -> dict[str, list[str]]:
    """The earlier export that ``out_dir`` holds ({} if none), or ExportError when writing there could lose a file.

    A folder is written only when it is missing or empty, or holds nothing but an earlier evo export (replaced with
    ``force``, and only where its files are as the export left them: regular files, not symlinks, whose digest the
    manifest records)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a folder; give another -o")
    if not out_dir.exists():
        return {}
    old = _read_manifest(out_dir) or {}
    names = [n for n in files_under(out_dir) if n not in (MANIFEST, MANIFEST + ".tmp", PART)]
    foreign = [n for n in names if n not in old]
    if foreign:
        raise ExportError(
            f"{out_dir} holds {len(foreign)} file(s) evo export did not write (e.g. {foreign[0]}); "
            "export into a new or empty folder (-o)"
        )
    if old and not force:
        raise ExportError(f"{out_dir} holds an earlier evo export; give --force to replace it, or another -o")
    for name, digests in old.items():
        why = _not_evos(out_dir / name, digests)
        if why:
            raise ExportError(f"{out_dir / name} {why}; move it away (--force replaces only files as evo wrote them)")
    return old


def _not_evos(f: Path, digests: Sequence[str]) -> str | None:
    """Why ``f`` (named in the manifest) is not a file evo wrote, as it wrote it; None when it is, or is gone."""
    import os
    import stat

    try:
        st = os.lstat(f)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink (evo never writes through one)"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not digests:
        return "has no digest in the export's manifest, so it cannot be told from a file of yours"
    if sha256(f) not in digests:
        return "was changed since evo exported it"
    return None


def copy_in(src: Path, out_dir: Path, name: str) -> None:
    """Copies ``src`` to ``out_dir/name`` whole or not at all: written to PART (created afresh, never through a
    link), then renamed over the name (a rename replaces a link itself, never what it points to)."""
    import os

    part = out_dir / PART
    part.unlink(missing_ok=True)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(src.read_bytes())
        f.flush()
        os.fsync(f.fileno())
    (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, out_dir / name)
