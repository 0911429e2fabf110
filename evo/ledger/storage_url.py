"""Storage URLs: the one place that builds a ``sqlite:///`` URL from a file and reads the file back from one.

A storage URL is what SQLAlchemy (and so Optuna's RDB storage) reads: the part after ``sqlite:///`` is
percent-decoded, and a ``?`` starts its options. A file name is put into a URL quoted, so that a folder named
``a?b``, ``c#d``, ``e%f``, ``g h``, ``i%20j`` or ``ü€`` is that folder, and read back as SQLAlchemy reads it.
What is handed to SQLAlchemy to connect is a SQLite URI (``file:...?mode=...``) quoted once more, so that neither
SQLAlchemy's decoding nor SQLite's own (``?``, ``#``, ``%``) nor Optuna's ``str.format`` of the URL
(``{SCHEMA_VERSION}``) can change the path. Called by the config (its default storage, its log folder), the ledger
(every open) and the commands that list ledgers; nothing here touches a file.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote

PREFIX = "sqlite:///"


class StorageURLError(ValueError):
    """A ``sqlite:///`` URL whose path cannot be told (one line for the user)."""


def sqlite_url(path: Path | str) -> str:
    """The storage URL of a SQLite file (absolute), quoted so that :func:`sqlite_path` gives ``path`` back."""
    return PREFIX + quote(str(Path(path).absolute()), safe="/")


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL, as SQLAlchemy reads it (None for other storages, in-memory ones and
    SQLite URIs, ``sqlite:///file:...``, which are passed on as written).

    Raises StorageURLError for a URL with options (an unquoted ``?`` in a path reads as one)."""
    if not url.startswith(PREFIX):
        return None
    rest = url[len(PREFIX) :]
    path, sep, options = rest.partition("?")
    if sep:
        if path.startswith("file:"):
            return None
        raise StorageURLError(
            f"storage {url[:120]!r}: a '?' in a sqlite URL starts its options ({options[:40]!r}); "
            "write a '?' in a file name as %3F (and '%' as %25)"
        )
    name = unquote(path)
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name)


def engine_url(path: Path, readonly: bool = False, create: bool = False) -> str:
    """The URL SQLAlchemy connects with to the SQLite file ``path``: a SQLite URI, read-only or read-write (``create``:
    the file may be made).

    Quoted twice: SQLAlchemy decodes the URL's path once, SQLite decodes its URI once more."""
    mode = "ro" if readonly else "rwc" if create else "rw"
    uri = "file:" + quote(str(Path(path).absolute()), safe="/")
    return f"{PREFIX}{quote(uri, safe='/:')}?mode={mode}&uri=true"
