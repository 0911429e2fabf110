"""Compile ahead: the next proposal's NVRTC build runs in other processes while the GPU measures this one.

A build lands in the on-disk cubin cache (:func:`harness.build.cache_dir`),
where the campaign's own ``Builder.build`` finds it, so the GPU does not wait
on NVRTC. Processes, not threads: NVRTC and ptxas hold the interpreter for
the length of a compile. Only knob genomes are compiled ahead; a genome with
ideas or an explicit source is built in-line, as before.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from evo.core.liveness import die_with_parent

_builder: Any = None


def _init(config_path: str, arch: str, parent: int = 0) -> None:
    global _builder
    die_with_parent(parent)  # a pool process never sees the campaign's process die (evo/core/liveness.py)
    from evo.config import load_config
    from harness.build import Builder

    cfg = load_config(config_path)
    _builder = Builder.for_config(cfg, arch)


def _compile(genome: dict[str, Any]) -> float:
    """Seconds the build took here (a compile error is left for the campaign's own build to report)."""
    from harness.build import BuildError

    t0 = time.perf_counter()
    try:
        _builder.build(genome)
    except BuildError:
        pass
    return time.perf_counter() - t0


class Prefetcher:
    """A small pool of compile processes for one campaign (``worker.prefetch`` of the config)."""

    def __init__(self, config_path: str, arch: str, workers: int = 1):
        # spawn: the campaign process may hold threads (rich, the worker pipe) that fork would copy mid-state
        self._pool = cf.ProcessPoolExecutor(
            workers, mp.get_context("spawn"), initializer=_init, initargs=(config_path, arch, os.getpid())
        )
        self._jobs: dict[str, cf.Future] = {}

    @staticmethod
    def eligible(genome: Mapping[str, Any]) -> bool:
        from evo.search.ideas import idea_slugs

        return not idea_slugs(genome)

    def submit(self, genome: Mapping[str, Any]) -> None:
        from evo.core.genome import Genome

        key = Genome(genome).key
        if key not in self._jobs and self.eligible(genome):
            self._jobs[key] = self._pool.submit(_compile, dict(genome))

    def wait(self, genome: Mapping[str, Any], timeout: float = 600.0) -> float | None:
        """Block until the genome's build ahead is done; its seconds, or None when none was made."""
        from evo.core.genome import Genome

        job = self._jobs.pop(Genome(genome).key, None)
        if job is None:
            return None
        try:
            return job.result(timeout=timeout)
        except Exception:  # a dead pool or a hung compile: the in-line build still runs
            return None

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)


def prefetcher_for(cfg: Any, simulated: bool, arch: str) -> Prefetcher | None:
    """The campaign's compile processes ahead of the GPU, or None (worker.prefetch 0 / auto off-GPU, or a config
    with no file the processes could load). Made as the loop starts."""
    n = cfg.worker.prefetch
    if n < 0:
        n = 0 if simulated else 1
    if n == 0 or cfg.path is None:
        return None
    return Prefetcher(str(cfg.path), arch, n)


def compile_ahead(
    prefetch: Any,
    prop: Any,
    propose_next: Callable[[], Any],
    genome_of: Callable[[Any], Any] = lambda p: p.genome,
) -> Any:
    """Compile ``prop`` and the proposal after it (``propose_next()``, None for none) in the prefetch processes;
    return that next one once ``prop``'s build is in the cache. Like a second worker, the next proposal lags
    one result. ``genome_of``: the genome of what ``propose_next`` returns (evo worker: a reserved trial's)."""
    prefetch.submit(prop.genome)
    pending = propose_next()
    if pending is not None:
        prefetch.submit(genome_of(pending))
    prefetch.wait(prop.genome)
    return pending
