"""The recorded-sweep file: its one reader and one writer.

``tools/sweep.py`` writes a sweep on the GPU; ``tools/merge_sweeps.py`` joins shards; the recorded backend
(harness/recorded.py) and ``tools/search_bench.py`` read them. All of them go through :func:`load` and
:func:`save`, so the format is checked in one place.

A sweep is one JSON document (``format`` = :data:`FORMAT`). It is stored xz-compressed (``.json.xz``): the
per-genome correctness rows repeat over tens of megabytes, past gzip's 32 KiB window, and xz keeps the largest
sweep at 0.74 MB where gzip took 9 MB. Older ``.json.gz`` files are still read.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

FORMAT = 1
# ``same_as`` links followed at most (tools/sweep.py links a twin to the first genome of its variant, one hop;
# tools/merge_sweeps.py may add one across shards): a longer chain is a broken sweep, not data.
SAME_AS_HOPS = 4
SUFFIXES = (".json.xz", ".json.gz")  # the first is written; both are read
# Keys every sweep holds (the recorded backend reads each of them).
REQUIRED = (
    "format",
    "family",
    "geometries",
    "seeds",
    "runs",
    "launches",
    "baseline_key",
    "baseline_hashes",
    "baseline_errors",
    "aa",
    "copy_ceiling",
    "genomes",
)


def linked_entry(
    genomes: Mapping[str, Any], key: str, on_link: Callable[[str, Mapping[str, Any]], None] | None = None
) -> dict[str, Any] | None:
    """Genome ``key``'s sweep entry with its ``same_as`` links followed (a link holds one variant's data for another
    genome of the same machine code and launch), at most :data:`SAME_AS_HOPS` of them; None where the genome, a
    link's target, or data within that many hops is missing. ``on_link(key, link)`` is called on each link before
    it is followed (the recorded backend refuses a link whose launches differ there). Every reader of a sweep
    (harness/recorded.py, harness/ktcache_write.py, tools/search_bench.py) follows links here."""
    e = genomes.get(key)
    for _ in range(SAME_AS_HOPS):
        if e is None or "same_as" not in e:
            break
        if on_link is not None:
            on_link(key, e)
        e = genomes.get(e["same_as"])
    return None if e is None or "same_as" in e else e


class SweepFileError(ValueError):
    """A sweep file cannot be read or is not a sweep (one line, naming the file)."""


def _opener(path: Path):
    name = path.name
    if name.endswith(".xz"):
        return lzma.open
    if name.endswith(".gz"):
        return gzip.open
    raise SweepFileError(f"{path}: a sweep file ends in {' or '.join(SUFFIXES)}")


def load(path: str | Path, *, check: bool = True) -> dict[str, Any]:
    """The sweep at ``path``; raises SweepFileError when it is unreadable or not a sweep of a known format.

    ``check=False`` skips the key check (for a shard being merged, or a partial sweep being resumed).
    """
    p = Path(path)
    try:
        with _opener(p)(p, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except SweepFileError:
        raise
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SweepFileError(f"{p}: not a readable sweep ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise SweepFileError(f"{p}: not a sweep (a JSON {type(data).__name__}, not an object)")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise SweepFileError(f"{p}: sweep format {fmt!r}; this evo reads format {FORMAT}")
    if check:
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise SweepFileError(f"{p}: not a complete sweep (missing {', '.join(missing)})")
    return data


def save(path: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` (format :data:`FORMAT`) to ``path`` atomically; the suffix picks the compression."""
    p = Path(path)
    if data.get("format") != FORMAT:
        raise SweepFileError(f"{p}: refusing to write sweep format {data.get('format')!r} (writes {FORMAT})")
    opener = _opener(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
    kwargs = {"preset": 9} if opener is lzma.open else {}
    try:
        with opener(tmp, "wt", encoding="utf-8", **kwargs) as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
    return p


def sweep_files(folder: str | Path) -> list[Path]:
    """The sweep files in a family's ``recorded/`` folder, sorted by name."""
    d = Path(folder)
    return sorted(p for s in SUFFIXES for p in d.glob(f"*{s}"))
