"""Watched geometries guarded against the baseline by default (gates/perf.py ``watched``; gates.perf.watched)."""

from __future__ import annotations

import pytest

from evo.config import ConfigError, load_config
from evo.core.records import Code
from gates.perf import PairSamples, perf_gate


def _samples(watched_vs_champ: float, watched_vs_base: float) -> list[PairSamples]:
    """A 1.2x win at the weighted geometry; at the watched one the candidate takes 10 µs, the champion
    10 * watched_vs_champ and the baseline 10 * watched_vs_base (a ratio > 1: the candidate is faster)."""
    n = 12
    return [
        PairSamples("W", 1.0, [10.0] * n, [12.0] * n, [20.0] * n),
        PairSamples("T1", 0.0, [10.0] * n, [10.0 * watched_vs_champ] * n, [10.0 * watched_vs_base] * n),
    ]


def test_slower_than_the_champion_but_faster_than_the_baseline_passes_by_default():
    """The issue's #30: 0.86x of the champion at the watched T1, 1.51x faster than the baseline there."""
    res = perf_gate(_samples(0.86, 1.51), 0.001)
    assert res.verdict.code is Code.PERF_ACCEPTED
    assert res.vs_parent["T1"].value == pytest.approx(0.86) and res.vs_baseline["T1"].value == pytest.approx(1.51)
    # the champion guard (today's rule, asked for) rejects it
    v = perf_gate(_samples(0.86, 1.51), 0.001, watched="champion").verdict
    assert v.code is Code.PERF_SLOWER and v.detail == {"geometry": "T1"}


def test_slower_than_the_baseline_is_rejected_under_either_guard():
    v = perf_gate(_samples(0.9, 0.95), 0.001).verdict
    assert v.code is Code.PERF_WATCHED_BASELINE and v.detail == {"geometry": "T1"}
    assert "guarded against the baseline" in v.reason
    # within the noise band of the baseline: passes
    assert perf_gate(_samples(0.9, 0.999), 0.001).verdict.code is Code.PERF_ACCEPTED
    v = perf_gate(_samples(0.99, 0.95), 0.001, watched_slack=0.02, watched="champion").verdict
    assert v.code is Code.PERF_WATCHED_BASELINE


def test_watched_slack_keeps_its_meaning_against_the_champion():
    assert perf_gate(_samples(0.985, 1.5), 0.001, watched_slack=0.02, watched="champion").verdict.ok
    v = perf_gate(_samples(0.95, 1.5), 0.001, watched_slack=0.02, watched="champion").verdict
    assert v.code is Code.PERF_WATCHED


def _cfg(tmp_path, perf: str):
    p = tmp_path / "c.yaml"
    p.write_text(
        "campaign: t\nfamily: mhc_pre_big_fuse\n"
        "geometries:\n  - {name: T4096_H4096, T: 4096, H: 4096, S: 1, weight: 1}\n"
        f"budget: {{attempts: 3}}\ngates:\n  perf: {{{perf}}}\nstorage: sqlite:///{tmp_path / 'l.db'}\n"
    )
    return load_config(p).gates.perf


def test_config_watched(tmp_path):
    assert _cfg(tmp_path, "rounds: 12").watched == "baseline"
    assert _cfg(tmp_path, "watched: champion").watched == "champion"
    # a slack given alone asks for the champion guard, as it did before gates.perf.watched existed
    p = _cfg(tmp_path, "watched_slack: 0.02")
    assert (p.watched, p.watched_slack) == ("champion", 0.02)
    with pytest.raises(ConfigError) as e:
        _cfg(tmp_path, "watched_slack: 0.02, watched: baseline")
    assert "gates.perf.watched_slack: 0.02 is a slack against the champion" in str(e.value)
    with pytest.raises(ConfigError) as e:
        _cfg(tmp_path, "watched: parent")
    assert "gates.perf.watched: 'parent' is not allowed (allowed: baseline, champion)" in str(e.value)


def test_shipped_fp4_configs_keep_their_champion_guard():
    for name in ("fp4_matvec", "fp4_matvec_pdl"):
        p = load_config(name).gates.perf
        assert (p.watched, p.watched_slack) == ("champion", 0.02)
    assert load_config("mhc_pre_big_fuse").gates.perf.watched == "baseline"
