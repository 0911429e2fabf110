"""GPU checks of the mhc_pre_big_fuse family and the GPU backend (skipped without a GPU)."""

from __future__ import annotations

import pytest

from evo.core.family import Geometry, load_family
from gates import correctness_gate
from harness.build import Builder

pytestmark = pytest.mark.gpu

GEOS = [
    Geometry("T64_H4096", {"T": 64, "H": 4096, "S": 1, "prenorm": False}),
    Geometry("T3_H7168_S4", {"T": 3, "H": 7168, "S": 4, "prenorm": False}),
    Geometry("T40_H4096_S32", {"T": 40, "H": 4096, "S": 32, "prenorm": False}),
    Geometry("T8_H4096_pre", {"T": 8, "H": 4096, "S": 1, "prenorm": True}),
]


@pytest.fixture(scope="module")
def env():
    from harness.gpu import GpuBackend

    fam = load_family("mhc_pre_big_fuse")
    b = Builder(fam, GEOS)
    be = GpuBackend(fam, GEOS, b, seeds=3, runs=2)
    base = fam.baseline()
    loaded = be.load(b.build(base), base)
    ev = be.correctness(loaded, freeze=True)
    return fam, b, be, ev


def test_baseline_matches_float64(env):
    fam, _, _, ev = env
    assert len(ev.checks) == len(GEOS) * 3 * 3
    for c in ev.checks:
        assert c.rel_err is not None and c.rel_err < fam.error_bound(c.output), c
        assert c.nonfinite == 0 and c.unwritten == 0
        assert len(set(c.hashes)) == 1


def _genomes(fam):
    base = fam.baseline()
    out = [base.replace(**{k.name: v}) for k in fam.knobs for v in k.values if v != k.default]
    out.append(base.replace(meta="slice", barrier="early", unroll=4, vec=8, warp0_stream=True, h_split=8, block=512))
    out.append(base.replace(meta="slice", barrier="early", unroll=2, h_split=2, block=128, split_reduce="warp"))
    return out


def test_every_knob_keeps_bits_or_tolerance(env):
    fam, b, be, _ = env
    for g in _genomes(fam):
        if fam.check(g, GEOS):
            continue
        ev = be.correctness(be.load(b.build(g), g))
        inexact = {geo.name: fam.inexact_knobs(g, geo) for geo in GEOS}
        exact_geos = {k for k, v in inexact.items() if not v}
        sub = type(ev)([c for c in ev.checks if c.geometry in exact_geos])
        v = correctness_gate(sub, be.baseline_hashes, "exact")
        assert v.ok, (dict(g), v.reason)
        tol = correctness_gate(ev, be.baseline_hashes, "tolerance", None, be.baseline_errors, 2.0)
        assert tol.ok, (dict(g), tol.reason)


_FAM = load_family("mhc_pre_big_fuse")


# Crashes and hangs need worker isolation (evo selfcheck); here, the faults the correctness gate must catch.
@pytest.mark.parametrize("title", [t for t in _FAM.faults if _FAM.fault_expectation(t) == "rejected: correctness"])
def test_faults_are_rejected(env, title):
    fam, b, be, _ = env
    g = fam.baseline()
    ev = be.correctness(be.load(b.build(g, fam.faulty_source(title)), g))
    v = correctness_gate(ev, be.baseline_hashes, "exact")
    assert not v.ok and v.gate == "correctness", v
    assert any(
        p in v.reason for p in ("differs from the baseline", "race", "never written", "NaN", "wrote past the bounds")
    ), v.reason


def test_graph_timing_is_physical():
    from harness.gpu import GpuBackend

    fam = load_family("mhc_pre_big_fuse")
    g = Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": False})
    b = Builder(fam, [g])
    be = GpuBackend(fam, [g], b, seeds=1, runs=2)
    base = fam.baseline()
    loaded = be.load(b.build(base), base)
    s = be.measure([("a", loaded)], g, 5)
    us = sorted(s.times_us["a"])[2]
    tbps = fam.bytes_moved(g) / (us * 1e-6) / 1e12
    # A graph that captured nothing "runs" in ~1 µs; the real kernel moves ~168 MB.
    assert 0.5 < tbps < 5.5, (us, tbps)


def test_copy_ceiling_is_the_best_of_its_trials():
    from harness.gpu import GpuBackend

    fam = load_family("mhc_pre_big_fuse")
    b = Builder(fam, GEOS[:1])
    be = GpuBackend(fam, GEOS[:1], b, seeds=1, runs=1)
    c = be.copy_ceiling(gib=0.5, reps=5, trials=2)
    assert len(c["trials"]) == 2 and c["bytes"] == 2**30 and "2 trials" in c["method"]
    for t in c["trials"]:
        assert 0.3 < t["own_kernel_tbps"] <= c["own_kernel_tbps"] and 0.3 < t["copyto_tbps"] <= c["copyto_tbps"]
    assert c["ceiling_tbps"] == max(c["own_kernel_tbps"], c["copyto_tbps"]) < 10.0


def _baseline_at_t4096():
    """mhc_pre_big_fuse's baseline loaded on the GPU backend at T4096_H4096 (batches of about 2 ms)."""
    from harness.gpu import GpuBackend

    fam = load_family("mhc_pre_big_fuse")
    g = Geometry("T4096_H4096", {"T": 4096, "H": 4096, "S": 1, "prenorm": False})
    b = Builder(fam, [g])
    be = GpuBackend(fam, [g], b, seeds=1, runs=1, batch_ms=2.0)
    base = fam.baseline()
    loaded = be.load(b.build(base), base)
    return fam, g, be, loaded


def test_ceiling_check_alternates_on_the_gpu():
    # evo/measure/ceiling.py on the GPU backend: a copy-ceiling trial of 4 GiB and the kernel's own batches, in turns
    from evo.measure import ceiling

    fam, g, be, loaded = _baseline_at_t4096()
    trials = ceiling.run_check(be, loaded, [g], {g.name: be.launches_for(loaded, g)}, 6, 2)
    assert [t["first"] for t in trials] == ["ceiling", "champion"]
    s = ceiling.summarize(trials, {g.name: fam.bytes_moved(g)})[g.name]
    assert s["alternations"] + s["unmeasured"] == 2
    for t in trials:
        assert 1.0 < t["ceiling_tbps"] < 10.0
    if s["alternations"]:  # (every round of an alternation may be throttled on a busy card)
        assert 5.0 < s["pct_median"] < 105.0, s


def test_measure_sizes_each_parts_graph_as_asked():
    # a campaign gives each part a graph of its own length; per-launch times must not depend on it beyond noise
    _, g, be, loaded = _baseline_at_t4096()
    n = be.launches_for(loaded, g)
    s = be.measure([("short", loaded), ("long", loaded)], g, 8, {"short": max(3, n // 4), "long": n})
    assert s.launches == {"short": max(3, n // 4), "long": n}
    assert s.batch_text() == f"graphs of short x {max(3, n // 4)}, long x {n} launches"
    if s.times_us["long"]:  # (every round may be throttled on a busy card)
        short, long = sorted(s.times_us["short"]), sorted(s.times_us["long"])
        assert 0.8 < short[len(short) // 2] / long[len(long) // 2] < 1.25
    assert be.measure([("a", loaded)], g, 2, 7).launches == 7
