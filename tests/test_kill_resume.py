"""Crash safety: SIGKILL `evo run` at random moments, 20 times on one ledger, then let it finish.

The campaign runs as a subprocess on the recorded backend. Each kill lands at a
seeded random moment: during imports and ledger creation, during set-up (meta
writes, A/A, the baseline), or mid-run. Afterwards the ledger is checked twice,
through the Ledger API and with raw SQL on the SQLite file: every trial is
finished and carries one complete attempt, ids are the contiguous trial numbers,
there is exactly one baseline, nothing judged was judged twice, attempts cut
short are recorded as ``error: interrupted``, the budget holds exactly, and the
study meta is whole.

Timing is taken from what the runs themselves print, so the test adapts to a
slow machine; a kill that lands before anything was written is fine.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from evo.core.family import load_family
from evo.core.genome import Genome
from evo.core.records import BASELINE, Attempt, Verdict
from evo.ledger.ledger import ATTEMPT_ATTR, Ledger
from evo.ledger.outcome import CHAMPION, MEASURED, TRIAL_STATES, trial_outcome

ROOT = Path(__file__).resolve().parent.parent
FAM = load_family("mhc_pre_big_fuse")
BUDGET = 40
KILLS = 20
CAMPAIGN = "kill_resume"
META_KEYS = (
    "config",
    "backend",
    "simulated",
    "started_at",
    "device",
    "copy_ceiling",
    "baseline_hashes",
    "baseline_errors",
    "baseline_id",
    "sessions",
    "noise_floor",
    "floor",
    "peer_torch_compile",
)


def _config(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "ledger.db"
    raw = {
        "campaign": CAMPAIGN,
        "family": FAM.name,
        "geometries": [{"name": "T4096_H4096", "T": 4096, "H": 4096, "S": 1, "weight": 1}],
        "budget": {"attempts": BUDGET},
        "proposer": {
            "name": "evolutionary",
            "options": {"elite": 4, "champion_bias": 0.5, "two_knob": 0.3, "crossover": 0.25},
        },
        "backend": "recorded",
        "peer": {"torch_compile": "default"},
        "storage": f"sqlite:///{db}",
        "seed": 0,
    }
    p = tmp_path / "configs" / "kill_resume.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p, db


class Run:
    """`evo run --plain` as a subprocess, its output lines timestamped as they arrive."""

    def __init__(self, cfg: Path):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}  # EVO_CACHE_DIR: from conftest
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evo", "run", str(cfg), "--plain"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def when(self, prefix: str) -> float | None:
        """Seconds from spawn to the first line starting with ``prefix``."""
        with self._cv:
            return next((t for t, ln in self.lines if ln.startswith(prefix)), None)

    def wait_for(self, prefix: str, timeout: float) -> float | None:
        end = time.monotonic() + timeout
        with self._cv:
            while True:
                t = next((t for t, ln in self.lines if ln.startswith(prefix)), None)
                if t is not None or self.proc.poll() is not None:
                    return t
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(min(left, 0.05))

    def kill_at(self, seconds_from_spawn: float) -> None:
        time.sleep(max(0.0, self.t0 + seconds_from_spawn - time.monotonic()))
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)

    def finish(self, timeout: float = 120) -> str:
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return "\n".join(ln for _, ln in self.lines)


def _integrity(db: Path) -> str:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def _sql(db: Path) -> dict:
    """Everything the checks need, read straight from the SQLite file."""
    con = sqlite3.connect(db)
    try:
        studies = con.execute("SELECT study_id, study_name FROM studies").fetchall()
        trials = con.execute("SELECT trial_id, number, state FROM trials ORDER BY number").fetchall()
        tattrs: dict[int, dict[str, object]] = {}
        for tid, key, value in con.execute("SELECT trial_id, key, value_json FROM trial_user_attributes"):
            tattrs.setdefault(tid, {})[key] = json.loads(value)
        values = dict(con.execute("SELECT trial_id, value FROM trial_values WHERE objective = 0").fetchall())
        params: dict[int, dict[str, str]] = {}
        for tid, name, dist in con.execute("SELECT trial_id, param_name, distribution_json FROM trial_params"):
            params.setdefault(tid, {})[name] = dist
        meta = {k: json.loads(v) for k, v in con.execute("SELECT key, value_json FROM study_user_attributes")}
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()
    return {
        "studies": studies,
        "trials": trials,
        "tattrs": tattrs,
        "values": values,
        "params": params,
        "meta": meta,
        "integrity": integrity,
    }


def test_sigkill_at_random_moments_then_resume(tmp_path):
    cfg, db = _config(tmp_path)
    rng = random.Random(20260501)
    t_begin = time.monotonic()
    # Observed timings (seconds from spawn), refreshed from every run that got that far.
    t_open = 1.5  # "evo: campaign ..." printed: imports done, ledger opened
    t_setup = 0.6  # from there to the first attempt line (A/A, baseline, set-up meta)
    step = 0.1  # one attempt
    landed = []
    for i in range(KILLS):
        run = Run(cfg)
        if rng.random() < 0.25:
            # imports, storage creation, create_study
            at = rng.uniform(0.3, 1.0) * t_open
        else:
            # set-up and the first few attempts; anchored on the ledger being open (slow machines are fine)
            opened = run.wait_for("evo: campaign", timeout=60)
            at = (opened if opened is not None else t_open) + rng.uniform(0.0, t_setup + 6 * step)
        run.kill_at(at)
        out = run.finish()
        rc = run.proc.returncode
        assert rc in (0, -signal.SIGKILL), f"run {i} failed with {rc}:\n{out[-3000:]}"
        assert "Traceback" not in out, f"run {i}:\n{out[-3000:]}"
        last = run.lines[-1][1][:24] if run.lines else "(nothing printed)"
        landed.append((round(at, 2), rc, last))
        a, b = run.when("evo: campaign"), run.when("#")
        if a is not None:
            t_open = a
            if b is not None:
                t_setup = max(0.05, b - a)
        stamps = [t for t, ln in run.lines if ln.startswith("#")]
        if len(stamps) >= 3:
            step = max(0.01, (stamps[-1] - stamps[0]) / (len(stamps) - 1))
        # The file is sound between kills (it may hold only some tables when the kill came during creation).
        if db.exists():
            assert _integrity(db) == "ok"

    t_kills = time.monotonic()
    final = Run(cfg)
    out = final.finish(timeout=150)
    assert final.proc.returncode == 0, out[-3000:]
    assert f"attempt budget reached ({BUDGET}/{BUDGET})" in out, out[-3000:]
    again = Run(cfg)  # resuming a finished campaign adds nothing
    out2 = again.finish(timeout=60)
    assert again.proc.returncode == 0 and "0 new attempt(s)" in out2, out2[-3000:]

    print(
        f"{KILLS} kills in {t_kills - t_begin:.1f}s, final runs {time.monotonic() - t_kills:.1f}s; "
        "(kill at s, rc, last line):",
        *landed,
        sep="\n  ",
    )
    _check_ledger_api(cfg)
    _check_raw_sql(db)


def _check_ledger_api(cfg: Path) -> None:
    led = Ledger(f"sqlite:///{cfg.parent.parent / 'ledger.db'}", CAMPAIGN, FAM.knobs)
    trials = led.study.get_trials(deepcopy=False)
    assert trials, "nothing was recorded"
    assert all(t.state.is_finished() for t in trials), [
        (t.number, t.state) for t in trials if not t.state.is_finished()
    ]
    assert all(ATTEMPT_ATTR in t.user_attrs for t in trials), "a trial without its attempt"
    atts = led.attempts()
    assert [a.id for a in atts] == [t.number for t in trials] == list(range(len(trials)))
    done = [a for a in atts if a.verdict.kind != "interrupted"]
    cut = [a for a in atts if a.verdict.kind == "interrupted"]
    assert len(done) == BUDGET
    keys = [a.genome_key for a in done if a.finish is None]  # (the finish measures a near miss again on purpose)
    assert len(keys) == len(set(keys)), "a genome was judged twice"
    assert led.seen_keys() == {a.genome_key for a in done}
    for a in cut:
        assert a.verdict.label() == "error: interrupted" and a.score is None
        assert a.genome_key == Genome(a.genome).key and set(a.genome) == {k.name for k in FAM.knobs}
    bases = [a for a in atts if a.verdict.status == BASELINE]
    assert len(bases) == 1
    base = bases[0]
    assert base.genome_key == Genome(FAM.baseline()).key and base.score == 1.0
    for a in atts:
        assert a.genome_key == Genome(a.genome).key
        t = trials[a.id]
        assert t.user_attrs["genome_key"] == a.genome_key and t.user_attrs["verdict"] == a.verdict.label()
        assert t.state == TRIAL_STATES[trial_outcome(a)]
        if t.state == TrialState.COMPLETE:  # a champion's score (or above), a measured one's (or under)
            assert t.value >= a.score if trial_outcome(a) == CHAMPION else t.value <= a.score
        assert Genome(t.params) == Genome(a.genome)
    assert led.study.best_trial.number == led.champion().id  # one truth: Optuna's best is the champion
    meta = led.all_meta()
    missing = [k for k in META_KEYS if k not in meta]
    assert not missing, f"meta keys missing: {missing}"
    assert meta["baseline_id"] == base.id
    assert meta["backend"] == "recorded" and meta["simulated"] is True
    assert meta["config"]["campaign"] == CAMPAIGN and meta["config"]["family"] == FAM.name
    assert meta["config"]["budget"]["attempts"] == BUDGET
    frozen = {f"{g}/{k}": v for g, hs in base.output_hashes.items() for k, v in hs.items()}
    assert meta["baseline_hashes"] == frozen
    assert isinstance(meta["sessions"], list) and meta["sessions"]
    assert led.champion() is not None


def _check_raw_sql(db: Path) -> None:
    s = _sql(db)
    assert s["integrity"] == "ok"
    assert [name for _, name in s["studies"]] == [CAMPAIGN]
    numbers = [n for _, n, _ in s["trials"]]
    assert numbers == list(range(len(numbers)))
    assert {st for _, _, st in s["trials"]} <= {"COMPLETE", "PRUNED", "FAIL"}
    knobs = {k.name for k in FAM.knobs}
    judged: list[str] = []
    baselines = 0
    for tid, number, state in s["trials"]:
        attrs = s["tattrs"].get(tid, {})
        assert isinstance(attrs.get(ATTEMPT_ATTR), str), f"trial {number} has no attempt"
        d = json.loads(attrs[ATTEMPT_ATTR])  # the complete document parses ...
        a = Attempt.from_json(attrs[ATTEMPT_ATTR])  # ... and round-trips
        assert d["id"] == a.id == number
        assert attrs["verdict"] == a.verdict.label() and attrs["genome_key"] == a.genome_key
        assert set(s["params"].get(tid, {})) == knobs, f"trial {number} has params {s['params'].get(tid)}"
        outcome = trial_outcome(a)  # the state (and value) the ledger's table gives this attempt
        assert state == TRIAL_STATES[outcome].name
        if outcome == CHAMPION:
            assert s["values"][tid] >= a.score  # its score, or just above an earlier champion's value
        elif outcome == MEASURED:
            assert s["values"][tid] <= a.score  # its score, or just under the champion's value
        else:
            assert tid not in s["values"]
        baselines += a.verdict.status == BASELINE
        if a.verdict.kind != "interrupted":
            judged.append(a.genome_key if a.finish is None else f"finish #{a.id}")
    assert baselines == 1
    assert len(judged) == len(set(judged)) == BUDGET
    assert all(k in s["meta"] for k in META_KEYS)


# ---------------------------------------------------------------------------
# The same windows, hit deterministically in-process: an exception inside a
# transaction is rolled back exactly as a SIGKILL's uncommitted journal is.


class Killed(Exception):
    pass


def _ledger(tmp_path: Path) -> Ledger:
    return Ledger(f"sqlite:///{tmp_path / 'l.db'}", "c1", FAM.knobs, sampler=optuna.samplers.RandomSampler(seed=0))


def _attempt(trial, verdict: Verdict, score: float | None) -> Attempt:
    g = Genome(trial.params)
    return Attempt(
        id=trial.number,
        campaign="c1",
        family=FAM.name,
        genome=dict(g),
        genome_key=g.key,
        verdict=verdict,
        score=score,
        backend="recorded",
    )


def _states(tmp_path: Path) -> list[str]:
    con = sqlite3.connect(tmp_path / "l.db")
    try:
        return [st for (st,) in con.execute("SELECT state FROM trials ORDER BY number")]
    finally:
        con.close()


def test_record_is_one_transaction(tmp_path, monkeypatch):
    led = _ledger(tmp_path)
    led.set_meta_many({"config": {"campaign": "c1", "family": FAM.name}, "backend": "recorded"})
    t = led.ask(dict(FAM.baseline()))
    a = _attempt(t, Verdict(BASELINE), 1.0)

    def die(*_args, **_kw):  # dies after the attrs, value and state were written, before the commit
        raise Killed

    monkeypatch.setattr(Ledger, "_set_meta_in", die)
    with pytest.raises(Killed):
        led.record(t, a, meta={"baseline_id": t.number, "baseline_hashes": {"x": "y"}})
    monkeypatch.undo()

    again = _ledger(tmp_path)
    raw = again.study.get_trials()[0]
    assert raw.state == TrialState.RUNNING and raw.user_attrs == {} and raw.values is None
    assert again.meta("baseline_id") is None and again.meta("baseline_hashes") is None
    assert again.recover() == [t.number]
    (got,) = again.attempts()
    assert got.verdict.label() == "error: interrupted" and got.genome == dict(FAM.baseline())
    assert again.seen_keys() == set()  # may be proposed again
    t2 = again.ask(dict(FAM.baseline()))
    again.record(t2, _attempt(t2, Verdict(BASELINE), 1.0), meta={"baseline_id": t2.number})
    assert again.meta("baseline_id") == t2.number == 1
    assert [x.verdict.status for x in again.attempts()] == ["error", BASELINE]
    assert _states(tmp_path) == ["FAIL", "COMPLETE"]


def test_fixed_ask_is_one_transaction(tmp_path, monkeypatch):
    led = _ledger(tmp_path)
    rdb = led._rdb()
    real = type(rdb)._set_trial_param_without_commit
    calls = []

    def param(self, *args, **kw):  # dies after a few params
        calls.append(1)
        if len(calls) == 3:
            raise Killed
        return real(self, *args, **kw)

    monkeypatch.setattr(type(rdb), "_set_trial_param_without_commit", param)
    with pytest.raises(Killed):
        led.ask({**FAM.baseline(), "block": 128})
    monkeypatch.undo()
    assert _states(tmp_path) == []  # no trial at all: neither WAITING nor one with some of its params
    t = led.ask({**FAM.baseline(), "block": 128})
    assert t.number == 0 and t.params == {**FAM.baseline(), "block": 128}
    assert _states(tmp_path) == ["RUNNING"]
    with pytest.raises(ValueError):  # a value outside the knob's choices writes nothing either
        led.ask({**FAM.baseline(), "block": 77})
    assert _states(tmp_path) == ["RUNNING"]


def test_recover_turns_every_leftover_into_one_attempt(tmp_path):
    led = _ledger(tmp_path)
    led.set_meta_many({"config": {"campaign": "c1", "family": FAM.name}, "backend": "recorded"})
    done = led.ask(dict(FAM.baseline()))
    led.record(done, _attempt(done, Verdict(BASELINE), 1.0))
    running = led.ask({**FAM.baseline(), "vec": 8})  # asked, never recorded
    waiting = {**FAM.baseline(), "unroll": 2}
    led.study.enqueue_trial(waiting)  # what older versions left between enqueue and ask
    # an unfixed ask killed before the sampler's params were written
    partial = led.study._storage.create_new_trial(led.study._study_id)
    del led

    led2 = _ledger(tmp_path)
    assert led2.recover() == [running.number, 3]
    assert _states(tmp_path) == ["COMPLETE", "FAIL", "FAIL", "FAIL"]
    atts = led2.attempts()
    assert [a.id for a in atts] == [0, 1, 2, 3]
    assert all(a.verdict.kind == "interrupted" for a in atts[1:])
    assert atts[1].genome == {**FAM.baseline(), "vec": 8} and atts[2].genome == waiting
    assert atts[3].genome == {} and partial is not None  # nothing was known of it but that it started
    assert led2.seen_keys() == {atts[0].genome_key}
    assert led2.recover() == [] and _states(tmp_path) == ["COMPLETE", "FAIL", "FAIL", "FAIL"]


def test_set_meta_many_is_all_or_nothing(tmp_path):
    led = _ledger(tmp_path)
    with pytest.raises(TypeError):
        led.set_meta_many({"config": {"campaign": "c1"}, "backend": object()})
    assert led.all_meta() == {}
    led.set_meta_many({"config": {"campaign": "c1"}, "backend": "recorded"})
    led.set_meta_many({"backend": "gpu"})
    assert led.all_meta() == {"config": {"campaign": "c1"}, "backend": "gpu"}
