"""Whole campaigns on the recorded H200 backend: records, resume, interruption, refusal, tabu, the CLI."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evo.config import load_config
from evo.core.records import ACCEPTED, BASELINE, ERROR, REJECTED, SIMULATED_LABEL
from evo.ledger.ledger import Ledger
from evo.loop.campaign import Campaign, CampaignError
from evo.report.logmd import write_log

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "mhc_pre_big_fuse.yaml"
GEOMETRIES = ("T4096_H4096", "T4096_H7168", "T1_H4096_S32")


def _sub(text: str, pattern: str, repl: str) -> str:
    new, n = re.subn(pattern, repl, text, flags=re.M)
    assert n == 1, f"the shipped config no longer has {pattern!r}"
    return new


def write_config(
    tmp_path: Path,
    attempts: int,
    name: str = "c",
    drop_geometry: str | None = None,
    db: str | None = None,
    extra: str = "",
) -> Path:
    """The shipped config's text with a small budget, the recorded backend and storage under tmp_path."""
    text = SHIPPED.read_text()
    text = _sub(text, r"^budget: .*$", f"budget: {{attempts: {attempts}}}")
    text = _sub(text, r"^backend: .*$", "backend: recorded")
    if drop_geometry:
        text = _sub(text, rf"^  - \{{name: {drop_geometry},.*\n", "")
    for line in extra.splitlines():  # a key of extra replaces the shipped one (a key given twice is refused)
        key = line.split(":")[0]
        if key and not key.startswith(" "):
            text = re.sub(rf"^{re.escape(key)}: .*\n", "", text, flags=re.M)
    text += f"storage: sqlite:///{tmp_path / (db or name + '.db')}\n" + extra
    p = tmp_path / "configs" / f"{name}.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def run_campaign(path: Path, out: list[str] | None = None):
    cfg = load_config(path)
    camp = Campaign(cfg, out=(out.append if out is not None else (lambda s: None)), command="pytest")
    return camp, camp.run()


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    # Module-scoped fixtures run before conftest's per-test EVO_CACHE_DIR: point at the same session cache here.
    d = os.environ.get("EVO_TEST_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cubin-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVO_CACHE_DIR", d)
        yield d


@pytest.fixture(scope="module")
def run25(tmp_path_factory, cache_env):
    tmp = tmp_path_factory.mktemp("run25")
    path = write_config(tmp, 25)
    out: list[str] = []
    camp, summary = run_campaign(path, out)
    return camp, summary, camp.ledger.attempts(), out, tmp


# ---------------------------------------------------------------------------
# (a) a fresh 25-attempt campaign


def test_fresh_campaign_records_every_attempt(run25):
    camp, summary, atts, out, _ = run25
    assert len(atts) == 25 and summary.attempts == 25 and summary.new_attempts == 24
    assert summary.stopped.startswith("attempt budget reached (25/25)")
    assert [a.id for a in atts] == list(range(25))
    keys = [a.genome_key for a in atts]
    assert len(set(keys)) == 25
    base = atts[0]
    assert base.verdict.status == BASELINE
    assert base.genome == dict(camp.family.baseline())
    assert set(base.timings) == set(GEOMETRIES)
    assert all(t.median_us > 0 and t.samples >= 3 for t in base.timings.values())
    assert base.score == 1.0
    assert camp.ledger.meta("baseline_id") == 0
    for a in atts:
        assert a.verdict.reason.strip(), a
        assert a.backend == "recorded"
        assert a.verdict.status in (BASELINE, ACCEPTED, REJECTED, ERROR)
    for a in atts[1:]:
        assert a.parent_id is not None and a.origin
        if a.timings:
            assert all(SIMULATED_LABEL in t.method for t in a.timings.values())
    assert any(a.verdict.status == REJECTED and a.verdict.gate == "perf" for a in atts)  # the gates did decide


def test_fresh_campaign_is_marked_simulated(run25):
    camp, _, atts, out, tmp = run25
    assert camp.simulated is True
    assert camp.ledger.meta("simulated") is True
    assert camp.ledger.meta("backend") == "recorded"
    assert any("A/A noise floor" in line for line in out)
    log = write_log(atts, camp.ledger.all_meta(), tmp / "attempts.md")
    text = log.read_text()
    assert "Simulated from recorded H200 measurements" in text
    for a in atts:
        assert f"#{a.id}" in text


def test_champion_chain_is_consistent(run25):
    camp, summary, atts, _, _ = run25
    accepted = [a for a in atts if a.verdict.status == ACCEPTED]
    assert accepted, "25 attempts on the recorded sweep find at least one win (meta=slice alone is 1.2x)"
    assert summary.champion is not None and summary.champion.id == accepted[-1].id
    # Each accepted attempt was measured against the champion of its time.
    champ = 0
    for a in atts[1:]:
        if a.timings:
            assert a.parent_id == champ, (a.id, a.parent_id, champ)
        if a.verdict.status == ACCEPTED:
            champ = a.id


