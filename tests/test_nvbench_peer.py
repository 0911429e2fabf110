"""Issue 43 item 4: an nvbench result of the baseline kernel read as a peer figure (``peer: {nvbench: FILE}``).

The files here are written by the test in the layout nvbench's JSON printer documents (``--json FILE``: devices,
benchmarks[].axes, states[] with axis_values and tagged summaries whose ``data`` holds the value, numbers written
as strings); no file of nvbench's is copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evo.cli import main
from evo.config import ConfigError, load_config
from evo.ledger.storage import open_ledger
from evo.report.nvbench_peer import NVBENCH_META, Figure, NvbenchError, NvbenchPeer, read_nvbench
from tests.test_nothing_lost_round2_ledger import _config

DEVICE = "NVIDIA H200"


def _summary(tag: str, name: str, hint: str, value: float) -> dict:
    return {
        "tag": tag,
        "name": name,
        "hint": hint,
        "description": "",
        "data": [{"name": "value", "type": "float64", "value": repr(value)}],
    }


def _state(T: int, H: int, S: int, dtype: str = "bf16", median: float | None = None, mean: float | None = None):
    """One state as nvbench writes it; median/mean in seconds (None: that summary absent)."""
    axis = [("T", T), ("H", H), ("S", S)]
    summaries = [_summary("nv/cold/sample_size", "Samples", "sample_size", 1000.0)]
    if mean is not None:
        summaries.append(_summary("nv/cold/time/gpu/mean", "GPU Time", "duration", mean))
    if median is not None:
        summaries.append(_summary("nv/cold/time/gpu/median", "GPU Time (median)", "duration", median))
    summaries.append(_summary("nv/cold/time/gpu/stdev/relative", "Noise", "percentage", 0.004))
    return {
        "name": f"Device=0 In={dtype} " + " ".join(f"{n}={v}" for n, v in axis),
        "min_samples": 10,
        "device": 0,
        "type_config_index": 0,
        "axis_values": [{"name": "In", "type": "string", "value": dtype}]
        + [{"name": n, "type": "int64", "value": str(v)} for n, v in axis],
        "summaries": summaries,
        "is_skipped": False,
    }


def _doc(states: list[dict], name: str = "mhc_pre_big_fuse", more: tuple[str, ...] = ()) -> dict:
    axes = [{"name": n, "type": "int64", "flags": "", "values": []} for n in ("T", "H", "S")]
    bench = {"name": name, "index": 0, "min_samples": 10, "devices": [0], "axes": axes, "states": states}
    others = [{"name": m, "index": i + 1, "devices": [0], "axes": [], "states": []} for i, m in enumerate(more)]
    return {
        "meta": {"version": {"json": {"major": 1, "minor": 0, "patch": 0, "string": "1.0.0"}}},
        "devices": [{"id": 0, "name": DEVICE, "sm_version": 900}],
        "benchmarks": [bench, *others],
    }


def _states() -> list[dict]:
    skipped = {**_state(1, 4096, 32, median=1e-5), "is_skipped": True, "skip_reason": "too short"}
    return [
        _state(4096, 4096, 1, median=50e-6, mean=51e-6),
        _state(4096, 7168, 1, mean=80e-6),  # an nvbench that writes no median: the mean, said so
        skipped,
        _state(8192, 4096, 1, median=90e-6),  # a shape the campaign does not have
    ]


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.fixture(scope="module")
def cfg():
    return load_config("configs/mhc_pre_big_fuse.yaml")


def test_each_geometry_gets_the_state_that_agrees_with_it(cfg, tmp_path):
    doc = _doc(_states(), more=("other",))
    nv = read_nvbench(_write(tmp_path / "nv.json", doc), cfg.geometries, names=[cfg.family.entry, cfg.family.name])
    assert nv.benchmark == "mhc_pre_big_fuse"  # of two, the one named as the family
    f = nv.figures
    assert f["T4096_H4096"].us == pytest.approx(50.0) and f["T4096_H4096"].statistic == "median"
    assert f["T4096_H4096"].device == DEVICE and f["T4096_H4096"].noise_pct == pytest.approx(0.4)
    assert f["T4096_H7168"].us == pytest.approx(80.0) and f["T4096_H7168"].statistic == "mean"
    assert f["T1_H4096_S32"] == Figure(error="no state matches it")  # its one state was skipped


def test_an_axis_the_geometry_does_not_fix_is_no_figure(cfg, tmp_path):
    states = [_state(4096, 4096, 1, "bf16", median=50e-6), _state(4096, 4096, 1, "fp16", median=40e-6)]
    states.append(_state(4096, 7168, 1, median=80e-6))
    f = read_nvbench(_write(tmp_path / "nv.json", _doc(states)), cfg.geometries).figures
    assert f["T4096_H4096"] == Figure(error="2 states match it (an axis it does not fix)")
    assert f["T4096_H7168"].us == pytest.approx(80.0)


def test_a_file_that_cannot_serve_is_one_line(cfg, tmp_path):
    with pytest.raises(NvbenchError, match="not an nvbench JSON result"):
        read_nvbench(_write(tmp_path / "a.json", {"cache": {}}), cfg.geometries)
    with pytest.raises(NvbenchError, match="no state of benchmark 'mhc_pre_big_fuse' matches"):
        read_nvbench(_write(tmp_path / "b.json", _doc([_state(8192, 4096, 1, median=1e-5)])), cfg.geometries)
    with pytest.raises(NvbenchError, match=r"holds 2 benchmarks \(x, y\): name one"):
        read_nvbench(_write(tmp_path / "c.json", _doc(_states(), name="x", more=("y",))), cfg.geometries)
    named = read_nvbench(tmp_path / "c.json", cfg.geometries, benchmark="x")
    assert named.benchmark == "x"


def test_the_config_key_is_checked_when_the_config_loads(tmp_path):
    text = _config(tmp_path, attempts=3).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("peer: {torch_compile: default}", "peer: {torch_compile: off, nvbench: gone.json}"))
    with pytest.raises(ConfigError, match=r"^peer\.nvbench: .*gone\.json: cannot be read as JSON") as e:
        load_config(bad)
    assert "\n" not in str(e.value)


def test_evo_run_shows_the_nvbench_time_beside_the_champion(tmp_path):
    _write(tmp_path / "nv.json", _doc(_states()))
    path = _config(tmp_path, attempts=3)
    text = path.read_text().replace("peer: {torch_compile: default}", "peer: {torch_compile: off, nvbench: nv.json}")
    assert text != path.read_text()
    path.write_text(text)
    assert main(["run", str(path), "--plain"]) == 0
    c = load_config(path)
    meta = open_ledger(c.storage, c.campaign, c.family.knobs, readonly=True).all_meta()
    assert meta[NVBENCH_META]["figures"]["T4096_H4096"]["us"] == pytest.approx(50.0)
    kept = NvbenchPeer.from_meta(meta)
    assert kept is not None and kept.figures["T1_H4096_S32"].error == "no state matches it"
    log = (c.log_dir / "attempts.md").read_text()
    peer = log[log.index("## Peer") :].split("\n## ")[0]
    assert "nvbench µs" in peer and "Champion vs nvbench" in peer
    row = next(ln for ln in peer.splitlines() if ln.startswith("| T4096_H4096"))
    best = float(row.split("|")[4])  # the best champion's µs
    assert "| 50.00 |" in row and f"{50.0 / best:.3f}x" in row
    assert "80.00 (mean)" in peer and f"timed on {DEVICE}" in peer
