"""One truth in every view: Optuna's best_trial is the champion; replay and selfcheck record beside the campaign."""

from __future__ import annotations

import gzip
import math
import re
import shutil
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from evo.config import load_config
from evo.core.records import Attempt, Code, Interval, Verdict
from evo.ledger.ledger import Ledger
from evo.ledger.outcome import (
    CHAMPION,
    FAILED,
    MEASURED,
    STOPPED,
    TRIAL_STATES,
    intermediate_values,
    trial_outcome,
    trial_value,
)
from evo.loop.campaign import Campaign
from evo.report.logmd import render_log, render_status

ROOT = Path(__file__).resolve().parent.parent
FAMILY_CONFIGS = ["mhc_pre_big_fuse", "mhc_prenorm_gemm", "moe_q2_matvec", "fp4_matvec"]


def _config(tmp_path: Path, name: str, attempts: int) -> Path:
    text = (ROOT / f"configs/{name}.yaml").read_text().replace("backend: auto", "backend: recorded")
    text = re.sub(r"budget: \{[^}]*\}", f"budget: {{attempts: {attempts}}}", text)
    assert f"attempts: {attempts}" in text
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text + f"\nstorage: sqlite:///{tmp_path}/ledger.db\n")
    return cfg


def _att(verdict: Verdict, score: float | None, reached: dict[str, float] | None = None) -> Attempt:
    return Attempt(
        id=1,
        campaign="c",
        family="f",
        genome={},
        genome_key="k",
        verdict=verdict,
        score=score,
        speedup_vs_baseline={g: Interval(v, v, v) for g, v in (reached or {}).items()},
    )


def test_the_state_table():
    """Only what was fully measured and compared as a win carries a value; nothing else can be best_trial."""
    cases = [
        (Verdict(status="baseline"), 1.0, CHAMPION),
        (Verdict.accepted("faster"), 1.3, CHAMPION),
        (Verdict.rejected("perf", "not faster", Code.PERF_NOT_FASTER), 1.31, MEASURED),
        (Verdict.rejected("perf", "slower", Code.PERF_SLOWER), 0.9, MEASURED),
        (Verdict.rejected("perf", "stopped", Code.PERF_EARLY_STOP, {"geometry": "a", "after": 6}), 0.8, STOPPED),
        # timed in full, yet rejected for a reason other than its weighted speed: its score may beat the champion's
        (Verdict.rejected("perf", "watched", Code.PERF_WATCHED), 1.5, FAILED),
        (Verdict.rejected("perf", "watched", Code.PERF_WATCHED_BASELINE), 1.5, FAILED),
        (Verdict.rejected("perf", "physics", Code.PERF_PHYSICS), 9.0, FAILED),
        (Verdict.rejected("correctness", "after timing", Code.CORRECTNESS_RECHECK), 1.4, FAILED),
        (Verdict.rejected("e2e", "tokens", Code.E2E_TOKENS), 1.4, FAILED),
        (Verdict.rejected("static", "spills", Code.STATIC_SPILLS), None, FAILED),
        (Verdict.error("compile", "ptxas"), None, FAILED),
        (Verdict.accepted("faster"), math.nan, FAILED),
    ]
    for verdict, score, want in cases:
        assert trial_outcome(_att(verdict, score)) == want, verdict
    assert TRIAL_STATES[STOPPED] == TrialState.PRUNED and TRIAL_STATES[MEASURED] == TrialState.COMPLETE
    # values: a champion above every earlier one, a measured attempt under the champion, never a tie
    assert trial_value(CHAMPION, 1.2, 1.1) == 1.2 and trial_value(CHAMPION, 1.0, 1.1) > 1.1
    assert trial_value(MEASURED, 0.9, 1.1) == 0.9
    assert 1.0999 < trial_value(MEASURED, 1.105, 1.1) < 1.1 and trial_value(MEASURED, 1.1, 1.1) < 1.1
    assert trial_value(STOPPED, 0.8, 1.1) is None and trial_value(FAILED, 1.5, 1.1) is None
    # intermediate values: step i is the config's i-th geometry, where it was reached
    stopped = _att(Verdict.rejected("perf", "s", Code.PERF_EARLY_STOP), 0.8, {"b": 0.8})
    assert intermediate_values(stopped, ["a", "b", "c"]) == {1: 0.8}


