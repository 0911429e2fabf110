"""Issue 43 item 4: a campaign's attempts as a Kernel Tuner cache and as nvbench-style JSON (`evo table --as`)."""

from __future__ import annotations

import json

import pytest

from evo.cli import main
from evo.config import load_config
from evo.ledger.ledger import Ledger
from evo.search.ideas import idea_slugs
from tests.test_nothing_lost_round2_ledger import _config


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    home = tmp_path_factory.mktemp("interop")
    cfg = _config(home, attempts=10)
    assert main(["run", str(cfg), "--plain"]) == 0
    c = load_config(cfg)
    return cfg, c, Ledger(c.storage, c.campaign, c.family.knobs, readonly=True).attempts()


def test_kernel_tuner_cache_holds_every_knob_genome_at_the_geometry(campaign, tmp_path, capsys):
    """`evo table --as kernel-tuner` and `evo kt-cache --ledger` are one writer: the same file, byte for byte; each
    knob genome measured at the geometry once (its first measurement), its time the campaign's median in ms."""
    cfg, c, attempts = campaign
    out, other = tmp_path / "cache.json", tmp_path / "kt.json"
    g = c.geometries[1].name
    assert main(["table", str(cfg), "--as", "kernel-tuner", "--geometry", g, "-o", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert main(["kt-cache", str(cfg), "--ledger", "--geometry", g, "-o", str(other)]) == 0
    assert out.read_bytes() == other.read_bytes()
    doc = json.loads(out.read_text())
    keys = [k.name for k in c.family.knobs]
    assert doc["tune_params_keys"] == keys and doc["objective"] == "time"
    assert doc["problem_size"] == list(c.geometries[1].params.values())
    firsts = {}
    for a in sorted(attempts, key=lambda x: x.id):
        if not idea_slugs(a.genome) and (
            g in a.timings or a.verdict.status == "error" or a.verdict.gate == "correctness"
        ):
            firsts.setdefault(",".join(str(a.genome[k]) for k in keys), a)
    assert set(doc["cache"]) == set(firsts)
    timed = 0
    for key, a in firsts.items():
        e = doc["cache"][key]
        assert {k: e[k] for k in keys} == {k: a.genome[k] for k in keys}
        if isinstance(e["time"], float):
            timed += 1
            assert e["time"] == pytest.approx(a.timings[g].median_us / 1000)  # Kernel Tuner's unit: ms
        else:
            assert e["time"] in ("CompilationFailedConfig", "RuntimeFailedConfig")
    assert timed >= 2
    util = pytest.importorskip("kernel_tuner.util")  # Kernel Tuner's own reader takes it (the bench extra)
    read = util.read_cache(str(out), open_cache=False)
    assert set(read["cache"]) == set(firsts)


def test_a_kernel_tuner_cache_not_named_json_is_one_line(campaign, tmp_path, capsys):
    cfg, c, _ = campaign
    assert main(["table", str(cfg), "--as", "kernel-tuner", "-o", str(tmp_path / "cache.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".json" in err


def test_nvbench_json_has_a_state_per_attempt_and_geometry_timed(campaign, tmp_path, capsys):
    cfg, c, attempts = campaign
    out = tmp_path / "nvbench.json"
    assert main(["table", str(cfg), "--as", "nvbench", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    (bench,) = doc["benchmarks"]
    assert [a["name"] for a in bench["axes"]] == [k.name for k in c.family.knobs] + ["geometry"]
    states = bench["states"]
    assert len(states) == sum(len(a.timings) for a in attempts)
    by_name = {s["name"]: s for s in states}
    for a in attempts:
        for g, t in a.timings.items():
            (s,) = [v for n, v in by_name.items() if n.endswith(f"evo_attempt={a.id}") and f"geometry={g} " in n]
            tags = {x["tag"]: x["data"][0]["value"] for x in s["summaries"]}
            assert float(tags["nv/cold/time/gpu/mean"]) == pytest.approx(t.median_us * 1e-6)
            assert int(tags["nv/cold/sample_size"]) == t.samples
            assert tags["evo/verdict"] == a.verdict.label()


def test_a_geometry_not_in_the_campaign_is_one_line(campaign, capsys):
    cfg, _, _ = campaign
    assert main(["table", str(cfg), "--as", "kernel-tuner", "--geometry", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--geometry nope" in err
