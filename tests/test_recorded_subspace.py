"""A recorded sweep of part of a family's knob space (tools/sweep.py --knobs): the campaign on the recorded backend
searches the values swept, and says so (evo.config.narrow_to_recorded; harness/recorded.py ``knob_space``).

The shipped case: mhc_pre_decode's knob space has about 184,000 genomes; its H200 sweep covers 384 of them, so the
decode campaign (configs/mhc_pre_decode.yaml) runs on a CPU machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evo.config import ConfigError, load_config, narrow_to_recorded, restrict_knobs
from evo.core.genome import Genome
from evo.loop.campaign import Campaign
from evo.loop.seams import config_fingerprint
from evo.report.logmd import render_status
from harness.recorded import RecordedBackend

ROOT = Path(__file__).resolve().parent.parent
DECODE = ROOT / "configs" / "mhc_pre_decode.yaml"


@pytest.fixture(scope="module")
def decode_cfg():
    return load_config(DECODE, backend_override="recorded")


def test_narrowing_keeps_what_the_space_holds_in_the_family_order(decode_cfg):
    cfg = decode_cfg
    same, lines = narrow_to_recorded(cfg, None)
    assert same is cfg and lines == []
    full = {k.name: list(k.values) for k in cfg.family.knobs}
    assert narrow_to_recorded(cfg, full) == (cfg, [])
    narrowed, lines = narrow_to_recorded(cfg, {**full, "block": [512, 256], "fast_math": [False, True]})
    assert narrowed.family.knob("block").values == (256, 512)
    assert narrowed.knobs["block"] == (256, 512) and "block" not in cfg.knobs  # the config itself is untouched
    assert lines == ["block: 256, 512 of 64, 128, 256, 512"]
    assert cfg.family.knob("block").values == (64, 128, 256, 512)
    # JSON keeps 1 and true apart; so does the narrowing (a bool knob is not matched by ints)
    assert narrow_to_recorded(cfg, {**full, "fast_math": [0, 1]}) == (cfg, [])
    # 0 == False in Python: a space of [False, 0] must not read as holding True's type twice, nor [0] as False
    assert narrow_to_recorded(cfg, {**full, "fast_math": [0]}) == (cfg, [])
    assert narrow_to_recorded(cfg, {**full, "fast_math": [False]})[0].family.knob("fast_math").values == (False,)
    # a space without the baseline's value, or without the knob: left alone (the backend names what it lacks)
    assert narrow_to_recorded(cfg, {**full, "block": [512]}) == (cfg, [])
    del full["block"]
    assert narrow_to_recorded(cfg, full) == (cfg, [])


def test_restrict_knobs_names_the_bad_knob_or_value(decode_cfg):
    fam = decode_cfg.family
    with pytest.raises(ConfigError, match=r"^--knobs\.nope: no such knob in mhc_pre_decode"):
        restrict_knobs(fam, {"nope": [1]}, "--knobs")
    with pytest.raises(ConfigError, match=r"^--knobs\.block: 96 is not a value"):
        restrict_knobs(fam, {"block": [96, 256]}, "--knobs")
    with pytest.raises(ConfigError, match=r"must keep the baseline's value 256"):
        restrict_knobs(fam, {"block": [512]}, "--knobs")
    with pytest.raises(ConfigError, match=r"True is not a value"):  # 1 == True, but unroll's values are ints
        restrict_knobs(fam, {"unroll": [True]})
    with pytest.raises(ConfigError, match=r"0 is not a value"):  # and a bool knob wants bools
        restrict_knobs(fam, {"fast_math": [0, 1]})


def test_the_decode_sweep_covers_its_declared_sub_space(decode_cfg):
    be = RecordedBackend(decode_cfg.family, decode_cfg.geometries, launch="pdl")
    space = be.knob_space()
    assert space is not None and space["block"] == [128, 256, 512] and space["h_split"] == [1]
    narrowed, _ = narrow_to_recorded(decode_cfg, space)
    n = 1
    for k in narrowed.family.knobs:
        n *= len(k.values)
    assert n == 384 and set(be.sweep.data["genomes"]) == set(be.sweep.data["space"]["order"])
    floor = be.recorded_floor()
    assert floor is not None and floor["launch"] == "pdl" and "measured by the sweep" in floor["method"]
    assert set(floor["geometries"]) == {g.name for g in decode_cfg.geometries}


def _decode_config(tmp_path: Path, attempts: int, extra: str = "") -> Path:
    text = DECODE.read_text()
    text = re.sub(r"^budget: .*$", f"budget: {{attempts: {attempts}}}", text, flags=re.M)
    text = re.sub(r"^backend: .*$", "backend: recorded", text, flags=re.M)
    if extra:
        text = re.sub(rf"^{extra.split(':')[0]}: .*$\n", "", text, flags=re.M) + extra + "\n"
    cfg_path = tmp_path / "decode.yaml"
    cfg_path.write_text(text + f"storage: sqlite:///{tmp_path / 'd.db'}\n")
    return cfg_path


def test_the_decode_campaign_runs_on_the_recorded_sub_space(tmp_path):
    cfg_path = _decode_config(tmp_path, 40)
    out: list[str] = []
    camp = Campaign(load_config(cfg_path), out=out.append, command="pytest")
    res = camp.run()
    assert out[0].startswith("recorded backend: searching the knob values it measured (block: 128, 256, 512 of 64,")
    space = camp.backend.knob_space()
    attempts = camp.ledger.attempts()
    assert len(attempts) == 40
    for a in attempts:  # every proposal inside what the sweep measured: none asked for a genome it lacks
        g = Genome(a.genome)
        assert all(g[k] in v for k, v in space.items()), a.genome
        assert a.verdict.code.value != "error.not_recorded", a.verdict.reason
    champ = camp.ledger.champion()
    assert champ is not None and champ.id > 0 and res is not None
    # the floor the sweep measured, as a GPU campaign has it, every line labelled as simulated
    assert any(line.startswith("latency floor: T1_H4096_S32 0.39 µs") for line in out)
    assert all("simulated from recorded H200 measurements" in line for line in out)
    meta = camp.ledger.meta("latency_floor")
    assert meta["backend"] == "recorded" and meta["geometries"]["T128_H7168"]["us"] > 0
    # the ledger keeps the config's own knobs (a GPU resume or replay of it matches), and says what was searched
    cfg_meta = camp.ledger.meta("config")
    assert cfg_meta["knobs"] == config_fingerprint(load_config(cfg_path))["knobs"]
    assert cfg_meta["knobs"]["block"] == [64, 128, 256, 512] and cfg_meta["searched_knobs"][0].startswith("block: ")
    assert "searched: block: 128, 256, 512 of 64" in render_status(attempts, camp.ledger.all_meta())
    # a resume narrows the same way and goes on
    more = cfg_path.read_text().replace("budget: {attempts: 40}", "budget: {attempts: 45}")
    cfg_path.write_text(more)
    again = Campaign(load_config(cfg_path), out=lambda s: None, command="pytest")
    again.run()
    assert len(again.ledger.attempts()) == 45


def test_an_isolated_recorded_worker_narrows_too(tmp_path):
    """worker.isolation: worker puts the recorded backend in a child process: it says its sub-space and floor at
    start, so the campaign narrows as in-process (before: NotRecorded after the baseline)."""
    cfg_path = _decode_config(tmp_path, 8, "worker: {isolation: worker, timeout_s: 60}")
    out: list[str] = []
    camp = Campaign(load_config(cfg_path), out=out.append, command="pytest")
    try:
        camp.run()
    finally:
        close = getattr(camp.backend, "close", None)
        if close:
            close()
    assert type(camp.backend).__name__ == "WorkerBackend"
    assert out[0].startswith("recorded backend: searching the knob values it measured (block: 128, 256, 512")
    attempts = camp.ledger.attempts()
    assert len(attempts) == 8 and not [a for a in attempts if a.verdict.code.value.startswith("error")]
    assert camp.ledger.meta("latency_floor")["geometries"]["T1_H4096_S32"]["us"] > 0
