"""The campaign's loaded modules and graph sizes, kept for the whole run.

A module is loaded once per genome (the baseline, the champion and each candidate) and reused by every gate and
check that measures it; each part of a measurement gets a graph of its own launches, sized once per (genome,
geometry). Made by the campaign at start; read by the gates through ``JudgeContext.load``, ``load_genome`` and
``part_launches``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.genome import Genome
from evo.core.protocols import Backend


class LoadedModules:
    """Genome key -> its loaded module on ``backend``, and (genome key, geometry) -> the launches a graph of its own.

    With every part sized by the baseline, the fp4 champion's 55-launch graphs (1.1 ms) read 20.78 µs where graphs of
    its own 410 launches read 20.29 in the same rounds (benchmarks/results/2026-12-01-batch-sizing-probe): each
    part's graph is sized for itself.
    """

    def __init__(self, backend: Backend, builder: Any, simulated: bool):
        self.backend = backend
        self.builder = builder
        self.simulated = simulated
        self.loaded: dict[str, Any] = {}
        self.sizes: dict[tuple[str, str], int] = {}

    def load(self, built: Any, genome: Mapping[str, Any]) -> Any:
        """The genome's module, loaded from ``built`` the first time it is asked for."""
        key = Genome(genome).key
        if key not in self.loaded:
            self.loaded[key] = self.backend.load(built, genome)
        return self.loaded[key]

    def load_genome(self, genome: Mapping[str, Any]) -> Any:
        """A recorded genome's loaded module (the champion's, the baseline's): the cached one, else built (unless the
        backend is simulated) and loaded. Asked by the perf gate through ``JudgeContext.load_genome``."""
        key = Genome(genome).key
        if key in self.loaded:
            return self.loaded[key]
        return self.load(None if self.simulated else self.builder.build(genome), genome)

    def forget(self, key: str) -> None:
        """Drop a genome's module (its worker died with it); the next load builds it again."""
        self.loaded.pop(key, None)

    def part_launches(self, parts: Sequence[tuple[str, Any]], keys: Sequence[str], g: Any) -> dict[str, int]:
        """Label -> launches a graph, each part's for itself (about batch_ms), remembered by genome key."""
        out = {}
        for (label, loaded), key in zip(parts, keys):
            if (key, g.name) not in self.sizes:
                self.sizes[key, g.name] = self.backend.launches_for(loaded, g)
            out[label] = self.sizes[key, g.name]
        return out