@pytest.mark.parametrize("name", FAMILY_CONFIGS)
def test_best_trial_is_the_champion_in_a_recorded_campaign(tmp_path, name):
    cfg = load_config(_config(tmp_path, name, 12))
    camp = Campaign(cfg, out=lambda s: None)
    camp.run()
    atts = camp.ledger.attempts()
    champ = camp.ledger.champion()
    study = optuna.load_study(study_name=cfg.campaign, storage=cfg.storage)  # as a user or the dashboard reads it
    assert study.best_trial.number == champ.id
    assert study.best_value >= champ.score
    trials = {t.number: t for t in study.get_trials()}
    names = [g.name for g in cfg.geometries]
    for a in atts:
        t = trials[a.id]
        assert t.state == TRIAL_STATES[trial_outcome(a)], (a.id, a.verdict.code)
        if t.state == TrialState.COMPLETE and a.id != champ.id:
            assert t.value < study.best_value
        if a.verdict.code is Code.PERF_EARLY_STOP:  # PRUNED, with what it reached, per geometry
            assert t.value is None and t.intermediate_values
            assert {names[i] for i in t.intermediate_values} == set(a.speedup_vs_baseline)
        if t.state == TrialState.FAIL:
            assert t.value is None
    df = study.trials_dataframe()
    assert len(df) == len(atts)


def test_replay_and_selfcheck_leave_the_campaign_as_it_was(tmp_path):
    from evo.loop.replay import replay
    from evo.loop.selfcheck import selfcheck

    cfg = load_config(_config(tmp_path, "mhc_pre_big_fuse", 20))
    Campaign(cfg, out=lambda s: None).run()

    def views() -> tuple:
        led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True)
        atts, meta = led.attempts(), led.all_meta()
        status = next(ln for ln in render_status(atts, meta).splitlines() if ln.startswith("attempts:"))
        log = render_log(atts, meta).split("## All attempts", 1)[1]
        study = optuna.load_study(study_name=cfg.campaign, storage=cfg.storage)
        return status, log, len(study.trials_dataframe()), study.best_trial.number, meta.get("sessions")

    before = views()
    camp = Campaign(cfg, out=lambda s: None, replaying=True)
    pairs = replay(camp, gate="perf")
    assert pairs
    out = selfcheck(Campaign(cfg, out=lambda s: None), aa_evaluations=3)
    assert views() == before, "replay or selfcheck changed a view of the campaign"

    side = Ledger(cfg.storage, f"{cfg.campaign}:replay", cfg.family.knobs, readonly=True)
    mine = side.attempts()
    assert [a.id for a in mine] == [n.id for _, n in pairs]
    assert [a.derived_from for a in mine] == [[o.id] for o, _ in pairs]  # linked to the campaign's attempts
    assert side.meta("side_of") == cfg.campaign and side.meta("sessions")  # its own session record
    checked = Ledger(cfg.storage, f"{cfg.campaign}:selfcheck", cfg.family.knobs, readonly=True).attempts()
    assert {a.id for a in checked} == {v["attempt"] for v in out["faults"].values()}
    led = Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True)
    assert led.meta("selfcheck")["study"] == f"{cfg.campaign}:selfcheck"
    assert led.meta("replays")[-1]["pairs"][0][:2] == [pairs[0][0].id, pairs[0][1].id]
    assert f"study {cfg.campaign}:selfcheck, attempt #" in render_log(led.attempts(), led.all_meta())


def test_an_old_ledger_reads_and_replays_beside_itself(tmp_path):
    """The committed H200 ledger (recorded before the state table: rejected attempts COMPLETE with their score)."""
    from evo.loop.replay import replay

    db = tmp_path / "h200.db"
    with (
        gzip.open(ROOT / "benchmarks/results/2026-11-30-mhc-pre-big-fuse-campaign/ledger.db.gz") as src,
        open(db, "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    cfg = load_config(
        ROOT / "configs/mhc_pre_big_fuse.yaml", backend_override="recorded", storage_override=f"sqlite:///{db}"
    )
    n = len(Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True).attempts())
    pairs = replay(Campaign(cfg, out=lambda s: None, replaying=True), ids=[2, 3])
    assert [o.id for o, _ in pairs] == [2, 3]
    assert len(Ledger(cfg.storage, cfg.campaign, cfg.family.knobs, readonly=True).attempts()) == n
    assert len(optuna.load_study(study_name=f"{cfg.campaign}:replay", storage=cfg.storage).trials) == 2
