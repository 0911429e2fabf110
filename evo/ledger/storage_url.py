"""Storage URLs: the one place that builds a ``sqlite:///`` URL from a file and reads the file back from one.

A storage URL is what SQLAlchemy (and so Optuna's RDB storage) reads: the part after ``sqlite:///`` is
percent-decoded, and a ``?`` starts its options. A file name is put into a URL quoted, so that a folder named
``a?b``, ``c#d``, ``e%f``, ``g h``, ``i%20j`` or ``ü€`` is that folder, and read back as SQLAlchemy reads it.
What is handed to SQLAlchemy to connect is a SQLite URI (``file:...?mode=...``) quoted once more, so that neither
SQLAlchemy's decoding nor SQLite's own (``?``, ``#``, ``%``) nor Optuna's ``str.format`` of the URL
(``{SCHEMA_VERSION}``) can change the path. Called by the config (its default storage, its log folder, which URLs
it takes), the ledger (every open: :func:`evo.ledger.open_ledger` picks the storage by the URL's scheme), the
commands that list ledgers or check the ledger's file, and every message that names a storage (:func:`safe_url`:
never its password); nothing here touches a file.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from urllib.parse import quote, unquote

PREFIX = "sqlite:///"
MEMORY = "memory:"  # evo.ledger.memory_ledger.MemoryLedger: one process, nothing kept (the search benchmark)
# What a config's ``storage:`` may be: a SQLite file, a PostgreSQL or MySQL database (Optuna's RDB storage).
_RDB = re.compile(r"^(sqlite:///.+|postgresql(\+\w+)?://.+|mysql(\+\w+)?://.+)$")


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


def is_memory_url(url: str) -> bool:
    """Whether ``url`` names a ledger held in memory (``memory:``): nothing is kept after the process."""
    return url.partition(":")[0] == "memory"


def is_rdb_url(url: str) -> bool:
    """Whether ``url`` names a database Optuna's RDB storage opens (what a config's ``storage:`` may be)."""
    return _RDB.fullmatch(url) is not None


def safe_url(url: str) -> str:
    """The storage URL without its password: what every message names."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def where(url: str) -> str:
    """The ledger's file for a ``sqlite:///`` URL, else the URL without its password: where a message says it is."""
    try:
        path = sqlite_path(url)
    except StorageURLError:
        path = None
    return str(path) if path is not None else safe_url(url)


def with_installed_driver(url: str) -> str:
    """A plain ``postgresql://`` URL with the PostgreSQL driver that is installed.

    SQLAlchemy 2.1 reads the plain form as psycopg (3), while evo's ``pg`` extra installs psycopg2: the form users
    type first would fail with everything installed. An explicit ``+driver`` is always kept as written."""
    if not url.startswith("postgresql://"):
        return url
    for module, driver in (("psycopg", "psycopg"), ("psycopg2", "psycopg2")):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{driver}://" + url[len("postgresql://") :]
    return url  # no driver at all: opening it says so, with the hint