# ---------------------------------------------------------------------------
# (e) exact mode and the inexact split_reduce=warp


def test_the_surrogate_knows_exact_mode_from_the_config(run25):
    # The shipped config runs in exact mode and the surrogate is told so (Proposer.correctness_mode): no genome
    # with an inexact knob is proposed, so none is rejected for it and a resumed campaign's tabu is empty. (The
    # rejection of split_reduce=warp, once, and the tabu read back from the verdicts, with a proposer that is not told:
    # tests/test_verdict_codes.py, scenario "tabu".)
    camp, _, atts, _, _ = run25
    assert not [a for a in atts if any(camp.family.inexact_knobs(a.genome, g) for g in camp.cfg.geometries)]
    again = Campaign(load_config(camp.cfg.path), out=lambda s: None, command="pytest")
    assert again.tabu() == {}


# ---------------------------------------------------------------------------
# (b) resume


# (b) and (c) drop the watched S=32 geometry: one module per genome instead of two halves the compile time.
S1_ONLY = "T1_H4096_S32"


def test_resume_continues_without_repeats(tmp_path, cache_env):
    path = write_config(tmp_path, 12, drop_geometry=S1_ONLY)
    _, s1 = run_campaign(path)
    assert s1.attempts == 12
    first = Ledger(load_config(path).storage, "mhc_pre_big_fuse", load_config(path).family.knobs).attempts()
    assert len(first) == 12

    path = write_config(tmp_path, 24, drop_geometry=S1_ONLY)  # same storage, bigger budget
    camp, s2 = run_campaign(path)
    atts = camp.ledger.attempts()
    assert len(atts) == 24 and s2.attempts == 24 and s2.new_attempts == 12
    assert [a.id for a in atts] == list(range(24))
    keys = [a.genome_key for a in atts if a.finish is None]  # the finish measures near misses again, on purpose
    assert len(set(keys)) == len(keys)
    assert all(a.finish["kind"] == "near-champion" for a in atts if a.finish and a.genome_key in keys)
    assert [a.to_json() for a in atts[:12]] == [a.to_json() for a in first]
    assert sum(a.verdict.status == BASELINE for a in atts) == 1
    sessions = camp.ledger.meta("sessions")
    assert len(sessions) == 2  # an A/A floor per (re)start

    # A third run with the budget already spent adds nothing.
    camp, s3 = run_campaign(path)
    assert s3.new_attempts == 0 and len(camp.ledger.attempts()) == 24


# ---------------------------------------------------------------------------
# (c) an attempt left running by a killed process


def test_interrupted_attempt_is_recorded_and_the_run_goes_on(tmp_path, cache_env):
    path = write_config(tmp_path, 5, drop_geometry=S1_ONLY)
    camp, _ = run_campaign(path)
    assert len(camp.ledger.attempts()) == 5
    cfg = load_config(path)
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs)
    trial = led.ask()  # the "killed" process: asked, never recorded
    number = trial.number

    path = write_config(tmp_path, 8, drop_geometry=S1_ONLY)
    out: list[str] = []
    camp, summary = run_campaign(path, out)
    atts = camp.ledger.attempts()
    by_id = {a.id: a for a in atts}
    assert number in by_id
    lost = by_id[number]
    assert lost.verdict.status == ERROR and lost.verdict.kind == "interrupted"
    assert lost.verdict.label() == "error: interrupted"
    assert lost.verdict.reason
    assert any("1 attempt(s) left running" in line for line in out), out
    # The run went on past it: 8 counted attempts (interrupted ones do not count) and ids after it.
    counted = [a for a in atts if a.verdict.kind != "interrupted"]
    assert len(counted) == 8 and len(atts) == 9
    assert summary.new_attempts == 3
    assert max(a.id for a in atts) > number
    # The interrupted genome is not "seen": it may be proposed again.
    assert lost.genome_key not in camp.ledger.seen_keys() or any(
        a.genome_key == lost.genome_key and a.id != number for a in atts
    )


# ---------------------------------------------------------------------------
# (d) a different geometry list on the same storage


def test_different_geometries_on_the_same_storage_refused(tmp_path, cache_env):
    path = write_config(tmp_path, 3)
    run_campaign(path)
    cfg = load_config(path)
    before = [a.to_json() for a in Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).attempts()]

    other = write_config(tmp_path, 6, name="other", drop_geometry="T4096_H7168", db="c.db")
    assert len(load_config(other).geometries) == 2
    with pytest.raises(CampaignError, match="different geometries"):
        run_campaign(other)
    after = [a.to_json() for a in Ledger(cfg.storage, cfg.campaign, cfg.family.knobs).attempts()]
    assert after == before  # nothing recorded by the refused run


# ---------------------------------------------------------------------------
# (f) the CLI


