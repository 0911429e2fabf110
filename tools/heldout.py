"""Kernel Tuner caches as the search benchmark's landscapes (issue 42's held-out bar): a cache file outside the
repository becomes a tools/search_bench.py ``Space``, and a frozen list of them (benchmarks/heldout/ktcaches.json:
sources and sha256, no content) is checked against the files in a folder before anything runs.

Called by tools/search_bench.py ``load_space`` (a landscape given as a ``.json`` / ``.json.gz`` path) and by
tools/bench_deployed.py ``--heldout LIST --cache-dir DIR``.

A cache is the campaign ``evo run CACHE.json`` runs (harness/ktcache.py ``kt_config``): the space's config path is
the cache itself, so evo's row is made from that config by the campaign's own factory (tools/bench_loop.py), and
the backend is the one ``evo run`` replays it with (``KTCacheBackend``). Its objective is Kernel Tuner's: the
baseline's recorded time over the configuration's (higher is faster); a configuration Kernel Tuner recorded as an
error has none (it costs an evaluation when proposed, for every strategy alike); ``InvalidConfig`` and
configurations the cache does not hold are not in the space (the family's check rules them out).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class HeldoutError(ValueError):
    """A held-out list that cannot be used as frozen (one line: the file and what is wrong)."""


@dataclass
class HeldoutCache:
    """One entry of the frozen list: its label, the file in the cache folder, and where it came from."""

    label: str
    path: Path
    sha256: str
    source: str  # repository@commit:path
    device_name: str


def kt_space(path: str | Path) -> Any:
    """The cache at ``path`` as a search_bench Space (see the module docstring). Raises KTCacheError."""
    from evo.config import load_config
    from evo.core.genome import Genome
    from harness.ktcache import KTCacheBackend, kt_landscape
    from tools import search_bench as sb

    p = Path(path).resolve()
    family, geometries, data = kt_landscape(p)
    cfg = load_config(p, backend_override="recorded")  # what `evo run CACHE.json` reads
    c = cfg.gates.correctness
    names = [k.name for k in family.knobs]
    # (the cache holds its configurations: the product is walked once, the check is a dict look-up)
    genomes = [Genome(dict(zip(names, v))) for v in itertools.product(*(k.values for k in family.knobs))]
    genomes = [g for g in genomes if family.check(g, geometries) is None]
    base = family.kt.baseline().time_ms
    assert base is not None
    scores: dict[str, float | None] = {}
    for g in genomes:
        e = family.kt.entries[g.key]
        scores[g.key] = None if e.time_ms is None else base / e.time_ms
    space = sb.Space(
        family,
        geometries,
        p,
        data["created"],
        scores,
        genomes,
        data["baseline_key"],
        c.mode,
        cfg.gates.perf.min_gain,
        {},  # no SASS digests: a cache records none, so no identical-SASS rejection for anyone
        c.seeds,
        c.runs,
        c.tolerance_factor,
        cfg.gates.perf,
        data,
        frozenset(),
        p,
    )
    space.replay_backend = KTCacheBackend(family, geometries, seeds=c.seeds, runs=c.runs)
    return space


def read_list(list_path: str | Path, cache_dir: str | Path) -> list[HeldoutCache]:
    """The frozen list's caches in ``cache_dir`` (each named by its ``file``), every file's sha256 checked against
    the list's. Raises HeldoutError naming the first file missing or changed."""
    lp = Path(list_path)
    try:
        doc = json.loads(lp.read_text())
        rows = doc["landscapes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HeldoutError(f"{lp}: not a held-out list ({type(e).__name__}: {e})") from None
    out = []
    for r in rows:
        f = Path(cache_dir) / r["file"]
        if not f.is_file():
            raise HeldoutError(f"{f}: missing (fetch it from {r['url']})")
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        if digest != r["sha256"]:
            raise HeldoutError(f"{f}: sha256 {digest[:12]}.. is not the frozen list's {r['sha256'][:12]}..")
        source = f"{r['repository']}@{r['commit'][:7]}:{r['path']}"
        out.append(HeldoutCache(r["label"], f, digest, source, r.get("device_name") or ""))
    return out
