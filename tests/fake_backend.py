"""A backend for worker-isolation tests: the recorded backend, plus kernels that crash, die or hang."""

from __future__ import annotations

import os
import time

from evo.backend_factories import recorded_backend
from harness.gpu import KernelCrash
from harness.recorded import RecordedBackend


class Faulty:
    """Genomes with unroll=4 'hit an illegal address', h_split=8 kill the process, vec=8 with unroll=2 hang."""

    def __init__(self, inner: RecordedBackend):
        self.inner = inner
        self.name, self.simulated = inner.name, True

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def correctness(self, loaded, *, freeze: bool = False):
        g = loaded.genome
        if g["unroll"] == 4:
            raise KernelCrash("an illegal memory access was encountered (simulated)")
        if g["h_split"] == 8:
            os._exit(139)  # as a segfault would end it
        if g["vec"] == 8 and g["unroll"] == 2:
            time.sleep(3600)
        return self.inner.correctness(loaded, freeze=freeze)


def faulty_backend(config: str, backend: str | None = None, storage: str | None = None) -> Faulty:
    return Faulty(recorded_backend(config, backend, storage))


class PeerEcho:
    """A backend that says which family loaded each module: load(..., peer=name) is what a worker must pass on."""

    name, simulated, peer_kernels = "echo", False, True

    def __init__(self) -> None:
        self.baseline_hashes: dict[str, str] = {}
        self.baseline_errors: dict[str, float] = {}

    def load(self, built, genome, peer=None):
        return {"genome": dict(genome), "peer": peer}

    def correctness(self, loaded, *, freeze: bool = False):
        return loaded


def peer_echo_backend() -> PeerEcho:
    return PeerEcho()


class Segfaulting(Faulty):
    """The first genome judged after the baseline segfaults inside the family's launch() (a marker file says it did)."""

    def __init__(self, inner: RecordedBackend, mark: str):
        super().__init__(inner)
        self.mark = mark

    def correctness(self, loaded, *, freeze: bool = False):
        import ctypes

        from evo.core.hooks import calling

        if not freeze and not os.path.exists(self.mark):
            open(self.mark, "w").close()
            with calling(self.inner.family.name, "launch()"):
                ctypes.string_at(0)
        return self.inner.correctness(loaded, freeze=freeze)


def segfaulting_backend(config: str, mark: str, backend: str | None = None, storage: str | None = None) -> Segfaulting:
    return Segfaulting(recorded_backend(config, backend, storage), mark)