def test_cli_run_plain_says_simulated_on_every_attempt_line(tmp_path, cache_env):
    path = write_config(tmp_path, 6)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVO_CACHE_DIR": cache_env}
    r = subprocess.run(
        [sys.executable, "-m", "evo", "run", str(path), "--plain"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stdout.splitlines()
    attempt_lines = [ln for ln in lines if re.match(r"#\d+\s", ln)]
    assert len(attempt_lines) == 6, r.stdout
    for ln in lines:  # every line, not only the attempts
        assert "simulated from recorded H200 measurements" in ln, ln
    assert "simulated from recorded H200 measurements" in lines[0]
    assert any(ln.startswith("evo: stopped: attempt budget reached (6/6)") for ln in lines), r.stdout
    log = load_config(path).log_dir / "attempts.md"
    assert log.is_file() and "Simulated from recorded H200 measurements" in log.read_text()


# ---------------------------------------------------------------------------
# the early-out stopping criterion (gates.perf.EarlyStop)


def test_early_out_stops_clear_losers_and_skips_the_rest(run25):
    camp, _, atts, _, _ = run25
    early = [a for a in atts if "stopped early" in a.verdict.reason]
    assert early, "a 25-attempt campaign from the baseline always meets clear losers"
    weighted = {g.name for g in camp.cfg.geometries if g.weight > 0}
    for a in early:
        assert a.verdict.status == REJECTED and a.verdict.gate == "perf"
        measured = set(a.timings)
        assert measured and measured <= weighted and len(measured) < len(GEOMETRIES)
        last = [g for g in measured if "(stopped early)" in a.timings[g].method]
        assert len(last) == 1 and a.timings[last[0]].samples == camp.cfg.gates.perf.early_rounds
        if camp.cfg.gates.perf.rule == "every":  # slower at that geometry in every round
            assert a.speedup_vs_parent[last[0]].value < 1.0 and a.speedup_vs_parent[last[0]].hi < 1.0
        else:  # weighted: slower in the weighted mean over it and the geometries before it, not at each one
            w = {g.name: g.weight for g in camp.cfg.geometries if g.name in measured}
            logs = sum(w[g] * math.log(a.speedup_vs_parent[g].value) for g in measured) / sum(w.values())
            assert logs < 0.0, {g: a.speedup_vs_parent[g].value for g in measured}
    full = [a for a in atts[1:] if a.timings and "stopped early" not in a.verdict.reason]
    assert all(set(a.timings) == set(GEOMETRIES) for a in full)
    # the recorded sweep holds 10 rounds per genome: all of them, never the early-out's 6
    assert all(a.timings[g].samples == 10 for a in full for g in GEOMETRIES)


def test_early_out_off_measures_every_round(tmp_path, cache_env):
    path = write_config(tmp_path, 8, extra="")
    text = path.read_text().replace("perf: {rounds: 12,", "perf: {early_rounds: 0, rounds: 12,")
    assert "early_rounds: 0" in text
    path.write_text(text)
    camp, _ = run_campaign(path)
    atts = camp.ledger.attempts()
    assert not any("stopped early" in a.verdict.reason for a in atts)
    assert all(set(a.timings) == set(GEOMETRIES) for a in atts if a.timings)


def test_early_stop_rule_is_exactly_all_slower():
    from gates import EarlyStop

    s = EarlyStop(4)
    assert s.hit({"cand": [2, 2, 2, 2], "champ": [1, 1, 1, 1]})
    assert not s.hit({"cand": [2, 2, 2, 1], "champ": [1, 1, 1, 1]})  # one pair not slower: keep measuring
    assert not s.hit({"cand": [2, 2, 2], "champ": [1, 1, 1]})  # looked at only after exactly 4 rounds
    assert not s.hit({"cand": [2] * 5, "champ": [1] * 5})
    assert "1/16" in s.describe(12)


# ---------------------------------------------------------------------------
# compile ahead (worker.prefetch): the next proposal builds in another process while this one is measured


def test_prefetch_pipeline_records_every_attempt_once_and_builds_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("EVO_CACHE_DIR", str(tmp_path / "fresh-cache"))  # nothing compiled before this test
    path = write_config(tmp_path, 12, extra="worker: {prefetch: 1}\n")
    camp, summary = run_campaign(path)
    atts = camp.ledger.attempts()
    assert len(atts) == 12 and len({a.genome_key for a in atts}) == 12
    assert summary.stopped.startswith("attempt budget reached")
    later = atts[2:]  # from the second proposal on, each was compiled while the one before it was measured
    assert all(a.cycle_s > 0 for a in atts[1:])
    from harness.build import cache_dir

    assert len(list(cache_dir().glob("*.cubin"))) >= len(atts)
    # a build served from the cache takes a fraction of a real NVRTC compile
    assert sorted(a.compile_s for a in later)[len(later) // 2] < 0.5 * max(a.compile_s for a in atts[:1])


def test_prefetch_values_are_validated(tmp_path):
    from evo.config import ConfigError

    for bad, msg in (("soon", "allowed: auto or an integer 0..16"), ("17", "out of range")):
        path = write_config(tmp_path, 5, name=f"p{bad}", extra=f"worker: {{prefetch: {bad}}}\n")
        with pytest.raises(ConfigError, match=msg):
            load_config(path)
