"""The GPU backend's correctness and recheck logic, run on the CPU with a simulated kernel.

A stand-in "kernel" writes the family's float32 reference into the poisoned
output buffers (or a deliberately wrong, partial, racy or NaN version of it),
so poisoning, written views, hashes, the frozen baseline, mismatch details and
the recheck are exercised without a GPU. Launching and timing stay GPU-only.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch

from evo.core.family import Geometry, load_family
from gates import correctness_gate
from harness.gpu import GpuBackend, Loaded


class CpuSim(GpuBackend):
    """GpuBackend with torch on the CPU and a Python 'kernel'."""

    def __init__(self, family, geometries, fault=None, seeds=3, runs=2):  # noqa: D107 - no CUDA here
        self.torch, self.cupy = torch, None
        self.family, self.geometries, self.builder = family, list(geometries), SimpleNamespace(arch="sm_90")
        self.seeds, self.runs, self.batch_ms, self.nvml = seeds, runs, 1.0, None
        self.device = torch.device("cpu")
        self.stream = SimpleNamespace(synchronize=lambda: None)
        self._inputs, self._refs, self._base_out, self._outbuf, self._streams = {}, {}, {}, {}, {}
        self._pristine = {}
        self._guards = {}
        self._warmed = False
        self.baseline_hashes, self.baseline_errors = {}, {}
        self.fault = fault
        self.calls = 0

    def _sync(self) -> None:
        pass

    def _launcher(self, loaded, g, inputs, outs):
        def launch():
            self.calls += 1
            ref = self.family.reference(inputs, g, dtype=torch.float32)
            views = self.family.written_view(outs, loaded.genome, g)
            for name, t in views.items():
                r = ref[name]
                if t.shape != r.shape:  # split partials: the whole sum in slice 0, zeros in the rest
                    src = torch.zeros(t.shape, dtype=torch.float32)
                    src[0] = r
                    r = src
                val = r.to(t.dtype)
                kind = loaded.genome.get("_fault") or self.fault
                if kind == "wrong" and name == list(views)[-1]:
                    val = val.flatten().roll(1).view_as(val)
                elif kind == "partial" and name == list(views)[-1]:
                    flat = t.view(-1)
                    flat[: flat.numel() // 2] = val.view(-1)[: flat.numel() // 2]
                    continue
                elif kind == "nan" and name == list(views)[0]:
                    val = val.clone()
                    val.view(-1)[0] = float("nan")
                elif kind == "oob" and name == list(views)[0]:
                    t.copy_(val)
                    past = torch.as_strided(t, (t.numel() + 3,), (1,), t.storage_offset())
                    past[t.numel() :] = 7.0  # three elements past the end
                    continue
                elif kind == "race" and self.calls % 2 == 0 and name == list(views)[-1]:
                    val = val.clone()
                    val.view(-1)[-1] = val.view(-1)[-1] * 1.5 + 1
                t.copy_(val)

        return launch


@pytest.fixture(autouse=True)
def _no_cuda_streams(monkeypatch):
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


GEOS = [Geometry("T3_H128", {"T": 3, "H": 128, "S": 2, "prenorm": False})]


def _setup(fault=None):
    fam = load_family("mhc_pre_big_fuse")
    be = CpuSim(fam, GEOS, fault=fault)
    base = Loaded(None, fam.baseline(), {})
    ev = be.correctness(base, freeze=True)
    return fam, be, ev


def test_freeze_records_hashes_and_float64_errors():
    fam, be, ev = _setup()
    assert len(ev.checks) == 3 * 3 and len(be.baseline_hashes) == 9
    for c in ev.checks:
        assert c.unwritten == 0 and c.nonfinite == 0 and len(set(c.hashes)) == 1
        assert c.rel_err is not None and c.rel_err < fam.error_bound(c.output)


@pytest.mark.parametrize(
    "fault,expect",
    [
        (None, "pass"),
        ("wrong", "differs from the baseline"),
        ("partial", "never written"),
        ("nan", "NaN"),
        ("race", "race"),
        ("oob", "wrote past the bounds of post_mix"),
    ],
)
def test_faults_get_the_right_reason(fault, expect):
    fam, be, _ = _setup()
    be.fault = fault
    cand = Loaded(None, fam.baseline().replace(meta="slice"), {})
    v = correctness_gate(be.correctness(cand), be.baseline_hashes, "exact")
    if expect == "pass":
        assert v.ok, v
    else:
        assert not v.ok and expect in v.reason, v.reason
    if fault == "wrong":
        assert "elements differ" in v.reason and "first at flat index" in v.reason


def test_recheck_compares_with_the_candidates_own_outputs():
    fam, be, _ = _setup()
    cand = Loaded(None, fam.baseline().replace(meta="slice"), {})
    be.correctness(cand)
    assert be.recheck(cand) is None
    be.fault = "wrong"  # the same kernel now returns something else after timing
    assert "changed after the timed runs" in be.recheck(cand)


def test_split_partials_use_written_and_compare_views():
    fam = load_family("mhc_prenorm_gemm")
    geos = [Geometry("T5_H64", {"T": 5, "H": 64})]
    be = CpuSim(fam, geos)
    base = Loaded(None, fam.baseline(), {})
    ev = be.correctness(base, freeze=True)
    assert all(c.unwritten == 0 for c in ev.checks), "only the written slices are checked for poison"
    assert all(c.rel_err is not None and c.rel_err < 1e-3 for c in ev.checks)
    two = Loaded(None, fam.baseline().replace(split_k=2), {})
    ev2 = be.correctness(two)
    v = correctness_gate(ev2, be.baseline_hashes, "tolerance", None, be.baseline_errors, 2.0)
    assert v.ok, v.reason  # other bits (other shape), same sums


def test_launcher_opts_in_to_dynamic_shared_memory_over_48_kib():
    """A launch asking for more than 48 KiB of dynamic shared memory sets the function's
    max_dynamic_shared_size_bytes first (CUDA refuses the launch otherwise); a smaller one leaves it alone."""
    fam = load_family("fp4_matvec")
    g = Geometry("g", {"in": 7168, "out": 18432, "x_dtype": "float32"})
    be = object.__new__(GpuBackend)
    be.family, be.torch, be.cupy = fam, torch, SimpleNamespace()
    be.builder = SimpleNamespace(spec_of=lambda geo: "spec")
    inputs, outs = {"w": torch.zeros(4, dtype=torch.uint8), "x": torch.zeros(4)}, {"y": torch.zeros(4)}
    big = fam.baseline().replace(expand="f16", qload="cp_async", rows_per_block=16, warps=4, unroll=1)
    small = big.replace(rows_per_block=8)
    for genome, want in ((big, 63488), (small, None)):
        fn = SimpleNamespace()
        be._launcher(Loaded(None, genome, {"spec": fn}), g, inputs, outs)
        assert fam.launch(genome, g).shared_bytes == (want or 46080)
        assert getattr(fn, "max_dynamic_shared_size_bytes", None) == want


class _FakeCupy:
    """Just enough of cupy for GpuBackend.copy_ceiling: buffers over `limit_gib` GiB do not fit; a copy of n
    16-byte chunks takes n * 32 / rate seconds (rate in B/s by trial, the copy kernel 2% slower than copyto)."""

    class _OOM(Exception):
        pass

    def __init__(self, limit_gib: float, rates: list[float]):
        self.limit, self.rates, self.trial, self.allocs = limit_gib * 2**30, list(rates), -1, []
        self.pending = 0.0
        oom = self._OOM
        fake = self

        class Event:
            def __init__(self):
                self.t = 0.0

            def record(self):
                self.t = fake.pending

            def synchronize(self):
                pass

        def elapsed(e0, e1):
            return (e1.t - e0.t) * 1000.0

        self.cuda = SimpleNamespace(
            runtime=SimpleNamespace(getDeviceProperties=lambda i: {"multiProcessorCount": 132}),
            Device=lambda: SimpleNamespace(synchronize=lambda: None),
            Event=Event,
            get_elapsed_time=elapsed,
            memory=SimpleNamespace(OutOfMemoryError=oom),
        )
        self.random = SimpleNamespace(random=self._random)
        self.uint64, self.float64 = int, "float64"

    def _random(self, n, dtype=None):
        if 2 * n * 8 > self.limit:  # the source and the copy
            raise self._OOM(f"{n * 8} B")
        self.trial += 1
        self.allocs.append(n * 8)
        return SimpleNamespace(n16=n * 8 // 16)

    def empty_like(self, a):
        return SimpleNamespace(n16=a.n16)

    def _copy(self, n16: int, slower: float) -> None:
        self.pending += n16 * 32 / (self.rates[self.trial] * slower)

    def RawKernel(self, src, name, options=()):  # noqa: N802 - cupy's name
        return lambda grid, block, args: self._copy(args[2], 0.98)

    def copyto(self, b, a):
        self._copy(a.n16, 1.0)

    def get_default_memory_pool(self):
        return SimpleNamespace(free_all_blocks=lambda: None)


def test_copy_ceiling_halves_where_memory_is_short_and_takes_the_best_trial():
    """A device that cannot hold two 4 GiB buffers measures with 2 GiB ones (and says so in the method); the
    ceiling is the best trial's copyto; below 0.25 GiB the out-of-memory error is raised, not hidden."""
    be = object.__new__(GpuBackend)
    be.cupy = _FakeCupy(limit_gib=5, rates=[4.0e12, 4.2e12, 4.1e12])
    c = be.copy_ceiling(gib=4.0, reps=3, trials=3)
    assert be.cupy.allocs == [2 * 2**30] * 3  # each trial on fresh 2 GiB buffers
    assert c["method"] == "best of 3 trials, 3 copies of 2 GiB each" and c["bytes"] == 2 * 2 * 2**30
    assert [r["copyto_tbps"] for r in c["trials"]] == [4.0, 4.2, 4.1]
    assert c["ceiling_tbps"] == c["copyto_tbps"] == 4.2 and c["own_kernel_tbps"] == round(4.2 * 0.98, 3)
    be.cupy = _FakeCupy(limit_gib=0.2, rates=[4e12])
    with pytest.raises(_FakeCupy._OOM):
        be.copy_ceiling(gib=4.0, reps=3, trials=1)
