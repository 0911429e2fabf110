"""The ledger on SQLite: round trip, de-duplication, champion, resume and crash recovery."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from optuna.trial import TrialState

from evo.core.family import load_family
from evo.core.genome import Genome
from evo.core.records import Attempt, Interval, Resources, Timing, Verdict
from evo.ledger.ledger import Ledger

FAM = load_family("mhc_pre_big_fuse")
G = "T4096_H4096"


def _url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'logs' / 'c1' / 'ledger.db'}"


def _ledger(tmp_path) -> Ledger:
    return Ledger(_url(tmp_path), "c1", FAM.knobs, sampler=optuna.samplers.RandomSampler(seed=0))


def _attempt(trial, verdict: Verdict, score: float | None = None, parent: int | None = None) -> Attempt:
    g = Genome(trial.params)
    return Attempt(
        id=trial.number,
        campaign="c1",
        family=FAM.name,
        genome=dict(g),
        genome_key=g.key,
        origin="test",
        parent_id=parent,
        verdict=verdict,
        score=score,
        resources={"T4096": Resources(registers=64, stack_frame=96, spill_stores=2)},
        timings={G: Timing(median_us=12.5, spread_pct=0.4, samples=12, method="batch: graph x 8")},
        speedup_vs_parent={G: Interval(1.05, 1.04, 1.06, n=12)},
        speedup_vs_baseline={G: Interval(1.10, 1.09, 1.11, n=12)},
        roofline_pct={G: 71.25},
        device={"sm_mhz_min": 1980, "sm_mhz_max": 1980},
        notes=["n1"],
        compile_s=1.5,
    )


def _run(led: Ledger, fixed, verdict: Verdict, score=None, parent=None) -> Attempt:
    t = led.ask(fixed)
    a = _attempt(t, verdict, score, parent)
    led.record(t, a)
    return a


def test_round_trip_and_fixed_ask(tmp_path):
    led = _ledger(tmp_path)
    assert (tmp_path / "logs" / "c1" / "ledger.db").exists()
    base = dict(FAM.baseline())
    a = _run(led, base, Verdict(status="baseline"), score=1.0)
    assert a.genome == base  # ask(fixed) evaluates exactly the fixed genome
    got = led.attempts()
    assert got == [a]
    t = led.study.trials[0]
    assert t.state == TrialState.COMPLETE and t.value == 1.0
    assert t.user_attrs["verdict"] == "baseline" and t.user_attrs["genome_key"] == a.genome_key


def test_record_sets_id_and_fail_without_score(tmp_path):
    led = _ledger(tmp_path)
    t = led.ask()
    a = _attempt(t, Verdict.rejected("perf", "no gain"))
    a.id = 99
    led.record(t, a)
    assert a.id == t.number
    assert led.study.trials[0].state == TrialState.FAIL
    assert led.attempts()[0].id == t.number


def test_seen_keys_and_champion(tmp_path):
    led = _ledger(tmp_path)
    assert led.champion() is None
    base = _run(led, dict(FAM.baseline()), Verdict(status="baseline"), 1.0)
    assert led.champion() == base
    a1 = _run(led, {**FAM.baseline(), "block": 512}, Verdict.accepted("faster"), 1.1, base.id)
    rej = _run(led, {**FAM.baseline(), "meta": "slice"}, Verdict.rejected("correctness", "bits differ"), None, a1.id)
    a2 = _run(led, {**FAM.baseline(), "block": 512, "vec": 8}, Verdict.accepted("faster"), 1.2, a1.id)
    _run(led, {**FAM.baseline(), "unroll": 4}, Verdict.rejected("perf", "slower"), 0.9, a2.id)
    assert led.champion() == a2
    assert led.seen_keys() == {a.genome_key for a in led.attempts()}
    assert rej.genome_key in led.seen_keys()


def test_resume_sees_attempts_and_meta(tmp_path):
    led = _ledger(tmp_path)
    led.set_meta("config", {"campaign": "c1", "family": FAM.name})
    led.set_meta("floor", 0.0008)
    a = _run(led, dict(FAM.baseline()), Verdict(status="baseline"), 1.0)
    del led
    again = _ledger(tmp_path)
    assert again.attempts() == [a]
    assert again.meta("floor") == pytest.approx(0.0008)
    assert again.meta("config")["family"] == FAM.name
    assert again.meta("missing", "dflt") == "dflt"
    assert again.all_meta()["floor"] == pytest.approx(0.0008)
    # numbering continues after the old trials
    assert again.ask().number == 1


def test_recover_after_kill(tmp_path):
    led = _ledger(tmp_path)
    led.set_meta("config", {"campaign": "c1", "family": FAM.name})
    led.set_meta("backend", "recorded")
    _run(led, dict(FAM.baseline()), Verdict(status="baseline"), 1.0)
    # killed mid-measurement: asked, never recorded
    lost = led.ask({**FAM.baseline(), "h_split": 4})
    lost_key = Genome(lost.params).key
    # killed between writing the attempt and telling Optuna
    half = led.ask({**FAM.baseline(), "vec": 8})
    half_att = _attempt(half, Verdict.accepted("faster"), 1.3, 0)
    led._write_attrs(half._trial_id, half_att)
    # killed after enqueueing a fixed genome but before asking it
    led.study.enqueue_trial({**FAM.baseline(), "block": 128})
    del led

    led2 = _ledger(tmp_path)
    assert sorted(led2.recover()) == [lost.number, half.number]
    states = [t.state for t in led2.study.get_trials(deepcopy=False)]
    assert TrialState.RUNNING not in states and TrialState.WAITING not in states
    by_id = {a.id: a for a in led2.attempts()}
    assert by_id[half.number] == half_att
    assert led2.study.trials[half.number].state == TrialState.COMPLETE
    gone = by_id[lost.number]
    assert gone.verdict.kind == "interrupted" and gone.genome_key == lost_key
    assert gone.family == FAM.name and gone.backend == "recorded"
    assert led2.study.trials[lost.number].state == TrialState.FAIL
    assert lost_key not in led2.seen_keys()
    assert half_att.genome_key in led2.seen_keys()
    assert led2.champion().id == half.number
    assert led2.recover() == []
    # the next fixed ask gets its own genome, not the stale enqueued one
    t = led2.ask({**FAM.baseline(), "unroll": 2})
    assert t.params["unroll"] == 2 and t.params["block"] == FAM.baseline()["block"]


def test_view_is_the_separate_reads_in_one(tmp_path):
    led = _ledger(tmp_path)
    base = _run(led, dict(FAM.baseline()), Verdict(status="baseline"), 1.0)
    _run(led, {**FAM.baseline(), "block": 512}, Verdict.accepted("faster"), 1.1, base.id)
    _run(led, {**FAM.baseline(), "unroll": 4}, Verdict.rejected("perf", "slower"), 0.9, base.id)
    held = led.ask({**FAM.baseline(), "vec": 8})  # running: seen, no attempt yet
    v = led.view()
    assert v.attempts == led.attempts() and len(v.attempts) == 3
    assert v.seen == led.seen_keys() and Genome({**FAM.baseline(), "vec": 8}).key in v.seen
    assert [t.number for t in v.running] == [t.number for t in led.running()] == [held.number]
    assert v.champion() == led.champion() and v.champion().id == 1


def test_record_raises_numeric_meta_in_its_transaction_and_never_lowers_it(tmp_path):
    led = _ledger(tmp_path)
    t = led.ask(dict(FAM.baseline()))
    led.record(t, _attempt(t, Verdict(status="baseline"), 1.0), meta_max={"elapsed_s": 12.5})
    assert led.meta("elapsed_s") == 12.5
    t = led.ask({**FAM.baseline(), "block": 512})
    led.record(t, _attempt(t, Verdict.rejected("perf", "slower"), 0.9), meta={"x": 1}, meta_max={"elapsed_s": 3.0})
    assert led.meta("elapsed_s") == 12.5 and led.meta("x") == 1  # another worker's larger value stays
    t = led.ask({**FAM.baseline(), "unroll": 4})
    led.record(t, _attempt(t, Verdict.rejected("perf", "slower"), 0.9), meta_max={"elapsed_s": 20.0})
    assert led.meta("elapsed_s") == 20.0
    assert [a.id for a in led.attempts()] == [0, 1, 2]


def test_fixed_ask_still_refuses_a_knob_whose_values_changed(tmp_path):
    led = _ledger(tmp_path)
    _run(led, dict(FAM.baseline()), Verdict(status="baseline"), 1.0)
    knobs = [k if k.name != "block" else dataclasses.replace(k, values=(*k.values, 2048)) for k in FAM.knobs]
    other = Ledger(_url(tmp_path), "c1", knobs)
    with pytest.raises(ValueError):  # Optuna's distribution check, made once per Ledger and knob
        other.ask({**FAM.baseline(), "block": 2048})
    assert len(other.study.get_trials()) == 1  # nothing written
