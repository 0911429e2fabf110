"""The latency floor (evo/measure/ceiling.py, harness/gpu.py): its CPU-side logic, and its kernel compiled with
NVRTC."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evo.core.family import Geometry, load_family
from evo.core.records import BASELINE, Attempt, Timing, Verdict
from evo.measure import ceiling as c
from evo.report.logmd import render_log
from harness.build import compile_program
from harness.gpu import EMPTY_KERNEL, EMPTY_KERNEL_NAME, empty_kernel_options


@pytest.mark.parametrize("pdl", [False, True])
def test_the_empty_kernel_compiles(pdl):
    got = compile_program(EMPTY_KERNEL, EMPTY_KERNEL_NAME, "sm_90", list(empty_kernel_options(pdl)))
    assert got.function == EMPTY_KERNEL_NAME and got.cubin
    assert "0 registers" in got.log or "registers" in got.log  # ptxas -v reports it


def test_measure_floor_asks_for_the_baselines_launch_shape():
    fam = load_family("mhc_pre_big_fuse")
    geoms = [Geometry("A", {"T": 4096, "H": 4096, "S": 1}), Geometry("D", {"T": 1, "H": 4096, "S": 32}, 0.0)]
    asked = {}

    def floor(grids, rounds, pdl):
        asked.update(grids=grids, rounds=rounds, pdl=pdl)
        return {g: {"us": 2.5} for g in grids}

    rec = c.measure_floor(SimpleNamespace(name="gpu", simulated=False, latency_floor=floor), fam, geoms, "pdl", 9)
    lc = fam.launch(fam.baseline(), geoms[1])
    assert asked["grids"]["D"] == {"grid": list(lc.grid), "block": list(lc.block)}
    assert (asked["rounds"], asked["pdl"], rec["launch"]) == (9, True, "pdl")
    assert c.floor_us(rec, "D") == 2.5 and c.floor_us(rec, "X") is None
    assert "griddepcontrol.wait" in rec["method"]
    # a simulated backend measures nothing and says so
    rec = c.measure_floor(SimpleNamespace(name="recorded", simulated=True), fam, geoms, "plain", 9)
    assert rec == {"backend": "recorded", "unmeasured": "not measured (recorded backend)"}
    assert c.describe_floor(rec) == "latency floor: not measured (recorded backend)"
    assert c.describe_floor(None, "recorded") == "latency floor: not measured (recorded backend)"


def test_multiples_and_latency_bound():
    assert c.floor_multiple(21.7, 2.0) == "10.8x latency floor"
    assert c.floor_multiple(None, 2.0) == "" and c.floor_multiple(3.0, None) == ""
    assert c.latency_bound(3.0, 5.0) and not c.latency_bound(2.0, 5.0) and not c.latency_bound(None, 5.0)


def test_the_log_labels_a_latency_bound_geometry_and_gives_every_time_as_a_multiple():
    base = Attempt(0, "t", "f", {}, "k", verdict=Verdict(BASELINE))
    base.timings = {"A": Timing(40.0, 0, 12), "D": Timing(5.0, 0, 12)}
    meta = {
        "baseline_id": 0,
        "backend": "gpu",
        "config": {"geometries": [{"name": "A", "weight": 1}, {"name": "D", "weight": 0}]},
        "latency_floor": {"geometries": {"A": {"us": 2.0}, "D": {"us": 3.0}}, "method": "m"},
    }
    md = render_log([base], meta)
    assert "| D (watched) (latency-bound) |" in md and "| A |" in md
    assert "40.00 (20.0x latency floor)" in md and "5.00 (1.7x latency floor)" in md
    assert "Latency floor: A 2.00 µs, D 3.00 µs (m)" in md


@pytest.mark.gpu
@pytest.mark.parametrize("launch", ["plain", "pdl"])
def test_the_floor_on_the_gpu(launch):
    """On a GPU: the empty kernel, launched as the candidates are, takes a few µs, under the baseline's time."""
    from harness.build import Builder
    from harness.gpu import GpuBackend, gpu_available

    if not gpu_available():
        pytest.skip("no CUDA GPU visible")
    from evo.config import load_config

    cfg = load_config(Path(__file__).resolve().parent.parent / "configs" / "mhc_pre_big_fuse.yaml")
    fam = cfg.family  # the config fills the geometry's defaults (prenorm), as a campaign's geometries are made
    geoms = [g for g in cfg.geometries if g.name == "T1_H4096_S32"]
    be = GpuBackend(fam, geoms, Builder(fam, geoms), seeds=1, runs=1, batch_ms=2.0)
    rec = c.measure_floor(be, fam, geoms, launch, 6)
    g = rec["geometries"]["T1_H4096_S32"]
    assert rec["launch"] == launch and g["launch"] == launch and 3 <= g["launches"] <= 2000
    assert 0.1 < g["us"] < 50.0, g
