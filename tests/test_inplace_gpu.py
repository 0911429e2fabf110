"""In-place kernels on the GPU (issue #40, item 3): tests/families/inplace_rmsnorm, whose kernel overwrites its
input and residual as the engines' fused add + RMSNorm does, passes the correctness gate at every launch block
size; its faults (half the rows written, a weight written) are rejected; timing runs it in place and the recheck
after it still passes. Skipped without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from evo.core.family import Geometry, load_family
from evo.core.records import Code
from gates.correctness import baseline_problem, correctness_gate
from harness.build import Builder

pytestmark = pytest.mark.gpu

FOLDER = Path(__file__).parent / "families" / "inplace_rmsnorm"
GEOS = [Geometry("T7_H4096", {"T": 7, "H": 4096}), Geometry("T64_H1024", {"T": 64, "H": 1024})]
FAULTS = {
    "in place, half the rows: blocks past the middle write nothing": Code.CORRECTNESS_UNWRITTEN,
    "in place, half the rows normalized: odd rows keep the input": Code.CORRECTNESS_UNWRITTEN,
    "writes its input: the weight scaled in place": Code.CORRECTNESS_INPUT_WRITTEN,
}


@pytest.fixture(scope="module")
def env():
    from harness.gpu import GpuBackend

    fam = load_family(str(FOLDER))
    b = Builder(fam, GEOS)
    be = GpuBackend(fam, GEOS, b, seeds=2, runs=2, batch_ms=0.5)
    base = fam.baseline()
    ev = be.correctness(be.load(b.build(base), base), freeze=True)
    return fam, b, be, ev


def test_in_place_baseline_matches_float64_and_leaves_its_inputs(env):
    import torch

    fam, _, be, ev = env
    assert baseline_problem(ev, fam.error_bound) is None
    assert not ev.written_inputs and len(ev.checks) == len(GEOS) * 2 * 2
    for c in ev.checks:
        assert c.unwritten == 0 and c.oob_bytes == 0 and len(set(c.hashes)) == 1, c
    for g in GEOS:
        made = fam.make_inputs(g, 0, be.device)
        assert all(torch.equal(be.inputs(g, 0)[k], made[k]) for k in made)


def test_every_launch_block_size_passes(env):
    fam, b, be, _ = env
    for block in (128, 512, 1024):
        g = fam.baseline().replace(block=block)
        ev = be.correctness(be.load(b.build(g), g))
        v = correctness_gate(ev, be.baseline_hashes, "tolerance", None, be.baseline_errors, 2.0)
        assert v.ok, (block, v.reason)


@pytest.mark.parametrize("title", list(FAULTS))
def test_in_place_faults_are_rejected(env, title):
    fam, b, be, _ = env
    g = fam.baseline()
    loaded = be.load(b.build(g, fam.faulty_source(title)), g)
    ev = be.correctness(loaded)
    v = correctness_gate(ev, be.baseline_hashes, "tolerance", None, be.baseline_errors, 2.0)
    assert v.code is FAULTS[title], v
    assert fam.fault_expectation(title) == "rejected: correctness"
    # the next run sees the inputs as they were made (a written input is set back)
    base = be.correctness(be.load(b.build(g), g))
    assert correctness_gate(base, be.baseline_hashes, "exact").ok


def test_timing_runs_in_place_and_the_recheck_starts_again(env):
    fam, b, be, _ = env
    g = fam.baseline().replace(block=512)
    loaded = be.load(b.build(g), g)
    be.correctness(loaded)
    for geo in GEOS:
        s = be.measure([("c", loaded)], geo, 4)
        assert len(s.times_us["c"]) + s.discarded == 4 and all(t > 0 for t in s.times_us["c"])
    assert be.recheck(loaded) is None
